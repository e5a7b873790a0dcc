#!/usr/bin/env bash
# Topologies on a real engine: how long a deploy of 3 LANs and 10 deckies takes (POST …/deploy
# until `active`, the decky image already built), and how many mutations a second the mutator
# applies: metadata-only ops (`update_lan`, store only) and live ops (`add_decky` + `remove_decky`,
# a container made and removed each). Runs `svc api` and `svc worker mutator` (no bus: the mutator
# polls every second) on the engine SVC_DOCKER_HOST names, Docker's, or a podman API service of
# its own; removes every container and network it made.
#   benches/topology.sh [mutations]          (SVC_BIN=path uses that svc binary instead of a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing curl python3
ensure_svc_bin
mutations=${1:-60}
work=$(mktemp -d)
ensure_container_engine "$work/engine"
fleet="tbench$$"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
svc_env=(env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$work/data" SVC_DOCKER_HOST="$SVC_DOCKER_HOST"
    SVC_FLEET_NAME="$fleet" SVC_DECKY_BINARY="$SVC_BIN" SVC_TOPOLOGY_SUBNET_POOL=10.214.192.0/20
    SVC_JWT_SECRET=0123456789abcdef0123456789abcdef SVC_ADMIN_PASSWORD="bench admin password"
    SVC_API_PORT="$port" SVC_MUTATOR_POLL_S=1)
cleanup() {
    for pid in ${api:-} ${mutator:-}; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    remove_bench_fleet "$work/engine" "$fleet"
    release_bench_engine "$work/engine"
    rm -rf "$work"
}
trap cleanup EXIT

"${svc_env[@]}" "$SVC_BIN" api >"$work/api.log" 2>&1 &
api=$!
"${svc_env[@]}" "$SVC_BIN" worker mutator >"$work/mutator.log" 2>&1 &
mutator=$!
python3 - "$port" "$mutations" <<'PY'
import json, sys, time, urllib.request

port, count = sys.argv[1], int(sys.argv[2])
base = f"http://127.0.0.1:{port}/api/v1"

def call(method, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request) as response:
        text = response.read()
        return json.loads(text) if text else None

for _ in range(100):
    try:
        call("GET", "/health"); break
    except Exception:
        time.sleep(0.1)
first = call("POST", "/auth/login", {"username": "admin", "password": "bench admin password"})
call("POST", "/auth/change-password", {"old_password": "bench admin password", "new_password": "bench admin password 2"}, first["access_token"])
token = call("POST", "/auth/login", {"username": "admin", "password": "bench admin password 2"})["access_token"]

def topology(name, lans, deckies):
    t = call("POST", "/topologies/blank", {"name": name}, token)
    ids = {n: call("POST", f"/topologies/{t['id']}/lans", {"name": n, "is_dmz": n == "dmz"}, token)["id"] for n in lans}
    for i in range(deckies):
        d = call("POST", f"/topologies/{t['id']}/deckies", {"name": f"d{i:02d}", "services": ["ssh", "http"]}, token)
        home = lans[i % len(lans)]
        call("POST", f"/topologies/{t['id']}/edges", {"decky_uuid": d["uuid"], "lan_id": ids[home]}, token)
        if i % len(lans) != 0:  # every decky off the DMZ bridges to it
            call("POST", f"/topologies/{t['id']}/edges", {"decky_uuid": d["uuid"], "lan_id": ids["dmz"], "forwards_l3": True}, token)
    return t["id"]

def deploy(tid):
    start = time.monotonic()
    call("POST", f"/topologies/{tid}/deploy", None, token)
    while (status := call("GET", f"/topologies/{tid}", None, token)["topology"]["status"]) == "deploying":
        time.sleep(0.05)
    assert status == "active", status
    return time.monotonic() - start

def teardown(tid):
    call("POST", f"/topologies/{tid}/teardown", None, token)
    while call("GET", f"/topologies/{tid}", None, token)["topology"]["status"] == "tearing_down":
        time.sleep(0.1)

# The image is built by the first deploy; the second is the one measured.
warm = topology("warm", ["dmz"], 1)
print(f"first deploy (decky image built on the way): {deploy(warm):.1f} s")
teardown(warm)
tid = topology("bench", ["dmz", "inner", "core"], 10)
print(f"deploy of 3 LANs and 10 deckies (image present): {deploy(tid):.1f} s")

def drain(ops):
    ids = [call("POST", f"/topologies/{tid}/mutations", {"op": op, "payload": p}, token)["mutation_id"] for op, p in ops]
    start = time.monotonic()
    while True:
        rows = {r["id"]: r for r in call("GET", f"/topologies/{tid}/mutations", None, token)}
        if all(rows[i]["state"] in ("applied", "failed") for i in ids):
            assert all(rows[i]["state"] == "applied" for i in ids), [rows[i] for i in ids if rows[i]["state"] != "applied"]
            return time.monotonic() - start
        time.sleep(0.05)

secs = drain([("update_lan", {"name": "inner", "x": float(i)}) for i in range(count)])
print(f"metadata mutations (update_lan): {count} in {secs:.1f} s = {count / secs * 60:.0f}/min")
live = []
for i in range(count // 2):
    live += [("add_decky", {"name": f"m{i:03d}", "lan": "inner", "services": ["ssh"]}), ("remove_decky", {"decky": f"m{i:03d}"})]
secs = drain(live)
print(f"live mutations (add_decky/remove_decky, a container each): {len(live)} in {secs:.1f} s = {len(live) / secs * 60:.0f}/min")
teardown(tid)
PY
