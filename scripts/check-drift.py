#!/usr/bin/env python3
"""Would taking the host's drift out of a run narrow its intervals, and would they still hold?

Reads runs kept by `KEEP=DIR scripts/check-ci.sh N` (DIR/run*.json) and judges, per benchmark,
three estimates of each run's level from its repetitions (the log of each repetition's median
over the result's median), each with a t interval over the repetitions:

  as measured   the repetitions' levels themselves;
  neighbours    each level less the level the other benchmarks' repetitions nearest in time
                sat at (the host's drift common to every benchmark of the run, leave-one-out),
                scaled by the regression of the one on the other (a control variate);
  witness       each level less the regression on the log of its worker's speed witness
                (`Repetition::witness_ns`, a fixed user-space loop timed in the same worker);
  exit          each level less the regression on the log of its worker's exit witness
                (`Repetition::exit_witness_ns`, CPUID: a round trip through the hypervisor
                in a guest), and another run's level projected to this run's exit level by
                this run's slope before it is asked whether this run's interval holds it:
                the host's drift between runs taken out, where the exit witness follows it;
  exit pooled   the same with one slope for the benchmark over all the runs;
  quiet         what `oscost run` does in a guest (`analysis::host_quiet`): a repetition
                whose exit witness sits above the run's quiet level (the lower quartile of
                every exit witness the run's workers timed) by more than 4 robust SDs of the
                witnesses below the run's median, and at least 10%, ran in a slow moment of the
                host; where 5 or more such repetitions sat dearer than their results' others
                (a one-sided sign test at 5%, and by 5% or more, the median over them), they
                are set aside from every result that keeps 5 or more; the host's slow moments
                removed instead of regressed on, so a noisy witness can only set aside too
                few, never add its noise to a level. Replayed on runs of a build before it,
                this is what the build with it would have said of them.

For each: the median interval width over the runs (percent of the median), how often one run's
interval holds another run's level (a calibrated 95% interval: ~83%), and the correlation the
adjustment worked from (for quiet: the share of each run's repetitions it kept). An adjustment earns its place only where it narrows the width and the
holds stay; docs/design-notes.md ("The host's drift: what cancels it") has the figures.

usage: scripts/check-drift.py DIR
"""
import glob
import json
import math
import statistics as st
import sys

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13}


def t95(dof):
    return T95.get(dof, 2.0 if dof > 15 else float("inf"))


def regress(y, x):
    """Slope of y on x and their correlation (0, 0 when x does not vary)."""
    mx, my = st.mean(x), st.mean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return 0.0, 0.0
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / sxx, sxy / math.sqrt(sxx * syy)


def adjusted(levels, control):
    """Levels less their regression on the control, and the correlation used."""
    slope, r = regress(levels, control)
    mc = st.mean(control)
    return [l - slope * (c - mc) for l, c in zip(levels, control)], r


def interval(levels, fitted):
    n = len(levels)
    dof = n - 1 - fitted
    if dof < 1:
        return None
    return st.mean(levels), t95(dof) * st.stdev(levels) / math.sqrt(n)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    files = sorted(glob.glob(f"{sys.argv[1]}/run*.json"))
    if len(files) < 2:
        print(f"check-drift: {sys.argv[1]} holds fewer than two run*.json", file=sys.stderr)
        sys.exit(2)
    kinds = ("as measured", "neighbours", "witness", "quiet")
    table = {}
    # Per benchmark, per run: (log median, levels, log exit witnesses), for the exit rows.
    exits = {}
    for f in files:
        results = [r for r in json.load(open(f))["results"]
                   if r.get("stats") and len(r.get("repetitions", [])) >= 4]
        series = {}
        slow_above = quiet_level(results)
        for r in results:
            reps = sorted(r["repetitions"], key=lambda x: x["started_ms"])
            mid = st.median(x["median_ns"] for x in reps)
            series[r["id"]] = [(x["started_ms"], math.log(x["median_ns"] / mid),
                                x.get("witness_ns")) for x in reps if x["median_ns"] > 0]
            kept = [x for x in reps if x["median_ns"] > 0]
            if kept and all(x.get("exit_witness_ns") for x in kept):
                exits.setdefault(r["id"], []).append((
                    math.log(mid), [math.log(x["median_ns"] / mid) for x in kept],
                    [math.log(x["exit_witness_ns"]) for x in kept]))
        for r in results:
            own = series[r["id"]]
            others = [p for k, v in series.items() if k != r["id"] for p in v]
            levels = [l for _, l, _ in own]
            base = math.log(r["stats"]["median"])
            row = table.setdefault(r["id"], {k: [] for k in kinds})
            row["as measured"].append((base, interval(levels, 0), None))
            # The same levels as measured, less the slow repetitions (all, where fewer than 5
            # would be left), about the same centre: kept whole, the row is "as measured".
            reps = [x for x in r["repetitions"] if x["median_ns"] > 0]
            mid = st.median(x["median_ns"] for x in reps)
            quiet = [math.log(x["median_ns"] / mid) for x in reps if slow_above is None
                     or not x.get("exit_witness_ns") or math.log(x["exit_witness_ns"]) <= slow_above]
            if len(quiet) < 5:
                quiet = [math.log(x["median_ns"] / mid) for x in reps]
            row["quiet"].append((base, interval(quiet, 0), len(quiet) / len(reps)))
            if others:
                k = max(1, 2 * (len(series) - 1))
                near = [st.median(q[1] for q in sorted(others, key=lambda q: abs(q[0] - t))[:k])
                        for t, _, _ in own]
                adj, rho = adjusted(levels, near)
                row["neighbours"].append((base, interval(adj, 1), rho))
            if all(w for _, _, w in own):
                adj, rho = adjusted(levels, [math.log(w) for _, _, w in own])
                row["witness"].append((base, interval(adj, 1), rho))
    print(f"{'benchmark':28} {'estimate':12} {'runs':>4} {'width':>8} {'holds':>7} {'corr':>6}")
    for bench, row in table.items():
        for kind in kinds:
            got = [(b + i[0], i[1], rho) for b, i, rho in row[kind] if i]
            if len(got) < 2:
                continue
            pairs = [(a, b) for a in range(len(got)) for b in range(len(got)) if a != b]
            holds = sum(1 for a, b in pairs if abs(got[b][0] - got[a][0]) <= got[a][1])
            width = 200 * st.median(math.expm1(h) for _, h, _ in got)
            rhos = [rho for _, _, rho in got if rho is not None]
            corr = f"{st.median(rhos):+.2f}" if rhos else ""
            if kind == "quiet":  # its third figure is the share of repetitions kept
                corr = f"kept {100 * min(rhos):.0f}-{100 * max(rhos):.0f}%"
            print(f"{bench:28} {kind:12} {len(got):4} {width:7.2f}% {100 * holds / len(pairs):6.1f}%"
                  f" {corr:>6}")
        for kind, line in exit_rows(exits.get(bench, [])):
            print(f"{bench:28} {kind:12} {line}")


def quiet_level(results):
    """The log exit witness above which a repetition of this run ran in a slow moment of the
    host, where the run's slow repetitions sat dearer (as `analysis::host_quiet::judge`), or
    None: too few witnesses, too few slow repetitions, or not dearer."""
    xs = sorted(math.log(x["exit_witness_ns"]) for r in results for x in r["repetitions"]
                if x.get("exit_witness_ns"))
    if len(xs) < 20:
        return None
    q25, low = xs[len(xs) // 4], xs[:len(xs) // 2 + 1]
    mad = st.median(abs(x - st.median(low)) for x in low)
    above = q25 + max(4 * 1.4826 * mad, math.log(1.10))
    dearer = []
    for r in results:
        reps = [x for x in r["repetitions"] if x["median_ns"] > 0]
        slow = [x for x in reps if x.get("exit_witness_ns") and math.log(x["exit_witness_ns"]) > above]
        kept = [x["median_ns"] for x in reps if x not in slow]
        if len(kept) >= 5:
            mid = math.log(st.median(kept))
            dearer += [math.log(x["median_ns"]) - mid for x in slow]
    if len(dearer) < 5:
        return None
    higher = sum(d > 0 for d in dearer)
    p = sum(math.comb(len(dearer), k) for k in range(higher, len(dearer) + 1)) / 2 ** len(dearer)
    return above if p < 0.05 and math.expm1(st.median(dearer)) >= 0.05 else None


def exit_rows(runs):
    """The exit witness's two rows for one benchmark's runs: (kind, the rest of the line)."""
    if len(runs) < 2:
        return []
    xs = [c for _, _, cs in runs for c in cs]
    ys = [b + l for b, ls, _ in runs for l in ls]
    pooled, pooled_r = regress(ys, xs)
    out = []
    for kind in ("exit", "exit pooled"):
        got = []
        for base, levels, controls in runs:
            slope, rho = regress(levels, controls)
            if kind == "exit pooled":
                slope, rho = pooled, pooled_r
            mc = st.mean(controls)
            adj = [l - slope * (c - mc) for l, c in zip(levels, controls)]
            i = interval(adj, 1)
            if i:
                got.append((base + i[0], i[1], slope, mc, rho))
        if len(got) < 2:
            continue
        pairs = [(a, b) for a in range(len(got)) for b in range(len(got)) if a != b]
        # Run b's level at run a's exit level, by run a's slope.
        holds = sum(1 for a, b in pairs
                    if abs(got[b][0] - got[a][2] * (got[b][3] - got[a][3]) - got[a][0]) <= got[a][1])
        width = 200 * st.median(math.expm1(h) for _, h, _, _, _ in got)
        corr = st.median(g[4] for g in got)
        spread = 100 * math.expm1(max(g[3] for g in got) - min(g[3] for g in got))
        out.append((kind, f"{len(got):4} {width:7.2f}% {100 * holds / len(pairs):6.1f}% {corr:+6.2f}"
                          f"  (slope {st.median(g[2] for g in got):+.2f}, exit witness moved {spread:.0f}%)"))
    return out


if __name__ == "__main__":
    main()
