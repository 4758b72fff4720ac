//! A run as the store keeps it, and back: its JSON without raw samples, deflated (`run_z`),
//! each result's samples in `sample_codec`'s compact form, the summary rows `history` and
//! `matrix` read, the run's identity (`digest`, so a copy is kept once) and the key of its
//! environment (`env_key`, so run-to-run spread is learned within one environment). Every
//! backend stores these rows; none encodes a run itself.

use sha2::Digest as _;

use super::StoreError;
use crate::base::model::{self, ResultRow, Run};

/// A run as rows, ready for any backend.
pub(crate) struct Encoded {
    pub started_at: String,
    pub label: Option<String>,
    pub host: Option<String>,
    pub kernel: Option<String>,
    pub wrapper: Option<String>,
    pub run_z: Vec<u8>,
    /// (result index, `sample_codec` blob), results with samples only.
    pub samples: Vec<(i64, Vec<u8>)>,
    pub results: Vec<ResultRow>,
    pub digest: String,
    pub env_key: String,
}

/// A stored run as its backend gives it back.
pub(crate) enum Fetched {
    Compact {
        run_z: Vec<u8>,
        samples: Vec<(i64, Vec<u8>)>,
    },
    /// Schema 1: the whole run as JSON text.
    Json(String),
}

/// The run's JSON without raw samples: what `run_z` keeps deflated and the digest hashes.
fn bare_json(run: &Run) -> Result<Vec<u8>, serde_json::Error> {
    let mut bare = run.clone();
    for r in &mut bare.results {
        r.samples_ns = Vec::new();
    }
    serde_json::to_vec(&bare)
}

/// Length-prefixed text into a hash (`None` is a zero length, text its length + 1), so that no
/// two sequences of fields hash alike.
fn hash_text(h: &mut sha2::Sha256, s: Option<&str>) {
    match s {
        Some(s) => {
            h.update((s.len() as u64 + 1).to_le_bytes());
            h.update(s.as_bytes());
        }
        None => h.update(0u64.to_le_bytes()),
    }
}

/// A run's identity: SHA-256 over what makes one measurement that measurement and nothing
/// else: when it started, its label, host, kernel and wrapper, its environment (`env_key`),
/// its clock (source, cost and step in whole picoseconds), and each result's id, status, the
/// reason of a failed or skipped one, and samples as whole picoseconds (the unit the store
/// keeps them in). Two copies of one run agree however they travelled: a JSON round trip may
/// bring a float back one ULP away, a newer oscost may add fields to the model or recompute
/// statistics, and none of that changes the identity. Two runs never agree: their samples
/// differ, and runs without samples (every result failed or skipped, started in the same
/// second) differ by their environment, clock or reasons.
pub fn digest(run: &Run) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"oscost run identity 3\0");
    hash_text(&mut h, Some(&run.started_at));
    hash_text(&mut h, run.label.as_deref());
    hash_text(&mut h, run.env.hostname.as_deref());
    hash_text(&mut h, run.env.kernel_release.as_deref());
    hash_text(&mut h, run.wrapper.as_deref());
    hash_text(&mut h, Some(&env_key(run)));
    hash_text(&mut h, Some(&format!("{:?}", run.clock.source)));
    h.update(picoseconds(run.clock.cost_ns).to_le_bytes());
    h.update(picoseconds(run.clock.resolution_ns).to_le_bytes());
    h.update((run.results.len() as u64).to_le_bytes());
    for r in &run.results {
        hash_text(&mut h, Some(&r.id));
        hash_text(&mut h, Some(r.status.word()));
        hash_text(&mut h, r.status.reason());
        h.update((r.samples_ns.len() as u64).to_le_bytes());
        for x in &r.samples_ns {
            h.update(picoseconds(*x).to_le_bytes());
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a run's environment is beyond its host, kernel and wrapper (schema 5's `env_key`): the
/// CPU model, the mitigations, transparent huge pages, the kernel's boot parameters and
/// oscost's own version and build (its measuring code), and the kernel settings the run was
/// measured under (`--set`; nothing for a plain run), the program that ran during it
/// (`--during`; nothing for a plain run), and what confined its workers
/// (`analysis::confinement::signature`: seccomp filters, a CPU quota, a lowered priority,
/// namespaces, an LSM label; nothing for an unconfined run), hashed to 16 hex digits. Runs that
/// share it, and their host, kernel and wrapper, are one environment: their scatter is the
/// run-to-run spread a comparison of runs measured apart learns.
pub fn env_key(run: &Run) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"oscost environment 1\0");
    let e = &run.env;
    // The machine's keyed facts in the table's order (CPU model, vulnerabilities, THP's two
    // lines, the boot command line), then the oscost that measured: the same bytes as before
    // the table existed, so stored keys still pool with new ones.
    let fields: Vec<Option<String>> = crate::analysis::facts::facts(e)
        .into_iter()
        .filter_map(|f| f.keyed)
        .chain(std::iter::once(Some(format!(
            "{} {}",
            run.tool.version, e.build_profile
        ))))
        .collect();
    // A run measured under `--set` is an environment of its own; a plain run's key is what it
    // was before settings existed.
    let set = (!run.settings.is_empty()).then(|| run.settings.join("\n"));
    for f in &fields {
        hash_text(&mut h, f.as_deref());
    }
    if let Some(s) = &set {
        hash_text(&mut h, Some(s));
    }
    // Likewise a run measured while a program ran during it (`--during`): what that program
    // attaches taxes every number of the run.
    // And a run on a system with something attached to it (a tracer's BPF programs, trace
    // events, kprobes): keyed only where something is, so that history stays pooled for the
    // runs of a bare system and of one before this was recorded.
    if let Some(a) = run.env.attached.as_ref().filter(|a| !a.is_empty()) {
        hash_text(&mut h, Some("attached"));
        hash_text(&mut h, Some(&a.join("\n")));
    }
    if let Some(d) = &run.during {
        hash_text(&mut h, Some("during"));
        hash_text(&mut h, Some(d));
    }
    // Likewise a run whose workers something confined (a seccomp filter, a CPU quota...).
    let confined = e
        .confinement
        .as_ref()
        .and_then(crate::analysis::confinement::signature);
    if let Some(c) = &confined {
        hash_text(&mut h, Some("confinement"));
        hash_text(&mut h, Some(c));
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A sample as whole picoseconds (saturating; NaN as 0): what a round trip cannot move.
fn picoseconds(ns: f64) -> i64 {
    (ns * 1000.0).round() as i64
}

/// A run as rows (see the module doc).
pub(crate) fn encode(run: &Run) -> Result<Encoded, StoreError> {
    let bad = |e: String| StoreError::BadRun { id: 0, why: e };
    let json = bare_json(run).map_err(|e| bad(e.to_string()))?;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &json).map_err(|e| bad(e.to_string()))?;
    let run_z = z.finish().map_err(|e| bad(e.to_string()))?;
    let samples = run
        .results
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.samples_ns.is_empty())
        .map(|(i, r)| (i as i64, crate::base::sample_codec::encode(&r.samples_ns)))
        .collect();
    let results = run
        .results
        .iter()
        .map(|r| {
            let st = r.stats.as_ref();
            ResultRow {
                bench: r.id.clone(),
                status: r.status.word().to_string(),
                median: st.map(|s| s.median),
                ci_lo: st.map(|s| s.ci95[0]),
                ci_hi: st.map(|s| s.ci95[1]),
                samples: r.samples_ns.len() as i64,
                disturbed: r.disturbed.is_disturbed(),
                exit_witness_ns: crate::analysis::witness::result_exit_witness(r),
                speed_witness_ns: crate::analysis::witness::result_speed_witness(r),
            }
        })
        .collect();
    Ok(Encoded {
        started_at: run.started_at.clone(),
        label: run.label.clone(),
        host: run.env.hostname.clone(),
        kernel: run.env.kernel_release.clone(),
        wrapper: run.wrapper.clone(),
        run_z,
        samples,
        results,
        digest: digest(run),
        env_key: env_key(run),
    })
}

/// A run from its stored form; validated when `whole` (a bare run, fetched without its
/// samples, has statistics without samples and is not checked).
pub(crate) fn decode(id: i64, fetched: Fetched, whole: bool) -> Result<Run, StoreError> {
    let bad = |why: String| StoreError::BadRun { id, why };
    let name = format!("stored run {id}");
    let (run_z, samples) = match fetched {
        Fetched::Json(json) => {
            return model::load::run_from_json(&json, &name).map_err(|e| bad(e.to_string()));
        }
        Fetched::Compact { run_z, samples } => (run_z, samples),
    };
    let mut json = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::DeflateDecoder::new(&run_z[..]),
        &mut json,
    )
    .map_err(|e| bad(e.to_string()))?;
    let mut run = model::load::parse_run(&json, &name).map_err(|e| bad(e.to_string()))?;
    for (idx, data) in samples {
        let r = run
            .results
            .get_mut(idx as usize)
            .ok_or_else(|| bad(format!("samples for result {idx}, which it lacks")))?;
        r.samples_ns = crate::base::sample_codec::decode(&data).map_err(bad)?;
    }
    if !whole {
        return Ok(run);
    }
    model::load::checked(run, &name).map_err(|e| bad(e.to_string()))
}
