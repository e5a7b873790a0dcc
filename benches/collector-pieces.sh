#!/usr/bin/env bash
# The collector's throughput on lines the engine split into partial records: wrk drives one decky's
# HTTP decoy (every request is one `request` line) with no collector running, so podman stores the
# output with the pieces it split (`P` records before the `F` that ends a line); then the collector
# starts and the time it takes to carry the backlog into the ingest file gives lines/s, with the
# share of lines that came in pieces and a check that every `request` line arrived whole.
# Uses the engine SVC_DOCKER_HOST names, or a podman API service of its own; holds an unreachable
# route for its subnet while it runs; removes every container, network and route it made.
#   benches/collector-pieces.sh [seconds of load]      (SVC_BIN=path skips the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing wrk curl python3 iproute2

ensure_svc_bin

seconds=${1:-15}
subnet=${BENCH_SUBNET:-10.213.228.0/24}
decky_ip=${subnet%.0/24}.2
work=$(mktemp -d)
ensure_container_engine "$work/engine"
fleet="bench$$"
svc_env=(env -i PATH="$PATH" RUST_LOG=warn SVC_DATA_DIR="$work/data" SVC_DOCKER_HOST="$SVC_DOCKER_HOST"
    SVC_FLEET_NAME="$fleet" SVC_INGEST_LOG_FILE="$work/ingest.log" SVC_DECKY_BINARY="$SVC_BIN")
engine() { CONTAINERS_CONF="$work/engine/containers.conf" podman "$@"; }
cleanup() {
    [ -n "${collector:-}" ] && kill "$collector" 2>/dev/null && wait "$collector" 2>/dev/null
    remove_bench_fleet "$work/engine" "$fleet"
    release_bench_engine "$work/engine" "$subnet"
    rm -rf "$work"
}
trap cleanup EXIT
# Nothing sent to the decky leaves the host, even while its bridge is gone.
ip route add unreachable "$subnet" metric 4242

printf '[general]\nnet = %s\n[d]\nservices = http\n' "$subnet" >"$work/one.ini"
"${svc_env[@]}" "$SVC_BIN" deploy "$work/one.ini" >/dev/null
container=$(engine ps -q --filter "label=svc.fleet=$fleet" | head -1)
log=$(engine inspect --format '{{.HostConfig.LogConfig.Path}}' "$container")

wrk -t2 -c32 -d"${seconds}s" "http://$decky_ip/bench/partial/records" >"$work/wrk.txt"
requests=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
pieces=$(grep -c ' stdout P ' "$log" || true)
lines=$(grep -c ' stdout F ' "$log" || true)

start=$(date +%s.%N)
"${svc_env[@]}" SVC_COLLECTOR_RECONCILE_S=1 SVC_FLOOD_CAP_PER_S=0 SVC_DISK_MIN_FREE_MB=0 "$SVC_BIN" worker collector &
collector=$!
# The backlog is carried when the ingest file has not grown for a second.
last_size=-1
last_growth=$start
while :; do
    size=$(stat -c %s "$work/ingest.log" 2>/dev/null || echo 0)
    now=$(date +%s.%N)
    if [ "$size" != "$last_size" ]; then
        last_size=$size
        last_growth=$now
    elif python3 -c "import sys; sys.exit(0 if $now - $last_growth > 1 else 1)"; then
        break
    fi
    sleep 0.05
done
written=$(wc -l <"$work/ingest.log")
logged=$(grep -c 'bench/partial/records' "$work/ingest.log" || true)
whole=$(grep -c 'bench/partial/records.*src_port="[0-9]*"\]$' "$work/ingest.log" || true)
python3 - "$requests" "$lines" "$pieces" "$written" "$logged" "$whole" "$start" "$last_growth" "$seconds" <<'PY'
import sys
requests, lines, pieces, written, logged, whole = map(int, sys.argv[1:7])
start, end, secs = map(float, sys.argv[7:])
took = end - start
print(f"load: {requests} requests in {secs:.0f} s; the engine stored {lines} lines, {pieces} partial pieces")
print(f"collector: {written} lines written in {took:.2f} s = {written / took:.0f} lines/s; "
      f"{whole} of its {logged} request lines whole (wrk counts only the requests it saw answered)")
PY
