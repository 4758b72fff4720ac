//! docs/ci.md's recipe, run: every command between its markers, in a temporary directory with a
//! temporary store, and the CI files they write checked against the formats' published shapes
//! (Bencher Metric Format: an object of benchmarks, each an object of measures, each with a
//! numeric `value` and optional numeric `lower_value`/`upper_value`; github-action-benchmark's
//! custom format: a list of objects with string `name` and `unit`, numeric `value`, optional
//! string `range` and `extra`).

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

fn recipe() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ci.md")).unwrap();
    let start = doc
        .find("<!-- recipe -->")
        .expect("the recipe's start marker");
    let end = doc
        .find("<!-- /recipe -->")
        .expect("the recipe's end marker");
    doc[start..end]
        .lines()
        .filter(|l| l.starts_with("oscost "))
        .map(str::to_string)
        .collect()
}

/// Bencher Metric Format: { benchmark: { measure: { value, lower_value?, upper_value? } } }.
fn check_bmf(v: &Value) -> Result<usize, String> {
    let benchmarks = v.as_object().ok_or("BMF is an object")?;
    for (name, measures) in benchmarks {
        let measures = measures
            .as_object()
            .ok_or(format!("{name}: an object of measures"))?;
        if measures.is_empty() {
            return Err(format!("{name}: no measure"));
        }
        for (m, metric) in measures {
            let metric = metric.as_object().ok_or(format!("{name}/{m}: an object"))?;
            if !metric.get("value").is_some_and(Value::is_number) {
                return Err(format!("{name}/{m}: value is required and a number"));
            }
            for (k, x) in metric {
                let known = ["value", "lower_value", "upper_value"].contains(&k.as_str());
                if !known || !x.is_number() {
                    return Err(format!("{name}/{m}: {k} is not a numeric field of BMF"));
                }
            }
            if let (Some(lo), Some(v), Some(hi)) = (
                metric.get("lower_value").and_then(Value::as_f64),
                metric["value"].as_f64(),
                metric.get("upper_value").and_then(Value::as_f64),
            ) && !(lo <= v && v <= hi)
            {
                return Err(format!("{name}/{m}: bounds {lo}..{hi} do not hold {v}"));
            }
        }
    }
    Ok(benchmarks.len())
}

/// github-action-benchmark's custom format: [{ name, unit, value, range?, extra? }].
fn check_github_benchmark(v: &Value) -> Result<usize, String> {
    let list = v.as_array().ok_or("a list")?;
    for e in list {
        let e = e.as_object().ok_or("each entry an object")?;
        for k in ["name", "unit"] {
            if !e.get(k).is_some_and(Value::is_string) {
                return Err(format!("{k} is required and a string: {e:?}"));
            }
        }
        if !e.get("value").is_some_and(Value::is_number) {
            return Err(format!("value is required and a number: {e:?}"));
        }
        for k in ["range", "extra"] {
            if e.get(k).is_some_and(|x| !x.is_string()) {
                return Err(format!("{k} is a string when given: {e:?}"));
            }
        }
    }
    Ok(list.len())
}

fn read(dir: &std::path::Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_ci_recipe_runs_on_a_temporary_store_and_writes_the_published_shapes() {
    let _m = measuring();
    let lines = recipe();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin = bin();
    for (i, line) in lines.iter().enumerate() {
        // The recipe compares the last two runs, which needs the run-to-run spread of their
        // environment: three stored runs at least, as a first job's `--runs 3` would leave.
        let times = if i == 0 { 3 } else { 1 };
        for _ in 0..times {
            let cmd = format!("\"{}\" {}", bin.display(), &line["oscost ".len()..]);
            let out = Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .current_dir(dir.path())
                .env("OSCOST_DB", dir.path().join("results.db"))
                .env("CI_COMMIT", "0123abc")
                .env("NO_COLOR", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{line}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // Two results: syscall/getppid and switch/pipe-proc@same.
    let n = check_bmf(&read(dir.path(), "bmf.json")).unwrap();
    assert_eq!(n, 2);
    let bmf = read(dir.path(), "bmf.json");
    assert!(bmf["syscall/getppid"]["latency"]["lower_value"].is_number());
    assert_eq!(
        check_github_benchmark(&read(dir.path(), "github-benchmark.json")),
        Ok(2)
    );
    let cmp = read(dir.path(), "comparison-bmf.json");
    assert_eq!(check_bmf(&cmp), Ok(2));
    assert!(cmp["syscall/getppid"]["slowdown"]["value"].is_number());
    assert_eq!(
        check_github_benchmark(&read(dir.path(), "matrix-github-benchmark.json")),
        Ok(2)
    );
    assert!(dir.path().join("comparison.md").exists());
}

#[test]
fn the_shape_checks_refuse_what_the_formats_do_not_allow() {
    let bad = [
        serde_json::json!([]),
        serde_json::json!({"a": {"latency": {"lower_value": 1.0}}}),
        serde_json::json!({"a": {"latency": {"value": "1"}}}),
        serde_json::json!({"a": {"latency": {"value": 1.0, "lower_value": 0.2, "upper_value": 0.5}}}),
    ];
    for b in &bad {
        assert!(check_bmf(b).is_err(), "{b}");
    }
    assert!(check_github_benchmark(&serde_json::json!([{"name": "a", "value": 1}])).is_err());
    assert!(
        check_github_benchmark(
            &serde_json::json!([{"name": "a", "unit": "ns", "value": 1, "range": 2}])
        )
        .is_err()
    );
}
