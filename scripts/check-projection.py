#!/usr/bin/env python3
"""Would projecting runs measured apart by their exit witnesses let them call more, falsely
calling no more? A replay over the runs `KEEP=DIR scripts/check-runs.sh` keeps (DIR/run-*.json,
exported with their repetitions): plain runs and one sandboxed run of the same benchmarks.

For each benchmark, each run's level is the log of its median and its exit witness the log of
the median of its workers' CPUID times (`Repetition::exit_witness_ns`). Two ways to judge a
pair of runs, both with the runs' own CIs and a run-to-run spread learned from the plain runs:

  as measured   the spread is the plain runs' scatter (the sample sd of their levels) and the
                difference is the two levels';
  projected     the plain runs' levels are regressed on their exit witnesses (one slope per
                benchmark), the spread is the residuals' sd, and the difference is taken at
                one exit level: the candidate's level less slope x (its witness less the
                base's).

A pair is called where the difference's 95% interval (t for the spread's degrees of freedom
times the root of twice the spread squared plus both runs' own standard errors squared)
excludes 0. Printed per benchmark: the slope and its correlation, both spreads, and for each
way the A/A calls among ordered pairs of plain runs and the sandboxed run's calls against each
plain run. The sandbox slows every system call, so its cells should be called; the A/A must
stay near 5% or below. This is evidence for docs/design-notes.md ("A witness that follows the
host"), not a judge oscost uses.

usage: scripts/check-projection.py DIR [SANDBOX_LABEL]   (default label: seccomp)
"""
import glob
import json
import math
import statistics as st
import sys

T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23}


def t975(dof):
    return T975.get(dof, 2.0 if dof > 10 else float("inf"))


def runs_of(directory):
    """Each kept run: (label, exit witness, {bench: (log median, own standard error)})."""
    out = []
    for f in sorted(glob.glob(f"{directory}/run-*.json")):
        run = json.load(open(f))
        exits = [rep["exit_witness_ns"] for r in run.get("results", [])
                 for rep in r.get("repetitions", []) if rep.get("exit_witness_ns")]
        levels = {}
        for r in run.get("results", []):
            s = r.get("stats") or {}
            m, ci = s.get("median"), s.get("ci95") or [None, None]
            if not m or m <= 0 or not ci[0] or not ci[1] or ci[0] <= 0:
                continue
            levels[r["id"]] = (math.log(m), math.log(ci[1] / ci[0]) / (2 * 1.96))
        if exits and levels:
            out.append((run.get("label") or "", math.log(st.median(exits)), levels))
    return out


def fit(points):
    """Slope, intercept and correlation of y on x; slope 0 where x does not vary."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = st.mean(xs), st.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return 0.0, my, 0.0
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return sxy / sxx, my - sxy / sxx * mx, sxy / math.sqrt(sxx * syy)


def called(base, cand, slope, tau, dof):
    """Whether cand differs from base: (base witness, level, se), the same for cand."""
    (xb, yb, sb), (xc, yc, sc) = base, cand
    diff = yc - yb - slope * (xc - xb)
    half = t975(dof) * math.sqrt(2 * tau ** 2 + sb ** 2 + sc ** 2)
    return abs(diff) > half, diff


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sandbox = sys.argv[2] if len(sys.argv) == 3 else "seccomp"
    runs = runs_of(sys.argv[1])
    plain = [r for r in runs if r[0] != sandbox]
    boxed = [r for r in runs if r[0] == sandbox]
    if len(plain) < 4 or not boxed:
        print(f"check-projection: need 4 plain runs and a '{sandbox}' run with exit witnesses "
              f"in {sys.argv[1]} (found {len(plain)} and {len(boxed)})", file=sys.stderr)
        sys.exit(2)
    print(f"{len(plain)} plain runs, exit witness {math.exp(min(r[1] for r in plain)):.0f}-"
          f"{math.exp(max(r[1] for r in plain)):.0f} ns; sandboxed run at "
          f"{math.exp(boxed[0][1]):.0f} ns")
    print(f"{'benchmark':30} {'slope':>6} {'corr':>6} {'spread':>7} {'proj':>7}  "
          f"{'A/A as measured':>15} {'A/A projected':>13}  {'box as measured':>15} "
          f"{'box projected':>13}")
    totals = [0, 0, 0, 0, 0, 0]
    for bench in sorted(plain[0][2]):
        pts = [(x, lv[bench][0], lv[bench][1]) for _, x, lv in plain if bench in lv]
        if len(pts) < 4 or bench not in boxed[0][2]:
            continue
        slope, _, corr = fit([(x, y) for x, y, _ in pts])
        ys = [y for _, y, _ in pts]
        tau_raw = st.stdev(ys)
        resid = [y - slope * x for x, y, _ in pts]
        tau_proj = math.sqrt(sum((r - st.mean(resid)) ** 2 for r in resid) / (len(pts) - 2))
        box = (boxed[0][1], *boxed[0][2][bench])
        row = []
        for s, tau, dof in ((0.0, tau_raw, len(pts) - 1), (slope, tau_proj, len(pts) - 2)):
            aa = [called(a, b, s, tau, dof)[0] for a in pts for b in pts if a is not b]
            bx = [called(p, box, s, tau, dof) for p in pts]
            row.append((sum(aa), len(aa), sum(1 for c, d in bx if c and d > 0), len(bx)))
        (a0, n0, b0, m0), (a1, n1, b1, m1) = row
        totals = [t + v for t, v in zip(totals, (a0, a1, n0, b0, b1, m0))]
        print(f"{bench:30} {slope:+6.2f} {corr:+6.2f} {100 * tau_raw:6.2f}% {100 * tau_proj:6.2f}%  "
              f"{a0:>7} of {n0:<5} {a1:>5} of {n1:<5}  {b0:>7} of {m0:<5} {b1:>5} of {m1:<5}")
    a0, a1, n, b0, b1, m = totals
    print(f"overall: A/A {a0} of {n} ({100 * a0 / max(n, 1):.1f}%) as measured, {a1} of {n} "
          f"({100 * a1 / max(n, 1):.1f}%) projected; the sandbox called slower in {b0} of {m} "
          f"as measured, {b1} of {m} projected")


if __name__ == "__main__":
    main()
