#!/usr/bin/env bash
# Swarm updates: the time to push one release to several hosts (network namespaces, each running
# `svc updater` and its agent) in parallel until every agent is healthy on it, and how long one
# host's agent stops answering during an update. Needs root. A release build by default;
# SVC_PROFILE=dev measures the debug build instead.
#   benches/swarm-updates.sh [hosts] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
profile=${SVC_PROFILE:-release}
cargo build --profile "$profile" --locked -p svc-cli
SWARM_UPDATE_HOSTS=${1:-3} SWARM_UPDATE_ROUNDS=${2:-5} \
    cargo bench --profile "$profile" --locked -p svc --bench swarm_updates
