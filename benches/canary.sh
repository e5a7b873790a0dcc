#!/usr/bin/env bash
# The canary callback under load, on a release build with throw-away data (sqlite, a private
# nats-server, the API's embedded ingester and webhook worker):
#   benches/canary.sh [seconds] [connections] [deliveries]
# Reports: GET /c/{token} requests/s and latency percentiles under wrk (`connections` clients for
# `seconds`) while 4 more clients read GET /api/v1/logs?limit=50 (requests/s, p99; and the same
# /logs alone before), how many triggers were stored against the callbacks answered, then the time
# from a callback to its webhook's arrival at a local receiver, for `deliveries` callbacks one after
# another (p50/p95/max). The store is seeded with SVC_BENCH_ROWS log lines (100,000) first.
# SVC_CANARY_TRIGGERS_PER_MINUTE is raised out of reach, so every callback stores a full trigger.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
if [ -z "${SVC_BIN:-}" ]; then
    apt_install_missing wrk curl python3 nats-server
    ensure_rust
    cargo build --release --locked -p svc-cli
    SVC_BIN="${CARGO_TARGET_DIR:-target}/release/svc"
fi
command -v wrk >/dev/null || { echo "wrk is needed" >&2; exit 1; }

seconds=${1:-10}
connections=${2:-32}
deliveries=${3:-50}
rows=${SVC_BENCH_ROWS:-100000}
data=$(mktemp -d)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
nats_port=$(free_port)
receiver_port=$(free_port)
root="http://127.0.0.1:$port"
base="$root/api/v1"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

export SVC_DATA_DIR="$data" SVC_LIMITER_ENABLED=false RUST_LOG=warn
export SVC_JWT_SECRET; SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export SVC_ADMIN_PASSWORD="load test admin password"
# The per-token limit on stored triggers (over it the callback answers but stores nothing) is out
# of reach here, so what is measured is a full trigger per callback.
export SVC_CANARY_TRIGGERS_PER_MINUTE=1000000
export SVC_EMBED_WEBHOOK=true SVC_WEBHOOK_ALLOW_PRIVATE=true

echo "==> binary: $SVC_BIN; seeding $rows log lines"
python3 benches/lines.py "$data/history.log" 0 "$rows" in-order
"$SVC_BIN" ingest-replay "$data/history.log" >/dev/null
rm -f "$data/history.log"

/usr/sbin/nats-server -a 127.0.0.1 -p "$nats_port" >/dev/null 2>&1 &
pids+=($!)
# Every trigger logs a warning: the API's output goes to a file, not the terminal.
SVC_API_PORT="$port" SVC_NATS_URL="nats://127.0.0.1:$nats_port" SVC_INGEST_LOG_FILE="$data/live.log" \
    "$SVC_BIN" api >"$data/api.log" 2>&1 &
api=$!
pids+=("$api")
for _ in $(seq 1 100); do curl -fs "$base/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "$base/health" >/dev/null || { echo "the API did not come up:" >&2; tail "$data/api.log" >&2; exit 1; }

post() { curl -fs -H 'Content-Type: application/json' "$@"; }
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
first=$(post -d '{"username":"admin","password":"load test admin password"}' "$base/auth/login" | field access_token)
post -H "Authorization: Bearer $first" -d '{"old_password":"load test admin password","new_password":"load test new password"}' \
    "$base/auth/change-password" >/dev/null
token=$(post -d '{"username":"admin","password":"load test new password"}' "$base/auth/login" | field access_token)
auth=(-H "Authorization: Bearer $token")
total() { curl -fs "${auth[@]}" "$base/stats" | field total_logs; }
trigger_count() { curl -fs "${auth[@]}" "$base/canary/tokens/$1" | field trigger_count; }

canary=$(post "${auth[@]}" -d '{"decky_name":"web-01","generator":"env_file"}' "$base/canary/tokens")
canary_uuid=$(field uuid <<<"$canary")
callback=$(field callback_token <<<"$canary")
curl -fs -o /dev/null "$root/c/$callback"  # the first trigger, before any timing
[ "$(trigger_count "$canary_uuid")" = 1 ] || { echo "the first callback stored no trigger" >&2; exit 1; }
for _ in $(seq 1 100); do [ "$(total)" -gt "$rows" ] && break; sleep 0.1; done

measure() { grep -E "Requests/sec|requests in|Latency|50%|99%|Non-2xx|Socket errors"; }
echo "==> GET /logs?limit=50 alone (${seconds}s, 4 connections)"
wrk -t1 -c4 -d"${seconds}s" --latency "${auth[@]}" "$base/logs?limit=50" | measure

echo "==> GET /c/{token} ($connections connections) and, at the same time, GET /logs?limit=50 (4 connections), ${seconds}s"
before=$(trigger_count "$canary_uuid")
logs_before=$(total)
wrk -t1 -c4 -d"${seconds}s" --latency "${auth[@]}" "$base/logs?limit=50" >"$data/logs.txt" &
reader=$!
pids+=("$reader")
wrk -t1 -c"$connections" -d"${seconds}s" --latency "$root/c/$callback" >"$data/callback.txt"
wait "$reader"
echo "callback:"
measure <"$data/callback.txt"
echo "/logs meanwhile:"
measure <"$data/logs.txt"
answered=$(awk '/requests in/ { print $1 }' "$data/callback.txt")
stored=$(( $(trigger_count "$canary_uuid") - before ))
echo "triggers stored: $stored for $answered callbacks answered (wrk leaves up to $connections unanswered at the end)"
# The ingester takes every trigger's line; wait (at most 20 s) until it has, so the deliveries below
# are timed on a settled API.
waited=$SECONDS
while [ $((SECONDS - waited)) -lt 20 ] && [ "$(total)" -lt $((logs_before + stored)) ]; do sleep 0.2; done
echo "trigger lines: $(wc -l <"$data/live.log") in the ingest file in all, $(( $(total) - logs_before )) of these $stored stored in the logs (waited $((SECONDS - waited)) s)"

echo "==> callback to webhook delivery ($deliveries callbacks, one after another)"
hook=$(post "${auth[@]}" -d "{\"name\":\"bench\",\"url\":\"http://127.0.0.1:$receiver_port/hook\",\"topic_patterns\":[\"canary.>\"]}" \
    "$base/webhooks")
hook_uuid=$(field uuid <<<"$hook")
timeout 300 python3 - "$root" "$callback" "$receiver_port" "$deliveries" "$canary_uuid" "$token" <<'PY'
import http.client, http.server, json, sys, threading, time, urllib.request
root, callback, receiver_port, n, token_uuid, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
arrivals = []  # (monotonic time, trigger_id, event id)
seen = threading.Condition()

class Receiver(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        at = time.monotonic()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        event = json.loads(body)
        with seen:
            arrivals.append((at, event["payload"].get("trigger_id"), event["id"], event["topic"]))
            seen.notify_all()
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", receiver_port), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()
host = root.removeprefix("http://")
def fire():
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.request("GET", f"/c/{callback}")
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.status == 200, response.status
def wait_for(count, limit):
    with seen:
        return seen.wait_for(lambda: len(arrivals) >= count, timeout=limit)

# A first delivery, untimed: the worker may take up to 10 s to read the new webhook.
fire()
if not wait_for(1, 30):
    sys.exit("no delivery within 30 s of the first callback")
samples, lost = [], 0
for i in range(n):
    expected = len(arrivals) + 1
    sent = time.monotonic()
    fire()
    if wait_for(expected, 10):
        samples.append((arrivals[expected - 1][0] - sent) * 1000)
    else:
        lost += 1
    time.sleep(0.05)
time.sleep(2)  # late or repeated deliveries
triggers = [a[1] for a in arrivals]
topics = {a[3] for a in arrivals}
print(f"deliveries received: {len(arrivals)} for {n + 1} callbacks ({len(set(triggers))} distinct trigger_id, "
      f"{len({a[2] for a in arrivals})} distinct event ids, topics {sorted(topics)})")
if samples:
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    print(f"callback→webhook: p50 {pick(0.5):.1f} ms, p95 {pick(0.95):.1f} ms, max {samples[-1]:.1f} ms "
          f"({len(samples)} timed, {lost} not delivered within 10 s)")
expected_topic = f"canary.{token_uuid}.triggered"
if topics != {expected_topic}:
    print(f"unexpected topics: {topics - {expected_topic}}")
# The newest stored triggers are this phase's callbacks: each should have been delivered once.
request = urllib.request.Request(f"{root}/api/v1/canary/tokens/{token_uuid}/triggers?limit={min(n + 1, 500)}",
                                 headers={"Authorization": f"Bearer {token}"})
stored = {t["uuid"] for t in json.load(urllib.request.urlopen(request))["triggers"]}
if n + 1 <= 500:
    print(f"stored triggers of this phase not delivered: {len(stored - set(triggers))}; "
          f"deliveries naming no such trigger: {len(set(triggers) - stored)}")
PY
state=$(curl -fs "${auth[@]}" "$base/webhooks/$hook_uuid" \
    | python3 -c 'import json, sys; w = json.load(sys.stdin); print(w["enabled"], w["consecutive_failures"], w["last_error"])')
echo "webhook enabled, consecutive failures, last error: $state"
echo "==> API: $(awk '$1 == "VmHWM:" { printf "peak RSS %.0f MiB", $2 / 1024 }' "/proc/$api/status"), $(grep -c 'ERROR' "$data/api.log" || true) error lines in its log"
grep 'ERROR' "$data/api.log" | head -5 || true
