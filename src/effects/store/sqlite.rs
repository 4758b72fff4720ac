//! The SQLite backend: the embedded default, one file per machine, no server. A save is one
//! `BEGIN IMMEDIATE` transaction, so SQLite's journal makes it atomic and a run killed while
//! saving leaves the earlier runs intact and no partial run. The schema's version is
//! `PRAGMA user_version`; `migrate` brings an older file up to date in place (schema 1 runs
//! rewritten compactly, then VACUUM; schema 4 identities computed; schema 5 environment keys;
//! schema 6 identities computed again, wider; a run that cannot be read is kept as it was and
//! named) and a newer or foreign file is refused.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::rows::{Encoded, Fetched};
use super::{Backend, ResultRow, SCHEMA, Saved, StoreError};
use crate::base::model::{HistoryPoint, RunSummary};

/// The largest store whose pages are all checked when it is opened to save (`pages_readable`).
const QUICK_CHECK_BYTES: u64 = 512 << 20;

/// A symbolic link that leads nowhere (dangling, or a loop) is said as what it is: SQLite would
/// create the file it points at, or fail with a message about the database.
fn no_broken_link(path: &Path) -> Result<(), StoreError> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    match std::fs::metadata(path) {
        Err(e) if is_link => Err(StoreError::BadLink {
            at: path.display().to_string(),
            why: e.to_string(),
        }),
        _ => Ok(()),
    }
}

/// A writer killed mid-transaction leaves a hot journal (`PATH-journal`, not empty) that only a
/// connection that may write can roll back. Try that (opening without creating anything:
/// rolling back restores the store's last committed state, which is what every reader must
/// see); return the journal's path when one is still there afterwards.
fn recover_hot_journal(path: &Path) -> Option<PathBuf> {
    let mut j = path.as_os_str().to_owned();
    j.push("-journal");
    let journal = PathBuf::from(j);
    let hot = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.len() > 0);
    if !hot(&journal) {
        return None;
    }
    if let Ok(c) = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE) {
        let _ = c.busy_timeout(PROBE_WAIT);
        // Any read takes the shared lock, and with it rolls the hot journal back.
        let _ = c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        });
    }
    hot(&journal).then_some(journal)
}

/// How long a save waits for another process's transaction (runs save in milliseconds).
const SAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long the check before measuring waits: a lock held longer is someone else's work.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

pub struct Sqlite {
    pub(super) conn: Connection,
    path: PathBuf,
}

mod migrate;

impl Sqlite {
    /// Open for saving (see `Store::open`).
    pub fn open(path: &Path) -> Result<Sqlite, StoreError> {
        no_broken_link(path)?;
        if let Ok(m) = std::fs::metadata(path)
            && !m.is_file()
        {
            return Err(StoreError::NotAFile(path.to_path_buf()));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Dir(dir.to_path_buf(), e))?;
        }
        let conn = Connection::open(path).map_err(|e| StoreError::NotOurs {
            at: path.display().to_string(),
            why: e.to_string(),
        })?;
        let store = Sqlite::checked(conn, path)?;
        store.pages_readable()?;
        store.probe_write()?;
        Ok(store)
    }

    /// Open an existing database to read; never creates anything.
    pub fn open_existing(path: &Path) -> Result<Sqlite, StoreError> {
        let none = || StoreError::NoStore(path.display().to_string());
        no_broken_link(path)?;
        match std::fs::metadata(path) {
            Err(_) => return Err(none()),
            Ok(m) if !m.is_file() => return Err(StoreError::NotAFile(path.to_path_buf())),
            Ok(_) => {}
        }
        let hot = recover_hot_journal(path);
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| StoreError::NotOurs {
                at: path.display().to_string(),
                why: e.to_string(),
            })?;
        let store = Sqlite::checked(conn, path).map_err(|e| match (e, hot) {
            // A read-only connection cannot roll a hot journal back: said as what it is.
            (StoreError::NotOurs { .. }, Some(journal)) => StoreError::HotJournal {
                at: path.display().to_string(),
                journal: journal.display().to_string(),
            },
            (e, _) => e,
        })?;
        if store.version()? == 0 {
            // Empty (or being created this instant): nothing to read yet.
            return Err(none());
        }
        Ok(store)
    }

    /// The schema's version; an error means the file is not SQLite.
    pub(super) fn version(&self) -> Result<i32, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.unreadable(e))
    }

    fn table_names(&self) -> Result<Vec<String>, StoreError> {
        self.conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| self.unreadable(e))
    }

    fn not_ours(&self, why: String) -> StoreError {
        StoreError::NotOurs {
            at: self.path.display().to_string(),
            why,
        }
    }

    /// An error reading the file: locked by another process (named when /proc says who), or
    /// not an oscost store.
    fn unreadable(&self, e: rusqlite::Error) -> StoreError {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Locked(locked_by(&self.path))
            }
            _ => self.not_ours(e.to_string()),
        }
    }

    /// Check that the file is ours (and not newer), migrating it when the connection can write.
    fn checked(conn: Connection, path: &Path) -> Result<Sqlite, StoreError> {
        conn.busy_timeout(SAVE_WAIT)?;
        let store = Sqlite {
            conn,
            path: path.to_path_buf(),
        };
        // Version and tables from one snapshot: another process may be migrating this very
        // file, and its tables without its version would look like someone else's.
        store
            .conn
            .execute_batch("BEGIN")
            .map_err(|e| store.unreadable(e))?;
        let seen = store.version().and_then(|v| Ok((v, store.table_names()?)));
        let _ = store.conn.execute_batch("COMMIT");
        let (version, tables) = seen?;
        if version > SCHEMA {
            return Err(StoreError::Newer {
                at: path.display().to_string(),
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
            // A file that cannot take a journal (in /proc, on a full or read-only file
            // system) is found here when new: refused as a save would be, before any work.
            store.migrate().map_err(|e| match e {
                StoreError::Sql(e) => store.write_refused(e),
                e => e,
            })?;
        }
        if store.version()? == SCHEMA {
            let writing = !store.conn.is_readonly(rusqlite::MAIN_DB)?;
            super::altered(&mut |t| store.table_seen(t), writing)?;
        }
        Ok(store)
    }

    /// One table as this file holds it (`None`: no such table or view).
    fn table_seen(&self, table: &str) -> Result<Option<super::TableSeen>, StoreError> {
        let kind: Option<String> = self
            .conn
            .query_row(
                "SELECT type FROM sqlite_master WHERE name = ?1 AND type IN ('table', 'view')",
                [table],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.unreadable(e))?;
        let Some(kind) = kind else {
            return Ok(None);
        };
        let mut q = self
            .conn
            .prepare("SELECT name, pk FROM pragma_table_info(?1) ORDER BY pk")
            .map_err(|e| self.unreadable(e))?;
        let cols: Vec<(String, i64)> = q
            .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.unreadable(e))?;
        let mut added: Vec<String> = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?1")
            .and_then(|mut q| {
                q.query_map([table], |r| r.get::<_, String>(0))?
                    .map(|n| n.map(|n| format!("trigger {n}")))
                    .collect()
            })
            .map_err(|e| self.unreadable(e))?;
        let sql: Option<String> = self
            .conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .map_err(|e| self.unreadable(e))?;
        if sql.is_some_and(|s| has_check(&s)) {
            added.push("a CHECK constraint".into());
        }
        Ok(Some(super::TableSeen {
            added,
            is_table: kind == "table",
            key: cols
                .iter()
                .filter(|(_, pk)| *pk > 0)
                .map(|(n, _)| n.clone())
                .collect(),
            columns: cols.into_iter().map(|(n, _)| n).collect(),
        }))
    }

    /// SQLite's `quick_check` of every page, before a run is measured to be saved here: a
    /// zeroed or torn interior page is found now (exit 2), not as "malformed" after the work.
    /// Only up to `QUICK_CHECK_BYTES`: it reads the whole file (0.12-0.16 s per 100 MiB
    /// here), and a larger store is left to the save's own errors, its run kept in unsaved/.
    fn pages_readable(&self) -> Result<(), StoreError> {
        let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if size > QUICK_CHECK_BYTES {
            return Ok(());
        }
        let first: String = self
            .conn
            .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
            .map_err(|e| match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseCorrupt) => StoreError::Damaged {
                    at: self.path.display().to_string(),
                    why: e.to_string(),
                },
                _ => self.unreadable(e),
            })?;
        if first == "ok" {
            Ok(())
        } else {
            Err(StoreError::Damaged {
                at: self.path.display().to_string(),
                why: first,
            })
        }
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
        r.map_err(|e| self.write_refused(e))
    }

    /// A write this store refused, as what the user can do about it: locked by another
    /// process, not writable here (a read-only file or directory, a file system that is full
    /// or cannot hold a journal), a row refused by what was added outside oscost.
    fn write_refused(&self, e: rusqlite::Error) -> StoreError {
        let at = || self.path.display().to_string();
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Locked(locked_by(&self.path))
            }
            Some(
                rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
                | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::DiskFull,
            ) => StoreError::ReadOnly {
                at: at(),
                why: e.to_string(),
            },
            // A trigger or a constraint added outside oscost refuses the row it would save.
            Some(rusqlite::ErrorCode::ConstraintViolation) => StoreError::AlteredTable {
                table: "runs".into(),
                why: format!("a row like the one a run saves is refused: {e}"),
            },
            _ => StoreError::Sql(e),
        }
    }

    fn fetch_compact(&self, id: i64, with_samples: bool) -> Result<Option<Fetched>, StoreError> {
        let z: Option<Option<Vec<u8>>> = if self.version()? < 2 {
            // A first-schema store opened read-only (never migrated): no run_z column.
            self.conn
                .query_row("SELECT NULL FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?
        } else {
            self.conn
                .query_row("SELECT run_z FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?
        };
        let Some(z) = z else { return Ok(None) };
        let Some(run_z) = z else {
            // A read-only store of the first schema: the whole run is its JSON.
            let json: String =
                self.conn
                    .query_row("SELECT run_json FROM runs WHERE id = ?1", [id], |r| {
                        r.get(0)
                    })?;
            return Ok(Some(Fetched::Json(json)));
        };
        let mut samples = Vec::new();
        if with_samples {
            let mut q = self
                .conn
                .prepare("SELECT idx, data FROM samples WHERE run_id = ?1")?;
            let rows = q.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            samples = rows.collect::<Result<_, _>>()?;
        }
        Ok(Some(Fetched::Compact { run_z, samples }))
    }
}

/// The store for a "locked" message: its path, and the other processes that have it open
/// (from /proc; those of other users are seen only by root).
/// Whether a table's `CREATE` statement declares a CHECK constraint (oscost's declare none):
/// the keyword as a word, outside quoted names and strings.
fn has_check(sql: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut word = String::new();
    for c in sql.chars().chain(std::iter::once(' ')) {
        match quote {
            Some(q) if c == q || (q == '[' && c == ']') => quote = None,
            Some(_) => {}
            None if matches!(c, '\'' | '"' | '`' | '[') => {
                word.clear();
                quote = Some(c);
            }
            None if c.is_ascii_alphanumeric() || c == '_' => word.push(c),
            None => {
                if word.eq_ignore_ascii_case("check") {
                    return true;
                }
                word.clear();
            }
        }
    }
    false
}

fn locked_by(path: &Path) -> String {
    let me = std::process::id().to_string();
    let Ok(want) = std::fs::canonicalize(path) else {
        return path.display().to_string();
    };
    let mut holders = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let holds = std::fs::read_dir(p.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == want));
        if holds {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            holders.push(format!(
                "pid {pid} ({})",
                crate::base::text::printable(comm.trim())
            ));
        }
    }
    match holders.len() {
        0 => path.display().to_string(),
        _ => format!("{} (held by {})", path.display(), holders.join(", ")),
    }
}

/// A run a migration could not bring along: kept as it was, and said.
fn skipped(id: i64, why: &str) {
    crate::say!(
        "oscost: stored run {id} was kept as it was while migrating the store ({why}); the other runs were migrated"
    );
}

fn write_samples(conn: &Connection, id: i64, e: &Encoded) -> Result<(), StoreError> {
    let mut ins =
        conn.prepare("INSERT OR REPLACE INTO samples (run_id, idx, data) VALUES (?1, ?2, ?3)")?;
    for (idx, data) in &e.samples {
        ins.execute(params![id, idx, data])?;
    }
    Ok(())
}

/// Insert one run and its rows inside `tx`; returns its id.
fn insert(tx: &rusqlite::Transaction, e: &Encoded) -> Result<i64, StoreError> {
    tx.execute(
        "INSERT INTO runs (started_at, label, host, kernel, wrapper, benchmarks, run_json,
                           run_z, digest, env_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, '', ?7, ?8, ?9)",
        params![
            e.started_at,
            e.label,
            e.host,
            e.kernel,
            e.wrapper,
            e.results.len() as i64,
            e.run_z,
            e.digest,
            e.env_key,
        ],
    )?;
    let id = tx.last_insert_rowid();
    write_samples(tx, id, e)?;
    let mut ins = tx.prepare(
        "INSERT OR REPLACE INTO results
         (run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed, exit_witness_ns,
          speed_witness_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for r in &e.results {
        ins.execute(params![
            id,
            r.bench,
            r.status,
            r.median,
            r.ci_lo,
            r.ci_hi,
            r.samples,
            r.disturbed,
            r.exit_witness_ns,
            r.speed_witness_ns
        ])?;
    }
    Ok(id)
}

impl Sqlite {
    /// The results' two witness columns as a query reads them: a store opened read-only
    /// before schema 7 (exit) or 8 (speed) has none, and reads as no witness.
    fn witness_columns(&self) -> Result<&'static str, StoreError> {
        Ok(match self.version()? {
            v if v >= 8 => "results.exit_witness_ns, results.speed_witness_ns",
            7 => "results.exit_witness_ns, NULL",
            _ => "NULL, NULL",
        })
    }
}

impl Backend for Sqlite {
    fn insert_all(
        &mut self,
        runs: &[Encoded],
        skip_known: bool,
        stop: &crate::base::stop::Stop,
    ) -> Result<Vec<Saved>, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut saved = Vec::new();
        for e in runs {
            let known: Option<i64> = if skip_known {
                tx.query_row(
                    "SELECT id FROM runs WHERE digest = ?1 ORDER BY id LIMIT 1",
                    [&e.digest],
                    |r| r.get(0),
                )
                .optional()?
            } else {
                None
            };
            saved.push(match known {
                Some(id) => Saved { id, new: false },
                None => Saved {
                    id: insert(&tx, e)?,
                    new: true,
                },
            });
        }
        if let Err(i) = stop.check() {
            tx.rollback()?;
            return Err(StoreError::Interrupted(i));
        }
        tx.commit()?;
        Ok(saved)
    }

    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError> {
        // A store opened read-only before schema 5 has no env_key column.
        let env_key = if self.version()? >= 5 {
            "env_key"
        } else {
            "NULL"
        };
        let mut q = self.conn.prepare(&format!(
            "SELECT id, started_at, label, host, kernel, wrapper, benchmarks, {env_key}
             FROM runs ORDER BY id"
        ))?;
        let rows = q.query_map([], |r| {
            Ok(RunSummary {
                id: r.get(0)?,
                started_at: r.get(1)?,
                label: r.get(2)?,
                host: r.get(3)?,
                kernel: r.get(4)?,
                wrapper: r.get(5)?,
                benchmarks: r.get(6)?,
                env_key: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn has_run(&mut self, id: i64) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT 1 FROM runs WHERE id = ?1", [id], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn nth_last(&mut self, back: i64) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                [back],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn fetch(
        &mut self,
        id: i64,
        with_samples: bool,
    ) -> Result<Option<(Fetched, Option<String>)>, StoreError> {
        let Some(f) = self.fetch_compact(id, with_samples)? else {
            return Ok(None);
        };
        let digest = if self.version()? >= 3 {
            self.conn
                .query_row("SELECT digest FROM runs WHERE id = ?1", [id], |r| r.get(0))?
        } else {
            None
        };
        Ok(Some((f, digest)))
    }

    fn history(&mut self, bench: &str) -> Result<Vec<HistoryPoint>, StoreError> {
        let witnesses = self.witness_columns()?;
        let mut q = self.conn.prepare(&format!(
            "SELECT runs.id, runs.started_at, runs.label, runs.wrapper, results.status,
                    results.median, results.ci_lo, results.ci_hi, results.disturbed, {witnesses}
             FROM results JOIN runs ON runs.id = results.run_id
             WHERE results.bench = ?1 ORDER BY runs.id"
        ))?;
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
                exit_witness_ns: r.get(9)?,
                speed_witness_ns: r.get(10)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn result_rows(&mut self, ids: &[i64]) -> Result<Vec<(i64, ResultRow)>, StoreError> {
        let witnesses = self.witness_columns()?;
        let mut q = self.conn.prepare(&format!(
            "SELECT run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed, {witnesses}
             FROM results WHERE run_id = ?1 ORDER BY rowid"
        ))?;
        let mut out = Vec::new();
        for &id in ids {
            let rows = q.query_map([id], |r| {
                Ok((
                    r.get(0)?,
                    ResultRow {
                        bench: r.get(1)?,
                        status: r.get(2)?,
                        median: r.get(3)?,
                        ci_lo: r.get(4)?,
                        ci_hi: r.get(5)?,
                        samples: r.get(6)?,
                        disturbed: r.get(7)?,
                        exit_witness_ns: r.get(8)?,
                        speed_witness_ns: r.get(9)?,
                    },
                ))
            })?;
            for row in rows {
                out.push(row?);
            }
        }
        Ok(out)
    }

    fn known_benchmarks(&mut self) -> Result<Vec<String>, StoreError> {
        let mut q = self
            .conn
            .prepare("SELECT DISTINCT bench FROM results ORDER BY bench")?;
        let rows = q.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests;
