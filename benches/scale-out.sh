#!/usr/bin/env bash
# Scale-out figures (issue 37) on the deployment scripts/scale-out brings up on loopback (haproxy,
# three clustered nats-server, 1-3 `svc api` replicas on the local MariaDB), release build:
#   benches/scale-out.sh [seconds] [connections] [revocations]
# For 1, 2 and 3 replicas: GET /logs?limit=50 (over SVC_BENCH_ROWS stored rows, default 20000) and
# POST /auth/login throughput through haproxy with wrk. With 3 replicas, also: the time a logout
# on one replica takes to be refused by every replica (`revocations` times), and the ingest lease's
# failover: kill -9 of the holder, until another replica holds it and a line written after the kill
# is listed. The limiter is off (logins are the point) and so is the /logs read cache
# (SVC_READ_CACHE_MS=0: every read queries the database), unless set. SVC_SCALE_OUT_* as
# scripts/scale-out takes them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3
ensure_svc_bin
export SVC_BIN

seconds=${1:-10}
connections=${2:-32}
revocations=${3:-3}
rows=${SVC_BENCH_ROWS:-20000}
front=${SVC_SCALE_OUT_PORT:-18000}
database=${SVC_SCALE_OUT_DB:-svc_scale_out}
base="http://127.0.0.1:$front/api/v1"
password="scale-out bench admin password"
export SVC_LIMITER_ENABLED=${SVC_LIMITER_ENABLED:-false} SVC_READ_CACHE_MS=${SVC_READ_CACHE_MS:-0}
export RUST_LOG=${RUST_LOG:-warn} SVC_ADMIN_PASSWORD="$password"

work=$(mktemp -d)
deployment=""
stop_deployment() {
    [ -n "$deployment" ] || return 0
    kill "$deployment" 2>/dev/null || true
    wait "$deployment" 2>/dev/null || true
    deployment=""
}
trap 'stop_deployment; rm -rf "$work"' EXIT

# Starts scripts/scale-out with $1 replicas and waits until it is up; sets $dir (its directory).
start_deployment() {
    local out="$work/deployment-$1.out"
    SVC_SCALE_OUT_REPLICAS=$1 scripts/scale-out >"$out" 2>&1 &
    deployment=$!
    until grep -qs "Ctrl-C stops all" "$out"; do
        kill -0 "$deployment" 2>/dev/null || { cat "$out" >&2; exit 1; }
        sleep 0.5
    done
    dir=$(sed -n 's/.*logs in \(.*\); Ctrl-C stops all/\1/p' "$out")
}

post() { curl -fsS -H 'Content-Type: application/json' "$@"; }
token_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])'; }
login() { post -d "{\"username\":\"admin\",\"password\":\"$1\"}" "$2/auth/login" | token_of; }
total() { curl -fsS -H "Authorization: Bearer $token" "$base/logs?limit=1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["total"])'; }

# $1 lines numbered from $2, as a decky's collector writes them, appended to the shared ingest file.
append_lines() {
    python3 - "$1" "$2" >>"$dir/decnet.log" <<'PY'
import sys
count, first = int(sys.argv[1]), int(sys.argv[2])
for seq in range(first, first + count):
    print(f'<134>1 2026-05-02T06:{seq // 60 % 60:02d}:{seq % 60:02d}.453826+00:00 decky-{seq % 7} ssh - auth_attempt '
          f'[relay@55555 src_ip="192.0.2.{seq % 250 + 1}" username="root" password="pw{seq}" seq="{seq}"]')
PY
}

wait_total() {
    until [ "$(total 2>/dev/null || echo 0)" -ge "$1" ]; do sleep 0.2; done
}

cat >"$work/login.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"username":"admin","password":"$password, changed"}'
LUA

for replicas in 1 2 3; do
    start_deployment "$replicas"
    first=$(login "$password" "$base")
    post -H "Authorization: Bearer $first" -d "{\"old_password\":\"$password\",\"new_password\":\"$password, changed\"}" \
        "$base/auth/change-password" >/dev/null
    token=$(login "$password, changed" "$base")
    append_lines "$rows" 0
    wait_total "$rows"

    echo "==> $replicas replica(s): GET /logs?limit=50 through haproxy (${seconds}s, $connections connections)"
    wrk -t2 -c"$connections" -d"${seconds}s" -H "Authorization: Bearer $token" "$base/logs?limit=50" |
        grep -E "Requests/sec|Latency|Non-2xx|errors"
    echo "==> $replicas replica(s): POST /auth/login through haproxy (${seconds}s, $connections connections)"
    wrk -t2 -c"$connections" -d"${seconds}s" -s "$work/login.lua" "$base/auth/login" |
        grep -E "Requests/sec|Latency|Non-2xx|errors"
    [ "$replicas" -eq 3 ] || { stop_deployment; continue; }

    echo "==> revocation: a logout on replica-0 until every replica refuses the token ($revocations times)"
    for _ in $(seq 1 "$revocations"); do
        python3 - "$front" "$(login "$password, changed" "$base")" <<'PY'
import sys, time, urllib.request, urllib.error
front, token = int(sys.argv[1]), sys.argv[2]
replicas = [f"http://127.0.0.1:{front + i}/api/v1" for i in (1, 2, 3)]
def status(url, method="GET"):
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
# Every replica has accepted (and cached) the token before the logout.
assert all(status(f"{r}/system/deployment-mode") == 200 for r in replicas)
assert status(f"{replicas[0]}/auth/logout", "POST") == 200
start, refused = time.monotonic(), {}
while len(refused) < len(replicas) and time.monotonic() - start < 30:
    for r in replicas:
        if r not in refused and status(f"{r}/system/deployment-mode") == 401:
            refused[r] = time.monotonic() - start
    time.sleep(0.05)
print("    refused by every replica after " + (f"{max(refused.values()):.2f} s" if len(refused) == 3 else "more than 30 s")
      + " (each: " + ", ".join(f"{v:.2f}" for v in refused.values()) + ")")
PY
    done

    echo "==> ingest lease failover: kill -9 of the holder (SVC_INGEST_LEASE_SECS=${SVC_INGEST_LEASE_SECS:-15})"
    lease() {
        as_root mariadb -u root -N -B -e "select holder from ingest_leases where source like '%decnet.log%' or source like '%ingest%'" "$database"
    }
    holder=$(lease)
    pid=$(echo "$holder" | cut -d: -f2)
    kill -9 "$pid"
    killed=$(date +%s.%N)
    append_lines 1 "$rows"
    until now=$(lease) && [ -n "$now" ] && [ "$(echo "$now" | cut -d: -f2)" != "$pid" ]; do sleep 0.05; done
    taken=$(date +%s.%N)
    wait_total $((rows + 1))
    stored=$(date +%s.%N)
    python3 -c "import sys; k, t, s = map(float, sys.argv[1:]); print(f'    another replica holds the lease after {t - k:.2f} s; the line written after the kill is listed after {s - k:.2f} s')" \
        "$killed" "$taken" "$stored"
    stop_deployment
done
