#!/usr/bin/env bash
# `oscost explain` checked against `perf sched timehist` run beside it: the ping-pong runs
# under `perf sched record`, and timehist's scheduling delay of oscost's threads is printed
# beside explain's stages. timehist's delay runs from the wake-up event it reads (sched_waking
# in the waker where perf recorded it, else sched_wakeup on the sleeper's CPU) to the switch
# in; explain's peer side has both: from the waking ("peer queued" + "peer's CPU leaves idle" +
# "peer switched in") and from the enqueue (the last two). So timehist's median delay must lie
# between the two, give or take 25% for the two tracers' own costs. Only the side whose CPU
# records its wake-ups is compared: a thread whose delays timehist reads as 0 throughout (a
# vCPU that records nothing while idle) says nothing.
#
#   sudo scripts/check-explain.sh [ID@PLACEMENT]     (default switch/pipe-proc@cross)
#
# Needs root, perf, python3 and a release build. tracefs is mounted only inside a private
# mount namespace (unshare -m), so nothing stays mounted.
set -euo pipefail
cd "$(dirname "$0")/.."
id=${1:-switch/pipe-proc@cross}
bin=$PWD/target/release/oscost
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
command -v perf >/dev/null || { echo "install perf first" >&2; exit 2; }
work=$(mktemp -d /tmp/oscost-check-explain.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" explain "$id" --json "$work/explain.json" >/dev/null
unshare -m --propagation private sh -c "
  mount -t tracefs nodev /sys/kernel/tracing &&
  perf sched record -q -o '$work/sched.data' -- '$bin' run '$id' --quick --no-save --events none >/dev/null 2>&1 &&
  perf sched timehist -i '$work/sched.data' 2>/dev/null" > "$work/timehist.txt"
python3 - "$work/explain.json" "$work/timehist.txt" <<'PY'
import json, statistics, sys
e = json.load(open(sys.argv[1]))
st = {s["name"]: s["median_ns"] / 1000 for s in e["stages"]}
from_enqueue = st["peer's CPU leaves idle"] + st["peer switched in"]
from_waking = st["peer queued"] + from_enqueue
by_tid = {}
for line in open(sys.argv[2]):
    f = line.split()
    # time cpu task-name[tid] wait-time sch-delay run-time
    if len(f) >= 6 and f[2].startswith("oscost["):
        try:
            by_tid.setdefault(f[2], []).append(float(f[4]) * 1000.0)  # ms -> us
        except ValueError:
            pass
medians = {t: statistics.median(v) for t, v in by_tid.items() if len(v) >= 100}
if not medians or max(medians.values()) == 0:
    sys.exit("perf sched timehist gave no delays for oscost's threads")
tid, d = max(medians.items(), key=lambda kv: kv[1])
print(f"{e['id']}: explain, peer's waking to running {from_waking:.2f} us, enqueue to running {from_enqueue:.2f} us")
print(f"perf sched timehist: median scheduling delay {d:.2f} us ({tid}, {len(by_tid[tid])} switches)")
low, high = from_enqueue * 0.75, from_waking * 1.25
verdict = "within" if low <= d <= high else "OUTSIDE"
print(f"{verdict} [{low:.2f}, {high:.2f}] us")
PY
