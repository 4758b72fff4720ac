#!/usr/bin/env bash
# Check `--profile` against `perf record -e cpu-clock` (run as root, perf installed):
#   1. spawn/fork: oscost's five costliest functions against perf record of the plain C fork
#      loop (scripts/ref/fork-loop.c) and of oscost's own timed pass of spawn/fork (same
#      process, same code: what the profiler itself gets right or wrong);
#   2. syscall/getppid: the same against a getppid loop under perf;
#   3. the median of `run syscall/getppid` with and without --profile, alternated three times
#      (sampling runs in passes of its own and must not move it).
# Shares are of every sample each tool took. Usage: scripts/check-profile.sh [OSCOST]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/oscost}
[ -x "$bin" ] || cargo build --release --quiet
command -v perf >/dev/null || { echo "check-profile: needs perf (apt-get install linux-perf)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=$(( $(nproc) - 1 ))
cc -O2 -o "$tmp/fork-loop" scripts/ref/fork-loop.c
cat > "$tmp/getppid-loop.c" <<'EOF'
#include <unistd.h>
int main(void) { for (long i = 0; i < 20000000; i++) getppid(); return 0; }
EOF
cc -O2 -o "$tmp/getppid-loop" "$tmp/getppid-loop.c"

# perf's five costliest symbols with their shares, "share symbol" a line.
perf_top() {
  perf report -i "$1" --no-children --sort sym --stdio -q 2>/dev/null \
    | awk 'NF >= 3 && n < 5 { n++; s = $1; sub("%", "", s); $1 = ""; $2 = ""; sub(/^ +/, ""); print s, $0 }'
}

# oscost's five costliest functions of the one result in a run file.
oscost_top() {
  python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
p = r["profile"]
tot = {}
n = 0
for rep in p["repetitions"]:
    n += rep["samples"]
    for k, v in rep["functions"].items():
        tot[k] = tot.get(k, 0) + v
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:5]:
    print(f"{100 * v / n:.2f} {k}")
EOF
}

compare() {  # label, oscost top file, perf top file
  python3 - "$@" <<'EOF'
import sys
label, a, b = sys.argv[1:4]
def load(f):
    return {l.split(" ", 1)[1].strip(): float(l.split(" ", 1)[0]) for l in open(f) if l.strip()}
o, p = load(a), load(b)
both = set(o) & set(p)
print(f"{label}: {len(both)} of 5 in both top fives")
for k in sorted(set(o) | set(p), key=lambda k: -max(o.get(k, 0), p.get(k, 0))):
    d = o.get(k, 0) - p.get(k, 0)
    print(f"  {k:45s} oscost {o.get(k, 0):5.1f}%  perf {p.get(k, 0):5.1f}%  ({d:+.1f} points)")
EOF
}

echo "== spawn/fork"
"$bin" run spawn/fork --profile --no-save --cpu "$cpu" --json "$tmp/fork.json" >/dev/null 2>&1
oscost_top "$tmp/fork.json" > "$tmp/o-fork"
perf record -q -e cpu-clock -F 10000 -o "$tmp/c.data" -- taskset -c "$cpu" "$tmp/fork-loop" 5000 >/dev/null 2>&1
perf_top "$tmp/c.data" > "$tmp/p-fork-c"
perf record -q -e cpu-clock -F 10000 -o "$tmp/s.data" -- "$bin" run spawn/fork --no-save --events none --cpu "$cpu" >/dev/null 2>&1
perf_top "$tmp/s.data" > "$tmp/p-fork-self"
compare "against perf record of the C fork loop" "$tmp/o-fork" "$tmp/p-fork-c"
compare "against perf record of oscost's own timed pass" "$tmp/o-fork" "$tmp/p-fork-self"

echo "== syscall/getppid"
"$bin" run syscall/getppid --profile --no-save --cpu "$cpu" --json "$tmp/ppid.json" >/dev/null 2>&1
oscost_top "$tmp/ppid.json" > "$tmp/o-ppid"
perf record -q -e cpu-clock -F 10000 -o "$tmp/g.data" -- taskset -c "$cpu" "$tmp/getppid-loop" >/dev/null 2>&1
perf_top "$tmp/g.data" > "$tmp/p-ppid"
compare "against perf record of a C getppid loop" "$tmp/o-ppid" "$tmp/p-ppid"

echo "== the median with and without --profile (alternated)"
for i in 1 2 3; do
  for flag in "" --profile; do
    "$bin" run syscall/getppid $flag --no-save --cpu "$cpu" --json "$tmp/m.json" >/dev/null 2>&1
    python3 -c "import json,sys; s=json.load(open('$tmp/m.json'))['results'][0]['stats']; print(f'  ${flag:-plain}: {s[\"median\"]:.1f} ns [{s[\"ci95\"][0]:.1f}, {s[\"ci95\"][1]:.1f}]')"
  done
done
