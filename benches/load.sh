#!/usr/bin/env bash
# Load against a running release build: starts `svc api` on a free loopback port with throw-away
# data and the limiter off, drives routes with wrk for a bounded time, and stops it.
#   benches/load.sh [seconds] [connections]
# Reports: requests/s of GET /health and of an authenticated GET; login throughput; and the p99
# latency of GET /health alone and while `connections` clients hammer POST /auth/login (argon2 must
# not block the request loop).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3
ensure_rust
cargo build --release --locked -p svc-cli

seconds=${1:-10}
connections=${2:-32}
data=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port/api/v1"
env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$data" SVC_API_PORT="$port" SVC_LIMITER_ENABLED=false \
    SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" SVC_ADMIN_PASSWORD="load test admin password" \
    target/release/svc api &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
    curl -fs "$base/health" >/dev/null 2>&1 && break
    sleep 0.1
done

post() { curl -fs -H 'Content-Type: application/json' "$@"; }
token_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])'; }
# The seeded admin must change its password before gated routes answer.
first=$(post -d '{"username":"admin","password":"load test admin password"}' "$base/auth/login" | token_of)
post -H "Authorization: Bearer $first" -d '{"old_password":"load test admin password","new_password":"load test new password"}' \
    "$base/auth/change-password" >/dev/null
token=$(post -d '{"username":"admin","password":"load test new password"}' "$base/auth/login" | token_of)

login_script=$(mktemp --suffix=.lua)
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$data" "$login_script"' EXIT
cat >"$login_script" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"username":"admin","password":"load test new password"}'
LUA

echo "==> GET /health (${seconds}s, $connections connections)"
wrk -t1 -c"$connections" -d"${seconds}s" "$base/health"
echo "==> GET /system/deployment-mode, authenticated (${seconds}s, $connections connections)"
wrk -t1 -c"$connections" -d"${seconds}s" -H "Authorization: Bearer $token" "$base/system/deployment-mode"
echo "==> GET /health latency, 4 connections, no other load"
wrk -t1 -c4 -d"${seconds}s" --latency "$base/health" | grep -E "Latency|99%|Requests/sec"
echo "==> POST /auth/login ($connections connections) and, at the same time, GET /health latency (4 connections)"
wrk -t1 -c"$connections" -d"${seconds}s" -s "$login_script" "$base/auth/login" >"$data/login.txt" &
login=$!
wrk -t1 -c4 -d"${seconds}s" --latency "$base/health" | grep -E "Latency|99%|Requests/sec"
wait "$login"
echo "login:"
grep -E "Requests/sec|Non-2xx|Latency" "$data/login.txt"
