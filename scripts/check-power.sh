#!/usr/bin/env bash
# What `oscost ab` can detect, checked: the smallest slowdown of a null system call that ab
# calls in 95% of tries within a stated time, and its false calls against itself.
#
# The slowdown is one we build and can tune: a seccomp filter of L instructions that reads an
# argument (scripts/ref/seccomp-length.c), over oscost's workers. A is a filter of L0
# instructions, B one of L0 + dL. The cost of one instruction is measured first (ab of L0
# against L0 + 800), so dL for +1%, +2% and +4% of getppid's cost under A is chosen on this
# host, whatever its CPU. Then TRIES tries of each, and TRIES of A/A (the same filter on both
# sides), each a fresh `oscost ab syscall/getppid --threshold 1`, timed. Printed: per effect,
# how many tries were called slower, no change, undecided or faster, and the slowest try's
# time; the A/A false-call rate; a witness that is not oscost (`perf bench syscall basic`,
# pinned alike) before and after, saying how much the host moved.
#
#   scripts/check-power.sh [TRIES]     (default 20; TRIES_EDGE=5 for +1%; L0=200, THRESHOLD=1,
#                                      BUDGET= ab's default)
#
# Needs a release build (cargo build --release), a C compiler and python3 for the tally.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIES=${1:-20}
L0=${L0:-200}
THRESHOLD=${THRESHOLD:-1}
BUDGET=${BUDGET:-}
bin=$PWD/target/release/oscost
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
work=$(mktemp -d /tmp/oscost-check-power.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/seccomp-length" scripts/ref/seccomp-length.c
cpu=$(( $(nproc) - 1 ))

witness() {
  if command -v perf >/dev/null 2>&1; then
    taskset -c "$cpu" perf bench syscall basic -l 2000000 2>/dev/null \
      | awk '/usecs\/op/ {printf "%.1f", $1 * 1000}'
  else
    printf "-"
  fi
}

# One ab try of A = L0 against B = L: "verdict rounds seconds slowdown lo hi".
try() {
  local json=$work/try.json
  local budget=()
  [ -n "$BUDGET" ] && budget=(--budget "$BUDGET")
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" ab --a "$work/seccomp-length $L0 --" --b "$work/seccomp-length $1 --" \
    syscall/getppid --threshold "$THRESHOLD" --no-save "${budget[@]}" --json "$json" \
    >/dev/null 2>"$work/try.err"
  t1=$(date +%s.%N)
  python3 - "$json" "$t0" "$t1" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
r = rows[0]
word = r["verdict"]
if (r.get("rounds") or {}).get("decision") == "undecided":
    word = "undecided"
print(word, (r.get("rounds") or {}).get("rounds", 0), f"{float(sys.argv[3]) - float(sys.argv[2]):.1f}",
      f"{r['slowdown']:.4f}", f"{r['slowdown_ci95'][0]:.4f}", f"{r['slowdown_ci95'][1]:.4f}")
EOF
}

echo "witness before: $(witness) ns/op (perf bench syscall basic)"
read -r _ _ _ s800 _ _ < <(try $((L0 + 800)))
base=$("$work/seccomp-length" "$L0" -- "$bin" run syscall/getppid --no-save --json "$work/base.json" \
  >/dev/null 2>&1; python3 -c "import json; print(json.load(open('$work/base.json'))['results'][0]['stats']['median'])")
python3 - "$s800" "$base" > "$work/dl" <<'EOF'
import sys
s800, base = float(sys.argv[1]), float(sys.argv[2])
per = base * (s800 - 1) / 800
print(f"{per:.4f}")
for pct in (1, 2, 4):
    print(max(1, round(base * pct / 100 / per)))
EOF
{ read -r per; read -r dl1; read -r dl2; read -r dl4; } < "$work/dl"
echo "getppid under $L0 instructions: $base ns; +800 instructions: x$s800, so $per ns an instruction"
echo "dL: +1% = $dl1, +2% = $dl2, +4% = $dl4 instructions"

# +1% sits at the band's edge (--threshold 1): ab may run to its budget there, so it gets
# fewer tries (TRIES_EDGE), last.
TRIES_EDGE=${TRIES_EDGE:-5}
for effect in "A/A:0:$TRIES" "+2%:$dl2:$TRIES" "+4%:$dl4:$TRIES" "+1%:$dl1:$TRIES_EDGE"; do
  name=${effect%%:*}
  rest=${effect#*:}
  dl=${rest%%:*}
  tries=${rest#*:}
  : > "$work/$dl.txt"
  for _ in $(seq 1 "$tries"); do
    try $((L0 + dl)) >> "$work/$dl.txt"
  done
  python3 - "$name" "$dl" "$work/$dl.txt" <<'EOF'
import sys
name, dl, path = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [l.split() for l in open(path) if l.strip()]
count = lambda w: sum(1 for r in rows if r[0] == w)
secs = [float(r[2]) for r in rows]
rounds = [int(r[1]) for r in rows]
sl = [float(r[3]) for r in rows]
print(f"{name:>4} (dL {dl:>4}): slower {count('slower')}, no change {count('no_change')}, "
      f"undecided {count('undecided')}, faster {count('faster')} of {len(rows)}; "
      f"slowdowns x{min(sl):.4f}-x{max(sl):.4f}; rounds {min(rounds)}-{max(rounds)}; "
      f"each try {min(secs):.1f}-{max(secs):.1f} s")
EOF
done
echo "witness after: $(witness) ns/op (perf bench syscall basic)"
