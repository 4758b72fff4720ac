#!/usr/bin/env bash
# Runs measured apart, checked: K plain runs saved into a fresh store with a pause between,
# and a run with the whole oscost process under N permissive seccomp filters (as a container
# runtime's profile would be; scripts/ref/seccomp-layers.c: a known small slowdown of every
# system call) measured in the middle of them. Then:
#   - the A/A false-call rate of `oscost matrix` over the plain runs (nothing may be called),
#     and the runs it names as run at another machine speed (`matrix::odd_runs`);
#   - what the matrix calls in the sandboxed column (every null syscall must be slower), that
#     it names "seccomp filters" among what differs, and that the plain runs' run-to-run
#     spread is learned from the plain runs alone (the sandboxed run recorded its filters,
#     so it is an environment of its own);
#   - the coverage of the run-to-run interval: how often one plain run's interval (its own
#     CI widened by the run-to-run spread learned from the store) holds another's median;
#   - beside each run, a witness that is not oscost (`perf bench syscall basic`, pinned alike)
#     saying how much the host itself moved;
#   - the in-run speed witness judged on these runs (scripts/check-witness.py).
#
#   scripts/check-runs.sh [K]        (default 6; PAUSE=15 seconds, LAYERS=2, IDS=..., OSCOST=binary;
#                                    CELLS=prefixes the sandbox must slow, default syscall/)
#   SMALL=1 scripts/check-runs.sh    a small sandbox instead: one filter (LAYERS=1) over calls
#                                    that cost 0.6-1.5 us (about +5-10% each on the AMD EPYC
#                                    guest of 2026-12-04, +8% on their geometric mean), where
#                                    the host's drift between runs is as large as the effect
#   KEEP=DIR scripts/check-runs.sh   keeps the store and the witness lines in DIR
#   RETALLY=1 KEEP=DIR scripts/check-runs.sh
#                                    measures nothing: judges DIR's kept store again with
#                                    this build (a change to the judging, on the same runs)
#
# Needs a release build (cargo build --release), a C compiler, and python3 for the tally.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${1:-6}
PAUSE=${PAUSE:-15}
SMALL_IDS="mem/brk mem/mprotect fs/stat fs/statx fs/open mem/select/10 ipc/msg-create"
if [ -n "${SMALL:-}" ]; then
  LAYERS=${LAYERS:-1}; IDS=${IDS:-"$SMALL_IDS syscall/getppid"}; CELLS=${CELLS:-$SMALL_IDS}
fi
LAYERS=${LAYERS:-2}
IDS=${IDS:-"syscall/ spawn/fork switch/pipe-proc@same mem/fault-write timer/monotonic"}
CELLS=${CELLS:-syscall/}
bin=${OSCOST:-$PWD/target/release/oscost}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
work=${KEEP:-$(mktemp -d /tmp/oscost-check-runs.XXXXXX)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
store=$work/runs.db
if [ -n "${RETALLY:-}" ]; then
  [ -n "${KEEP:-}" ] && [ -f "$store" ] || { echo "RETALLY needs KEEP=DIR with a kept runs.db" >&2; exit 2; }
else
cc -O2 -o "$work/seccomp-layers" scripts/ref/seccomp-layers.c
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

half=$(( (K + 1) / 2 ))
for i in $(seq 1 "$K"); do
  w=$(witness)
  echo "plain run $i: witness ${w} ns/op (perf bench syscall basic)" | tee -a "$work/witness.txt"
  # shellcheck disable=SC2086
  "$bin" run $IDS --db "$store" --label plain >/dev/null 2>"$work/run-$i.err"
  sleep "$PAUSE"
  if [ "$i" = "$half" ]; then
    w=$(witness)
    echo "seccomp run: witness ${w} ns/op" | tee -a "$work/witness.txt"
    # shellcheck disable=SC2086
    "$work/seccomp-layers" "$LAYERS" -- "$bin" run $IDS --db "$store" --label seccomp \
      >"$work/run-seccomp.txt" 2>"$work/run-seccomp.err"
    head -1 "$work/run-seccomp.txt"
    sleep "$PAUSE"
  fi
done
fi

"$bin" matrix --db "$store" --where label=plain --json "$work/aa.json" >"$work/aa.txt"
"$bin" matrix --db "$store" --json "$work/all.json" >"$work/all.txt"

python3 - "$work" "$store" "$CELLS" <<'PY'
import json, math, sqlite3, sys, itertools
work, store = sys.argv[1], sys.argv[2]
cells = tuple(sys.argv[3].split())
aa = json.load(open(f"{work}/aa.json"))
called = total = 0
for r in aa["rows"]:
    for i, c in enumerate(r["cells"]):
        if i == aa["base"] or c.get("missing"):
            continue
        total += 1
        called += c.get("verdict") in ("Slower", "Faster", "slower", "faster")
print(f"A/A (plain against the first plain run): {called} of {total} cells called "
      f"({100.0 * called / max(total, 1):.1f}%); target at most 5%")
odd = [f"run {o['run_id']} x{o['factor']:.3f} ({o['moved']} of {o['of']})" for o in aa.get("odd_runs", [])]
print(f"runs at another machine speed named (their cells judged with the factor taken out): "
      f"{', '.join(odd) if odd else 'none'}")
allm = json.load(open(f"{work}/all.json"))
if any(o["run_id"] == allm["columns"][i]["run_id"] for o in allm.get("odd_runs", [])
       for i, c in enumerate(allm["columns"]) if c.get("label") == "seccomp"):
    print("  FAIL: the sandboxed run was named a machine-speed outlier")
col = next(i for i, c in enumerate(allm["columns"]) if c.get("label") == "seccomp")
print(f"sandboxed column (run {allm['columns'][col]['run_id']}): title {allm['columns'][col]['title']}")
print(f"the matrix's columns differ in: {allm['differs']} (must name 'seccomp filters')")
plain_runs = sorted({r['run_to_run']['runs'] for r in aa['rows'] if r.get('run_to_run')})
all_runs = sorted({r['run_to_run']['runs'] for r in allm['rows'] if r.get('run_to_run')})
print(f"run-to-run spread learned from {plain_runs} runs over the plain runs and {all_runs} "
      f"with the sandboxed run present (the same: it is not pooled)")
for r in allm["rows"]:
    c = r["cells"][col]
    if r["bench"].startswith(cells) or r["bench"].startswith("switch/pipe-proc"):
        add = c.get("addition_ns")
        print(f"  {r['bench']:28s} verdict {str(c.get('verdict')):9s} "
              f"x{(c.get('slowdown') or float('nan')):.3f}  {'+%.0f ns' % add if add is not None else ''}")
syscalls = [r["cells"][col] for r in allm["rows"] if r["bench"].startswith(cells)]
slower = sum(c.get("verdict") in ("Slower", "slower") for c in syscalls)
projected = sum(bool((c.get("run_to_run") or {}).get("drift_factor")) for c in syscalls)
print(f"sandbox called slower in {slower} of {len(syscalls)} cells it slows ({' '.join(cells)}) "
      f"({projected} of them projected to the base's level of a witness first)")
# Coverage of the run-to-run interval over pairs of plain runs; where the spread was learned
# with a slope on a witness (`run_to_run.drift_slope` on `drift_witness`: exit or speed), the
# other run's median is projected to this run's level of that witness first, as a comparison
# would.
db = sqlite3.connect(store)
cols = [c[1] for c in db.execute("PRAGMA table_info(results)")]
exit_col = "exit_witness_ns" if "exit_witness_ns" in cols else "NULL"
speed_col = "speed_witness_ns" if "speed_witness_ns" in cols else "NULL"
rows = db.execute(f"""SELECT results.bench, runs.id, median, ci_lo, ci_hi, {exit_col}, {speed_col}
                     FROM results JOIN runs ON runs.id = results.run_id
                     WHERE runs.label = 'plain' AND status = 'ok'""").fetchall()
slope = {r["bench"]: (r["run_to_run"].get("drift_slope") or r["run_to_run"].get("exit_slope"),
                      r["run_to_run"].get("drift_witness") or "exit")
         for r in aa["rows"] if r.get("run_to_run")}
# The run-to-run term is stated as a percent taken by a quantile (Student's t for the runs
# it was learned from); the interval below takes it back by the same one.
tau = {r["bench"]: math.log(1 + r["run_to_run"]["percent"] / 100)
       / r["run_to_run"].get("quantile", 1.96)
       for r in aa["rows"] if r.get("run_to_run")}
quantile = {r["bench"]: r["run_to_run"].get("quantile", 1.96)
            for r in aa["rows"] if r.get("run_to_run")}
by = {}
for b, rid, m, lo, hi, x_exit, x_speed in rows:
    on = slope.get(b, (None, "exit"))[1]
    by.setdefault(b, []).append((rid, m, lo, hi, x_speed if on == "speed" else x_exit))
held = pairs = own_held = 0
for b, runs in by.items():
    if b not in tau:
        continue
    for (i, mi, lo, hi, xi), (j, mj, _, _, xj) in itertools.permutations(runs, 2):
        if slope.get(b, (None,))[0] and xi and xj:
            mj = mj * (xi / xj) ** slope[b][0]
        # The run's own interval, each side widened by the run-to-run term in quadrature.
        drift = (quantile[b] * tau[b]) ** 2
        low = mi * math.exp(-math.sqrt(math.log(mi / lo) ** 2 + drift))
        high = mi * math.exp(math.sqrt(math.log(hi / mi) ** 2 + drift))
        pairs += 1
        held += low <= mj <= high
        own_held += lo <= mj <= hi
spread = sorted(round(100 * (math.exp(quantile[b] * t) - 1), 1) for b, t in tau.items())
print(f"run-to-run spread learned (±%, per benchmark): {spread}")
print(f"run-to-run interval holds another plain run's median in {held} of {pairs} pairs "
      f"({100.0 * held / max(pairs, 1):.1f}%; target at least 75%); the run's own CI alone: "
      f"{100.0 * own_held / max(pairs, 1):.1f}%")
PY
# The in-run speed witness judged on the same runs (replay): does it explain their drift?
"$bin" history --db "$store" | awk 'NR > 2 && $1 ~ /^[0-9]+$/ {print $1}' | while read -r id; do
  "$bin" export "$id" --db "$store" --json "$work/run-$id.json" 2>/dev/null
done
python3 scripts/check-witness.py "$work"/run-*.json || true
echo "witness lines: $work/witness.txt; matrices: $work/aa.txt, $work/all.txt"
