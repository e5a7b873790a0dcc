#!/usr/bin/env bash
# The log pipeline under load, on a release build with throw-away data (sqlite by default):
#   benches/logs-load.sh [rows] [seconds] [connections]
# Reports: `svc ingest-replay` back-fill rate of `rows` lines; the live ingest rate of the API's
# embedded ingester (from appending `rows` more lines at once to the followed file until /stats counts
# them all); GET /logs?limit=50 requests/s and latency percentiles over the stored rows; and the time
# from appending one line to an open /stream receiving it (20 samples, with a private nats-server as
# the bus); the API's resident memory idle, after the live ingest and at its peak.
# SVC_READ_CACHE_MS=0 in the environment measures the reads without shared bodies (every request
# queries); SVC_BENCH_IN_ORDER=1 writes lines in time order, as deckies do, instead of timestamps
# that wrap every hour (the harder case for the time indexes). GET /logs is measured also while
# SVC_BENCH_WRITE_RATE lines a second (5,000) are appended to the followed file.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3 nats-server
ensure_rust
ensure_build_deps
cargo build --release --locked -p svc-cli

rows=${1:-1000000}
seconds=${2:-10}
connections=${3:-32}
data=$(mktemp -d)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
nats_port=$(free_port)
base="http://127.0.0.1:$port/api/v1"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$data"' EXIT

# Lines like the deckies write (benches/lines.py), in time order with SVC_BENCH_IN_ORDER=1.
generate() {
    local order=""
    [ "${SVC_BENCH_IN_ORDER:-0}" = 1 ] && order=in-order
    python3 benches/lines.py "$1" "$2" "$3" ${order:+"$order"}
}

export SVC_DATA_DIR="$data" SVC_LIMITER_ENABLED=false RUST_LOG=warn
export SVC_JWT_SECRET; SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export SVC_ADMIN_PASSWORD="load test admin password"

echo "==> generating $rows lines"
generate "$data/history.log" 0 "$rows"
sync  # the generated file's write-back would otherwise compete with the database's writes
echo "==> svc ingest-replay of $rows lines"
start=$(date +%s.%N)
target/release/svc ingest-replay "$data/history.log"
end=$(date +%s.%N)
python3 -c "print(f'back-fill: {$rows / ($end - $start):,.0f} lines/s ({$end - $start:.2f} s)')"

/usr/sbin/nats-server -a 127.0.0.1 -p "$nats_port" >/dev/null 2>&1 &
pids+=($!)
SVC_API_PORT="$port" SVC_NATS_URL="nats://127.0.0.1:$nats_port" SVC_INGEST_LOG_FILE="$data/live.log" \
    target/release/svc api &
api=$!
pids+=("$api")
for _ in $(seq 1 100); do curl -fs "$base/health" >/dev/null 2>&1 && break; sleep 0.1; done
rss() { awk -v what="$1" '$1 == what ":" { printf "%.0f MiB", $2 / 1024 }' "/proc/$api/status"; }
echo "==> API resident memory idle: $(rss VmRSS)"

post() { curl -fs -H 'Content-Type: application/json' "$@"; }
token_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])'; }
first=$(post -d '{"username":"admin","password":"load test admin password"}' "$base/auth/login" | token_of)
post -H "Authorization: Bearer $first" -d '{"old_password":"load test admin password","new_password":"load test new password"}' \
    "$base/auth/change-password" >/dev/null
token=$(post -d '{"username":"admin","password":"load test new password"}' "$base/auth/login" | token_of)
total() { curl -fs -H "Authorization: Bearer $token" "$base/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["total_logs"])'; }

echo "==> live ingest: $rows lines appended at once to the followed file"
generate "$data/live.pending" "$rows" "$rows"
sync
# One poller process: a curl and a python start every 50 ms took a fifth of a core from the ingester.
python3 - "$base/stats" "$token" "$rows" "$data/live.pending" "$data/live.log" <<'PY'
import json, shutil, sys, time, urllib.request
url, token, rows, pending, live = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def total():
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(request))["total_logs"]
before = total()
start = time.monotonic()
with open(pending, "rb") as source, open(live, "ab") as target:
    shutil.copyfileobj(source, target)
while total() < before + rows:
    time.sleep(0.05)
took = time.monotonic() - start
print(f"live ingest: {rows / took:,.0f} lines/s ({took:.2f} s, file append to committed rows)")
PY
echo "==> API resident memory after the live ingest: $(rss VmRSS)"

# The dashboards' polls while deckies under attack write: lines appended at a steady rate (each
# commit makes the shared bodies stale, so reads query again after every batch).
rate=${SVC_BENCH_WRITE_RATE:-5000}
echo "==> GET /logs?limit=50 while $rate lines/s are appended (${seconds}s, $connections connections)"
generate "$data/trickle.pending" $((2 * rows)) $((rate * seconds))
before=$(total)
python3 - "$data/trickle.pending" "$data/live.log" "$rate" <<'PY' &
import sys, time
pending, live, rate = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(pending).readlines()
chunk = max(rate // 10, 1)
start = time.monotonic()
with open(live, "a") as f:
    for i in range(0, len(lines), chunk):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        f.writelines(lines[i:i + chunk])
        f.flush()
PY
appender=$!
wrk -t1 -c"$connections" -d"${seconds}s" --latency -H "Authorization: Bearer $token" "$base/logs?limit=50" \
    | grep -E "Requests/sec|Latency|50%|99%|Non-2xx"
wait "$appender"
while [ "$(total)" -lt $((before + rate * seconds)) ]; do sleep 0.05; done
echo "    (all $((rate * seconds)) appended lines stored)"

echo "==> GET /logs?limit=50 over $(total) rows (${seconds}s, $connections connections)"
wrk -t1 -c"$connections" -d"${seconds}s" --latency -H "Authorization: Bearer $token" "$base/logs?limit=50" \
    | grep -E "Requests/sec|Latency|50%|99%|Non-2xx"
echo "==> GET /logs?limit=50&search=service:ssh (${seconds}s, $connections connections)"
wrk -t1 -c"$connections" -d"${seconds}s" --latency -H "Authorization: Bearer $token" "$base/logs?limit=50&search=service:ssh" \
    | grep -E "Requests/sec|Latency|50%|99%|Non-2xx"

echo "==> append to stream latency (20 samples)"
python3 - "$port" "$token" "$data/live.log" <<'PY'
import http.client, json, sys, time
port, token, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
conn.request("GET", "/api/v1/stream", headers={"Authorization": f"Bearer {token}"})
stream = conn.getresponse()
assert stream.status == 200, stream.status
def next_logs():
    data = None
    while True:
        line = stream.fp.readline().decode().rstrip("\n")
        if line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and data is not None:
            if data["type"] == "logs":
                return data["data"]
            data = None
samples = []
for i in range(20):
    marker = f"latency-{i}-{time.time_ns()}"
    sent = time.monotonic()
    with open(path, "a") as f:
        f.write(f'<134>1 2026-05-02T07:00:00+00:00 decky-00 ssh - probe [relay@55555 src_ip="198.51.100.1" marker="{marker}"]\n')
    while not any(marker in row["raw_line"] for row in next_logs()):
        pass
    samples.append((time.monotonic() - sent) * 1000)
    time.sleep(0.2)
samples.sort()
print(f"append→stream: median {samples[10]:.0f} ms, max {samples[-1]:.0f} ms")
PY
echo "==> API resident memory now $(rss VmRSS), at its peak $(rss VmHWM)"
