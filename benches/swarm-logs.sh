#!/usr/bin/env bash
# Log shipping from one worker host to the master over mutual TLS: lines per second, the master's CPU
# per 10,000 lines/s, and the time from a line written on the host to its row in `GET /logs`. A
# release build by default; SVC_PROFILE=dev measures the debug build instead.
#   benches/swarm-logs.sh [lines] [latency samples]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
profile=${SVC_PROFILE:-release}
dir=release
[ "$profile" = dev ] && dir=debug
target=${CARGO_TARGET_DIR:-target}
cargo build --profile "$profile" --locked -p svc-cli
SWARM_LINES=${1:-300000} SWARM_SAMPLES=${2:-200} SVC_BIN="$target/$dir/svc" \
    cargo bench --profile "$profile" --locked -p svc --bench swarm_logs
