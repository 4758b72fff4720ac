#!/usr/bin/env bash
# Does `oscost watch` keep its duty, and call a real change in time and nothing before it?
# Runs `oscost watch --interval INTERVAL --ids syscall/getppid` for MINUTES minutes (default 20,
# interval 20 s) on a store of its own; at half time it starts an always-on tracer: bpftrace
# counting every system call (`tracepoint:raw_syscalls:sys_enter`), which puts every system
# call through the tracepoint's BPF program while it runs and is detached when it ends. (Not an
# audit rule: enabling audit once makes every process forked after it take audit's slow
# system-call path until the next boot, whatever rules remain, so it cannot be put back.)
# The tracer is stopped on any exit. Prints the watch's log with the time the tracer started,
# and judges: the change called within two windows after, none before, what the watch named
# as differing, and the duty as the watch measured it (its CPU time over wall time, workers
# included).
#
#   sudo scripts/check-watch.sh            # 20 minutes
#   sudo MINUTES=4 INTERVAL=10 scripts/check-watch.sh
#
# Needs root and bpftrace (Debian: bpftrace). OSCOST= names the binary (default: the release
# build).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${MINUTES:-20}
INTERVAL=${INTERVAL:-20}
OSCOST=${OSCOST:-target/release/oscost}
command -v bpftrace >/dev/null || { echo "check-watch: needs bpftrace (apt-get install bpftrace)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "check-watch: needs root (BPF)"; exit 2; }
[ -x "$OSCOST" ] || cargo build --release --quiet
work=$(mktemp -d /tmp/oscost-check-watch.XXXXXX)
# bpftrace finds tracepoints in tracefs: mounted for the check where it is not, and unmounted
# after.
tracefs_before=$(grep -c ' tracefs ' /proc/mounts || true)
[ "$tracefs_before" = 0 ] && mount -t tracefs nodev /sys/kernel/tracing
cleanup() {
  [ -n "${tracer:-}" ] && kill -INT "$tracer" 2>/dev/null && wait "$tracer" 2>/dev/null || true
  if [ "$tracefs_before" = 0 ] && grep -q ' /sys/kernel/tracing tracefs ' /proc/mounts; then
    umount /sys/kernel/tracing 2>/dev/null || true
  fi
  [ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
start=$(date +%s)
XDG_DATA_HOME=$work "$OSCOST" watch --interval "$INTERVAL" --ids syscall/getppid \
  --db "$work/watch.db" --openmetrics "$work/watch.prom" 2>"$work/watch.log" &
pid=$!
half=$((MINUTES * 30))
sleep "$half"
bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @calls = count(); }' >/dev/null 2>"$work/bpftrace.err" &
tracer=$!
added=$(date -u +%Y-%m-%dT%H:%M:%SZ)
added_s=$(date +%s)
sleep 2
kill -0 "$tracer" 2>/dev/null || { echo "check-watch: bpftrace did not start:"; cat "$work/bpftrace.err"; exit 1; }
echo "check-watch: tracer started at $added ($((added_s - start)) s in)"
sleep $((MINUTES * 60 - half))
kill -TERM "$pid"
wait "$pid" || true
pid=
kill -INT "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null || true
tracer=
cat "$work/watch.log"
python3 - "$work/watch.log" "$added" "$INTERVAL" <<'EOF'
import re, sys, datetime
log, added, interval = open(sys.argv[1]).read(), sys.argv[2], float(sys.argv[3])
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
changes = re.findall(r"syscall/getppid ([+-]\d+)% since (\S+) \(CI ([+-]\d+)% to ([+-]\d+)%", log)
windows = re.findall(r"window (\d+) at (\S+):", log)
said = [l for l in log.splitlines() if " since " in l]
before = [c for c in changes if t(c[1]) < t(added)]
after = [c for c in changes if t(c[1]) >= t(added)]
duty = re.findall(r"the watch so far ([\d.]+)% of one CPU", log)
print(f"check-watch: {len(windows)} windows; changes called: {len(changes)}")
for l in said:
    print("  " + l)
ok = True
if before:
    print(f"check-watch: FAIL: {len(before)} change(s) called before the tracer started"); ok = False
if not after:
    print("check-watch: FAIL: no change called after the tracer started"); ok = False
else:
    # The window in which it was said: the first window whose time is the change's start or later, plus the tail.
    first = t(after[0][1])
    late = (first - t(added)).total_seconds()
    idx = [i for i, (_, w) in enumerate(windows) if t(w) >= t(added)]
    called_at = None
    for line in log.splitlines():
        m = re.search(r"window (\d+) at (\S+):", line)
        if m: last_window = (int(m.group(1)), m.group(2))
        if " since " in line and "syscall/getppid" in line:
            called_at = last_window; break
    # Windows that began after the tracer was launched, to the one the change was said in. A
    # window stamped the launch's own second began before the tracer attached (bpftrace takes
    # a second or two to load): it straddles the change and is not counted as after it.
    n_after = sum(1 for _, w in windows if t(w) > t(added) and called_at and int(_) <= called_at[0])
    print(f"check-watch: the change began {late:.0f} s after the tracer started; called in the window at {called_at[1]}, the {n_after}th window after it (want at most 2)")
    if n_after > 2: ok = False
if duty:
    print(f"check-watch: duty measured by the watch at its end: {duty[-1]}% of one CPU")
print("check-watch: " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
EOF
