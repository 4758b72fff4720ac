#!/usr/bin/env bash
# How fast the store answers at fleet scale: synthesizes N runs (default 1000) from the runs of
# a source store (e.g. two default runs: `oscost run --db /tmp/src.db` twice) into a fresh
# store (a file, or a postgres:// URL), then times history, history ID, history ID --changes,
# compare of two runs and a matrix of 20 runs, three times each, and prints bytes per sample.
#
# usage: scripts/check-store-speed.sh SOURCE.db [N] [TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: check-store-speed.sh SOURCE.db [N] [TARGET]}
n=${2:-1000}
target=${3:-$(mktemp -d)/fleet.db}
cargo build --release --quiet --example synth_store
cargo build --release --quiet
bin=target/release/oscost
target/release/examples/synth_store "$src" "$n" "$target"
time_it() {
  local best=999
  for _ in 1 2 3; do
    local t0 t1
    t0=$(date +%s.%N); "$bin" "$@" --db "$target" >/dev/null; t1=$(date +%s.%N)
    best=$(awk -v a="$t0" -v b="$t1" -v m="$best" 'BEGIN { d = b - a; print (d < m ? d : m) }')
  done
  printf '%-44s best of 3: %.3f s\n' "$*" "$best"
}
time_it history
time_it history syscall/getpid
time_it history syscall/getpid --changes
time_it compare 1 2
time_it matrix $(seq -s ' ' 1 20)
time_it matrix --where host=host3 --where 'date<2026-01-20'
if [ -f "$target" ]; then
  samples=$(sqlite3 "$target" 'select sum(samples) from results' 2>/dev/null || echo 0)
  bytes=$(stat -c %s "$target")
  [ "$samples" -gt 0 ] && awk -v b="$bytes" -v s="$samples" 'BEGIN { printf "%d bytes for %d samples: %.2f bytes a sample, all included\n", b, s, b / s }'
fi
