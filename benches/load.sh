#!/usr/bin/env bash
# Load against a running release build: starts `svc api` on a free loopback port with throw-away
# data, drives each route with wrk for a bounded time, and stops it.
#   benches/load.sh [seconds] [connections]
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
env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$data" SVC_API_PORT="$port" \
    SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" SVC_ADMIN_PASSWORD="load test admin password" \
    target/release/svc api &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && break
    sleep 0.1
done

for route in /api/v1/health /api/v1/system/deployment-mode; do
    echo "==> GET $route (${seconds}s, $connections connections)"
    wrk -t1 -c"$connections" -d"${seconds}s" "http://127.0.0.1:$port$route"
done
