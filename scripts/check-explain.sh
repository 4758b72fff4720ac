#!/usr/bin/env bash
# `oscost explain` checked against `perf sched timehist` run beside it: the ping-pong runs
# under `perf sched record`, and timehist's scheduling delay of oscost's threads is printed
# beside explain's waking-to-running ("leaves idle" + "switched in"). They are not the same
# interval: timehist starts at sched_wakeup, which for a wakeup queued to another CPU fires
# there once that CPU has left idle and processed the queue, while explain starts at
# sched_waking in the waker. So timehist's delay must fall between explain's "switched in"
# alone and its waking-to-running; one outside that range means one of them is wrong.
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
st = {s["name"]: s["median_ns"] for s in e["stages"]}
peer = st["peer's CPU leaves idle"] + st["peer switched in"]
master = st["master's CPU leaves idle"] + st["master switched in"]
delays = []
for line in open(sys.argv[2]):
    f = line.split()
    # time cpu task-name[tid] wait-time sch-delay run-time
    if len(f) >= 6 and f[2].startswith("oscost["):
        try:
            delays.append(float(f[4]) * 1000.0)  # ms -> us
        except ValueError:
            pass
if not delays:
    sys.exit("perf sched timehist gave no delays for oscost's threads")
d = statistics.median(delays)
print(f"{e['id']}: explain, waking to running: peer {peer/1000:.1f} us, master {master/1000:.1f} us")
print(f"perf sched timehist, oscost threads' scheduling delay: median {d:.1f} us over {len(delays)} switches")
low = min(st["peer switched in"], st["master switched in"]) / 1000
high = max(peer, master) / 1000
verdict = "within" if low <= d <= high else "OUTSIDE"
print(f"{verdict} explain's range from 'switched in' alone ({low:.1f} us) to waking-to-running ({high:.1f} us)")
PY
