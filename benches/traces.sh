#!/usr/bin/env bash
# What traces cost, and what a /metrics scrape costs, on a release build with throw-away data:
#   benches/traces.sh [rows] [seconds] [connections]
# For SVC_DEVELOPER_TRACING off, then on (OTLP HTTP/protobuf to a sink in this script that answers
# every export and counts the spans), an `svc api` of its own: the live ingest rate of `rows` lines
# appended at once to its followed file (every tenth line carrying a trace context as the collector
# writes it, so the ingester opens a span for it), then GET /logs?limit=50 under wrk (first with no
# rows, where only a request's fixed cost counts, then over the rows). Then, on the
# last API, the time of a GET /metrics scrape once requests to every route template with several
# methods and statuses have been counted and 10 workers send heartbeats over the bus.
# SVC_BIN names the binary (default: the release build under CARGO_TARGET_DIR or target/).
# SVC_BIN_BEFORE, when set, names a build from before the traces (38f97c1^), measured first the
# same way with tracing off: the baseline "off" is compared with.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3 nats-server

rows=${1:-200000}
seconds=${2:-10}
connections=${3:-32}
svc=${SVC_BIN:-${CARGO_TARGET_DIR:-target}/release/svc}
[ -x "$svc" ] || { echo "no $svc: cargo build --release -p svc-cli --bin svc" >&2; exit 1; }
data=$(mktemp -d)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
nats_port=$(free_port)
sink_port=$(free_port)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$data"' EXIT

# The OTLP/HTTP sink: answers every export with an empty ExportTraceServiceResponse and counts the
# spans (the protobuf's span messages are not decoded: their bytes are counted by the exporter's
# batches, each POST one batch of at most 512 spans).
python3 - "$sink_port" "$data/sink" <<'PY' &
import http.server, sys
port, out = int(sys.argv[1]), sys.argv[2]
posts = 0
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global posts
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        posts += 1
        open(out, "w").write(str(posts))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()
PY
pids+=($!)
/usr/sbin/nats-server -a 127.0.0.1 -p "$nats_port" >/dev/null 2>&1 &
pids+=($!)

export SVC_LIMITER_ENABLED=false RUST_LOG=warn SVC_METRICS_TOKEN=bench-metrics-token-0123456789abcdef
export SVC_JWT_SECRET; SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export SVC_ADMIN_PASSWORD="load test admin password"
export SVC_NATS_URL="nats://127.0.0.1:$nats_port" SVC_OTEL_PROTOCOL=http/protobuf
export SVC_OTEL_ENDPOINT="http://127.0.0.1:$sink_port"

# `rows` lines from `first` on, every tenth carrying a trace context where the collector puts it.
generate() {
    python3 benches/lines.py "$1.plain" "$2" "$3" in-order
    python3 - "$1.plain" "$1" <<'PY'
import os, sys
with open(sys.argv[1]) as source, open(sys.argv[2], "w") as target:
    for i, line in enumerate(source):
        if i % 10 == 0:
            head = line.split(" ", 6)
            tp = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"
            rest = head[6][1:] if head[6].startswith("- ") else head[6]
            line = " ".join(head[:6]) + f' [trace@55555 traceparent="{tp}"]' + rest
        target.write(line)
PY
    rm "$1.plain"
}

run() {
    local tracing=$1 port base token first
    # One API at a time: the previous one goes with its data.
    if [ -n "${api:-}" ]; then kill "$api"; wait "$api" 2>/dev/null || true; fi
    port=$(free_port)
    base="http://127.0.0.1:$port/api/v1"
    rm -rf "$data/api" && mkdir "$data/api"
    SVC_DATA_DIR="$data/api" SVC_API_PORT="$port" SVC_INGEST_LOG_FILE="$data/api/live.log" \
        SVC_DEVELOPER_TRACING="$tracing" "${binary:-$svc}" api &
    api=$!
    pids+=("$api")
    for _ in $(seq 1 100); do curl -fs "$base/health" >/dev/null 2>&1 && break; sleep 0.1; done
    post() { curl -fs -H 'Content-Type: application/json' "$@"; }
    token_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])'; }
    first=$(post -d '{"username":"admin","password":"load test admin password"}' "$base/auth/login" | token_of)
    post -H "Authorization: Bearer $first" \
        -d '{"old_password":"load test admin password","new_password":"load test new password"}' \
        "$base/auth/change-password" >/dev/null
    token=$(post -d '{"username":"admin","password":"load test new password"}' "$base/auth/login" | token_of)

    # A request's fixed cost (middleware, spans made or not) apart from reading rows.
    echo "==> ${label:-SVC_DEVELOPER_TRACING=$tracing}: GET /logs?limit=50 with no rows (${seconds}s)"
    wrk -t1 -c"$connections" -d"${seconds}s" --latency -H "Authorization: Bearer $token" "$base/logs?limit=50" \
        | grep -E "Requests/sec|50%"
    echo "==> ${label:-SVC_DEVELOPER_TRACING=$tracing}: live ingest of $rows lines appended at once"
    generate "$data/live.pending" 0 "$rows"
    python3 - "$base/stats" "$token" "$rows" "$data/live.pending" "$data/api/live.log" <<'PY'
import json, shutil, sys, time, urllib.request
url, token, rows, pending, live = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def total():
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(request))["total_logs"]
start = time.monotonic()
with open(pending, "rb") as source, open(live, "ab") as target:
    shutil.copyfileobj(source, target)
while total() < rows:
    time.sleep(0.05)
took = time.monotonic() - start
print(f"    live ingest: {rows / took:,.0f} lines/s ({took:.2f} s)")
PY
    echo "==> ${label:-SVC_DEVELOPER_TRACING=$tracing}: GET /logs?limit=50 (${seconds}s, $connections connections)"
    wrk -t1 -c"$connections" -d"${seconds}s" --latency -H "Authorization: Bearer $token" "$base/logs?limit=50" \
        | grep -E "Requests/sec|50%|99%|Non-2xx"
    LAST_PORT=$port LAST_TOKEN=$token
}

if [ -n "${SVC_BIN_BEFORE:-}" ]; then binary=$SVC_BIN_BEFORE label="before the traces" run false; fi
run false
run true
echo "==> OTLP exports (batches) received by the sink: $(cat "$data/sink" 2>/dev/null || echo 0)"

echo "==> /metrics with every route template × methods × statuses and 10 workers"
base="http://127.0.0.1:$LAST_PORT/api/v1"
grep -rhoP 'path = "\K/[^"]+' src/http | sort -u | while read -r path; do
    url="$base$(echo "$path" | sed -E 's/\{[^}]+\}/00000000-0000-0000-0000-000000000000/g')"
    for method in GET POST DELETE PUT; do curl -s -m 2 -o /dev/null -X "$method" "$url" || true; done
    # (The streams answer for as long as the client stays: bounded by -m.)
    curl -s -m 2 -o /dev/null -H "Authorization: Bearer $LAST_TOKEN" "$url" || true
done
python3 - "$nats_port" <<'PY'
import json, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.recv(4096)
s.sendall(b'CONNECT {"verbose":false}\r\n')
for i in range(10):
    body = json.dumps({"topic": f"system.bench{i}.health", "type": "heartbeat", "ts": time.time(),
                       "payload": {"worker": f"bench{i}"}}).encode()
    s.sendall(b"PUB system.bench%d.health %d\r\n%s\r\n" % (i, len(body), body))
s.sendall(b"PING\r\n")
s.recv(4096)
PY
scrape="http://127.0.0.1:$LAST_PORT/metrics"
curl -fs -H "Authorization: Bearer $SVC_METRICS_TOKEN" "$scrape" > "$data/metrics.txt"
echo "    $(grep -vc '^#' "$data/metrics.txt") series, $(wc -c < "$data/metrics.txt") bytes;" \
    "$(grep -c 'route=' "$data/metrics.txt") with a route label"
python3 - "$scrape" "$SVC_METRICS_TOKEN" <<'PY'
import sys, time, urllib.request
url, token = sys.argv[1], sys.argv[2]
took = []
for _ in range(200):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    start = time.perf_counter()
    urllib.request.urlopen(request).read()
    took.append((time.perf_counter() - start) * 1000)
took.sort()
print(f"    scrape: median {took[100]:.2f} ms, p99 {took[197]:.2f} ms (200 scrapes, one at a time)")
PY
