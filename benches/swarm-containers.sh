#!/usr/bin/env bash
# A swarm deploy onto real containers: three `svc agent`s, each in a network namespace of its own
# with a podman API service of its own, take DECKIES deckies (default 30) from `svc api`; the wall
# time from `POST /deckies/deploy` until every lifecycle record has succeeded. It is the
# `swarm_containers` test (the debug build cargo's tests use) run with SVC_SWARM_BENCH_DECKIES;
# needs root (namespaces) and podman, and takes the shared podman lock when there is one.
#   benches/swarm-containers.sh [deckies, a multiple of 3]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
deckies=${1:-30}
lock=${SVC_PODMAN_LOCK:-/work/wt/podman.lock}
run=(cargo test --locked -p svc-cli --test swarm_containers -- --nocapture)
if [ -e "$lock" ]; then run=(flock "$lock" "${run[@]}"); fi
SVC_SWARM_BENCH_DECKIES=$deckies "${run[@]}" 2>&1 | grep -E '^swarm deploy:|^test result:'
