#!/usr/bin/env bash
# Only possible numbers, on a loaded machine: runs the benchmarks the issue named (getppid, the
# pipe round trip, fork, a page fault, sched-yield, clock_gettime by system call, mem/mmap)
# quiet and with a kernel copy loop pinned on every CPU (`dd bs=16M`), alternating, ROUNDS
# times (default 3), and prints per benchmark the loaded median over the quiet one; fails if any
# interval bound is at or below zero or above 10x its median, if a run printed more than 15
# note lines, or if an A/A `ab` (the same worker both sides, `--b env`) under the load calls a
# change. The load is stopped however the script ends.
#
# usage: scripts/check-loaded.sh [ROUNDS]    env: OSCOST=path to the binary
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
oscost=${OSCOST:-target/release/oscost}
[ -x "$oscost" ] || cargo build --release --quiet
ids=(syscall/getppid switch/pipe-proc@same spawn/fork mem/fault-write syscall/sched-yield
     timer/clock-gettime-syscall mem/mmap)
tmp=$(mktemp -d)
load=()
stop_load() { [ ${#load[@]} -eq 0 ] || kill "${load[@]}" 2>/dev/null || true; load=(); }
trap 'stop_load; rm -rf "$tmp"' EXIT
start_load() {
  for c in $(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))'); do
    taskset -c "$c" dd if=/dev/zero of=/dev/null bs=16M status=none &
    load+=($!)
  done
  sleep 0.5
}
for r in $(seq 1 "$rounds"); do
  for side in quiet loaded; do
    [ "$side" = loaded ] && start_load
    "$oscost" run --no-save --json "$tmp/$side$r.json" "${ids[@]}" >"$tmp/$side$r.txt" 2>/dev/null
    stop_load
    echo "round $r $side: $(grep -cE '^(\[[0-9]+\]|note:)' "$tmp/$side$r.txt") note lines"
  done
done
start_load
"$oscost" ab --no-save --b env syscall/getppid switch/pipe-proc@same spawn/fork >"$tmp/aa.txt" 2>&1 || true
stop_load
python3 - "$tmp" "$rounds" <<'PY'
import json, sys, statistics as st
tmp, rounds = sys.argv[1], int(sys.argv[2])
bad, medians = [], {}
for side in ("quiet", "loaded"):
    for r in range(1, rounds + 1):
        run = json.load(open(f"{tmp}/{side}{r}.json"))
        for x in run["results"]:
            s = x.get("stats")
            if x["status"]["state"] != "ok" or not s:
                continue
            lo, hi, m = s["ci95"][0], s["ci95"][1], s["median"]
            if lo is not None and (lo <= 0 or hi > 10 * m):
                bad.append(f"{side} {r} {x['id']}: {m:.1f} ns [{lo:.1f}, {hi:.1f}]")
            medians.setdefault(x["id"], {}).setdefault(side, []).append(m)
        notes = sum(1 for l in open(f"{tmp}/{side}{r}.txt") if l.startswith(("note:", "[")))
        if notes > 15:
            bad.append(f"{side} {r}: {notes} note lines")
print(f"{'benchmark':32} {'quiet':>10} {'loaded':>10} {'ratio':>7}")
for id_, v in medians.items():
    q, l = st.median(v.get("quiet", [float("nan")])), st.median(v.get("loaded", [float("nan")]))
    print(f"{id_:32} {q:10.1f} {l:10.1f} {l / q:7.3f}")
aa = [l for l in open(f"{tmp}/aa.txt").read().splitlines()
      if l.split() and l.split()[0] in ("syscall/getppid", "switch/pipe-proc@same", "spawn/fork")]
print("A/A ab under load (--b env):\n" + "\n".join("  " + l for l in aa))
if any("slower" in l or "faster" in l for l in aa):
    bad.append("the A/A ab called a change")
print("bounds at or below zero, above 10x, or over 15 note lines: " + ("none" if not bad else "\n  " + "\n  ".join(bad)))
sys.exit(1 if bad else 0)
PY
