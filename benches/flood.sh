#!/usr/bin/env bash
# The flood cap under a one-address flood: one decky with http, `svc worker collector` and `svc api`
# (the ingester) on a data directory; wrk floods the decky's HTTP decoy from the host's address on
# the fleet bridge for `seconds` while a second, bounded client (curl, one request every 100 ms) asks
# from a second address added to the bridge. Once the load stops and the rows stop growing: requests
# sent, rows stored, `flood_suppressed` rows, whether every request line of the second source was
# stored, the ingest rate, and the bytes written per minute to the ingest file, the data directory
# and the engine's log of the container. Run for each cap in CAPS (default "50 0": the default
# SVC_FLOOD_CAP_PER_S, then no cap), each on a fresh deploy.
# The cap is per (attacker, decky) with the attacker the TCP peer's address, so the second client
# needs an address of its own: X-Forwarded-For would not separate it.
# Uses the engine SVC_DOCKER_HOST names, or a podman API service of its own; holds an unreachable
# route for its subnet while it runs; removes every container, network, address and route it made.
#   benches/flood.sh [seconds of load]      (SVC_BIN=path skips the release build)
# Where several runs share one engine, serialise them (e.g. with flock on a lock file of your own).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3 iproute2

ensure_svc_bin

seconds=${1:-20}
caps=${CAPS:-50 0}
subnet=${BENCH_SUBNET:-10.213.241.0/24}
prefix=${subnet%.0/24}
decky_ip=$prefix.2
second_ip=$prefix.250
work=$(mktemp -d)
ensure_container_engine "$work/engine"
engine() { CONTAINERS_CONF="$work/engine/containers.conf" podman "$@"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
stop() {
    if [ -n "${1:-}" ] && kill "$1" 2>/dev/null; then wait "$1" 2>/dev/null || true; fi
}
teardown() {
    stop "${sampler:-}"
    stop "${second:-}"
    stop "${collector:-}"
    stop "${api:-}"
    sampler='' second='' collector='' api=''
    if [ -n "${bridge:-}" ]; then ip addr del "$second_ip/32" dev "$bridge" 2>/dev/null || true; fi
    bridge=''
    if [ -n "${fleet:-}" ]; then remove_bench_fleet "$work/engine" "$fleet"; fi
}
cleanup() {
    teardown
    release_bench_engine "$work/engine" "$subnet"
    rm -rf "$work"
}
trap cleanup EXIT
# Nothing sent to the decky leaves the host, even while its bridge is gone.
ip route add unreachable "$subnet" metric 4242

export SVC_JWT_SECRET; SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
printf '[general]\nnet = %s\n[d]\nservices = http\n' "$subnet" >"$work/one.ini"

run() {
    local cap=$1 dir="$work/cap$1" port base token first container log
    fleet="flood$$x$cap"
    mkdir -p "$dir/data"
    local svc_env=(env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$dir/data" SVC_DOCKER_HOST="$SVC_DOCKER_HOST"
        SVC_FLEET_NAME="$fleet" SVC_INGEST_LOG_FILE="$dir/ingest.log" SVC_DECKY_BINARY="$SVC_BIN"
        SVC_FLOOD_CAP_PER_S="$cap" SVC_DISK_MIN_FREE_MB=0)
    "${svc_env[@]}" "$SVC_BIN" deploy "$work/one.ini" >/dev/null
    container=$(engine ps -q --filter "label=svc.fleet=$fleet" | head -1)
    log=$(engine inspect --format '{{.HostConfig.LogConfig.Path}}' "$container")
    bridge=$(ip -o -4 addr show to "$subnet" | awk '{print $2; exit}')
    [ -n "$bridge" ] || { echo "no host address on $subnet" >&2; return 1; }
    ip addr add "$second_ip/32" dev "$bridge"

    port=$(free_port)
    base="http://127.0.0.1:$port/api/v1"
    "${svc_env[@]}" SVC_COLLECTOR_RECONCILE_S=1 "$SVC_BIN" worker collector &
    collector=$!
    "${svc_env[@]}" SVC_API_PORT="$port" SVC_LIMITER_ENABLED=false SVC_JWT_SECRET="$SVC_JWT_SECRET" \
        SVC_ADMIN_PASSWORD="flood bench admin password" "$SVC_BIN" api &
    api=$!
    for _ in $(seq 1 100); do curl -fs "$base/health" >/dev/null 2>&1 && break; sleep 0.1; done
    post() { curl -fs -H 'Content-Type: application/json' "$@"; }
    token_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])'; }
    first=$(post -d '{"username":"admin","password":"flood bench admin password"}' "$base/auth/login" | token_of)
    post -H "Authorization: Bearer $first" \
        -d '{"old_password":"flood bench admin password","new_password":"flood bench new password"}' \
        "$base/auth/change-password" >/dev/null
    token=$(post -d '{"username":"admin","password":"flood bench new password"}' "$base/auth/login" | token_of)
    # The decoy answers before the load starts.
    for _ in $(seq 1 100); do curl -fs -o /dev/null -m 1 "http://$decky_ip/" && break; sleep 0.1; done

    # The engine's log is truncated at its max-size: its growth is summed from samples.
    python3 - "$log" "$dir/engine-bytes" <<'PY' &
import os, sys, time
path, out = sys.argv[1], sys.argv[2]
last, total = os.path.getsize(path), 0
while True:
    time.sleep(0.2)
    size = os.path.getsize(path)
    total += size - last if size >= last else size
    last = size
    open(out, "w").write(str(total))
PY
    sampler=$!
    local data_before ingest_before start
    data_before=$(du -sb "$dir/data" | cut -f1)
    ingest_before=$(stat -c %s "$dir/ingest.log" 2>/dev/null || echo 0)
    start=$(date +%s.%N)
    # The second source: one request every 100 ms, each numbered, counted when answered.
    (
        i=0 ok=0
        end=$(($(date +%s) + seconds))
        while [ "$(date +%s)" -lt "$end" ]; do
            i=$((i + 1))
            curl -s -o /dev/null -m 2 -w '%{http_code}\n' --interface "$second_ip" \
                "http://$decky_ip/second/source/$i" | grep -vq '^000$' && ok=$((ok + 1))
            sleep 0.1
        done
        echo "$i $ok" >"$dir/second"
    ) &
    second=$!
    wrk -t2 -c32 -d"${seconds}s" "http://$decky_ip/flood/one/address" >"$dir/wrk.txt"
    wait "$second"
    second=''
    local load_end
    load_end=$(date +%s.%N)
    # Settled: the rows have not grown for 3 s (the ingester follows the file within a second), and
    # the last flood window (SVC_FLOOD_WINDOW_S, 10 s) has ended and been summarised.
    python3 - "$base" "$token" "$load_end" "$dir/samples" <<'PY'
import json, sys, time, urllib.request
base, token, load_end, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
def total():
    request = urllib.request.Request(base + "/stats", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(request))["total_logs"]
samples = [(time.time(), total())]
grew = samples[0][0]
while (time.time() - grew < 3 or time.time() - load_end < 13) and time.time() - load_end < 600:
    time.sleep(0.2)
    samples.append((time.time(), total()))
    if samples[-1][1] != samples[-2][1]:
        grew = samples[-1][0]
with open(out, "w") as f:
    f.writelines(f"{t} {n}\n" for t, n in samples)
PY
    stop "$sampler"
    sampler=''
    local data_after ingest_after
    data_after=$(du -sb "$dir/data" | cut -f1)
    ingest_after=$(stat -c %s "$dir/ingest.log" 2>/dev/null || echo 0)
    python3 - "$base" "$token" "$cap" "$seconds" "$second_ip" "$start" "$load_end" \
        "$dir/samples" "$(cat "$dir/second")" "$(awk '/requests in/ {print $1}' "$dir/wrk.txt")" \
        "$((ingest_after - ingest_before))" "$((data_after - data_before))" "$(cat "$dir/engine-bytes")" <<'PY'
import json, sys, urllib.parse, urllib.request
base, token, cap, secs, second_ip = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
start, load_end = float(sys.argv[6]), float(sys.argv[7])
samples = [(float(t), int(n)) for t, n in (line.split() for line in open(sys.argv[8]))]
rows = samples[-1][1]
sent2, ok2 = map(int, sys.argv[9].split())
flood_requests = int(sys.argv[10])
ingest_bytes, data_bytes, engine_bytes = map(int, sys.argv[11:14])
def logs(search, limit=1, offset=0):
    query = urllib.parse.urlencode({"search": search, "limit": limit, "offset": offset})
    request = urllib.request.Request(f"{base}/logs?{query}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(request))
summaries = logs("event:flood_suppressed")["total"]
suppressed = 0
for offset in range(0, summaries, 1000):
    for row in logs("event:flood_suppressed", 1000, offset)["data"]:
        suppressed += int(json.loads(row["fields"]).get("suppressed", 0))
second_rows = logs(f"attacker:{second_ip} /second/source/")["total"]
second_summaries = logs(f"attacker:{second_ip} event:flood_suppressed")["total"]
# The ingest's end: the first sample holding every row but the summaries (the last window's come
# up to SVC_FLOOD_WINDOW_S after the load).
settled = next(t for t, n in samples if n >= rows - summaries)
load_s, ingest_s = load_end - start, max(settled, load_end) - start
per_min = lambda b: b / load_s * 60 / 1e6
print(f"cap {cap}/s: flood {flood_requests:,} requests answered in {secs} s; second source {sent2} sent, {ok2} answered")
print(f"  rows stored {rows:,}; all but the summaries in {ingest_s:.1f} s from the load's start = "
      f"{(rows - summaries) / ingest_s:,.0f} rows/s; "
      f"{summaries} flood_suppressed rows counting {suppressed:,} lines not written")
print(f"  second source: {second_rows} of its {ok2} answered requests stored as rows "
      f"({'all' if second_rows >= ok2 else 'NOT all'}), {second_summaries} flood_suppressed rows for it")
print(f"  written per minute of load: ingest file {per_min(ingest_bytes):.1f} MB, data directory "
      f"{per_min(data_bytes):.1f} MB, engine's container log {per_min(engine_bytes):.1f} MB")
PY
    teardown
}

for cap in $caps; do run "$cap"; done
