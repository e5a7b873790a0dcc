#!/usr/bin/env bash
# The fleet on a real engine, with a release build: how long `svc deploy` takes for 10 deckies (the
# decky image built first, then already there), and the collector's throughput (lines/s from a
# container's stdout to the ingest file) and CPU per 1,000 lines/s while wrk drives one decky's
# HTTP decoy (every request is one `request` line); then, through `svc api`, deploy and teardown of
# FLEET_SIZES deckies (default 10 60 200): from `POST /deckies/deploy` until every lifecycle record
# has ended, and from the first `DELETE /deckies/<name>` until the last has answered. Uses the engine
# SVC_DOCKER_HOST names, Docker's, or a podman API service of its own; removes every container and
# network it made.
#   [SVC_BIN=path/to/svc] [FLEET_SIZES="10 60 200"] benches/fleet.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3
# SVC_BIN: another build of svc (a debug one, say); by default the release build, made here.
ensure_svc_bin

seconds=${1:-15}
# FLEET_NET: the first three octets of the fleet's /24 (another run on the engine needs its own).
net=${FLEET_NET:-10.214.0}
work=$(mktemp -d)
ensure_container_engine "$work/engine"
fleet="bench$$"
svc_env=(env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$work/data" SVC_DOCKER_HOST="$SVC_DOCKER_HOST"
    SVC_FLEET_NAME="$fleet" SVC_INGEST_LOG_FILE="$work/ingest.log" SVC_DEPLOYMENT_LIMIT=20)
cleanup() {
    [ -n "${collector:-}" ] && kill "$collector" 2>/dev/null && wait "$collector" 2>/dev/null
    [ -n "${api:-}" ] && kill "$api" 2>/dev/null && wait "$api" 2>/dev/null
    remove_bench_fleet "$work/engine" "$fleet"
    # The route svc holds for the fleet's subnet (`fleet::host_routes`); the fleet was not torn down.
    release_bench_engine "$work/engine" 10.214.0.0/24
    rm -rf "$work"
}
trap cleanup EXIT

printf '[general]\nnet = %s.0/24\n[d]\nservices = http\namount = 10\n' "$net" >"$work/ten.ini"
start=$(date +%s.%N)
"${svc_env[@]}" "$SVC_BIN" deploy "$work/ten.ini" >/dev/null
echo "deploy of 10 deckies (image built on the way): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
"${svc_env[@]}" "$SVC_BIN" deploy --replace "$work/ten.ini" >/dev/null
start=$(date +%s.%N)
"${svc_env[@]}" "$SVC_BIN" deploy --replace "$work/ten.ini" >/dev/null
echo "redeploy of 10 deckies (image present, containers recreated): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"

"${svc_env[@]}" SVC_COLLECTOR_RECONCILE_S=1 "$SVC_BIN" worker collector &
collector=$!
sleep 2
before_lines=$(wc -l <"$work/ingest.log" 2>/dev/null || echo 0)
before_ticks=$(awk '{print $14 + $15}' "/proc/$collector/stat")
wrk -t1 -c16 -d"${seconds}s" "http://$net.2/bench" >/dev/null
# Let the collector drain what the decoy printed.
for _ in $(seq 1 50); do
    now=$(wc -l <"$work/ingest.log")
    sleep 0.2
    [ "$(wc -l <"$work/ingest.log")" = "$now" ] && break
done
after_lines=$(wc -l <"$work/ingest.log")
after_ticks=$(awk '{print $14 + $15}' "/proc/$collector/stat")
hz=$(getconf CLK_TCK)
python3 - "$before_lines" "$after_lines" "$before_ticks" "$after_ticks" "$hz" "$seconds" <<'PY'
import sys
b, a, tb, ta, hz, secs = map(float, sys.argv[1:])
lines, cpu = a - b, (ta - tb) / hz
print(f"collector: {lines:.0f} lines in {secs:.0f} s = {lines / secs:.0f} lines/s; "
      f"CPU {cpu:.2f} s = {cpu / secs * 100:.1f}% of a core, {cpu / secs * 100 / (lines / secs / 1000):.1f}% per 1,000 lines/s")
PY

if kill "$collector" 2>/dev/null; then wait "$collector" 2>/dev/null || true; fi
collector=
remove_bench_fleet "$work/engine" "$fleet"

# Deploy and teardown through the API, as the dashboard does them.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
password="fleet bench admin password"
"${svc_env[@]}" SVC_DATA_DIR="$work/api-data" SVC_DEPLOYMENT_LIMIT=250 SVC_API_PORT="$port" \
    SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" SVC_ADMIN_PASSWORD="$password" \
    "$SVC_BIN" api >"$work/api.log" 2>&1 &
api=$!
read -ra sizes <<<"${FLEET_SIZES:-10 60 200}"
python3 - "$port" "$password" "$net" "${sizes[@]}" <<'PY'
import json, sys, time, urllib.request

port, password, net, sizes = int(sys.argv[1]), sys.argv[2], sys.argv[3], [int(n) for n in sys.argv[4:]]
base = f"http://127.0.0.1:{port}/api/v1"

def call(method, path, body=None, token=None):
    request = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, None

for _ in range(300):
    try:
        call("GET", "/health")
        break
    except OSError:
        time.sleep(0.1)
first = call("POST", "/auth/login", {"username": "admin", "password": password})[1]["access_token"]
call("POST", "/auth/change-password", {"old_password": password, "new_password": password + "!"}, first)
token = call("POST", "/auth/login", {"username": "admin", "password": password + "!"})[1]["access_token"]
for size in sizes:
    ini = f"[general]\nnet = {net}.0/24\n[d]\nservices = http\namount = {min(size, 100)}\n"
    if size > 100:
        ini += f"[e]\nservices = http\namount = {size - 100}\n"
    start = time.monotonic()
    status, body = call("POST", "/deckies/deploy", {"ini_content": ini, "replace_fleet": True}, token)
    assert status == 202, status
    ids = body["lifecycle_ids"]
    while True:
        rows = []
        for at in range(0, len(ids), 100):
            query = "&".join(f"ids={i}" for i in ids[at:at + 100])
            rows += call("GET", f"/deckies/lifecycle?{query}", token=token)[1]["rows"]
        if all(r["status"] in ("succeeded", "failed") for r in rows):
            break
        time.sleep(0.1)
    deployed = time.monotonic() - start
    failed = sum(r["status"] == "failed" for r in rows)
    names = [d["name"] for d in call("GET", "/deckies", token=token)[1]]
    start = time.monotonic()
    for name in names:
        assert call("DELETE", f"/deckies/{name}", token=token)[0] == 204
    removed = time.monotonic() - start
    print(f"{size} deckies: deploy {deployed:.1f} s ({failed} failed), teardown {removed:.1f} s")
PY
