//! Synthesize a large store from real runs, for timing the store's reads at fleet scale:
//! `cargo run --release --example synth_store -- SOURCE.db N TARGET` copies the runs of
//! SOURCE round-robin into TARGET (a file or a postgres:// URL) N times, each copy a distinct
//! run: another start time, one of 8 hosts, one of 4 kernels, a label, and its samples and
//! statistics scaled by a small per-kernel factor (so a matrix has something to show). Used by
//! scripts/check-store-speed.sh; never part of a measurement.
// Tests and examples print to a terminal the harness owns; a failed write there is the
// harness's to report.
#![allow(clippy::disallowed_macros)]

use std::path::PathBuf;

use oscost::effects::store::{Store, classify};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, n, target] = args.as_slice() else {
        anyhow::bail!("usage: synth_store SOURCE N TARGET");
    };
    let n: usize = n.parse()?;
    let mut src = Store::open_existing(&classify(PathBuf::from(source))?)?;
    let ids: Vec<i64> = src.list()?.iter().map(|r| r.id).collect();
    anyhow::ensure!(!ids.is_empty(), "{source} holds no runs");
    let originals: Vec<_> = ids
        .iter()
        .map(|&id| src.load(id))
        .collect::<Result<_, _>>()?;
    let mut dst = Store::open(&classify(PathBuf::from(target))?)?;
    let kernels = ["6.1.0-13", "6.6.30", "6.12.9", "6.18.44"];
    let factors = [1.00, 0.98, 1.03, 1.06];
    let mut batch = Vec::new();
    for i in 0..n {
        let mut run = originals[i % originals.len()].clone();
        let k = (i / 25) % kernels.len();
        run.started_at = format!(
            "2026-{:02}-{:02}T{:02}:{:02}:00Z",
            1 + (i / 600) % 12,
            1 + (i / 24) % 28,
            i % 24,
            (i * 7) % 60
        );
        run.env.hostname = Some(format!("host{}", i % 8));
        run.env.kernel_release = Some(kernels[k].into());
        run.label = Some(format!("synthetic-{i}"));
        let f = factors[k];
        for r in &mut run.results {
            for x in &mut r.samples_ns {
                *x = (*x * f * 1000.0).round() / 1000.0;
            }
            if let Some(s) = &mut r.stats {
                for v in [
                    &mut s.min,
                    &mut s.p1,
                    &mut s.p5,
                    &mut s.p25,
                    &mut s.median,
                    &mut s.p75,
                    &mut s.p95,
                    &mut s.p99,
                    &mut s.max,
                    &mut s.mean,
                    &mut s.stddev,
                    &mut s.mad,
                ] {
                    *v *= f;
                }
                s.ci95 = [s.ci95[0] * f, s.ci95[1] * f];
            }
        }
        batch.push(run);
        if batch.len() == 25 || i + 1 == n {
            let with: Vec<_> = batch.iter().collect();
            dst.copy_in(&with, &oscost::base::stop::Stop::never())?;
            batch.clear();
            eprint!("\r{} of {n}", i + 1);
        }
    }
    eprintln!();
    Ok(())
}
