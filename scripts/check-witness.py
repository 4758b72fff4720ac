#!/usr/bin/env python3
"""Judge the speed witness on kept runs (replay): does the fixed user-space loop every worker
times explain how benchmark levels move, within a run and between runs measured apart?

    scripts/check-witness.py RUN.json...      (oscost export ID --json FILE; plain runs of
                                               one environment; runs with other labels are
                                               used only to show the witness did not move)

Within a run: for each result with at least 6 repetitions, the correlation across its
repetitions of log(repetition median) with log(repetition witness); a witness that tracks the
machine's speed makes these positive.

Between runs: for each benchmark, the spread (sd of log-medians, in %) of the plain runs'
medians as measured, and after dividing each by its run's witness relative to the runs'
geometric mean. The witness is worth dividing by only if that shrinks the spread for most
benchmarks without moving a real change (the other-label runs' witness must sit inside the
plain runs' range).
"""
import json
import math
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def corr(xs, ys):
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def ok(result):
    status = result.get("status")
    return (status.get("state") if isinstance(status, dict) else status) == "ok"


def run_witness(run):
    seen, values = set(), []
    for r in run["results"]:
        for rep in r.get("repetitions", []):
            w = rep.get("witness_ns")
            if w is None:
                continue
            key = (rep["started_ms"], w)
            if key not in seen:
                seen.add(key)
                values.append(w)
    return statistics.median(values) if values else None


def main(paths):
    runs = [load(p) for p in paths]
    plain = [r for r in runs if (r.get("label") or "") in ("plain", "")]
    other = [r for r in runs if r not in plain]
    if len(plain) < 3:
        print("need at least 3 plain runs", file=sys.stderr)
        return 2

    # Within runs.
    within = []
    for run in plain:
        for r in run["results"]:
            reps = [x for x in r.get("repetitions", []) if x.get("witness_ns")]
            if len(reps) < 6 or not ok(r):
                continue
            c = corr([math.log(x["witness_ns"]) for x in reps],
                     [math.log(x["median_ns"]) for x in reps if x["median_ns"] > 0])
            if c is not None:
                within.append((r["id"], c))
    if within:
        cs = [c for _, c in within]
        pos = sum(1 for c in cs if c > 0.3)
        print(f"within runs: {len(cs)} results; correlation of a repetition's level with its "
              f"witness: median {statistics.median(cs):+.2f}, {pos} above +0.3")

    # Between runs.
    ws = [run_witness(r) for r in plain]
    if any(w is None for w in ws):
        print("a plain run has no witness (made before witnesses were kept)", file=sys.stderr)
        return 2
    g = math.exp(statistics.fmean(math.log(w) for w in ws))
    print("plain runs' witnesses: " + ", ".join(f"{w:.0f}" for w in ws)
          + f" ns a loop (spread {100 * statistics.stdev(math.log(w) for w in ws):.2f}%)")
    for run in other:
        w = run_witness(run)
        if w is not None:
            inside = min(ws) <= w <= max(ws)
            print(f"{run.get('label')} run's witness: {w:.0f} ns "
                  f"({'inside' if inside else 'outside'} the plain runs' range)")
    benches = [r["id"] for r in plain[0]["results"] if ok(r)]
    shrunk, total = 0, 0
    print(f"{'benchmark':28} {'as measured':>12} {'/ witness':>10} {'corr':>6}")
    for b in benches:
        meds = []
        for run, w in zip(plain, ws):
            m = next((r["stats"]["median"] for r in run["results"]
                      if r["id"] == b and r.get("stats")), None)
            if m and m > 0:
                meds.append((math.log(m), math.log(w / g)))
        if len(meds) < 3:
            continue
        raw = [m for m, _ in meds]
        adj = [m - d for m, d in meds]
        s_raw = 100 * statistics.stdev(raw)
        s_adj = 100 * statistics.stdev(adj)
        c = corr([d for _, d in meds], raw)
        total += 1
        shrunk += s_adj < 0.9 * s_raw
        print(f"{b:28} {s_raw:11.2f}% {s_adj:9.2f}% {c if c is not None else float('nan'):+6.2f}")
    print(f"dividing by the witness shrank the run-to-run spread by a tenth or more in {shrunk} "
          f"of {total} benchmarks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
