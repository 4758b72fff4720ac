//! A run from JSON text, as the store and run files give it: its schema version read first
//! (a file of another version gets that message, not a field error), older versions upgraded
//! (`upgrade`), then checked against what measurements can give (`validate`) before anything
//! is computed from it. `LoadError` says why a run could not be had.

use serde::Deserialize;

use super::{Note, NoteKind, Run, SCHEMA_VERSION, Status, V1_NOTE, note};

/// A run's version, read before anything else of it (every other field skipped).
#[derive(Deserialize)]
struct Version {
    schema_version: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
/// Why a run file could not be read.
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    /// The file could not be read.
    Io {
        /// The file.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    #[error(
        "{path} is not an oscost run file ({source}); pass a JSON written by `oscost run --json`"
    )]
    /// The file is not JSON of a run.
    Parse {
        /// The file.
        path: String,
        /// Where and why parsing failed.
        source: serde_json::Error,
    },
    #[error(
        "{path} has schema_version {found}, this oscost reads versions 1 to {SCHEMA_VERSION}; re-export it with a matching oscost"
    )]
    /// The file is of a format version this oscost does not read.
    Version {
        /// The file.
        path: String,
        /// Its `schema_version`.
        found: u64,
    },
    #[error(
        "{path} holds {samples} samples, which need about {mib} MiB of memory this process cannot have (ulimit -v, a cgroup's limit, or the machine's); raise the limit, or import it where there is room"
    )]
    /// The run is larger than the memory this process may take.
    TooLarge {
        /// The file (or files).
        path: String,
        /// How many samples it holds.
        samples: u64,
        /// The memory it needs, MiB.
        mib: u64,
    },
    #[error("{path} holds values no measurement gives ({why}); was it edited by hand?")]
    /// The file holds values no measurement gives.
    Invalid {
        /// The file.
        path: String,
        /// Which values, in words.
        why: String,
    },
}

/// Longest time one operation may be said to take: 1000 s. Anything beyond is not a
/// measurement (a file with 1e308 in it), and would overflow the statistics built on it.
const MAX_NS: f64 = 1e12;

/// What a run read from a file or the store must satisfy before anything is computed from it:
/// samples finite, normal (or zero) and below `MAX_NS`; statistics only with samples; a
/// result called ok has some sample above zero (all zero or negative gives ratios and
/// "faster" verdicts that mean nothing).
pub fn validate(run: &Run) -> Result<(), String> {
    if chrono::DateTime::parse_from_rfc3339(&run.started_at).is_err() {
        return Err(format!(
            "started_at {:?} is not a time (oscost writes 2026-11-24T00:00:00Z)",
            run.started_at.chars().take(40).collect::<String>()
        ));
    }
    // A NUL in any text (a label, a host name) is refused by PostgreSQL on every later push,
    // and no measurement writes one.
    if serde_json::to_string(run).is_ok_and(|j| j.contains("\\u0000")) {
        return Err("a text field holds a NUL character".into());
    }
    for r in &run.results {
        let id = &r.id;
        if !id.contains('/')
            || id.len() > 200
            || id.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(format!(
                "{:?} is not a benchmark id (family/name)",
                id.chars().take(60).collect::<String>()
            ));
        }
        if let Some(x) = r
            .samples_ns
            .iter()
            .find(|x| !x.is_finite() || x.is_subnormal() || x.abs() > MAX_NS)
        {
            return Err(format!("{id}: a sample of {x:.3e} ns"));
        }
        let Some(st) = &r.stats else { continue };
        if r.samples_ns.is_empty() {
            return Err(format!("{id}: statistics but no samples"));
        }
        let values = [st.min, st.median, st.max, st.mean, st.p5, st.p95];
        if values.iter().any(|v| !v.is_finite() || v.abs() > MAX_NS) {
            return Err(format!("{id}: statistics that are not finite"));
        }
        // A cost below the loop's jitter can give a median at or below zero, but a real
        // measurement always has some positive samples.
        if matches!(r.status, Status::Ok) && r.samples_ns.iter().all(|x| *x <= 0.0) {
            return Err(format!("{id}: no sample above zero"));
        }
        if st.ci95.iter().any(|v| v.is_infinite() || v.abs() > MAX_NS) {
            return Err(format!("{id}: a confidence interval out of range"));
        }
    }
    Ok(())
}

/// Whether this oscost reads a file of `version`.
pub fn supported(version: Option<u64>, path: &str) -> Result<(), LoadError> {
    match version {
        Some(v) if (1..=SCHEMA_VERSION as u64).contains(&v) => Ok(()),
        Some(found) => Err(LoadError::Version {
            path: path.into(),
            found,
        }),
        None => Err(LoadError::Parse {
            path: path.into(),
            source: serde::de::Error::custom("missing schema_version"),
        }),
    }
}

/// Parse a run from JSON text, checking the schema version before anything else so a file of
/// another version gets that message, not a confusing field error. Not yet validated: the
/// store fills in the raw samples it keeps apart first.
pub fn parse_run(text: &str, path: &str) -> Result<Run, LoadError> {
    let parse = |source| LoadError::Parse {
        path: path.into(),
        source,
    };
    // The version first, with nothing else kept; then the run straight into its types (a
    // `serde_json::Value` of a large run takes several times the text).
    let version: Version = serde_json::from_str(text).map_err(parse)?;
    supported(version.schema_version, path)?;
    let run: Run = serde_json::from_str(text).map_err(parse)?;
    Ok(upgrade(run, version.schema_version))
}

/// A run of an older schema version as this one reads it: version 1 gains its note, and the
/// bare-word notes of versions 1 and 2 their kinds (`note::classify_legacy`).
pub fn upgrade(mut run: Run, version: Option<u64>) -> Run {
    let Some(v) = version.filter(|&v| v < SCHEMA_VERSION as u64) else {
        return run;
    };
    if v == 1 && !run.notes.iter().any(|n| n.text == V1_NOTE) {
        run.notes.push(Note::new(NoteKind::OlderFormat, V1_NOTE));
    }
    for n in &mut run.notes {
        note::classify_legacy(n, 0);
    }
    for r in &mut run.results {
        let departed = r
            .repetitions
            .iter()
            .filter(|x| x.departs_pct.is_some())
            .count();
        for n in &mut r.notes {
            note::classify_legacy(n, departed);
        }
    }
    run
}

/// Load a run from JSON text: parsed (`parse_run`), then checked (`validate`).
pub fn run_from_json(text: &str, path: &str) -> Result<Run, LoadError> {
    checked(parse_run(text, path)?, path)
}

/// A parsed run, once checked against what measurements can give.
pub fn checked(run: Run, path: &str) -> Result<Run, LoadError> {
    validate(&run).map_err(|why| LoadError::Invalid {
        path: path.into(),
        why,
    })?;
    Ok(run)
}
