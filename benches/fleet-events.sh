#!/usr/bin/env bash
# A fleet of 200 deckies on a real engine, kept by the engine's events: how long `GET /deckies`
# takes (p50/p99 and requests/s, 1 and 8 keep-alive clients on loopback, served from the state
# the events keep) next to what one engine listing of the fleet costs (what every `/deckies` call
# paid before), and how long a decky killed with `podman kill` takes to answer HTTP again (and to
# show as not running in `/deckies`). Runs `svc api` on the engine SVC_DOCKER_HOST names, Docker's,
# or a podman API service of its own, on subnet 10.213.232.0/24; removes every container, network
# and route it made.
#   benches/fleet-events.sh [seconds] [kills]   (SVC_BIN=path uses that svc binary instead of a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing curl python3
ensure_svc_bin
seconds=${1:-10}
kills=${2:-5}
subnet=10.213.232.0/24
work=$(mktemp -d)
ensure_container_engine "$work/engine"
fleet="hev-bench$$"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
svc_env=(env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$work/data" SVC_DOCKER_HOST="$SVC_DOCKER_HOST"
    SVC_FLEET_NAME="$fleet" SVC_DECKY_BINARY="$SVC_BIN" SVC_DEPLOYMENT_LIMIT=200
    SVC_JWT_SECRET=0123456789abcdef0123456789abcdef SVC_ADMIN_PASSWORD="bench admin password"
    SVC_API_PORT="$port" SVC_INGEST_LOG_FILE="$work/ingest.log")
cleanup() {
    [ -n "${api:-}" ] && kill "$api" 2>/dev/null && wait "$api" 2>/dev/null
    remove_bench_fleet "$work/engine" "$fleet"
    # The route svc held for the fleet's subnet (the API was stopped, not torn down).
    release_bench_engine "$work/engine" "$subnet"
    rm -rf "$work"
}
trap cleanup EXIT

"${svc_env[@]}" "$SVC_BIN" api >"$work/api.log" 2>&1 &
api=$!
CONTAINERS_CONF="$work/engine/containers.conf" python3 - "$port" "$seconds" "$kills" "$fleet" "$subnet" \
    "${SVC_DOCKER_HOST#unix://}" <<'PY'
import http.client, json, socket, subprocess, sys, threading, time, urllib.parse, urllib.request

port, seconds, kills, fleet, subnet, engine_socket = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
base = f"http://127.0.0.1:{port}/api/v1"

def call(method, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request) as response:
            text = response.read()
            return json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        raise SystemExit(f"{method} {path}: {error.code} {error.read().decode()}")

for _ in range(300):
    try:
        call("GET", "/health"); break
    except Exception:
        time.sleep(0.1)
first = call("POST", "/auth/login", {"username": "admin", "password": "bench admin password"})
call("POST", "/auth/change-password", {"old_password": "bench admin password", "new_password": "bench admin password 2"}, first["access_token"])
token = call("POST", "/auth/login", {"username": "admin", "password": "bench admin password 2"})["access_token"]

gateway = subnet.replace(".0/24", ".1")
ini = f"[general]\nnet = {subnet}\ngw = {gateway}\n[a]\nservices = http\namount = 100\n[b]\nservices = http\namount = 100\n"
start = time.monotonic()
call("POST", "/deckies/deploy", {"ini_content": ini}, token)
deadline = start + 900
while True:
    deckies = call("GET", "/deckies", token=token)
    if len(deckies) == 200 and all(d["state"] == "running" for d in deckies):
        break
    assert time.monotonic() < deadline, f"not all running: {[d['state'] for d in deckies]}"
    time.sleep(0.5)
print(f"deploy of 200 deckies until /deckies says all run: {time.monotonic() - start:.1f} s")

def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]

def load(clients):
    latencies, stop = [], time.monotonic() + seconds
    def client():
        connection = http.client.HTTPConnection("127.0.0.1", int(port))
        mine = []
        while time.monotonic() < stop:
            began = time.perf_counter()
            connection.request("GET", "/api/v1/deckies", headers={"Authorization": f"Bearer {token}"})
            response = connection.getresponse()
            assert response.status == 200, response.status
            response.read()
            mine.append(time.perf_counter() - began)
        latencies.extend(mine)
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(f"GET /deckies at 200 deckies, {clients} client(s), {seconds:.0f} s: p50 {pct(latencies, 0.5) * 1000:.1f} ms, "
          f"p99 {pct(latencies, 0.99) * 1000:.1f} ms, {len(latencies) / seconds:.0f} req/s")

load(1)
load(8)

# What each `/deckies` call cost before: one listing of the fleet's containers from the engine.
class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(engine_socket)
query = urllib.parse.quote(json.dumps({"label": [f"svc.fleet={fleet}"]}))
listings = []
for _ in range(20):
    connection = UnixConnection("engine")
    began = time.perf_counter()
    connection.request("GET", f"/containers/json?all=true&filters={query}")
    response = connection.getresponse()
    body = response.read()
    listings.append(time.perf_counter() - began)
    assert response.status == 200 and len(json.loads(body)) == 200
print(f"one engine listing of the 200 containers (each /deckies call before): p50 {pct(listings, 0.5) * 1000:.0f} ms, "
      f"p99 {pct(listings, 0.99) * 1000:.0f} ms")

def answers(ip):
    try:
        connection = http.client.HTTPConnection(ip, 80, timeout=0.3)
        connection.request("GET", "/bench-kill")
        connection.getresponse().read()
        return True
    except OSError:
        return False

def state_of(name):
    return next(d["state"] for d in call("GET", "/deckies", token=token) if d["name"] == name)

deckies = call("GET", "/deckies", token=token)
downs, backs = [], []
for decky in deckies[:: max(1, len(deckies) // kills)][:kills]:
    name, ip = decky["name"], decky["ip"]
    assert answers(ip), f"{name} does not answer before the kill"
    subprocess.run(["podman", "kill", f"{fleet}-{name}"], check=True, capture_output=True)
    killed = time.monotonic()
    while state_of(name) == "running":
        assert time.monotonic() - killed < 30, f"/deckies still says {name} runs"
    downs.append(time.monotonic() - killed)
    while not answers(ip):
        assert time.monotonic() - killed < 120, f"{name} did not come back"
        time.sleep(0.02)
    backs.append(time.monotonic() - killed)
    while state_of(name) != "running":
        time.sleep(0.05)
print(f"podman kill of {len(backs)} deckies: /deckies says not running after p50 {pct(downs, 0.5) * 1000:.0f} ms "
      f"(max {max(downs) * 1000:.0f} ms); answering HTTP again after p50 {pct(backs, 0.5):.2f} s (max {max(backs):.2f} s)")
PY
