//! Reading run files (`--json`, `export`, `unsaved/`) without holding more than the run itself,
//! and refusing before work a file this process has no room for.
//!
//! A file is read twice, streamed both times: a first pass (`scan`) keeps nothing but the
//! schema version and how many samples each result holds; the second parses the run itself
//! straight into its types. Neither holds the file's text or a `serde_json::Value` of it (a
//! 3-million-sample run took 27 MB of text and ~130 MB of `Value` that way, and a process
//! under `ulimit -v` aborted). Between the passes `room` asks the system for the address space
//! the run's vectors will take (`reserve::room_for`), so a file too large for this process is
//! a clear refusal (`LoadError::TooLarge`, exit 2), never an allocation failure.

use std::fmt;
use std::io::BufReader;
use std::path::Path;

use serde::Deserialize;
use serde::de::{IgnoredAny, SeqAccess, Visitor};

use super::Run;
use super::load::{LoadError, checked};

/// The few things the first pass keeps of a run file.
#[derive(Debug, Default, Deserialize)]
pub struct Scanned {
    /// The file's `schema_version`.
    schema_version: Option<u64>,
    /// Each result's sample counts.
    #[serde(default)]
    results: Vec<ScannedResult>,
}

/// One result's counts, read without keeping its samples.
#[derive(Debug, Default, Deserialize)]
struct ScannedResult {
    #[serde(default)]
    samples_ns: Count,
    #[serde(default)]
    preempted: Count,
}

/// How many elements a JSON array has (0 for anything else), counted without storing them.
#[derive(Debug, Default, Clone, Copy)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct Counting;
        impl<'de> Visitor<'de> for Counting {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        d.deserialize_seq(Counting)
    }
}

/// Bytes of address space a loaded sample may take at the peak, a bound with a margin: its
/// `f64` in a vector that doubles as it grows (up to 16 bytes when the count is just past a
/// power of two), and what is made from it while it is kept (the store's picosecond deltas and
/// their deflated copy, sorted copies for statistics). Measured: a 3-million-sample run (27 MB
/// of JSON) imported under `ulimit -v` at 105,000 KiB and aborted at 100,000, where a small run
/// needs under 30,000: about 27 bytes a sample at 1.4 times its count's power of two, so 38 at
/// the worst (`docs/design-notes.md`, "A run file larger than memory").
pub const BYTES_PER_SAMPLE: u64 = 48;

/// Address space a run needs beyond the samples: its other fields, the store's statements.
const BYTES_PER_RUN: u64 = 8 << 20;

impl Scanned {
    /// The samples its results hold, together.
    pub fn samples(&self) -> u64 {
        self.results.iter().map(|r| r.samples_ns.0).sum()
    }

    /// Address space this run needs once loaded and while it is worked on (a preempted
    /// sample's index is counted as a sample: a vector of 8-byte values as well).
    pub fn bytes_needed(&self) -> u64 {
        let preempted: u64 = self.results.iter().map(|r| r.preempted.0).sum();
        BYTES_PER_RUN + (self.samples() + preempted) * BYTES_PER_SAMPLE
    }
}

fn open(path: &Path) -> Result<BufReader<std::fs::File>, LoadError> {
    std::fs::File::open(path)
        .map(|f| BufReader::with_capacity(1 << 16, f))
        .map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })
}

/// The first pass: the version and the sample counts, read as a stream.
pub fn scan(path: &Path) -> Result<Scanned, LoadError> {
    let p = path.display().to_string();
    let scanned: Scanned =
        serde_json::from_reader(open(path)?).map_err(|source| LoadError::Parse {
            path: p.clone(),
            source,
        })?;
    super::load::supported(scanned.schema_version, &p)?;
    Ok(scanned)
}

/// Refuse before work when `bytes` of address space cannot be had now (an `ulimit -v`, a
/// cgroup's limit, a full machine): `what` names the files it is for.
pub fn room(bytes: u64, samples: u64, what: &str) -> Result<(), LoadError> {
    if usize::try_from(bytes).is_ok_and(crate::base::reserve::room_for) {
        return Ok(());
    }
    Err(LoadError::TooLarge {
        path: what.into(),
        samples,
        mib: bytes.div_ceil(1 << 20),
    })
}

/// The run a file holds, checked (`load::checked`), read as a stream after `scan` said it fits.
pub fn load_run_file(path: &Path) -> Result<Run, LoadError> {
    let p = path.display().to_string();
    let scanned = scan(path)?;
    room(scanned.bytes_needed(), scanned.samples(), &p)?;
    load_scanned(path, &scanned)
}

/// The second pass, for a file `scan` has read and the caller has found room for.
pub fn load_scanned(path: &Path, scanned: &Scanned) -> Result<Run, LoadError> {
    let p = path.display().to_string();
    let run: Run = serde_json::from_reader(open(path)?).map_err(|source| LoadError::Parse {
        path: p.clone(),
        source,
    })?;
    checked(super::load::upgrade(run, scanned.schema_version), &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn the_first_pass_counts_samples_without_keeping_them() {
        let f = file(
            r#"{"schema_version": 2, "other": [1, {"a": 2}],
                "results": [{"samples_ns": [1.5, 2, 3], "preempted": [0]}, {"id": "x"}]}"#,
        );
        let s = scan(f.path()).unwrap();
        assert_eq!(s.samples(), 3);
        assert_eq!(s.bytes_needed(), BYTES_PER_RUN + 4 * BYTES_PER_SAMPLE);
    }

    #[test]
    fn versions_and_garbage_are_refused_by_the_first_pass() {
        let e = scan(file(r#"{"schema_version": 99}"#).path()).unwrap_err();
        assert!(e.to_string().contains("schema_version 99"), "{e}");
        let e = scan(file(r#"{"results": []}"#).path()).unwrap_err();
        assert!(e.to_string().contains("missing schema_version"), "{e}");
        let e = scan(file(r#"{"schema_version": 2, "resu"#).path()).unwrap_err();
        assert!(e.to_string().contains("not an oscost run file"), "{e}");
    }

    #[test]
    fn a_run_with_no_room_is_refused_with_its_size() {
        let e = room(u64::MAX / 2, 123, "f.json").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("f.json") && text.contains("123 samples"),
            "{text}"
        );
        assert!(room(1 << 20, 1, "f.json").is_ok());
    }
}
