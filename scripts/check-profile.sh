#!/usr/bin/env bash
# Check `--profile` against `perf record -e cpu-clock -C CPU` (run as root, perf installed;
# CPU-wide on the measuring CPU, as oscost samples as root, and the program's samples only):
#   1. spawn/fork: oscost's five costliest kernel functions (what the kernel charges for a
#      fork; the user-space side is the two programs' own code) against perf record of the C
#      fork loop (scripts/ref/fork-loop.c, bound at load as oscost is: -z now, see its head)
#      grown to the shape of the parent oscost forked from (the result's parent_mappings,
#      parent_anon_mappings, parent_anon_kib and parent_anon_regions: what that fork copied),
#      of the plain C loop (a course program's parent, a few pages: a smaller fork, said for
#      scale), and of oscost's own timed pass of spawn/fork (same process, same code: what the profiler itself gets
#      right or wrong);
#   2. syscall/getppid: the same against a getppid loop under perf;
#   3. the median of `run syscall/getppid` with and without --profile, alternated three times
#      (sampling runs in passes of its own and must not move it).
# Shares are of every sample each tool took. Usage: [ROUNDS=4] scripts/check-profile.sh [OSCOST]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/oscost}
[ -x "$bin" ] || cargo build --release --quiet
command -v perf >/dev/null || { echo "check-profile: needs perf (apt-get install linux-perf)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=$(( $(nproc) - 1 ))
cc -O2 -Wl,-z,now -o "$tmp/fork-loop" scripts/ref/fork-loop.c  # bound at load: see its head
cat > "$tmp/getppid-loop.c" <<'EOF'
#include <unistd.h>
int main(void) { for (long i = 0; i < 20000000; i++) getppid(); return 0; }
EOF
cc -O2 -o "$tmp/getppid-loop" "$tmp/getppid-loop.c"

# perf's symbols with their shares, "share symbol" a line, costliest first (TOP of them);
# with a third argument "kernel", the kernel's ([k]: its image, modules, JIT'd BPF) only.
# perf records CPU-wide on the measuring CPU (-C), as oscost samples: a clock that follows a
# task starts each child's a whole period from its first run, so a fork's children, shorter
# than a period, go unsampled (docs/design-notes.md, "A clock that follows a task misses the
# children"). Only the program's own samples are kept (its processes' command name, the
# fourth argument: a fork's children keep it), as oscost keeps its measuring process's tree;
# a function's samples in them are summed, and the shares are of the program's samples
# (perf's own are of every sample on the CPU, the idle task's included, which oscost drops).
# glibc's internal alias of a function (`__GI___getppid`, which perf shows of the several
# names at its address) is printed as the function (`getppid`, which oscost shows): one
# function, not a gap between the tools.
perf_top() {
  perf report -i "$1" --no-children --sort comm,sym --stdio -q 2>/dev/null \
    | awk -v only="${3:-}" -v comm="$4" 'NF >= 4 && $2 == comm { s = $1; sub("%", "", s); dso = $3; $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); sub(/^__GI___/, ""); all += s; if (only != "kernel" || dso == "[k]") tot[$0] += s } END { for (k in tot) print 100 * tot[k] / all, k }' \
    | sort -rn | head -n "${2:-5}"
}

# oscost's costliest functions (TOP of them, default 5) of the one result in a run file;
# with a third argument "kernel", those its profile places in the kernel or BPF only.
# "[other]" (the functions past the 250 a repetition keeps by name, summed) is no function
# and is not ranked.
oscost_top() {
  python3 - "$1" "${2:-5}" "${3:-}" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
p = r["profile"]
tot = {}
n = 0
for rep in p["repetitions"]:
    n += rep["samples"]
    for k, v in rep["functions"].items():
        if k != "[other]" and (sys.argv[3] != "kernel" or p["spaces"].get(k) != "user"):
            tot[k] = tot.get(k, 0) + v
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:int(sys.argv[2])]:
    print(f"{100 * v / n:.2f} {k}")
EOF
}

# label, then files of oscost's shares, "--", files of perf's: each side's shares averaged
# over its files (a function absent from a file counts 0 there), the top fives compared. A
# function in one top five and not in the other is a tie where, in the other tool's runs, its
# share and that top five's last one differ by an amount whose 95% interval (t, over the
# runs; two runs at least) holds 0: which of the two is fifth is then chance, not a
# difference between the tools, and the sets are the same up to ties where every function in
# one top five only is one.
compare() {
  python3 - "$@" <<'EOF'
import statistics, sys
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
label, rest = sys.argv[1], sys.argv[2:]
cut = rest.index("--")
def load(f):
    return {l.split(" ", 1)[1].strip(): float(l.split(" ", 1)[0]) for l in open(f) if l.strip()}
def mean(runs):
    keys = set().union(*runs)
    return {k: sum(r.get(k, 0) for r in runs) / len(runs) for k in keys}
oruns, pruns = [load(f) for f in rest[:cut]], [load(f) for f in rest[cut + 1:]]
o, p = mean(oruns), mean(pruns)
top = lambda d: sorted(d, key=lambda k: -d[k])[:5]
both = set(top(o)) & set(top(p))
worst = max(abs(o.get(k, 0) - p.get(k, 0)) for k in set(top(o)) | set(top(p)))
def tie(runs, d, k):
    """The words where k, outside d's top five, is tied with its fifth in these runs."""
    fifth = top(d)[-1]
    if len(runs) < 2:
        return None
    diffs = [r.get(fifth, 0) - r.get(k, 0) for r in runs]
    t = T975[min(len(runs) - 2, len(T975) - 1)]
    m, h = statistics.mean(diffs), t * statistics.stdev(diffs) / len(runs) ** 0.5
    if m - h <= 0 <= m + h:
        return f"{k} {d.get(k, 0):.1f}% against the fifth, {fifth} {d[fifth]:.1f}%: {m:+.2f} [{m - h:+.2f}, {m + h:+.2f}] points"
    return None
only = [(k, pruns, p, "perf") for k in set(top(o)) - both] + [(k, oruns, o, "oscost") for k in set(top(p)) - both]
ties = [(tool, tie(runs, d, k)) for k, runs, d, tool in only]
same = "" if not only else (", the rest tied at the fifth place: the same set up to ties" if all(w for _, w in ties) else "")
print(f"{label} (means of {len(oruns)} and {len(pruns)} runs): {len(both)} of 5 in both top fives{same}, "
      f"the widest gap {worst:.1f} points")
for tool, w in ties:
    if w:
        print(f"  a tie in {tool}'s runs: {w}")
for k in sorted(set(top(o)) | set(top(p)), key=lambda k: -max(o.get(k, 0), p.get(k, 0))):
    d = o.get(k, 0) - p.get(k, 0)
    print(f"  {k:45s} oscost {o.get(k, 0):5.1f}%  perf {p.get(k, 0):5.1f}%  ({d:+.1f} points)")
EOF
}

echo "== spawn/fork"
# A fork's profile moves from one run to the next on a shared guest (whether the child or
# the parent runs first after the fork decides which faults and switches are sampled), in
# perf's as much as in oscost's: both sides are the means of ROUNDS runs, alternated.
ROUNDS=${ROUNDS:-4}
o_files=() p_files=()
for i in $(seq 1 "$ROUNDS"); do
  "$bin" run spawn/fork --profile --no-save --cpu "$cpu" --json "$tmp/fork$i.json" >/dev/null 2>&1
  oscost_top "$tmp/fork$i.json" 40 kernel > "$tmp/o-fork$i"
  read -r maps anon_maps kib regions < <(python3 -c "import json; p=json.load(open('$tmp/fork$i.json'))['results'][0]['params']; print(p['parent_mappings'], p['parent_anon_mappings'], p['parent_anon_kib'], p['parent_anon_regions'])")
  perf record -q -e cpu-clock -F 10000 -C "$cpu" -o "$tmp/cs.data" -- taskset -c "$cpu" "$tmp/fork-loop" 5000 "$maps" "$anon_maps" "$kib" "$regions" >/dev/null 2>"$tmp/shape"
  perf_top "$tmp/cs.data" 40 kernel fork-loop > "$tmp/p-fork-cs$i"
  echo "round $i: oscost's worker forked from a parent of $maps mappings, $anon_maps with $kib KiB anonymous in $regions regions of 2 MiB; the C loop's $(cat "$tmp/shape")"
  o_files+=("$tmp/o-fork$i")
  p_files+=("$tmp/p-fork-cs$i")
done
perf record -q -e cpu-clock -F 10000 -C "$cpu" -o "$tmp/c.data" -- taskset -c "$cpu" "$tmp/fork-loop" 5000 >/dev/null 2>&1
perf_top "$tmp/c.data" 40 kernel fork-loop > "$tmp/p-fork-c"
perf record -q -e cpu-clock -F 10000 -C "$cpu" -o "$tmp/s.data" -- "$bin" run spawn/fork --no-save --events none --cpu "$cpu" >/dev/null 2>&1
perf_top "$tmp/s.data" 40 kernel oscost > "$tmp/p-fork-self"
compare "against perf record of the C fork loop in the worker's shape" "${o_files[@]}" -- "${p_files[@]}"
compare "against perf record of the plain C fork loop (a smaller parent)" "${o_files[@]}" -- "$tmp/p-fork-c"
compare "against perf record of oscost's own timed pass" "${o_files[@]}" -- "$tmp/p-fork-self"

echo "== syscall/getppid"
"$bin" run syscall/getppid --profile --no-save --cpu "$cpu" --json "$tmp/ppid.json" >/dev/null 2>&1
oscost_top "$tmp/ppid.json" 40 > "$tmp/o-ppid"
perf record -q -e cpu-clock -F 10000 -C "$cpu" -o "$tmp/g.data" -- taskset -c "$cpu" "$tmp/getppid-loop" >/dev/null 2>&1
perf_top "$tmp/g.data" 40 all getppid-loop > "$tmp/p-ppid"
compare "against perf record of a C getppid loop" "$tmp/o-ppid" -- "$tmp/p-ppid"

echo "== the median with and without --profile (alternated)"
for i in 1 2 3; do
  for flag in "" --profile; do
    "$bin" run syscall/getppid $flag --no-save --cpu "$cpu" --json "$tmp/m.json" >/dev/null 2>&1
    python3 -c "import json,sys; s=json.load(open('$tmp/m.json'))['results'][0]['stats']; print(f'  ${flag:-plain}: {s[\"median\"]:.1f} ns [{s[\"ci95\"][0]:.1f}, {s[\"ci95\"][1]:.1f}]')"
  done
done
