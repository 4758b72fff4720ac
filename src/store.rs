//! History: every run saved to an SQLite database (rusqlite, bundled). The database path is
//! `--db PATH`, else `$OSCOST_DB`, else `$XDG_DATA_HOME/oscost/results.db`, else
//! `~/.local/share/oscost/results.db`.
//!
//! A run is written in one transaction at its end: SQLite's journal makes that atomic, so a run
//! killed while saving (even by SIGKILL) leaves the earlier runs intact and no partial run.
//! Schema 2 keeps a run compactly: its JSON (the result model) without raw samples, deflated,
//! in `runs.run_z`, and each result's samples in `samples` as picoseconds, delta-varint and
//! deflated (`sample_codec`: ~2.3 bytes a sample, lossless); a summary row per result serves
//! `history`. The schema is versioned with `PRAGMA user_version`; `migrate` brings an older
//! database up to date in place (schema 1 runs rewritten, then VACUUM) and a newer or foreign
//! one is refused.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::model::{self, HistoryPoint, Run, RunSummary};

/// The schema this oscost writes.
pub const SCHEMA: i32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error(
        "{path} is not an oscost database ({why}); point --db (or OSCOST_DB) at another file, or move this one away"
    )]
    NotOurs { path: PathBuf, why: String },
    #[error(
        "{0} is not a regular file; point --db (or OSCOST_DB) at a file (it is created when missing)"
    )]
    NotAFile(PathBuf),
    #[error(
        "no results database at {0}; `oscost run` creates it, or point --db (or OSCOST_DB) at one"
    )]
    NoStore(PathBuf),
    #[error(
        "cannot save into {path}: {why}; make it and its directory writable, or give --no-save or another --db"
    )]
    ReadOnly { path: PathBuf, why: String },
    #[error(
        "--db takes a file path; this oscost has no {0}:// store (a URL would become a directory named '{0}:'); give a path such as ./results.db"
    )]
    Url(String),
    #[error("{0} is locked by another process; wait for it, or give --no-save or another --db")]
    Locked(PathBuf),
    #[error(
        "no place for the results database: HOME and XDG_DATA_HOME are unset and this user has no home directory; give --db or set OSCOST_DB"
    )]
    NoHome,
    #[error(
        "{path} was written by a newer oscost (schema {found}, this one reads {SCHEMA}); upgrade oscost"
    )]
    Newer { path: PathBuf, found: i32 },
    #[error("no run '{0}' in the store (`oscost history` lists them)")]
    NoSuchRun(String),
    #[error("stored run {id} cannot be read: {why}")]
    BadRun { id: i64, why: String },
    #[error("the save was interrupted; nothing was saved")]
    Interrupted,
    // Not `#[from]`: that would make SQLite's text both this message and its source, and the
    // error would print it twice.
    #[error("database error: {0}")]
    Sql(rusqlite::Error),
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
            StoreError::Sql(_) | StoreError::BadRun { .. } | StoreError::Interrupted
        )
    }
}

/// Where the database is, by precedence: the flag, `OSCOST_DB`, `$XDG_DATA_HOME/oscost`,
/// `$HOME/.local/share/oscost`, then the home directory the password database gives (never
/// the current directory: a store that moves with `cd` loses history silently).
pub fn default_path(explicit: Option<&Path>) -> Result<PathBuf, StoreError> {
    if let Some(p) = explicit {
        return not_a_url(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("OSCOST_DB").filter(|v| !v.is_empty()) {
        return not_a_url(PathBuf::from(p));
    }
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
    Ok(base.join("oscost").join("results.db"))
}

/// A store is a file: `postgres://host/db` would otherwise become a directory named
/// `postgres:` with a database inside it. Anything shaped like `scheme://` is refused.
fn not_a_url(p: PathBuf) -> Result<PathBuf, StoreError> {
    let text = p.to_string_lossy();
    match text.split_once("://") {
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            Err(StoreError::Url(scheme.to_string()))
        }
        _ => Ok(p),
    }
}

/// How long a save waits for another process's transaction (runs save in milliseconds).
const SAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long the check before measuring waits: a lock held longer is someone else's work.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Open for saving, creating the file when missing, migrating it, and proving that a run
    /// could be written now (so a read-only, locked or foreign database is refused before
    /// measuring, not after).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Ok(m) = std::fs::metadata(path)
            && !m.is_file()
        {
            return Err(StoreError::NotAFile(path.to_path_buf()));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Dir(dir.to_path_buf(), e))?;
        }
        let conn = Connection::open(path).map_err(|e| StoreError::NotOurs {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        let store = Store::checked(conn, path)?;
        store.probe_write()?;
        Ok(store)
    }

    /// Open an existing database to read; never creates anything.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        match std::fs::metadata(path) {
            Err(_) => return Err(StoreError::NoStore(path.to_path_buf())),
            Ok(m) if !m.is_file() => return Err(StoreError::NotAFile(path.to_path_buf())),
            Ok(_) => {}
        }
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| StoreError::NotOurs {
                path: path.to_path_buf(),
                why: e.to_string(),
            })?;
        let store = Store::checked(conn, path)?;
        if store.version()? == 0 {
            // Empty (or being created this instant): nothing to read yet.
            return Err(StoreError::NoStore(path.to_path_buf()));
        }
        Ok(store)
    }

    /// The schema's version; an error means the file is not SQLite.
    fn version(&self) -> Result<i32, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.not_ours(e.to_string()))
    }

    fn table_names(&self) -> Result<Vec<String>, StoreError> {
        self.conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| self.not_ours(e.to_string()))
    }

    fn not_ours(&self, why: String) -> StoreError {
        StoreError::NotOurs {
            path: self.path.clone(),
            why,
        }
    }

    /// Check that the file is ours (and not newer), migrating it when the connection can write.
    fn checked(conn: Connection, path: &Path) -> Result<Store, StoreError> {
        conn.busy_timeout(SAVE_WAIT)?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        // Version and tables from one snapshot: another process may be migrating this very
        // file, and its tables without its version would look like someone else's.
        store
            .conn
            .execute_batch("BEGIN")
            .map_err(|e| store.not_ours(e.to_string()))?;
        let seen = store.version().and_then(|v| Ok((v, store.table_names()?)));
        let _ = store.conn.execute_batch("COMMIT");
        let (version, tables) = seen?;
        if version > SCHEMA {
            return Err(StoreError::Newer {
                path: path.to_path_buf(),
                found: version,
            });
        }
        let ours = ["runs", "results"]
            .iter()
            .all(|t| tables.iter().any(|x| x == t));
        let others = tables.iter().filter(|t| !t.starts_with("sqlite_")).count();
        if version == 0 && others > 0 {
            return Err(store.not_ours(format!("it holds {others} table(s) of something else")));
        }
        if version >= 1 && !ours {
            return Err(store.not_ours(format!(
                "it says schema {version} but has no runs and results tables"
            )));
        }
        if version < SCHEMA && !store.conn.is_readonly(rusqlite::MAIN_DB)? {
            store.migrate()?;
        }
        Ok(store)
    }

    /// Write a throwaway row and roll it back, waiting only briefly for a lock: this finds a
    /// read-only file or directory (the journal) and a database another process holds.
    fn probe_write(&self) -> Result<(), StoreError> {
        self.conn.busy_timeout(PROBE_WAIT)?;
        let r = self.conn.execute_batch(
            "BEGIN IMMEDIATE;
             INSERT INTO runs (started_at, benchmarks, run_json) VALUES ('probe', 0, '');
             ROLLBACK;",
        );
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.conn.busy_timeout(SAVE_WAIT)?;
        r.map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Locked(self.path.clone())
            }
            Some(
                rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
                | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::DiskFull,
            ) => StoreError::ReadOnly {
                path: self.path.clone(),
                why: e.to_string(),
            },
            _ => StoreError::Sql(e),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bring the schema up to `SCHEMA` in one immediate transaction that reads the version
    /// again under the lock: several processes opening a fresh file at once migrate it once.
    fn migrate(&self) -> Result<(), StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let from = self.version()?;
        let r = self.migrate_locked();
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        self.conn.execute_batch(end)?;
        if r.is_ok() && from == 1 {
            // Runs rewritten compactly leave their old pages free: give them back to the disk.
            let _ = self.conn.execute_batch("VACUUM");
        }
        r
    }

    fn migrate_locked(&self) -> Result<(), StoreError> {
        let from = self.version()?;
        if from < 1 {
            self.conn.execute_batch(
                "CREATE TABLE runs (
                     id INTEGER PRIMARY KEY AUTOINCREMENT,
                     started_at TEXT NOT NULL,
                     label TEXT,
                     host TEXT,
                     kernel TEXT,
                     wrapper TEXT,
                     benchmarks INTEGER NOT NULL,
                     run_json TEXT NOT NULL
                 );
                 CREATE TABLE results (
                     run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                     bench TEXT NOT NULL,
                     status TEXT NOT NULL,
                     median REAL,
                     ci_lo REAL,
                     ci_hi REAL,
                     samples INTEGER NOT NULL,
                     disturbed INTEGER NOT NULL,
                     PRIMARY KEY (run_id, bench)
                 );
                 CREATE INDEX results_by_bench ON results(bench, run_id);
                 PRAGMA user_version = 1;",
            )?;
        }
        if from < 2 {
            // Compact runs: the JSON without raw samples, deflated, and each result's samples
            // as picoseconds, delta-varint and deflated (`sample_codec`). Existing runs are
            // rewritten in place.
            self.conn.execute_batch(
                "ALTER TABLE runs ADD COLUMN run_z BLOB;
                 CREATE TABLE samples (
                     run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                     idx INTEGER NOT NULL,
                     data BLOB NOT NULL,
                     PRIMARY KEY (run_id, idx)
                 );",
            )?;
            let old: Vec<(i64, String)> = {
                let mut q = self.conn.prepare("SELECT id, run_json FROM runs")?;
                q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?
            };
            for (id, json) in &old {
                let run = model::parse_run(json, &format!("stored run {id}")).map_err(|e| {
                    StoreError::BadRun {
                        id: *id,
                        why: e.to_string(),
                    }
                })?;
                write_compact(&self.conn, *id, &run)?;
            }
            self.conn.execute_batch("PRAGMA user_version = 2;")?;
        }
        Ok(())
    }

    /// Save one run (see `save_all`).
    pub fn save(&mut self, run: &Run) -> Result<i64, StoreError> {
        Ok(self.save_all(&[run], &|| false)?[0])
    }

    /// Save runs in one transaction (ab's two sides: never one without the other), giving
    /// their ids. `stop` is asked just before the commit: when it says so (a signal came), the
    /// transaction is rolled back and nothing is saved.
    pub fn save_all(
        &mut self,
        runs: &[&Run],
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<i64>, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut ids = Vec::new();
        for run in runs {
            ids.push(insert(&tx, run)?);
        }
        if stop() {
            tx.rollback()?;
            return Err(StoreError::Interrupted);
        }
        tx.commit()?;
        Ok(ids)
    }

    pub fn list(&self) -> Result<Vec<RunSummary>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT id, started_at, label, host, kernel, wrapper, benchmarks FROM runs ORDER BY id",
        )?;
        let rows = q.query_map([], |r| {
            Ok(RunSummary {
                id: r.get(0)?,
                started_at: r.get(1)?,
                label: r.get(2)?,
                host: r.get(3)?,
                kernel: r.get(4)?,
                wrapper: r.get(5)?,
                benchmarks: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A run id from "7", "last" or "last~N" (N runs before the last).
    pub fn resolve(&self, reference: &str) -> Result<i64, StoreError> {
        let no = || StoreError::NoSuchRun(reference.to_string());
        if let Ok(id) = reference.parse::<i64>() {
            let found: Option<i64> = self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?;
            return found.ok_or_else(no);
        }
        let back: i64 = match reference.strip_prefix("last") {
            Some("") => 0,
            Some(rest) => rest
                .strip_prefix('~')
                .and_then(|n| n.parse().ok())
                .ok_or_else(no)?,
            None => return Err(no()),
        };
        self.conn
            .query_row(
                "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                [back],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(no)
    }

    pub fn load(&self, id: i64) -> Result<Run, StoreError> {
        let bad = |why: String| StoreError::BadRun { id, why };
        let name = format!("stored run {id}");
        if self.version()? < 2 {
            // A read-only store of the first schema: the whole run is its JSON.
            let json: String = self
                .conn
                .query_row("SELECT run_json FROM runs WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()?
                .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
            return model::run_from_json(&json, &name).map_err(|e| bad(e.to_string()));
        }
        let z: Vec<u8> = self
            .conn
            .query_row("SELECT run_z FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
        let mut json = String::new();
        std::io::Read::read_to_string(&mut flate2::read::DeflateDecoder::new(&z[..]), &mut json)
            .map_err(|e| bad(e.to_string()))?;
        let mut run = model::parse_run(&json, &name).map_err(|e| bad(e.to_string()))?;
        let mut q = self
            .conn
            .prepare("SELECT idx, data FROM samples WHERE run_id = ?1")?;
        let rows = q.query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
        for row in rows {
            let (idx, data) = row?;
            let r = run
                .results
                .get_mut(idx as usize)
                .ok_or_else(|| bad(format!("samples for result {idx}, which it lacks")))?;
            r.samples_ns = crate::sample_codec::decode(&data).map_err(bad)?;
        }
        model::checked(run, &name).map_err(|e| bad(e.to_string()))
    }

    /// One benchmark across every run that has it, oldest first.
    pub fn history(&self, bench: &str) -> Result<Vec<HistoryPoint>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT runs.id, runs.started_at, runs.label, runs.wrapper, results.status,
                    results.median, results.ci_lo, results.ci_hi, results.disturbed
             FROM results JOIN runs ON runs.id = results.run_id
             WHERE results.bench = ?1 ORDER BY runs.id",
        )?;
        let rows = q.query_map([bench], |r| {
            Ok(HistoryPoint {
                run_id: r.get(0)?,
                started_at: r.get(1)?,
                label: r.get(2)?,
                wrapper: r.get(3)?,
                status: r.get(4)?,
                median: r.get(5)?,
                ci_lo: r.get(6)?,
                ci_hi: r.get(7)?,
                disturbed: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Benchmark ids that have any history, for suggestions.
    pub fn known_benchmarks(&self) -> Result<Vec<String>, StoreError> {
        let mut q = self
            .conn
            .prepare("SELECT DISTINCT bench FROM results ORDER BY bench")?;
        let rows = q.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Insert one run and its summary rows inside `tx`; returns its id.
fn insert(tx: &rusqlite::Transaction, run: &Run) -> Result<i64, StoreError> {
    tx.execute(
        "INSERT INTO runs (started_at, label, host, kernel, wrapper, benchmarks, run_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, '')",
        params![
            run.started_at,
            run.label,
            run.env.hostname,
            run.env.kernel_release,
            run.wrapper,
            run.results.len() as i64,
        ],
    )?;
    let id = tx.last_insert_rowid();
    write_compact(tx, id, run)?;
    {
        let mut ins = tx.prepare(
            "INSERT OR REPLACE INTO results
             (run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for r in &run.results {
            let st = r.stats.as_ref();
            ins.execute(params![
                id,
                r.id,
                r.status.word(),
                st.map(|s| s.median),
                st.map(|s| s.ci95[0]),
                st.map(|s| s.ci95[1]),
                r.samples_ns.len() as i64,
                r.disturbed.is_disturbed()
            ])?;
        }
    }
    Ok(id)
}

/// Store run `id` compactly: its JSON without raw samples, deflated, in `runs.run_z`, and each
/// result's samples in `samples` (see `sample_codec`).
fn write_compact(conn: &Connection, id: i64, run: &Run) -> Result<(), StoreError> {
    let bad = |e: String| StoreError::BadRun { id, why: e };
    let mut bare = run.clone();
    for r in &mut bare.results {
        r.samples_ns = Vec::new();
    }
    let json = serde_json::to_vec(&bare).map_err(|e| bad(e.to_string()))?;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &json).map_err(|e| bad(e.to_string()))?;
    let z = z.finish().map_err(|e| bad(e.to_string()))?;
    conn.execute(
        "UPDATE runs SET run_json = '', run_z = ?2 WHERE id = ?1",
        params![id, z],
    )?;
    let mut ins =
        conn.prepare("INSERT OR REPLACE INTO samples (run_id, idx, data) VALUES (?1, ?2, ?3)")?;
    for (i, r) in run.results.iter().enumerate() {
        if !r.samples_ns.is_empty() {
            ins.execute(params![
                id,
                i as i64,
                crate::sample_codec::encode(&r.samples_ns)
            ])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testdata;

    fn temp_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("sub/results.db")).unwrap();
        (dir, s)
    }

    #[test]
    fn saves_lists_loads_and_resolves() {
        let (_d, mut s) = temp_store();
        let run = testdata::run();
        let a = s.save(&run).unwrap();
        let mut second = run.clone();
        second.label = Some("second".into());
        let b = s.save(&second).unwrap();
        assert!(b > a);
        let list = s.list().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].label.as_deref(), Some("second"));
        assert_eq!(list[0].benchmarks, run.results.len() as i64);
        assert_eq!(s.resolve("last").unwrap(), b);
        assert_eq!(s.resolve("last~1").unwrap(), a);
        assert_eq!(s.resolve(&a.to_string()).unwrap(), a);
        assert!(matches!(s.resolve("last~2"), Err(StoreError::NoSuchRun(_))));
        assert!(matches!(s.resolve("first"), Err(StoreError::NoSuchRun(_))));
        assert!(matches!(s.resolve("999"), Err(StoreError::NoSuchRun(_))));
        let back = s.load(a).unwrap();
        assert_eq!(back.results, run.results);
        let h = s.history("call/f0").unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].median, Some(1.5));
        let h = s.history("timer/rdtscp").unwrap();
        assert_eq!(h[0].status, "skipped");
        assert_eq!(h[0].median, None);
    }

    #[test]
    fn reopening_keeps_runs_and_schema() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.db");
        Store::open(&p).unwrap().save(&testdata::run()).unwrap();
        let s = Store::open(&p).unwrap();
        assert_eq!(s.list().unwrap().len(), 1);
    }

    #[test]
    fn garbage_foreign_and_newer_databases_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, vec![0x42u8; 8192]).unwrap();
        let e = Store::open(&junk).err().unwrap();
        assert!(
            e.is_usage() && e.to_string().contains("not an oscost database"),
            "{e}"
        );

        let foreign = dir.path().join("foreign.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        let e = Store::open(&foreign).err().unwrap();
        assert!(e.to_string().contains("something else"), "{e}");

        let newer = dir.path().join("newer.db");
        Connection::open(&newer)
            .unwrap()
            .execute_batch("PRAGMA user_version = 99;")
            .unwrap();
        let e = Store::open(&newer).err().unwrap();
        assert!(e.to_string().contains("newer oscost"), "{e}");
    }

    #[test]
    fn path_precedence_is_flag_then_env_then_xdg() {
        let p = default_path(Some(Path::new("/x/y.db"))).unwrap();
        assert_eq!(p, PathBuf::from("/x/y.db"));
    }

    #[test]
    fn a_first_schema_store_is_migrated_in_place_to_compact_samples() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v1.db");
        let mut run = testdata::run();
        // Realistic samples: many, rounded to picoseconds as the analysis rounds them.
        let samples: Vec<f64> = (0..5000)
            .map(|i| ((150.0 + (i * 7919 % 97) as f64 * 0.37) * 1000.0).round() / 1000.0)
            .collect();
        run.results[0].samples_ns = samples.clone();
        {
            let c = Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL,
                   label TEXT, host TEXT, kernel TEXT, wrapper TEXT, benchmarks INTEGER NOT NULL,
                   run_json TEXT NOT NULL);
                 CREATE TABLE results (run_id INTEGER NOT NULL, bench TEXT NOT NULL,
                   status TEXT NOT NULL, median REAL, ci_lo REAL, ci_hi REAL,
                   samples INTEGER NOT NULL, disturbed INTEGER NOT NULL,
                   PRIMARY KEY (run_id, bench));
                 PRAGMA user_version = 1;",
            )
            .unwrap();
            c.execute(
                "INSERT INTO runs (started_at, benchmarks, run_json) VALUES ('t', 4, ?1)",
                [serde_json::to_string(&run).unwrap()],
            )
            .unwrap();
        }
        let s = Store::open(&p).unwrap();
        assert_eq!(s.version().unwrap(), SCHEMA);
        let back = s.load(1).unwrap();
        assert_eq!(back.results, run.results);
        // The samples now take a few bytes each, not the ~16 of JSON text.
        let stored: i64 = s
            .conn
            .query_row("SELECT sum(length(data)) FROM samples", [], |r| r.get(0))
            .unwrap();
        let per = stored as f64 / samples.len() as f64;
        assert!(per < 3.0, "{per:.2} bytes a sample");
        // A new save is compact too and loads back equal.
        let mut s = s;
        let id = s.save(&run).unwrap();
        assert_eq!(s.load(id).unwrap().results, run.results);
    }

    #[test]
    fn urls_are_refused_not_made_into_directories() {
        for url in [
            "postgres://u@h:5432/db",
            "postgresql://h/db",
            "sqlite://x.db",
        ] {
            let e = default_path(Some(Path::new(url))).unwrap_err();
            assert!(matches!(e, StoreError::Url(_)) && e.is_usage(), "{e}");
        }
        assert!(
            default_path(Some(Path::new("./a://b"))).is_ok(),
            "a path, not a URL"
        );
    }

    #[test]
    fn reading_never_creates_and_special_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("typo/results.db");
        assert!(matches!(
            Store::open_existing(&p),
            Err(StoreError::NoStore(_))
        ));
        assert!(!dir.path().join("typo").exists());
        let e = Store::open(Path::new("/dev/null")).err().unwrap();
        assert!(matches!(e, StoreError::NotAFile(_)) && e.is_usage());
        assert!(!Path::new("/dev/null-journal").exists());
        // A file that says schema 1 but holds someone else's tables.
        let foreign = dir.path().join("v1.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); PRAGMA user_version = 1;")
            .unwrap();
        let e = Store::open(&foreign).err().unwrap();
        assert!(e.to_string().contains("no runs and results"), "{e}");
    }

    #[test]
    fn a_locked_or_read_only_database_is_refused_before_any_work() {
        let (dir, s) = temp_store();
        drop(s);
        let p = dir.path().join("sub/results.db");
        let holder = Connection::open(&p).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
        let t = std::time::Instant::now();
        let e = Store::open(&p).err().unwrap();
        assert!(matches!(e, StoreError::Locked(_)), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        holder.execute_batch("ROLLBACK;").unwrap();
        drop(holder);
        // Read-only file (root ignores the mode: then the open must simply succeed).
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
        match Store::open(&p) {
            Err(e) => assert!(matches!(e, StoreError::ReadOnly { .. }), "{e}"),
            Ok(_) => assert!(nix::unistd::geteuid().is_root()),
        }
        assert!(Store::open_existing(&p).is_ok());
    }

    #[test]
    fn concurrent_first_uses_of_a_fresh_file_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fresh.db");
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let p = p.clone();
                std::thread::spawn(move || Store::open(&p).map(|mut s| s.save(&testdata::run())))
            })
            .collect();
        for h in handles {
            assert!(h.join().unwrap().unwrap().is_ok());
        }
        assert_eq!(Store::open_existing(&p).unwrap().list().unwrap().len(), 8);
    }

    #[test]
    fn runs_saved_together_are_saved_together_or_not_at_all() {
        let (_d, mut s) = temp_store();
        let run = testdata::run();
        let e = s.save_all(&[&run, &run], &|| true).unwrap_err();
        assert!(matches!(e, StoreError::Interrupted));
        assert!(s.list().unwrap().is_empty());
        let ids = s.save_all(&[&run, &run], &|| false).unwrap();
        assert_eq!(ids.len(), 2);
        assert_eq!(s.list().unwrap().len(), 2);
    }
}
