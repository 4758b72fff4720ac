//! Replay kept runs through today's CI: `cargo run --release --example replay_ci -- IN OUT`
//! reads every `run*.json` that `KEEP=IN scripts/check-ci.sh` kept, recomputes each result's
//! `stats.ci95` from its repetitions' samples with the current `analysis::repetition_ci`, and
//! writes the runs (and the witness) to OUT, so that `REPORT_ONLY=1 KEEP=OUT
//! scripts/check-ci.sh` judges a change to the CI method on batches already measured: the
//! same samples, only the interval differs. How the robust spread of the t interval was chosen
//! (docs/design-notes.md); never part of a measurement.
// Tests and examples print to a terminal the harness owns; a failed write there is the
// harness's to report.
#![allow(clippy::disallowed_macros)]

use std::path::Path;

use oscost::analysis::{FINAL_JUDGING, repetition_ci};
use serde_json::Value;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        anyhow::bail!(
            "usage: replay_ci IN_DIR OUT_DIR (IN_DIR as kept by KEEP=IN_DIR scripts/check-ci.sh)"
        );
    };
    let (input, output) = (Path::new(input), Path::new(output));
    std::fs::create_dir_all(output)?;
    let mut replayed = 0;
    for entry in std::fs::read_dir(input)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if name == "witness" {
            std::fs::copy(&path, output.join(&name))?;
            continue;
        }
        if !(name.starts_with("run") && name.ends_with(".json")) {
            continue;
        }
        let mut run: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        for r in run["results"].as_array_mut().into_iter().flatten() {
            replay(r);
        }
        std::fs::write(output.join(&name), serde_json::to_vec(&run)?)?;
        replayed += 1;
    }
    eprintln!("{replayed} runs replayed into {}", output.display());
    Ok(())
}

/// Recompute one result's CI in place; a result without repetitions or statistics is left.
fn replay(r: &mut Value) {
    let samples: Vec<f64> = r["samples_ns"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let (Some(point), Some(reps)) = (r["stats"]["median"].as_f64(), r["repetitions"].as_array())
    else {
        return;
    };
    let spans: Vec<&[f64]> = reps
        .iter()
        .filter_map(|x| {
            let start = x["start"].as_u64()? as usize;
            samples.get(start..start + x["samples"].as_u64()? as usize)
        })
        .collect();
    let batch = r["batch"]["size"].as_u64().unwrap_or(1);
    let ci = repetition_ci(&spans, batch, point, FINAL_JUDGING);
    r["stats"]["ci95"] = serde_json::json!(ci.map_or([f64::NAN; 2], |c| c));
}
