#!/usr/bin/env bash
# The prober at scale: targets fingerprinted per minute with every probe (the four ICMP stimuli,
# TCP/IP, HASSH, JARM's ten hellos, the certificate), CPU per target and memory with N known attackers (default 10,000).
# The attackers are written straight into a fresh sqlite database at 10.232.0.0/16 addresses; all of
# them live in one network namespace of the script's own (`svc-b-247`, routed over a veth pair, the
# whole /16 made local there with an AnyIP route), where `openssl s_server`, Debian's `sshd` and a
# plain listener answer on every address. Nothing leaves this host. `svc worker prober` runs for
# SECONDS (default 60) with private probing allowed; then its CPU time (utime+stime), peak and current
# RSS are read from /proc and the targets whose last probe (the certificate) was written counted.
# Needs root, `ip`, `openssl`, `sshd` (scripts/lib.sh `ensure_prober_test_tools`).
#   benches/prober.sh [attackers] [seconds] [concurrency]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
seconds=${2:-60}
concurrency=${3:-8}
if [ -z "${SVC_BIN:-}" ]; then
    . scripts/lib.sh
    ensure_rust
    cargo build --release --locked -p svc-cli
    SVC_BIN="${CARGO_TARGET_DIR:-target}/release/svc"
fi
ns=svc-b-247
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    ip link del svcb247m 2>/dev/null || true
    ip route del 10.232.0.0/16 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cleanup_first() { ip netns del "$ns" 2>/dev/null || true; ip link del svcb247m 2>/dev/null || true; ip route del 10.232.0.0/16 2>/dev/null || true; }
cleanup_first

ip netns add "$ns"
ip link add svcb247m type veth peer name svcb247h
ip link set svcb247h netns "$ns"
ip addr add 10.231.247.1/30 dev svcb247m
ip link set svcb247m up
ip -n "$ns" addr add 10.231.247.2/30 dev svcb247h
ip -n "$ns" link set svcb247h up
ip -n "$ns" link set lo up
ip -n "$ns" route add default via 10.231.247.1
ip -n "$ns" route add local 10.232.0.0/16 dev lo
ip route add 10.232.0.0/16 via 10.231.247.2
# One kernel answers for every target here, and it rate-limits the ICMP errors it sends to one peer
# (1/s, a burst of 6): off, so each target answers the ICMP stimuli as a host of its own would.
ip netns exec "$ns" sysctl -qw net.ipv4.icmp_ratelimit=0

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 2 \
    -subj "/CN=c2.bench.test" 2>/dev/null
ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
mkdir -p /run/sshd
ip netns exec "$ns" openssl s_server -accept 4443 -cert "$work/cert.pem" -key "$work/key.pem" -www -quiet \
    </dev/null >/dev/null 2>&1 &
pids+=($!)
ip netns exec "$ns" /usr/sbin/sshd -D -f /dev/null -p 2022 -o PidFile=none -o MaxStartups=1000 \
    -h "$work/host_key" >/dev/null 2>&1 &
pids+=($!)
ip netns exec "$ns" python3 -c '
import socket
s = socket.socket(); s.bind(("0.0.0.0", 8081)); s.listen(1024)
while True: s.accept()[0].close()' &
pids+=($!)
sleep 1

export SVC_DATA_DIR="$work/data"
mkdir -p "$SVC_DATA_DIR"
env SVC_JWT_SECRET=4f9d2c7a1b8e6f3d0c5a9b2e7d4f1a8c "$SVC_BIN" migrate >/dev/null
python3 - "$SVC_DATA_DIR/svc.db" "$n" <<'PY'
import json, sqlite3, sys, uuid
db, n = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
t0 = 1_767_225_600_000
rows = [(str(uuid.uuid4()), f"10.232.{i >> 8 & 255}.{(i & 255)}", t0 + i, t0 + i + 60_000, 1, 1, 1, '["ssh"]',
         '["web-01"]', "web-01", 0, 0, 0, "[]", 0, "{}", "{}", t0 + i) for i in range(n)]
db.executemany("insert into attackers (uuid, ip, first_seen, last_seen, event_count, service_count, decky_count, "
               "services, deckies, traversal_path, is_traversal, bounty_count, credential_count, fingerprints, "
               "command_count, behavior, fold_state, updated_at) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
db.commit()
PY

env RUST_LOG=warn SVC_INGEST_LOG_FILE="$work/prober.log" SVC_PROBER_ALLOW_PRIVATE=true \
    SVC_PROBER_TLS_PORTS=4443 SVC_PROBER_SSH_PORTS=2022 SVC_PROBER_TCPFP_PORTS=8081,4443 \
    SVC_PROBER_CONCURRENCY="$concurrency" SVC_PROBER_TARGET_GAP_MS=0 SVC_PROBER_MAX_PPS=100000 \
    SVC_PROBER_TIMEOUT_SECS=5 "$SVC_BIN" worker prober >"$work/worker.log" 2>&1 &
prober=$!
pids+=("$prober")
sleep "$seconds"
read -r utime stime < <(awk '{ print $14, $15 }' "/proc/$prober/stat")
hwm=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$prober/status")
rss=$(awk '/^VmRSS:/ { print int($2 / 1024) }' "/proc/$prober/status")
kill "$prober"
wait "$prober" || true
ticks=$(getconf CLK_TCK)
done_targets=$(grep -c ' tls_certificate ' "$work/prober.log" || true)
icmp=$(grep -c ' icmp_error ' "$work/prober.log" || true)
lines=$(wc -l <"$work/prober.log")
cpu=$(echo "scale=3; ($utime + $stime) / $ticks" | bc)
echo "binary: $SVC_BIN; $n known attackers, concurrency $concurrency, ${seconds} s"
echo "targets fingerprinted: $done_targets ($(echo "scale=1; $done_targets * 60 / $seconds" | bc)/min), $lines lines ($icmp icmp_error)"
if [ "$done_targets" -gt 0 ]; then
    echo "CPU: ${cpu} s in all, $(echo "scale=2; $cpu * 1000 / $done_targets" | bc) ms per target"
fi
echo "memory: peak RSS ${hwm} MiB, RSS at the end ${rss} MiB"
