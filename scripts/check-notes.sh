#!/usr/bin/env bash
# Notes said once, checked: K default suites (`oscost run`, as a newcomer's `cargo run
# --release` runs it) into a fresh store, and for each:
#   - the numbered notes under the default table (the goal: at most 15 where a moving host
#     gave 62 before departures were said once), and under `show --verbose`; a departure
#     that is why a CI is wide is a `rep K +X%` flag on its row, not a note;
#   - that nothing was dropped: every departing repetition is still in the run's JSON
#     (`departs_pct`), and every result whose departure note the default table left out is
#     counted by one of its run-level lines (the machine's moments, or the lone departures its
#     CI absorbs);
#   - the widest line of the default table (at most 100 columns);
#   - beside each run, a witness that is not oscost (`perf bench syscall basic`, pinned alike)
#     saying how much the host itself moved.
#
#   scripts/check-notes.sh [K]       (default 3; ARGS="--quick" to pass flags to run)
#   KEEP=DIR scripts/check-notes.sh  keeps the store, the tables and the JSON in DIR
#
# Needs a release build (cargo build --release) and python3 for the tally.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${1:-3}
ARGS=${ARGS:-}
bin=$PWD/target/release/oscost
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
work=${KEEP:-$(mktemp -d /tmp/oscost-check-notes.XXXXXX)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
store=$work/runs.db
rm -f "$store"
cpu=$(( $(nproc) - 1 ))

witness() {
  if command -v perf >/dev/null 2>&1; then
    taskset -c "$cpu" perf bench syscall basic -l 2000000 2>/dev/null \
      | awk '/usecs\/op/ {printf "%.1f", $1 * 1000}'
  else
    printf "-"
  fi
}

for i in $(seq 1 "$K"); do
  w=$(witness)
  # shellcheck disable=SC2086
  "$bin" run $ARGS --db "$store" --json "$work/run-$i.json" >"$work/table-$i.txt" \
    2>"$work/run-$i.err"
  "$bin" show "$i" --db "$store" --verbose >"$work/verbose-$i.txt"
  echo "run $i: witness ${w} ns/op (perf bench syscall basic)"
done

python3 - "$work" "$K" <<'EOF'
import json, re, sys
work, k = sys.argv[1], int(sys.argv[2])
NOTE = "kept, not removed: "
LEVELS = "two levels, not one: "
worst = 0
for i in range(1, k + 1):
    table = open(f"{work}/table-{i}.txt").read()
    verbose = open(f"{work}/verbose-{i}.txt").read()
    run = json.load(open(f"{work}/run-{i}.json"))
    numbered = re.findall(r"^\[\d+\] ", table, re.M)
    numbered_v = re.findall(r"^\[\d+\] ", verbose, re.M)
    departing = sum(1 for r in run["results"] for rep in r.get("repetitions", [])
                    if rep.get("departs_pct") is not None)
    with_note = [r["id"] for r in run["results"]
                 if any(n["kind"] in ("departure", "two_levels") if isinstance(n, dict)
                        else n.startswith((NOTE, LEVELS)) for n in r["notes"])]
    # Said with the result: a numbered note, or a `rep K +X%` flag on its row.
    shown = [rid for rid in with_note
             if re.search(rf"^\[\d+\] {re.escape(rid)}: ({NOTE}|{LEVELS})", table, re.M)
             or re.search(rf"^ {re.escape(rid)} .* reps? [\d,]+ [+-]\d", table, re.M)]
    m = re.search(r"not noted again for the (\d+) results", table)
    machine = int(m.group(1)) if m else 0
    m = re.search(r"note: (\d+) results? had repetitions depart alone", table)
    quiet = int(m.group(1)) if m else 0
    family = sum(int(n) for n in re.findall(r"^note: (\d+) \S+/ results ran at two levels", table, re.M))
    # Each left-out result is counted by one line: explained results are left out of the
    # family and quiet counts, and a two-levels result has no lone departure note.
    accounted = len(shown) + machine + quiet + family
    widest = max(len(l) for l in table.splitlines() if l.startswith((" ", "-")))
    print(f"run {i}: {len(numbered)} notes (verbose {len(numbered_v)}); JSON: {departing} "
          f"departing repetitions in {len(with_note)} results with a departure or two-levels note: "
          f"{len(shown)} said with the result (note or flag), {machine} said as the machine's moments, "
          f"{family} as a family at two levels, {quiet} counted as absorbed; "
          f"table {widest} columns wide")
    if accounted != len(with_note):
        print(f"  FAIL: {len(with_note) - accounted} departure notes neither shown nor counted")
        worst = max(worst, 1)
    if widest > 100:
        print("  FAIL: the table is wider than 100 columns")
        worst = max(worst, 1)
    if len(numbered) > 15:
        print("  over the goal of 15 notes")
sys.exit(worst)
EOF
