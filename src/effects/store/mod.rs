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
pub mod rows;
mod sqlite;
#[cfg(test)]
mod tests;

use crate::base::stop::{Interrupted, Stop};
use std::path::{Path, PathBuf};

use crate::base::model::{HistoryPoint, Run, RunSummary};
use rows::{Encoded, Fetched, decode, encode};

/// The schema this oscost writes: 1 runs as JSON text, 2 compact samples, 3 run digests,
/// 4 run identities that survive a JSON round trip (`digest`; recomputed for every run),
/// 5 environment keys (`env_key`), 6 identities that also hash the environment, the clock
/// and each failed or skipped result's reason (recomputed for every run), 7 each result's
/// exit witness (`results.exit_witness_ns`, computed for every stored run), 8 each result's
/// speed witness (`results.speed_witness_ns`, the same).
pub const SCHEMA: i32 = 8;

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
            "exit_witness_ns",
            "speed_witness_ns",
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
    /// What was added to it outside oscost, which makes none: triggers, rules, CHECK and
    /// exclusion constraints, row security ("trigger trim_runs"). Any of them can refuse,
    /// change or delete what a run saves.
    pub added: Vec<String>,
}

/// The first way the tables `seen` (by name; `None`: missing) differ from `TABLES`. A store
/// opened for `writing` must also carry nothing added outside oscost (`TableSeen::added`): a
/// trigger that deletes earlier runs, or a CHECK that refuses a sample, would otherwise be
/// found only after measuring, or never. Reading is not refused for them: nothing is written.
pub fn altered(
    seen: &mut dyn FnMut(&str) -> Result<Option<TableSeen>, StoreError>,
    writing: bool,
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
        if writing && !t.added.is_empty() {
            return Err(table_is(&format!(
                "{} added outside oscost, which makes none: it could refuse, change or delete what a run saves; drop it",
                t.added.join(", ")
            )));
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
        "{at} is damaged ({why}): restore it from a backup, or point --db (or OSCOST_DB) elsewhere; `sqlite3 {at} .recover` may save what is readable"
    )]
    /// SQLite's own check of the file found pages it cannot read.
    Damaged {
        /// The file.
        at: String,
        /// What the check said first.
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
        sel: &crate::analysis::select::RunFilter,
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
