#!/usr/bin/env bash
# `oscost predict` checked against what it measures: three programs (system-call bound,
# process spawning, mixed) under two wrappers (8 permissive seccomp filters from
# scripts/ref/seccomp-layers.c, and `strace -f -o /dev/null`), each predicted from its counted
# system calls and then measured in alternating rounds. Prints one row per pair: predicted
# and measured added time with their 95% CIs, and the error. Runs one after another (never two
# benchmarks at once); about 15-25 minutes on a 2-vCPU VM.
#
#   scripts/check-predict.sh            (needs root for the tracepoints, a release build,
#                                        a C compiler, strace and python3)
#   KEEP=DIR scripts/check-predict.sh   keeps each prediction's JSON in DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/target/release/oscost
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
command -v strace >/dev/null || { echo "install strace first" >&2; exit 2; }
work=${KEEP:-$(mktemp -d /tmp/oscost-check-predict.XXXXXX)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/seccomp-layers" scripts/ref/seccomp-layers.c

wrappers=("$work/seccomp-layers 8 --" "strace -f -o /dev/null")
names=(seccomp8 strace)
programs=(
  "dd if=/dev/zero of=/dev/null bs=1 count=100000"
  "sh -c 'for i in \$(seq 200); do /bin/true; done'"
  "find /usr/include -name '*.h'"
)
pnames=(dd shloop find)
for w in 0 1; do
  for p in 0 1 2; do
    out="$work/${names[$w]}-${pnames[$p]}.json"
    echo "== ${names[$w]}: ${programs[$p]}" >&2
    eval "set -- ${programs[$p]}"
    "$bin" predict --no-save --under "${wrappers[$w]}" --json "$out" -- "$@" >/dev/null
  done
done
python3 - "$work" <<'PY'
import json, os, sys
d = sys.argv[1]
def ms(x): return f"{x/1e6:+.2f} ms"
print(f"{'wrapper':9} {'program':7} {'predicted (95% CI)':36} {'measured (95% CI)':36} error")
for f in sorted(os.listdir(d)):
    if not f.endswith(".json"): continue
    j = json.load(open(os.path.join(d, f)))
    w, p = f[:-5].split("-", 1)
    pr = f"{ms(j['predicted_added_ns'])} ({ms(j['predicted_ci95'][0])}..{ms(j['predicted_ci95'][1])})"
    me = f"{ms(j['measured_added_ns'])} ({ms(j['measured_ci95'][0])}..{ms(j['measured_ci95'][1])})"
    print(f"{w:9} {p:7} {pr:36} {me:36} {100*j['error']:+.1f}%")
PY
