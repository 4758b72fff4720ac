#!/usr/bin/env bash
# scale/ beside will-it-scale itself: per-task operations per second at 1 and 2 copies (or
# COPIES), processes and threads, for getppid1, page_fault1, mmap1 and context_switch1 (and
# tlb_flush1 when built), as ratios oscost/will-it-scale. Rounds alternate the two tools so the
# machine's drift falls on both; the verdict is the median of each point's per-round ratios,
# against the issue's 10%.
#
# will-it-scale is not part of oscost: build it yourself from its public repository and give
# the directory that holds its binaries (getppid1_processes, getppid1_threads, ...). This
# script runs them, as `runtest.py` does (`-t N -s SECS`, its 5 warm-up seconds left out,
# per task = its "average" over N), and builds nothing.
#
# usage: WIS=/path/to/will-it-scale scripts/versus-wis.sh [ROUNDS] [SECS]
#        (env: OSCOST=path, COPIES="1 2", TESTS="getppid1 page_fault1 mmap1 context_switch1")
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
secs=${2:-3}
wis=${WIS:?set WIS to a directory of will-it-scale binaries (getppid1_processes, ...)}
oscost=${OSCOST:-target/release/oscost}
copies=${COPIES:-"1 2"}
tests=${TESTS:-"getppid1 page_fault1 mmap1 context_switch1 tlb_flush1"}
[ -x "$oscost" ] || cargo build --release --quiet
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
case_of() {
  case $1 in
    getppid1) echo getppid ;; page_fault1) echo page-fault-anon ;; mmap1) echo mmap-anon ;;
    context_switch1) echo pipe-pair ;; tlb_flush1) echo tlb-flush ;;
    *) echo "no scale/ case for $1" >&2; exit 2 ;;
  esac
}
# The speed witness beside the comparison: perf's getppid loop, ns per call.
witness() { command -v perf >/dev/null && perf bench syscall basic -l 2000000 2>&1 | awk '/usecs\/op/ {printf "%.1f", $1*1000}' || echo "n/a"; }

echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
echo "witness before: $(witness) ns per getppid (perf bench syscall basic)"
: > "$tmp/rows"
for t in $tests; do
  [ -x "$wis/${t}_processes" ] || { echo "skipping $t: $wis/${t}_processes not built"; continue; }
  c=$(case_of "$t")
  for r in $(seq 1 "$rounds"); do
    for n in $copies; do
      for mode in processes threads; do
        avg=$("$wis/${t}_$mode" -t "$n" -s "$secs" | awk -F: '/^average:/ {print $2}')
        echo "$t $mode $n $r wis $(awk -v a="$avg" -v n="$n" 'BEGIN {printf "%.0f", a/n}')" >> "$tmp/rows"
      done
    done
    list=$(echo "$copies" | tr ' ' ',')
    "$oscost" scale "$c" --copies "$list" --json "$tmp/o.json" > /dev/null 2>&1
    python3 - "$tmp/o.json" "$t" "$r" >> "$tmp/rows" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
for x in run["results"]:
    p = x["params"]
    if x["status"] != {"state": "ok"} or "ops_per_s_per_task" not in p:
        continue
    mode = {"process": "processes", "thread": "threads"}[p["mode"]]
    print(sys.argv[2], mode, p["copies"], sys.argv[3], "oscost", round(p["ops_per_s_per_task"]))
EOF
  done
done
echo "witness after: $(witness) ns per getppid"
echo
printf '%-16s %-9s %6s %16s %16s %8s %s\n' test mode tasks wis_ops/s/task oscost_ops/s/task ratio verdict
for t in $tests; do
  for mode in processes threads; do
    for n in $copies; do
      w=$(awk -v t="$t" -v m="$mode" -v n="$n" '$1==t && $2==m && $3==n && $5=="wis" {print $6}' "$tmp/rows" | median)
      o=$(awk -v t="$t" -v m="$mode" -v n="$n" '$1==t && $2==m && $3==n && $5=="oscost" {print $6}' "$tmp/rows" | median)
      [ -n "$w" ] && [ -n "$o" ] || continue
      ratio=$(awk -v o="$o" -v w="$w" 'BEGIN {printf "%.3f", o/w}')
      verdict=$(awk -v x="$ratio" 'BEGIN {print (x >= 0.9 && x <= 1.1) ? "within 10%" : "OUTSIDE 10%"}')
      printf '%-16s %-9s %6s %16.0f %16.0f %8s %s\n' "$t" "$mode" "$n" "$w" "$o" "$ratio" "$verdict"
    done
  done
done
