//! History: every run kept in a store, one interface over two backends. The embedded default
//! is an SQLite file (rusqlite, bundled: no server); a fleet shares a PostgreSQL database
//! (`postgres://` or `postgresql://` URL, as libpq spells them). Where: `--db`, else
//! `$OSCOST_DB`, else `$XDG_DATA_HOME/oscost/results.db`, else `~/.local/share/oscost/results.db`.
//!
//! Both backends keep the same schema (version `SCHEMA`): a run's JSON (the result model)
//! without raw samples, deflated, in `runs.run_z`; each result's samples in `samples` as
//! picoseconds, delta-varint and deflated (`sample_codec`, ~2.3 bytes a sample, lossless); a
//! summary row per result in `results` (what `history` and `matrix` read without loading runs);
//! and a content digest per run so that copying a run into a store twice keeps one. Encoding
//! and decoding live here, once; a backend only moves rows, in one transaction per save (a run
//! killed while saving, even by SIGKILL, leaves no partial run on either backend).

mod pg;
mod pg_connect;
mod sqlite;
#[cfg(test)]
mod tests;

use crate::base::stop::{Interrupted, Stop};
use std::path::{Path, PathBuf};

use sha2::Digest as _;

use crate::base::model::{self, HistoryPoint, Run, RunSummary};

/// The schema this oscost writes: 1 runs as JSON text, 2 compact samples, 3 run digests,
/// 4 run identities that survive a JSON round trip (`digest`; recomputed for every run),
/// 5 environment keys (`env_key`), 6 identities that also hash the environment, the clock
/// and each failed or skipped result's reason (recomputed for every run).
pub const SCHEMA: i32 = 6;

/// Every table oscost reads and writes at `SCHEMA`: its name, its columns, its primary key. A
/// store whose table is missing, is a view, lacks a column (dropped or renamed) or another
/// primary key (a table rebuilt with `CREATE TABLE AS`) was altered outside oscost, and is
/// refused before any work (both backends check it against this one list).
pub const TABLES: &[(&str, &[&str], &[&str])] = &[
    (
        "runs",
        &[
            "id",
            "started_at",
            "label",
            "host",
            "kernel",
            "wrapper",
            "benchmarks",
            "run_json",
            "run_z",
            "digest",
            "env_key",
        ],
        &["id"],
    ),
    (
        "results",
        &[
            "run_id",
            "bench",
            "status",
            "median",
            "ci_lo",
            "ci_hi",
            "samples",
            "disturbed",
        ],
        &["run_id", "bench"],
    ),
    ("samples", &["run_id", "idx", "data"], &["run_id", "idx"]),
];

/// One table as a store holds it: whether it is a table (not a view), its columns, its primary
/// key's columns.
#[derive(Debug, Clone, Default)]
pub struct TableSeen {
    /// A table, not a view.
    pub is_table: bool,
    /// Its columns.
    pub columns: Vec<String>,
    /// Its primary key's columns.
    pub key: Vec<String>,
}

/// The first way the tables `seen` (by name; `None`: missing) differ from `TABLES`.
pub fn altered(
    seen: &mut dyn FnMut(&str) -> Result<Option<TableSeen>, StoreError>,
) -> Result<(), StoreError> {
    for (table, columns, key) in TABLES {
        let altered = |column: &str, why: &str| StoreError::Altered {
            table: (*table).to_string(),
            column: column.to_string(),
            why: why.to_string(),
        };
        let table_is = |why: &str| StoreError::AlteredTable {
            table: (*table).to_string(),
            why: why.to_string(),
        };
        let Some(t) = seen(table)? else {
            return Err(table_is("it is missing"));
        };
        if !t.is_table {
            return Err(table_is("it is a view"));
        }
        if let Some(c) = columns.iter().find(|c| !t.columns.iter().any(|x| x == *c)) {
            return Err(altered(c, "it is missing: dropped or renamed"));
        }
        let mut have = t.key.clone();
        have.sort();
        let mut want: Vec<String> = key.iter().map(|k| k.to_string()).collect();
        want.sort();
        if have != want {
            return Err(altered(
                &key.join(", "),
                &format!(
                    "the primary key is ({}), not ({}): the table was rebuilt",
                    t.key.join(", "),
                    key.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
/// Why a store could not be opened, read or written; each message says what to do.
pub enum StoreError {
    #[error("cannot create {0}: {1}")]
    /// The store's directory could not be created.
    Dir(PathBuf, std::io::Error),
    #[error(
        "{at} is not an oscost store ({why}); point --db (or OSCOST_DB) at another file, or move this one away"
    )]
    /// The file is not an oscost store.
    NotOurs {
        /// Where the store is.
        at: String,
        /// Why, in words.
        why: String,
    },
    #[error(
        "{at} is a symbolic link that leads to no file ({why}); point --db (or OSCOST_DB) at a file, or mend the link"
    )]
    /// The path is a symbolic link that leads to no file.
    BadLink {
        /// Where the store is.
        at: String,
        /// Why, in words.
        why: String,
    },
    #[error(
        "{0} is not a regular file; point --db (or OSCOST_DB) at a file (it is created when missing)"
    )]
    /// The path is a device, a FIFO or a directory.
    NotAFile(PathBuf),
    #[error(
        "no results store at {0}; `oscost run` creates it, or point --db (or OSCOST_DB) at one"
    )]
    /// A command that only reads found no store.
    NoStore(String),
    #[error(
        "cannot save into {at}: {why}; make it writable for this user, or give --no-save or another --db"
    )]
    /// This user cannot write the store.
    ReadOnly {
        /// Where the store is.
        at: String,
        /// Why, in words.
        why: String,
    },
    #[error(
        "--db takes a file path or a postgres:// URL; this oscost has no {0}:// store (a URL would become a directory named '{0}:'); give a path such as ./results.db"
    )]
    /// A URL of a kind this oscost does not store into.
    Url(String),
    #[error(
        "cannot reach the PostgreSQL store {at}: {why}; check the URL, that the server runs and that this user may connect (sslmode, sslrootcert, PGPASSWORD and ~/.pgpass are read as libpq reads them)"
    )]
    /// The PostgreSQL server could not be reached or refused the connection.
    Unreachable {
        /// Where the store is.
        at: String,
        /// Why, in words.
        why: String,
    },
    #[error(
        "this user may not read the store ({0}); ask its owner for USAGE on schema oscost and SELECT on its tables, or point --db elsewhere"
    )]
    /// This user lacks the privileges to read the PostgreSQL store.
    NoRights(String),
    #[error("{0} is locked by another process; wait for it, or give --no-save or another --db")]
    /// Another process holds the store's lock.
    Locked(String),
    #[error(
        "no place for the results database: HOME and XDG_DATA_HOME are unset and this user has no home directory; give --db or set OSCOST_DB"
    )]
    /// No default place for the store.
    NoHome,
    #[error(
        "{at} was written by a newer oscost (schema {found}, this one reads {SCHEMA}); upgrade oscost"
    )]
    /// The store was written by a newer oscost.
    Newer {
        /// Where the store is.
        at: String,
        /// The version it has.
        found: i32,
    },
    #[error("no run '{0}' in the store (`oscost history` lists them)")]
    /// No run by that reference.
    NoSuchRun(String),
    #[error(
        "no run '{0}' among the runs --where selects (`oscost history` with the same --where lists them)"
    )]
    /// A run that exists but that `--where` leaves out.
    NotSelected(String),
    #[error("stored run {id} cannot be read: {why}")]
    /// A stored run that cannot be decoded.
    BadRun {
        /// The run's id.
        id: i64,
        /// Why, in words.
        why: String,
    },
    #[error(
        "the table {table} is not what oscost writes ({why}): the store was altered outside oscost; restore it from a backup, or point --db elsewhere"
    )]
    /// A table oscost writes is missing or is a view.
    AlteredTable {
        /// The table.
        table: String,
        /// What is wrong with it.
        why: String,
    },
    #[error(
        "{column} in {table} is not what oscost writes ({why}): the store was altered outside oscost; restore it from a backup, or point --db elsewhere"
    )]
    /// A table or column holds what oscost never writes.
    Altered {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// What is wrong with it.
        why: String,
    },
    #[error(
        "a write to {at} was interrupted (its journal {journal} is still there) and this user cannot recover it; the next `oscost run` or `oscost import` by a user who may write it recovers it. Never move the store without its journal: that would corrupt it"
    )]
    /// An interrupted write left a journal this user cannot roll back.
    HotJournal {
        /// Where the store is.
        at: String,
        /// The journal file left beside it.
        journal: String,
    },
    #[error("the save was interrupted ({0}); nothing was saved")]
    /// A signal came before the save committed; it was rolled back.
    Interrupted(Interrupted),
    // Not `#[from]`: that would make the driver's text both this message and its source, and
    // the error would print it twice.
    #[error("database error: {0}")]
    /// SQLite's own error.
    Sql(rusqlite::Error),
    #[error("PostgreSQL error: {0}")]
    /// PostgreSQL's own error, as text.
    Pg(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e)
    }
}

impl StoreError {
    /// Errors that are the user's to fix by pointing elsewhere (exit 2).
    pub fn is_usage(&self) -> bool {
        !matches!(
            self,
            StoreError::Sql(_)
                | StoreError::Pg(_)
                | StoreError::BadRun { .. }
                | StoreError::Interrupted(_)
        )
    }
}

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    File(PathBuf),
    /// A libpq URL, as given.
    Postgres(String),
}

impl Location {
    /// For messages: the path, or the URL with any password hidden.
    pub fn shown(&self) -> String {
        match self {
            Location::File(p) => p.display().to_string(),
            // Its own passwords found and masked: `user:***@`, `password=***`.
            Location::Postgres(url) => scrub_passwords(url, url),
        }
    }
}

/// `text` with every password that `url` carries (`user:pw@`, `password=pw`) replaced by
/// `***`.
pub fn scrub_passwords(text: &str, url: &str) -> String {
    let mut secrets: Vec<String> = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        if let Some((user, _)) = authority.rsplit_once('@')
            && let Some((_, pw)) = user.split_once(':')
        {
            secrets.push(pw.to_string());
        }
    }
    for kv in url.split(['?', '&']) {
        if let Some((k, v)) = kv.split_once('=')
            && (k.eq_ignore_ascii_case("password") || k.eq_ignore_ascii_case("sslpassword"))
        {
            secrets.push(v.to_string());
        }
    }
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s.as_str(), "***");
    }
    out
}

/// Where the store is, by precedence: the flag, `OSCOST_DB`, `$XDG_DATA_HOME/oscost`,
/// `$HOME/.local/share/oscost`, then the home directory the password database gives (never
/// the current directory: a store that moves with `cd` loses history silently).
pub fn locate(explicit: Option<&Path>) -> Result<Location, StoreError> {
    if let Some(p) = explicit {
        return classify(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("OSCOST_DB").filter(|v| !v.is_empty()) {
        return classify(PathBuf::from(p));
    }
    Ok(Location::File(data_dir()?.join("results.db")))
}

/// oscost's data directory: `$XDG_DATA_HOME/oscost`, else `$HOME/.local/share/oscost`, else
/// under the home directory the password database gives.
pub fn data_dir() -> Result<PathBuf, StoreError> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = env("XDG_DATA_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".local/share")))
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir.join(".local/share"))
                .filter(|d| d.is_absolute())
        })
        .ok_or(StoreError::NoHome)?;
    Ok(base.join("oscost"))
}

/// A PostgreSQL URL, or a file path. Anything else shaped like `scheme://` is refused: it
/// would otherwise become a directory named `scheme:` with a database inside it.
pub fn classify(p: PathBuf) -> Result<Location, StoreError> {
    let text = p.to_string_lossy();
    match text.split_once("://") {
        Some(("postgres" | "postgresql", _)) => Ok(Location::Postgres(text.into_owned())),
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            Err(StoreError::Url(scheme.to_string()))
        }
        _ => Ok(Location::File(p)),
    }
}

pub use crate::base::model::ResultRow;

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

/// What a save did with each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// The run's id in the store.
    pub id: i64,
    /// False when the store already held this run (same digest) and kept the one it had.
    pub new: bool,
}

/// What a backend does; `Store` is the one interface over them.
pub(crate) trait Backend {
    /// Insert runs in one transaction, asking `stop` just before the commit (a signal came:
    /// roll back, `Interrupted`). With `skip_known`, a run whose digest is already there is
    /// not inserted again.
    fn insert_all(
        &mut self,
        runs: &[Encoded],
        skip_known: bool,
        stop: &Stop,
    ) -> Result<Vec<Saved>, StoreError>;
    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError>;
    fn has_run(&mut self, id: i64) -> Result<bool, StoreError>;
    /// The id `back` runs before the last.
    fn nth_last(&mut self, back: i64) -> Result<Option<i64>, StoreError>;
    /// A run's stored form and digest; samples only when asked.
    fn fetch(
        &mut self,
        id: i64,
        with_samples: bool,
    ) -> Result<Option<(Fetched, Option<String>)>, StoreError>;
    fn history(&mut self, bench: &str) -> Result<Vec<HistoryPoint>, StoreError>;
    /// The summary rows of the given runs.
    fn result_rows(&mut self, ids: &[i64]) -> Result<Vec<(i64, ResultRow)>, StoreError>;
    fn known_benchmarks(&mut self) -> Result<Vec<String>, StoreError>;
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
/// measured under (`--set`; nothing for a plain run), and what confined its workers
/// (`analysis::confinement::signature`: seccomp filters, a CPU quota, a lowered priority,
/// namespaces, an LSM label; nothing for an unconfined run), hashed to 16 hex digits. Runs that
/// share it, and their host, kernel and wrapper, are one environment: their scatter is the
/// run-to-run spread a comparison of runs measured apart learns.
pub fn env_key(run: &Run) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"oscost environment 1\0");
    let e = &run.env;
    let vulnerabilities: Vec<String> = e
        .vulnerabilities
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let fields = [
        e.cpu_model.clone(),
        Some(vulnerabilities.join("\n")),
        e.thp_enabled.clone(),
        e.thp_defrag.clone(),
        e.boot_cmdline.clone(),
        Some(format!("{} {}", run.tool.version, e.build_profile)),
    ];
    // A run measured under `--set` is an environment of its own; a plain run's key is what it
    // was before settings existed.
    let set = (!run.settings.is_empty()).then(|| run.settings.join("\n"));
    for f in &fields {
        hash_text(&mut h, f.as_deref());
    }
    if let Some(s) = &set {
        hash_text(&mut h, Some(s));
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
            return model::run_from_json(&json, &name).map_err(|e| bad(e.to_string()));
        }
        Fetched::Compact { run_z, samples } => (run_z, samples),
    };
    let mut json = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::DeflateDecoder::new(&run_z[..]),
        &mut json,
    )
    .map_err(|e| bad(e.to_string()))?;
    let mut run = model::parse_run(&json, &name).map_err(|e| bad(e.to_string()))?;
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
    model::checked(run, &name).map_err(|e| bad(e.to_string()))
}

/// How a stored run is named on the command line: its id, `last`, or `last~N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunRef {
    /// A run's id.
    Id(i64),
    /// N runs before the last (`last` is 0).
    Back(u64),
}

impl RunRef {
    /// The reference `reference` names, or `None` when it is not one.
    pub fn parse(reference: &str) -> Option<RunRef> {
        if let Ok(id) = reference.parse::<i64>() {
            return Some(RunRef::Id(id));
        }
        match reference.strip_prefix("last")? {
            "" => Some(RunRef::Back(0)),
            rest => rest.strip_prefix('~')?.parse().ok().map(RunRef::Back),
        }
    }
}

/// A run id from a reference, counted within `runs` (oldest first); with a selection in
/// force (`selected`), a run outside them is "not selected", else "no such run".
pub fn resolve_among(
    reference: &str,
    runs: &[RunSummary],
    selected: bool,
) -> Result<i64, StoreError> {
    let found = match RunRef::parse(reference) {
        Some(RunRef::Id(id)) => runs.iter().find(|r| r.id == id),
        Some(RunRef::Back(n)) => usize::try_from(n)
            .ok()
            .and_then(|n| runs.iter().rev().nth(n)),
        None => None,
    };
    found.map(|r| r.id).ok_or_else(|| {
        if selected {
            StoreError::NotSelected(reference.to_string())
        } else {
            StoreError::NoSuchRun(reference.to_string())
        }
    })
}

/// A results store, open: an SQLite file or a PostgreSQL database behind one interface.
pub struct Store {
    backend: Box<dyn Backend>,
    location: Location,
}

impl Store {
    /// Open for saving, creating the store when missing, migrating it, and proving that a run
    /// could be written now (so a read-only, locked or foreign store is refused before
    /// measuring, not after).
    pub fn open(at: &Location) -> Result<Store, StoreError> {
        Store::opened(at, true)
    }

    /// Open an existing store to read; never creates anything.
    pub fn open_existing(at: &Location) -> Result<Store, StoreError> {
        Store::opened(at, false)
    }

    fn opened(at: &Location, to_save: bool) -> Result<Store, StoreError> {
        let backend: Box<dyn Backend> = match at {
            Location::File(p) if to_save => Box::new(sqlite::Sqlite::open(p)?),
            Location::File(p) => Box::new(sqlite::Sqlite::open_existing(p)?),
            Location::Postgres(url) => Box::new(pg::Pg::open(url, &at.shown(), to_save)?),
        };
        Ok(Store {
            backend,
            location: at.clone(),
        })
    }

    /// The store for messages (a URL's password hidden).
    pub fn shown(&self) -> String {
        self.location.shown()
    }

    /// Save one run (see `save_all`).
    pub fn save(&mut self, run: &Run) -> Result<i64, StoreError> {
        Ok(self.save_all(&[run], &Stop::never())?[0])
    }

    /// Save runs in one transaction (ab's two sides: never one without the other), giving
    /// their ids. `stop` is asked just before the commit: when it says so (a signal came), the
    /// transaction is rolled back and nothing is saved.
    pub fn save_all(&mut self, runs: &[&Run], stop: &Stop) -> Result<Vec<i64>, StoreError> {
        let rows = runs
            .iter()
            .map(|r| encode(r))
            .collect::<Result<Vec<_>, _>>()?;
        let saved = self.backend.insert_all(&rows, false, stop)?;
        Ok(saved.into_iter().map(|s| s.id).collect())
    }

    /// Copy runs in (push, import) in one transaction: all or none, and a run the store
    /// already holds (same identity, `digest`) is kept once, so a copy repeated after an
    /// interruption is harmless.
    pub fn copy_in(&mut self, runs: &[&Run], stop: &Stop) -> Result<Vec<Saved>, StoreError> {
        let rows = runs
            .iter()
            .map(|r| encode(r))
            .collect::<Result<Vec<_>, _>>()?;
        self.backend.insert_all(&rows, true, stop)
    }

    /// Every run, oldest first, as `history` lists them.
    pub fn list(&mut self) -> Result<Vec<RunSummary>, StoreError> {
        self.backend.list()
    }

    /// A run id from "7", "last" or "last~N" counted within the runs `sel` selects (an id
    /// outside them is no such run).
    pub fn resolve_in(
        &mut self,
        reference: &str,
        sel: &crate::analysis::select::Selection,
    ) -> Result<i64, StoreError> {
        if sel.is_all() {
            return self.resolve(reference);
        }
        resolve_among(reference, &sel.apply(self.list()?), true)
    }

    /// A run id from "7", "last" or "last~N" (N runs before the last).
    pub fn resolve(&mut self, reference: &str) -> Result<i64, StoreError> {
        let found = match RunRef::parse(reference) {
            Some(RunRef::Id(id)) => self.backend.has_run(id)?.then_some(id),
            // Beyond i64 no store reaches back that far (and `as` would wrap to -1: the last).
            Some(RunRef::Back(n)) => match i64::try_from(n) {
                Ok(n) => self.backend.nth_last(n)?,
                Err(_) => None,
            },
            None => None,
        };
        found.ok_or_else(|| StoreError::NoSuchRun(reference.to_string()))
    }

    /// One stored run, whole (its samples included).
    pub fn load(&mut self, id: i64) -> Result<Run, StoreError> {
        Ok(self.load_with_digest(id)?.0)
    }

    /// A run and its stored digest (runs saved before schema 3 had theirs computed then).
    pub fn load_with_digest(&mut self, id: i64) -> Result<(Run, Option<String>), StoreError> {
        let (f, d) = self
            .backend
            .fetch(id, true)?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
        Ok((decode(id, f, true)?, d))
    }

    /// A run without its raw samples (its environment, statistics and repetitions): what
    /// needs no samples reads a run in a fraction of the time.
    pub fn load_bare(&mut self, id: i64) -> Result<Run, StoreError> {
        let (f, _) = self
            .backend
            .fetch(id, false)?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
        decode(id, f, false)
    }

    /// One benchmark across every run that has it, oldest first.
    pub fn history(&mut self, bench: &str) -> Result<Vec<HistoryPoint>, StoreError> {
        self.backend.history(bench)
    }

    /// The summary rows of the given runs, by run.
    pub fn result_rows(&mut self, ids: &[i64]) -> Result<Vec<(i64, ResultRow)>, StoreError> {
        self.backend.result_rows(ids)
    }

    /// Benchmark ids that have any history, for suggestions.
    pub fn known_benchmarks(&mut self) -> Result<Vec<String>, StoreError> {
        self.backend.known_benchmarks()
    }
}
