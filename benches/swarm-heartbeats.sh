#!/usr/bin/env bash
# The master's CPU and memory while simulated agents heart-beat to its swarm listener over mutual
# TLS (each with its own certificate, enrolled in the master's store). A release build by default;
# SVC_PROFILE=dev measures the debug build instead.
#   benches/swarm-heartbeats.sh [hosts] [interval seconds] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
profile=${SVC_PROFILE:-release}
dir=release
[ "$profile" = dev ] && dir=debug
target=${CARGO_TARGET_DIR:-target}
cargo build --profile "$profile" --locked -p svc-cli
SWARM_HOSTS=${1:-100} SWARM_INTERVAL_S=${2:-1} SWARM_SECONDS=${3:-30} SVC_BIN="$target/$dir/svc" \
    cargo bench --profile "$profile" --locked -p svc --bench swarm_heartbeats
