#!/usr/bin/env bash
# How the back-fill rate changes as the database grows, on a release build with throw-away data:
#   benches/ingest-growth.sh [steps] [rows per step]
# Appends `rows` lines (benches/lines.py) to one file per step and stores them with
# `svc ingest-replay`, which stores what was appended since the last replay: the rate of each step,
# from 0 to steps × rows stored rows. Lines are in time order, as deckies write them, unless
# SVC_BENCH_IN_ORDER=0 (timestamps that wrap every hour). SVC_DB_TYPE=mysql with SVC_DB_URL (an
# empty database) measures MySQL/MariaDB.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
apt_install_missing python3
ensure_rust
ensure_build_deps
cargo build --release --locked -p svc-cli

steps=${1:-5}
rows=${2:-1000000}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export SVC_DATA_DIR="$data" RUST_LOG=warn SVC_ADMIN_PASSWORD="growth bench admin password"
export SVC_JWT_SECRET; SVC_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
order=in-order
[ "${SVC_BENCH_IN_ORDER:-1}" = 0 ] && order=""

for step in $(seq 1 "$steps"); do
    python3 benches/lines.py "$data/history.log" $(((step - 1) * rows)) "$rows" ${order:+"$order"}
    sync  # the generated lines' write-back would otherwise compete with the database's writes
    start=$(date +%s.%N)
    target/release/svc ingest-replay "$data/history.log" >/dev/null
    end=$(date +%s.%N)
    python3 -c "print(f'{($step - 1) * $rows:>9,} → {$step * $rows:>9,} rows: {$rows / ($end - $start):,.0f} lines/s ({$end - $start:.2f} s)')"
done
du -m "$data"/*.db | awk '{ print "database file: " $1 " MiB" }'
