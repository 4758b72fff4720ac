//! The SQLite store's migrations, one step per schema version, run in one immediate
//! transaction that reads the version again once it holds the lock; a run that cannot be read
//! is kept as it was and named, never blocking the others.

use rusqlite::params;

use super::{Sqlite, skipped, write_samples};
use crate::base::model;
use crate::effects::store::StoreError;

impl Sqlite {
    /// Bring the schema up to `SCHEMA` in one immediate transaction that reads the version
    /// again under the lock: several processes opening a fresh file at once migrate it once.
    pub(super) fn migrate(&self) -> Result<(), StoreError> {
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
            self.create_tables()?;
        }
        if from < 2 {
            self.compact_runs()?;
        }
        if from < 3 {
            self.add_digests()?;
        }
        if from < 4 {
            self.compute_identities(4)?;
        }
        if from < 5 {
            self.compute_env_keys()?;
        }
        if from < 6 {
            // Identities that also hash the environment, the clock and why a result failed
            // or was skipped (two runs of failures started in one second shared one).
            self.compute_identities(6)?;
        }
        if from < 7 {
            self.compute_witness(
                "exit_witness_ns",
                crate::analysis::witness::result_exit_witness,
                7,
            )?;
        }
        if from < 8 {
            self.compute_witness(
                "speed_witness_ns",
                crate::analysis::witness::result_speed_witness,
                8,
            )?;
        }
        Ok(())
    }

    /// Schema 1: the runs and results tables.
    fn create_tables(&self) -> Result<(), StoreError> {
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
        Ok(())
    }

    /// Schema 2: compact runs (the JSON without raw samples, deflated) and samples as picoseconds, delta-varint and deflated (`sample_codec`); existing runs rewritten in place.
    fn compact_runs(&self) -> Result<(), StoreError> {
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
            let Ok(run) = model::load::parse_run(json, &format!("stored run {id}")) else {
                // Kept as it is (read as JSON, as before) rather than blocking every
                // other run's migration; said once, here.
                skipped(*id, "it cannot be read as a run");
                continue;
            };
            let e = crate::effects::store::rows::encode(&run)?;
            self.conn.execute(
                "UPDATE runs SET run_json = '', run_z = ?2 WHERE id = ?1",
                params![id, e.run_z],
            )?;
            write_samples(&self.conn, *id, &e)?;
        }
        self.conn.execute_batch("PRAGMA user_version = 2;")?;
        Ok(())
    }

    /// Schema 3: a digest column and its index.
    fn add_digests(&self) -> Result<(), StoreError> {
        self.conn.execute_batch(
            "ALTER TABLE runs ADD COLUMN digest TEXT;
             CREATE INDEX runs_by_digest ON runs(digest);",
        )?;
        self.conn.execute_batch("PRAGMA user_version = 3;")?;
        Ok(())
    }

    /// Schema 4 (and 6, with a wider identity): identities, so that a run copied in twice (push, import) is kept once, computed anew for every run (schema 3's digests did not survive a JSON round trip).
    fn compute_identities(&self, version: i32) -> Result<(), StoreError> {
        // Identities, so that a run copied in twice (push, import) is kept once: computed
        // anew for every run (schema 3's digests did not survive a JSON round trip).
        let ids: Vec<i64> = {
            let mut q = self.conn.prepare("SELECT id FROM runs")?;
            q.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        for id in ids {
            let run = self
                .fetch_compact(id, true)?
                .map(|f| crate::effects::store::rows::decode(id, f, false));
            match run {
                Some(Ok(run)) => {
                    self.conn.execute(
                        "UPDATE runs SET digest = ?2 WHERE id = ?1",
                        params![id, crate::effects::store::rows::digest(&run)],
                    )?;
                }
                Some(Err(e)) => skipped(id, &e.to_string()),
                None => {}
            }
        }
        self.conn
            .execute_batch(&format!("PRAGMA user_version = {version};"))?;
        Ok(())
    }

    /// Schema 5: each run's environment key (`store::rows::env_key`), so that the run-to-run spread is learned from runs of one environment only.
    fn compute_env_keys(&self) -> Result<(), StoreError> {
        self.add_column("runs", "env_key", "TEXT")?;
        self.each_run(|id, run| {
            self.conn.execute(
                "UPDATE runs SET env_key = ?2 WHERE id = ?1",
                params![id, crate::effects::store::rows::env_key(run)],
            )?;
            Ok(())
        })?;
        self.conn.execute_batch("PRAGMA user_version = 5;")?;
        Ok(())
    }

    /// Schemas 7 and 8: each stored result's exit witness (`witness::result_exit_witness`)
    /// and then its speed witness (`witness::result_speed_witness`), from its run's
    /// repetitions, so that runs measured apart can be projected to one level of either.
    fn compute_witness(
        &self,
        column: &str,
        of: fn(&crate::base::model::BenchResult) -> Option<f64>,
        version: u32,
    ) -> Result<(), StoreError> {
        self.add_column("results", column, "REAL")?;
        let update = format!("UPDATE results SET {column} = ?3 WHERE run_id = ?1 AND bench = ?2");
        self.each_run(|id, run| {
            for r in &run.results {
                if let Some(w) = of(r) {
                    self.conn.execute(&update, params![id, r.id, w])?;
                }
            }
            Ok(())
        })?;
        self.conn
            .execute_batch(&format!("PRAGMA user_version = {version};"))?;
        Ok(())
    }

    /// `table` gains `column` of `kind` unless it has it (a migration run again after one
    /// that stopped part way).
    fn add_column(&self, table: &str, column: &str, kind: &str) -> Result<(), StoreError> {
        let has: bool = self.conn.query_row(
            "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
            params![table, column],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !has {
            self.conn
                .execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind};"))?;
        }
        Ok(())
    }

    /// `each` for every stored run that can be read (without samples); one that cannot is
    /// named and kept as it was, never blocking the others.
    fn each_run(
        &self,
        mut each: impl FnMut(i64, &model::Run) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let ids: Vec<i64> = {
            let mut q = self.conn.prepare("SELECT id FROM runs")?;
            q.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        for id in ids {
            match self
                .fetch_compact(id, false)?
                .map(|f| crate::effects::store::rows::decode(id, f, false))
            {
                Some(Ok(run)) => each(id, &run)?,
                Some(Err(e)) => skipped(id, &e.to_string()),
                None => {}
            }
        }
        Ok(())
    }
}
