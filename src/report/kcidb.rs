//! KernelCI's KCIDB I/O JSON (`--kcidb`), schema 5.3: one checkout and one build describing
//! the kernel measured (its release and version, the digest of its build configuration where
//! it was readable), and one test per benchmark (`report::outcomes`): its median as a
//! `number` in seconds with a metric prefix (KCIDB scales it for display), the CI and the
//! change in `misc`, and its status: `DONE` for a measured result (a number, no judgement of
//! the code), `PASS` or `FAIL` for a comparison decided (`FAIL` a regression), `DONE` for one
//! undecided, `ERROR` where `--fail-above` could not be answered or a benchmark failed,
//! `SKIP` where it was not measured. KernelCI knows oscost as the origin `oscost`; ids are
//! `oscost:` and a digest of what identifies the kernel, the build or the report, so that the
//! same report submitted twice is the same objects. Checked by kcidb-io's own validator in
//! `tests/ci_results.rs`.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::Exporter;
use super::ci_formats::bytes;
use super::outcomes::{self, CiOutcome, CiStatus, Subject};
use crate::analysis::compare::Comparison;
use crate::analysis::matrix::Matrix;
use crate::base::model::Run;

/// The KCIDB schema version written.
pub const VERSION: (u32, u32) = (5, 3);

/// The origin KernelCI knows oscost's submissions by.
const ORIGIN: &str = "oscost";

/// KCIDB I/O JSON; a comparison's regression judged against `fail_above` when given.
pub struct Kcidb {
    /// `--fail-above`, percent.
    pub fail_above: Option<f64>,
}

/// `oscost:` and 16 hex digits of `text`'s SHA-256.
fn id(text: &str) -> String {
    let h = Sha256::digest(text.as_bytes());
    let hex: String = h.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{ORIGIN}:{hex}")
}

/// A benchmark id as a KCIDB test path: `oscost.` then its parts, `/` between them; any
/// character the path does not allow (`[a-zA-Z0-9_-]` in a part) becomes `_`
/// (`switch/pipe-proc@same` is `oscost.switch.pipe-proc_same`).
pub fn path(bench: &str) -> String {
    let parts: Vec<String> = bench
        .split('/')
        .map(|p| {
            let s: String = p
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if s.is_empty() { "_".into() } else { s }
        })
        .collect();
    format!("{ORIGIN}.{}", parts.join("."))
}

/// A KCIDB status for an outcome.
fn status(s: &CiStatus) -> &'static str {
    match s {
        CiStatus::Measured | CiStatus::Undecided => "DONE",
        CiStatus::Passed => "PASS",
        CiStatus::Regressed => "FAIL",
        CiStatus::Unknown | CiStatus::Failed => "ERROR",
        CiStatus::Skipped => "SKIP",
    }
}

/// A time KCIDB takes (RFC 3339 with a zone), or none.
fn time(t: &str) -> Option<String> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.to_rfc3339())
}

/// The whole document for `subject`'s outcomes.
fn document(s: &Subject, outcomes: &[CiOutcome]) -> Value {
    let kernel = format!(
        "{}\n{}",
        s.kernel_release.as_deref().unwrap_or("unknown"),
        s.kernel_version.as_deref().unwrap_or("")
    );
    let checkout_id = id(&format!("checkout\n{kernel}"));
    let build_id = id(&format!(
        "build\n{kernel}\n{}",
        s.kernel_config.as_deref().unwrap_or("")
    ));
    let mut checkout = Map::new();
    checkout.insert("id".into(), json!(checkout_id));
    checkout.insert("origin".into(), json!(ORIGIN));
    checkout.insert(
        "comment".into(),
        json!(format!(
            "the kernel oscost measured: {}",
            s.kernel_release.as_deref().unwrap_or("release unknown")
        )),
    );
    let mut misc = Map::new();
    for (k, v) in [
        ("kernel_release", &s.kernel_release),
        ("kernel_version", &s.kernel_version),
    ] {
        if let Some(v) = v {
            misc.insert(k.into(), json!(v));
        }
    }
    checkout.insert("misc".into(), Value::Object(misc));
    let mut build = Map::new();
    build.insert("id".into(), json!(build_id));
    build.insert("checkout_id".into(), json!(checkout_id));
    build.insert("origin".into(), json!(ORIGIN));
    if let Some(c) = &s.kernel_config {
        build.insert("config_name".into(), json!(format!("config-{c}")));
        build.insert("misc".into(), json!({ "kernel_config_digest": c }));
    }
    let tests: Vec<Value> = outcomes.iter().map(|o| test(s, &build_id, o)).collect();
    json!({
        "version": { "major": VERSION.0, "minor": VERSION.1 },
        "checkouts": [Value::Object(checkout)],
        "builds": [Value::Object(build)],
        "tests": tests,
    })
}

/// One benchmark as a KCIDB test.
fn test(s: &Subject, build_id: &str, o: &CiOutcome) -> Value {
    let mut t = Map::new();
    t.insert(
        "id".into(),
        json!(id(&format!("test\n{}\n{}", s.identity, o.id))),
    );
    t.insert("build_id".into(), json!(build_id));
    t.insert("origin".into(), json!(ORIGIN));
    t.insert("path".into(), json!(path(&o.id)));
    t.insert("status".into(), json!(status(&o.status)));
    t.insert("comment".into(), json!(format!("{}: {}", o.id, o.message)));
    if let Some(start) = time(&s.started_at) {
        t.insert("start_time".into(), json!(start));
    }
    if let Some(m) = o.median_ns.filter(|m| m.is_finite()) {
        t.insert(
            "number".into(),
            json!({ "value": m * 1e-9, "unit": "s", "prefix": "metric" }),
        );
    }
    let mut env = Map::new();
    env.insert(
        "comment".into(),
        json!(format!(
            "{} on {}{}",
            s.what,
            s.host.as_deref().unwrap_or("an unnamed host"),
            s.label
                .as_deref()
                .map(|l| format!(", label {l}"))
                .unwrap_or_default()
        )),
    );
    t.insert("environment".into(), Value::Object(env));
    let mut misc = Map::new();
    misc.insert("benchmark".into(), json!(o.id));
    if let Some(ci) = o.ci95_ns {
        misc.insert("ci95_ns".into(), json!(ci));
    }
    if let Some(n) = o.samples {
        misc.insert("samples".into(), json!(n));
    }
    misc.insert("disturbed".into(), json!(o.disturbed));
    if let Some(c) = &o.change {
        misc.insert("base_median_ns".into(), json!(c.base_ns));
        misc.insert("slowdown".into(), json!(c.slowdown));
        misc.insert("slowdown_ci95".into(), json!(c.slowdown_ci95));
        misc.insert("addition_ns".into(), json!(c.addition_ns));
    }
    t.insert("misc".into(), Value::Object(misc));
    Value::Object(t)
}

impl Exporter<Run> for Kcidb {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        bytes(&document(&Subject::of_run(run), &outcomes::of_run(run)))
    }
}

impl Exporter<Comparison> for Kcidb {
    fn serialize(&self, c: &Comparison) -> anyhow::Result<Vec<u8>> {
        let o = outcomes::of_comparison(c, self.fail_above);
        bytes(&document(&Subject::of_comparison(c), &o))
    }
}

impl Exporter<Matrix> for Kcidb {
    fn serialize(&self, m: &Matrix) -> anyhow::Result<Vec<u8>> {
        bytes(&document(&Subject::of_matrix(m), &outcomes::of_matrix(m)))
    }
}
