#!/usr/bin/env bash
# The fleet on a real engine, with a release build: how long `svc deploy` takes for 10 deckies (the
# decky image built first, then already there), and the collector's throughput (lines/s from a
# container's stdout to the ingest file) and CPU per 1,000 lines/s while wrk drives one decky's
# HTTP decoy (every request is one `request` line). Uses the engine SVC_DOCKER_HOST names, Docker's,
# or a podman API service of its own; removes every container and network it made.
#   benches/fleet.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3
ensure_rust
cargo build --release --locked -p svc-cli

seconds=${1:-15}
work=$(mktemp -d)
ensure_container_engine "$work/engine"
fleet="bench$$"
svc_env=(env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$work/data" SVC_DOCKER_HOST="$SVC_DOCKER_HOST"
    SVC_FLEET_NAME="$fleet" SVC_INGEST_LOG_FILE="$work/ingest.log" SVC_DEPLOYMENT_LIMIT=20)
engine() { CONTAINERS_CONF="$work/engine/containers.conf" podman "$@"; }
cleanup() {
    [ -n "${collector:-}" ] && kill "$collector" 2>/dev/null && wait "$collector" 2>/dev/null
    for id in $(engine ps -aq --filter "label=svc.fleet=$fleet" 2>/dev/null); do engine rm -f "$id" >/dev/null 2>&1; done
    engine network rm -f "$fleet-fleet" >/dev/null 2>&1 || true
    # The API service this run started, if it started one (by its pid, nothing else of that name).
    if [ -f "$work/engine/podman.pid" ]; then kill "$(cat "$work/engine/podman.pid")" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

printf '[general]\nnet = 10.214.0.0/24\n[d]\nservices = http\namount = 10\n' >"$work/ten.ini"
start=$(date +%s.%N)
"${svc_env[@]}" target/release/svc deploy "$work/ten.ini" >/dev/null
echo "deploy of 10 deckies (image built on the way): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
"${svc_env[@]}" target/release/svc deploy --replace "$work/ten.ini" >/dev/null
start=$(date +%s.%N)
"${svc_env[@]}" target/release/svc deploy --replace "$work/ten.ini" >/dev/null
echo "redeploy of 10 deckies (image present, containers recreated): $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"

"${svc_env[@]}" SVC_COLLECTOR_RECONCILE_S=1 target/release/svc worker collector &
collector=$!
sleep 2
before_lines=$(wc -l <"$work/ingest.log" 2>/dev/null || echo 0)
before_ticks=$(awk '{print $14 + $15}' "/proc/$collector/stat")
wrk -t1 -c16 -d"${seconds}s" http://10.214.0.2/bench >/dev/null
# Let the collector drain what the decoy printed.
for _ in $(seq 1 50); do
    now=$(wc -l <"$work/ingest.log")
    sleep 0.2
    [ "$(wc -l <"$work/ingest.log")" = "$now" ] && break
done
after_lines=$(wc -l <"$work/ingest.log")
after_ticks=$(awk '{print $14 + $15}' "/proc/$collector/stat")
hz=$(getconf CLK_TCK)
python3 - "$before_lines" "$after_lines" "$before_ticks" "$after_ticks" "$hz" "$seconds" <<'PY'
import sys
b, a, tb, ta, hz, secs = map(float, sys.argv[1:])
lines, cpu = a - b, (ta - tb) / hz
print(f"collector: {lines:.0f} lines in {secs:.0f} s = {lines / secs:.0f} lines/s; "
      f"CPU {cpu:.2f} s = {cpu / secs * 100:.1f}% of a core, {cpu / secs * 100 / (lines / secs / 1000):.1f}% per 1,000 lines/s")
PY
