#!/usr/bin/env bash
# What an agent attached to the whole system costs, measured with `ab --b-during` (as root):
# nothing (`sleep infinity`, an A/A check), a system-wide perf counter on every system call
# entry, bpftrace counting them, and an audit rule that matches nothing. Prints the README's
# table ("What an agent costs"), one row per agent and benchmark, then checks that the machine
# is as it was: no BPF program, trace event, audit rule or agent process left, tracefs mounted
# only if it was. Then compares bpftrace's count() with oscost's own counter hook (hook/).
#
#   sudo scripts/check-agents.sh            (OSCOST=target/release/oscost by default)
#
# The audit agent enables audit for its block and puts the flag and the rules back on SIGINT.
# Note that enabling audit once marks the kernel (audit_ever_enabled): until the next boot,
# every process forked after it takes the system call slow path, so the null call measured
# after this script is slower than before it. SKIP_AUDIT=1 leaves that agent out.
set -euo pipefail
cd "$(dirname "$0")/.."
OSCOST=${OSCOST:-target/release/oscost}
BENCHES=${BENCHES:-"syscall/getppid syscall/getpid switch/pipe-proc@same spawn/fork"}
work=$(mktemp -d /tmp/oscost-agents.XXXXXX)
tracefs_before=$(grep -c ' - tracefs ' /proc/self/mountinfo || true)
# bpftrace resolves tracepoints through tracefs and does not mount it itself (perf does).
[ "$tracefs_before" != 0 ] || mount -t tracefs nodev /sys/kernel/tracing
cleanup() {
  if [ "$tracefs_before" = 0 ]; then
    umount /sys/kernel/tracing 2>/dev/null || true
    umount /sys/kernel/debug/tracing 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/audit-agent.sh" <<'EOF'
#!/bin/sh
# An audit rule that matches nothing (uid 12345 calls no getppid here), removed on SIGINT.
was=$(auditctl -s | awk '/^enabled/ {print $2}')
trap 'auditctl -d always,exit -F arch=b64 -S getppid -F uid=12345 >/dev/null; auditctl -e "$was" >/dev/null; exit 0' INT TERM
auditctl -e 1 >/dev/null
auditctl -a always,exit -F arch=b64 -S getppid -F uid=12345 >/dev/null
echo "audit rule added"
while :; do sleep 0.2; done
EOF
chmod +x "$work/audit-agent.sh"

agents=("sleep infinity"
        "perf stat -a -e raw_syscalls:sys_enter -o /dev/null"
        "bpftrace -q -e 'tracepoint:raw_syscalls:sys_enter { @c = count(); }'")
[ "${SKIP_AUDIT:-0}" = 1 ] || agents+=("$work/audit-agent.sh")

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
echo "| agent (during B) | benchmark | plain | with it | slowdown (95% CI) | addition | verdict | agent CPU |"
echo "|---|---|---|---|---|---|---|---|"
i=0
for agent in "${agents[@]}"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$OSCOST" ab $BENCHES --quick --no-save --b-during "$agent" --json "$work/ab$i.json" \
    >"$work/ab$i.txt" 2>&1 || { echo "ab during '$agent' failed:"; tail -5 "$work/ab$i.txt"; exit 1; }
  python3 - "$work/ab$i.json" "$agent" "$work" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
agent = sys.argv[2].replace(sys.argv[3] + "/", "")
def ns(x):
    return f"{x/1000:.2f} us" if abs(x) >= 1000 else f"{x:.0f} ns"
cpu = next((n for n in c["cand"].get("notes", []) if "% of one CPU" in n), "")
# "...(0.1% of one CPU; CPU 0 0.0%, CPU 1 0.0%)...": the share of one CPU, in all.
share = cpu.split("% of one CPU")[0].split("(")[-1] + "%" if "% of one CPU" in cpu else "?"
for r in c["rows"]:
    lo, hi = r["slowdown_ci95"]
    print(f"| `{agent}` | {r['id']} | {ns(r['base_median_ns'])} | {ns(r['cand_median_ns'])} | "
          f"x{r['slowdown']:.3f} ({lo:.3f}-{hi:.3f}) | {'+' if r['addition_ns'] >= 0 else ''}{ns(r['addition_ns'])} | "
          f"{r['verdict'].replace('_', ' ')} | {share} |")
EOF
done

# bpftrace's count() against oscost's own counter hook on the same tracepoint, same machine.
"$OSCOST" run hook/none hook/tp-sys-enter --no-save --json "$work/hook.json" >"$work/hook.txt" 2>&1 \
  || { echo "hook/ failed:"; tail -5 "$work/hook.txt"; exit 1; }
python3 - "$work/ab3.json" "$work/hook.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
bt = next(r for r in c["rows"] if r["id"] == "syscall/getppid")
run = json.load(open(sys.argv[2]))
own = next(r for r in run["results"] if r["id"] == "hook/tp-sys-enter/counter")
a, ci = own["params"]["addition_ns"], own["params"]["addition_ci95"]
b, bci = bt["addition_ns"], bt["addition_ci95"]
print(f"bpftrace count() on raw_syscalls:sys_enter adds {b:.0f} ns ({bci[0]:.0f}-{bci[1]:.0f}) to getppid; "
      f"oscost's hook/tp-sys-enter/counter adds {a:.0f} ns ({ci[0]:.0f}-{ci[1]:.0f}): ratio {b / a:.2f}")
EOF

# Nothing left: no agent process, no BPF program, no audit rule.
left=$(pgrep -f 'perf stat -a -e raw_syscalls|bpftrace -q -e|audit-agent.sh|sleep infinity' || true)
[ -z "$left" ] || { echo "FAIL: agent processes left: $left"; exit 1; }
if command -v bpftool >/dev/null; then
  n=$(bpftool prog show 2>/dev/null | grep -c '^[0-9]' || true)
  echo "BPF programs loaded after: $n"
fi
if command -v auditctl >/dev/null; then
  echo "audit after: $(auditctl -l 2>&1 | head -1); $(auditctl -s | grep '^enabled')"
fi
