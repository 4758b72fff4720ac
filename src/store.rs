//! History: every run saved to an SQLite database (rusqlite, bundled). The database path is
//! `--db PATH`, else `$OSCOST_DB`, else `$XDG_DATA_HOME/oscost/results.db`, else
//! `~/.local/share/oscost/results.db`.
//!
//! A run is written in one transaction at its end: SQLite's journal makes that atomic, so a run
//! killed while saving (even by SIGKILL) leaves the earlier runs intact and no partial run. The
//! whole run is kept as its JSON (the result model, raw samples included) beside a summary row
//! per result that `history` queries. The schema is versioned with `PRAGMA user_version`;
//! `migrate` brings an older database up to date and a newer or foreign one is refused.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::model::{self, HistoryPoint, Run, RunSummary};

/// The schema this oscost writes.
pub const SCHEMA: i32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error(
        "{path} is not an oscost database ({why}); point --db (or OSCOST_DB) at another file, or move this one away"
    )]
    NotOurs { path: PathBuf, why: String },
    #[error(
        "{path} was written by a newer oscost (schema {found}, this one reads {SCHEMA}); upgrade oscost"
    )]
    Newer { path: PathBuf, found: i32 },
    #[error("no run '{0}' in the store (`oscost history` lists them)")]
    NoSuchRun(String),
    #[error("stored run {id} cannot be read: {why}")]
    BadRun { id: i64, why: String },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
}

impl StoreError {
    /// Errors that are the user's to fix by pointing elsewhere (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            StoreError::NotOurs { .. } | StoreError::Newer { .. } | StoreError::NoSuchRun(_)
        )
    }
}

/// Where the database is, by precedence.
pub fn default_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("OSCOST_DB").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("oscost").join("results.db")
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Open (creating if needed) and migrate.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Dir(dir.to_path_buf(), e))?;
        }
        let not_ours = |why: String| StoreError::NotOurs {
            path: path.to_path_buf(),
            why,
        };
        let conn = Connection::open(path).map_err(|e| not_ours(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let version: i32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| not_ours(e.to_string()))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        if version > SCHEMA {
            return Err(StoreError::Newer {
                path: path.to_path_buf(),
                found: version,
            });
        }
        if version == 0 {
            let tables: i64 = store.conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )?;
            if tables > 0 {
                return Err(not_ours(format!(
                    "it holds {tables} table(s) of something else"
                )));
            }
        }
        store.migrate(version)?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bring the schema from `from` to `SCHEMA`, one step per version, each in a transaction.
    fn migrate(&self, from: i32) -> Result<(), StoreError> {
        if from < 1 {
            self.conn.execute_batch(
                "BEGIN;
                 CREATE TABLE runs (
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
                 PRAGMA user_version = 1;
                 COMMIT;",
            )?;
        }
        Ok(())
    }

    /// Save a run in one transaction; returns its id.
    pub fn save(&mut self, run: &Run) -> Result<i64, StoreError> {
        let json = serde_json::to_string(run).map_err(|e| StoreError::BadRun {
            id: 0,
            why: e.to_string(),
        })?;
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO runs (started_at, label, host, kernel, wrapper, benchmarks, run_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run.started_at,
                run.label,
                run.env.hostname,
                run.env.kernel_release,
                run.wrapper,
                run.results.len() as i64,
                json
            ],
        )?;
        let id = tx.last_insert_rowid();
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
        tx.commit()?;
        Ok(id)
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
        let json: String = self
            .conn
            .query_row("SELECT run_json FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
        model::run_from_json(&json, &format!("stored run {id}")).map_err(|e| StoreError::BadRun {
            id,
            why: e.to_string(),
        })
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
        let p = default_path(Some(Path::new("/x/y.db")));
        assert_eq!(p, PathBuf::from("/x/y.db"));
    }
}
