//! The JSON shapes continuous-benchmarking services read, so a CI job needs no converter:
//! Bencher Metric Format (`--bmf`: `{"NAME": {"latency": {"value", "lower_value",
//! "upper_value"}}}`, nanoseconds) and github-action-benchmark's `customSmallerIsBetter`
//! (`--github-benchmark`: `[{"name", "unit", "value", "range", "extra"}]`). A run gives each
//! measured result's median with its 95% CI as the bounds; a comparison gives the candidate's
//! median and its slowdown against the base with the slowdown's CI, and a matrix its last
//! column's against the base column (the newest run, when the columns are in time order).
//! Results without a median (skipped, failed) are left out: both formats take numbers only.

use serde_json::{Map, Value, json};

use super::Exporter;
use crate::analysis::compare::Comparison;
use crate::analysis::matrix::Matrix;
use crate::base::model::Run;

/// Bencher Metric Format.
pub struct Bmf;

/// github-action-benchmark's `customSmallerIsBetter` list.
pub struct GithubBenchmark;

/// A BMF measure: the value, with bounds where both are finite.
fn measure(value: f64, ci: [f64; 2]) -> Value {
    let mut m = Map::new();
    m.insert("value".into(), json!(value));
    if ci.iter().all(|b| b.is_finite()) {
        m.insert("lower_value".into(), json!(ci[0]));
        m.insert("upper_value".into(), json!(ci[1]));
    }
    Value::Object(m)
}

/// The measured results of a run: (id, median, CI, samples, repetitions).
fn measured(run: &Run) -> impl Iterator<Item = (&str, f64, [f64; 2], usize, usize)> {
    run.results.iter().filter_map(|r| {
        let s = r.stats.as_ref()?;
        s.median.is_finite().then_some((
            r.id.as_str(),
            s.median,
            s.ci95,
            s.count,
            r.repetitions.len(),
        ))
    })
}

/// A JSON document as written: pretty, with a final newline.
pub(super) fn bytes(v: &Value) -> anyhow::Result<Vec<u8>> {
    let mut out = serde_json::to_vec_pretty(v)?;
    out.push(b'\n');
    Ok(out)
}

impl Exporter<Run> for Bmf {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        let mut top = Map::new();
        for (id, median, ci, _, _) in measured(run) {
            top.insert(id.to_string(), json!({ "latency": measure(median, ci) }));
        }
        bytes(&Value::Object(top))
    }
}

impl Exporter<Comparison> for Bmf {
    fn serialize(&self, c: &Comparison) -> anyhow::Result<Vec<u8>> {
        let mut top = Map::new();
        for r in c.rows.iter().filter(|r| r.cand_median_ns.is_finite()) {
            top.insert(
                r.id.clone(),
                json!({
                    "latency": measure(r.cand_median_ns, [f64::NAN; 2]),
                    "slowdown": measure(r.slowdown, r.slowdown_ci95),
                }),
            );
        }
        bytes(&Value::Object(top))
    }
}

/// One benchmark of a matrix's last column: id, median, slowdown, its CI, the verdict's word.
type LastCell<'a> = (&'a str, f64, Option<f64>, [f64; 2], &'static str);

/// A matrix's last column against its base.
fn last_column(m: &Matrix) -> Vec<LastCell<'_>> {
    let last = m.columns.len().saturating_sub(1);
    m.rows
        .iter()
        .filter_map(|r| {
            let c = r.cells.get(last)?;
            let median = c.median_ns.filter(|v| v.is_finite())?;
            Some((
                r.bench.as_str(),
                median,
                c.slowdown,
                c.slowdown_ci95.unwrap_or([f64::NAN; 2]),
                c.verdict.map_or("not judged", |v| v.word()),
            ))
        })
        .collect()
}

impl Exporter<Matrix> for Bmf {
    fn serialize(&self, m: &Matrix) -> anyhow::Result<Vec<u8>> {
        let mut top = Map::new();
        for (id, median, slowdown, ci, _) in last_column(m) {
            let mut e = Map::new();
            e.insert("latency".into(), measure(median, [f64::NAN; 2]));
            if let Some(s) = slowdown {
                e.insert("slowdown".into(), measure(s, ci));
            }
            top.insert(id.to_string(), Value::Object(e));
        }
        bytes(&Value::Object(top))
    }
}

impl Exporter<Matrix> for GithubBenchmark {
    fn serialize(&self, m: &Matrix) -> anyhow::Result<Vec<u8>> {
        let list: Vec<Value> = last_column(m)
            .into_iter()
            .map(|(id, median, slowdown, ci, verdict)| {
                let extra = match slowdown {
                    Some(s) => format!(
                        "x{s:.3} [{:.3}-{:.3}] against the base column: {verdict}",
                        ci[0], ci[1]
                    ),
                    None => "the base column".to_string(),
                };
                json!({ "name": id, "unit": "ns", "value": median, "extra": extra })
            })
            .collect();
        bytes(&Value::Array(list))
    }
}

/// The CI around a value as github-action-benchmark's free-text range: "± x" where the two
/// distances to the bounds are within a tenth of each other, else both, "-x +y". A cost's CI is
/// asymmetric where its repetitions are (on the log scale), and "± the larger distance" then
/// implied a lower bound below zero that the CI does not have.
fn range(value: f64, ci: [f64; 2]) -> Option<String> {
    if !ci.iter().all(|b| b.is_finite()) {
        return None;
    }
    let (down, up) = (value - ci[0], ci[1] - value);
    Some(if (up - down).abs() <= 0.1 * up.max(down) {
        format!("± {:.3}", down.max(up))
    } else {
        format!("-{down:.3} +{up:.3}")
    })
}

impl Exporter<Run> for GithubBenchmark {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        let list: Vec<Value> = measured(run)
            .map(|(id, median, ci, samples, reps)| {
                let mut e = Map::new();
                e.insert("name".into(), json!(id));
                e.insert("unit".into(), json!("ns"));
                e.insert("value".into(), json!(median));
                if let Some(r) = range(median, ci) {
                    e.insert("range".into(), json!(r));
                }
                e.insert(
                    "extra".into(),
                    json!(format!(
                        "95% CI of the median {:.3}-{:.3} ns; {samples} samples in {reps} repetitions",
                        ci[0], ci[1]
                    )),
                );
                Value::Object(e)
            })
            .collect();
        bytes(&Value::Array(list))
    }
}

impl Exporter<Comparison> for GithubBenchmark {
    fn serialize(&self, c: &Comparison) -> anyhow::Result<Vec<u8>> {
        let list: Vec<Value> = c
            .rows
            .iter()
            .filter(|r| r.cand_median_ns.is_finite())
            .map(|r| {
                json!({
                    "name": r.id,
                    "unit": "ns",
                    "value": r.cand_median_ns,
                    "extra": format!(
                        "x{:.3} [{:.3}-{:.3}] against {} ({:.3} ns): {}",
                        r.slowdown,
                        r.slowdown_ci95[0],
                        r.slowdown_ci95[1],
                        c.base.name,
                        r.base_median_ns,
                        r.verdict.word()
                    ),
                })
            })
            .collect();
        bytes(&Value::Array(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmf_of_a_run_has_latency_with_the_ci_as_bounds_and_leaves_out_unmeasured() {
        let run = crate::base::model::testdata::run();
        let v: Value = serde_json::from_slice(&Bmf.serialize(&run).unwrap()).unwrap();
        let top = v.as_object().unwrap();
        assert!(!top.contains_key("timer/rdtscp"), "skipped: no number");
        let f0 = &top["call/f0"]["latency"];
        let s = run.results[0].stats.as_ref().unwrap();
        assert_eq!(f0["value"], json!(s.median));
        assert_eq!(f0["lower_value"], json!(s.ci95[0]));
        assert_eq!(f0["upper_value"], json!(s.ci95[1]));
        // Every measure of the format is an object of numbers.
        for (_, m) in top {
            for (_, x) in m.as_object().unwrap() {
                assert!(x["value"].is_number());
            }
        }
    }

    #[test]
    fn github_benchmark_of_a_run_is_a_list_of_name_unit_value_range_extra() {
        let run = crate::base::model::testdata::run();
        let v: Value = serde_json::from_slice(&GithubBenchmark.serialize(&run).unwrap()).unwrap();
        let list = v.as_array().unwrap();
        assert_eq!(list.len(), 3);
        for e in list {
            assert!(e["name"].is_string() && e["unit"] == "ns" && e["value"].is_number());
            assert!(e["extra"].as_str().unwrap().contains("repetitions"));
        }
        assert_eq!(list[0]["name"], "call/f0");
    }

    #[test]
    fn an_asymmetric_ci_is_given_as_both_distances_never_a_symmetric_range_past_zero() {
        assert_eq!(super::range(100.0, [95.0, 105.5]).unwrap(), "± 5.500");
        // 344.6 ns with its upper bound far above: no "± 688" implying a bound below zero.
        assert_eq!(
            super::range(344.6, [330.0, 1033.8]).unwrap(),
            "-14.600 +689.200"
        );
        assert!(super::range(1.0, [f64::NAN, 2.0]).is_none());
    }
}
