#!/usr/bin/env bash
# The slow tier on a loaded machine: runs `cargo test -- --ignored` (the orderings and
# statistical invariants at default sampling) N times (default 3) with a busy loop pinned on
# every allowed CPU, the load users' CI runners and production nodes have. Every test must pass
# every time: a test that fails on a busy machine decides by accident (tests/common's
# `assert_costlier` measures again while intervals overlap, and fails only then).
#
# The load is a kernel copy per CPU (`dd bs=16M` from /dev/zero to /dev/null, pinned with
# taskset), stopped however the script ends. Prints each pass's verdict and wall time, and
# exits non-zero if any pass failed.
#
# usage: scripts/check-busy.sh [N] [TEST-FILTER...]
set -euo pipefail
cd "$(dirname "$0")/.."
passes=${1:-3}
shift || true
command -v taskset >/dev/null || { echo "check-busy: taskset (util-linux) is needed" >&2; exit 2; }
cpus=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
load=()
stop_load() { [ ${#load[@]} -eq 0 ] || kill "${load[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop_load EXIT
cargo test --no-run --quiet
for c in $cpus; do
  taskset -c "$c" dd if=/dev/zero of=/dev/null bs=16M status=none &
  load+=($!)
done
echo "check-busy: a copy loop on CPUs $cpus (pids ${load[*]}); $passes passes of the slow tier"
failed=0
for i in $(seq 1 "$passes"); do
  log=$(mktemp)
  t0=$(date +%s)
  if cargo test --quiet -- --ignored "$@" >"$log" 2>&1; then verdict=passed; else verdict=FAILED; failed=$((failed + 1)); fi
  echo "check-busy: pass $i of $passes: $verdict in $(( $(date +%s) - t0 )) s"
  if [ "$verdict" = FAILED ]; then grep -E '^(test .* FAILED|---- |thread .* panicked)|not decided in' "$log" | head -40; fi
  rm -f "$log"
done
echo "check-busy: $((passes - failed)) of $passes passes passed"
[ "$failed" -eq 0 ]
