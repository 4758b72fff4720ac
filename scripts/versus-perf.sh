#!/usr/bin/env bash
# Compare oscost with reference tools, run right beside it, as ratios of per-operation cost.
#   syscall/getppid  vs  perf bench syscall basic   (perf times getppid in a loop)
#   spawn/fork       vs  scripts/ref/fork-loop.c    (the plain fork/_exit/waitpid loop)
#   switch/pipe-proc@same  vs  perf bench sched pipe, both processes on one CPU (per round trip)
# Rounds alternate oscost and perf so drift of the machine hits both alike; the verdict uses
# the median of the per-round ratios. Both run pinned to the same CPU.
# Each reference command prints ns per operation.
#
# usage: scripts/versus-perf.sh [ROUNDS] [all|getppid|fork|pipe]   (env: OSCOST=path, CPU=n)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
cpu=${CPU:-$(( $(nproc) - 1 ))}
oscost=${OSCOST:-target/release/oscost}
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 2; }
[ -x "$oscost" ] || cargo build --release --quiet
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# median of numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# oscost median (ns) of one benchmark id from a CSV export
oscost_ns() { awk -F, -v id="$2" '$1==id {print $11}' "$1"; }

# Reference commands print ns per operation on stdout.
perf_ns() { "$@" 2>&1 | awk '/usecs\/op/ {print $1*1000}'; }

compare() { # name oscost-id reference-command...
  local name=$1 id=$2; shift 2
  : > "$tmp/ratios"
  echo "== $name"
  printf '%-6s %14s %14s %8s\n' round oscost_ns ref_ns ratio
  for r in $(seq 1 "$rounds"); do
    "$oscost" run --no-save --placement same --cpu "$cpu" --csv "$tmp/o.csv" "${id%@*}" >/dev/null 2>&1
    o=$(oscost_ns "$tmp/o.csv" "$id")
    p=$("$@")
    ratio=$(awk -v o="$o" -v p="$p" 'BEGIN {printf "%.3f", o/p}')
    echo "$ratio" >> "$tmp/ratios"
    printf '%-6s %14.1f %14.1f %8s\n' "$r" "$o" "$p" "$ratio"
  done
  m=$(median < "$tmp/ratios")
  echo "median ratio oscost/reference for $name: $m"
}

cc -O2 -Wl,-z,now -o "$tmp/fork-loop" scripts/ref/fork-loop.c  # bound at load: see its head
case "${2:-all}" in
  all|getppid) compare "getppid (syscall/getppid vs perf bench syscall basic)" syscall/getppid \
    perf_ns taskset -c "$cpu" perf bench syscall basic -l 3000000 ;;&
  all|fork) compare "fork (spawn/fork vs a C fork/_exit/waitpid loop)" spawn/fork \
    taskset -c "$cpu" "$tmp/fork-loop" 3000 ;;&
  all|pipe) compare "pipe round trip (switch/pipe-proc@same vs perf bench sched pipe)" \
    switch/pipe-proc@same perf_ns taskset -c "$cpu" perf bench sched pipe -l 200000 ;;&
  *) ;;
esac
