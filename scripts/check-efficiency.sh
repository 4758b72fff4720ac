#!/usr/bin/env bash
# Efficiency from one instant, checked: the null call's efficiency at every allowed CPU, in
# processes and threads, over TRIES `oscost scale getppid --quick` runs, each a fresh oscost.
# The goal (issue "Every path holds", part 2): at least 0.9 in every try and both modes, with
# its CI, and no point above 1 beyond its CI that the run did not flag as the host moving.
#
# A goal, not a test: it holds on a host that gives two busy vCPUs a core each; on a guest whose
# host first runs two freshly busy vCPUs on SMT siblings (docs/design-notes.md, "Efficiency
# from one instant") the same code reads 0.75-0.88, which is the host's, and a C loop shows it
# too. So the tests assert that the null call scales (above 0.6, paired, CI around the point)
# and this script says, with a witness, whether this host meets 0.9.
#
#   scripts/check-efficiency.sh [TRIES]     (default 10)
#
# Needs a release build (cargo build --release) and python3 for the tally.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIES=${1:-10}
bin=$PWD/target/release/oscost
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
work=$(mktemp -d /tmp/oscost-check-efficiency.XXXXXX)
trap 'rm -rf "$work"' EXIT
witness() { command -v perf >/dev/null && perf bench syscall basic -l 2000000 2>&1 | awk '/usecs\/op/ {printf "%.1f", $1*1000}' || echo "n/a"; }

echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
echo "witness before: $(witness) ns per getppid (perf bench syscall basic)"
for i in $(seq "$TRIES"); do
  "$bin" scale getppid --quick --json "$work/$i.json" >/dev/null 2>&1
done
echo "witness after: $(witness) ns per getppid"
python3 - "$work" "$TRIES" <<'EOF'
import json, sys
work, tries = sys.argv[1], int(sys.argv[2])
rows = {}  # mode -> [(text, ok)]
for i in range(1, tries + 1):
    run = json.load(open(f"{work}/{i}.json"))
    for r in run["results"]:
        if not r["params"].get("efficiency_paired"):
            continue
        mode = r["id"].rsplit("/", 1)[1]
        e = r["params"]["efficiency"]
        lo, hi = r["params"]["efficiency_ci95"]
        flagged = any(n.get("kind") == "efficiency_above_one" for n in r.get("notes", []))
        ok = e >= 0.9 and (lo <= 1.0 or flagged)
        text = f"{e:.2f} ({lo:.2f}-{hi:.2f})" + ("" if ok else " !") + (" flagged" if flagged else "")
        rows.setdefault(mode, []).append((text, ok))
bad = 0
for mode, v in sorted(rows.items()):
    n_ok = sum(ok for _, ok in v)
    bad += len(v) - n_ok
    print(f"{mode}: {n_ok} of {len(v)} at least 0.9: " + ", ".join(t for t, _ in v))
print("PASS" if bad == 0 else f"FAIL: {bad} point(s) below 0.9 or above 1 beyond the CI unflagged")
sys.exit(1 if bad else 0)
EOF
