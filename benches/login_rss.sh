#!/usr/bin/env bash
# Resident memory of `svc api` around a login storm: RSS idle (after startup), then after N logins
# from C concurrent clients (limiter off), read from /proc/<pid>/status; and how long the storm took.
# Uses SVC_BIN when set (e.g. an older build, to compare), else builds the release binary.
#   benches/login_rss.sh [logins] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
logins=${1:-1000}
clients=${2:-16}
if [ -z "${SVC_BIN:-}" ]; then
    . scripts/lib.sh
    ensure_rust
    cargo build --release --locked -p svc-cli
    SVC_BIN="${CARGO_TARGET_DIR:-target}/release/svc"
fi
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
password="a long admin password"
env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$work/data" SVC_API_PORT="$port" SVC_LIMITER_ENABLED=false \
    SVC_JWT_SECRET=4f9d2c7a1b8e6f3d0c5a9b2e7d4f1a8c SVC_ADMIN_PASSWORD="$password" "$SVC_BIN" api >"$work/api.log" 2>&1 &
api=$!
cleanup() { kill "$api" 2>/dev/null && wait "$api" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/api/v1/health" >/dev/null && break; sleep 0.1; done
rss() { awk '/^VmRSS:/ { print int($2 / 1024) }' "/proc/$api/status"; }

idle=$(rss)
start=$(date +%s.%N)
seq "$logins" | xargs -P "$clients" -I{} curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
    -d "{\"username\":\"admin\",\"password\":\"$password\"}" "http://127.0.0.1:$port/api/v1/auth/login"
end=$(date +%s.%N)
after=$(rss)
echo "binary:          $SVC_BIN"
echo "logins:          $logins from $clients concurrent clients in $(echo "$end - $start" | bc) s"
echo "RSS idle:        $idle MiB"
echo "RSS after:       $after MiB (+$((after - idle)) MiB)"
