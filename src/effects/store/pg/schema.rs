//! The PostgreSQL store's schema: created under an advisory lock when missing, migrated step by
//! step, its version read (and tables of ours without one refused as someone else's), and the
//! rights a save needs proven before anything is measured.

use postgres::error::SqlState;

use super::{Pg, write_err};
use crate::effects::store::{Fetched, SCHEMA, StoreError};

/// The advisory lock key under which the schema is created or migrated ("oscost" in ASCII).
const SCHEMA_LOCK: i64 = 0x6f73_636f_7374;

/// The schema (the SQLite file's after its migrations), in PostgreSQL's types.
const CREATE: &str = "
    CREATE TABLE oscost.runs (
        id BIGSERIAL PRIMARY KEY,
        started_at TEXT NOT NULL,
        label TEXT,
        host TEXT,
        kernel TEXT,
        wrapper TEXT,
        benchmarks BIGINT NOT NULL,
        run_json TEXT NOT NULL DEFAULT '',
        run_z BYTEA,
        digest TEXT,
        env_key TEXT
    );
    CREATE INDEX runs_by_digest ON oscost.runs(digest);
    CREATE TABLE oscost.results (
        run_id BIGINT NOT NULL REFERENCES oscost.runs(id) ON DELETE CASCADE,
        bench TEXT NOT NULL,
        status TEXT NOT NULL,
        median DOUBLE PRECISION,
        ci_lo DOUBLE PRECISION,
        ci_hi DOUBLE PRECISION,
        samples BIGINT NOT NULL,
        disturbed BOOLEAN NOT NULL,
        exit_witness_ns DOUBLE PRECISION,
        speed_witness_ns DOUBLE PRECISION,
        PRIMARY KEY (run_id, bench)
    );
    CREATE INDEX results_by_bench ON oscost.results(bench, run_id);
    CREATE TABLE oscost.samples (
        run_id BIGINT NOT NULL REFERENCES oscost.runs(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    -- Already deflated: compressing it again only costs time.
    ALTER TABLE oscost.samples ALTER COLUMN data SET STORAGE EXTERNAL;
    ALTER TABLE oscost.runs ALTER COLUMN run_z SET STORAGE EXTERNAL;
";

impl Pg {
    /// The schema's version, `None` when this database has no oscost store. Tables of ours
    /// without a version row are someone else's (or a half-made store: refused, not guessed).
    pub(super) fn version(&mut self) -> Result<Option<i32>, StoreError> {
        let c = &mut self.client;
        let has_schema = c
            .query_opt(
                // pg_tables lists tables whatever this user's rights on them.
                "SELECT 1 FROM pg_catalog.pg_tables
                 WHERE schemaname = 'oscost' AND tablename = 'schema_version'",
                &[],
            )
            .map_err(|e| super::pg_err(&e))?
            .is_some();
        if !has_schema {
            return Ok(None);
        }
        let rows = c
            .query("SELECT version FROM oscost.schema_version", &[])
            .map_err(|e| super::pg_err(&e))?;
        let not_ours = |why: String| StoreError::NotOurs {
            at: self.at.clone(),
            why,
        };
        let version: i32 = match rows.as_slice() {
            [r] => super::col(r, 0, "schema_version")?,
            [] => return Err(not_ours("its oscost schema has no version".into())),
            more => {
                return Err(not_ours(format!(
                    "its oscost.schema_version has {} rows, not one",
                    more.len()
                )));
            }
        };
        let tables: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'oscost'
                 AND tablename IN ('runs', 'results', 'samples')",
                &[],
            )
            .map_err(|e| super::pg_err(&e))?
            .try_get(0)
            .map_err(|e| super::pg_err(&e))?;
        // A newer oscost's tables are its own business (the caller says "newer"); at this
        // schema `store::altered` names the table that is missing or is a view.
        if tables < 3 && version < SCHEMA {
            return Err(not_ours(format!(
                "it says schema {version} but lacks {} of the runs, results and samples tables",
                3 - tables
            )));
        }
        Ok(Some(version))
    }

    /// Create or bring the schema up to `SCHEMA`, under the advisory lock, reading the
    /// version again once it is held.
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
        let at = self.at.clone();
        let c = &mut self.client;
        let mut tx = c.transaction().map_err(|e| super::pg_err(&e))?;
        let r: Result<(), postgres::Error> = (|| {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(
                "CREATE SCHEMA IF NOT EXISTS oscost;
                 CREATE TABLE IF NOT EXISTS oscost.schema_version (version INTEGER NOT NULL);",
            )?;
            let found: Option<i32> = tx
                .query_opt("SELECT version FROM oscost.schema_version", &[])?
                .map(|r| r.try_get(0))
                .transpose()?;
            if found.is_none() {
                let stray = tx.query_one(
                    "SELECT count(*) FROM information_schema.tables
                     WHERE table_schema = 'oscost' AND table_name <> 'schema_version'",
                    &[],
                )?;
                if stray.try_get::<_, i64>(0)? > 0 {
                    // Reported below, after the rollback.
                    return Ok(());
                }
                tx.batch_execute(CREATE)?;
                tx.execute("INSERT INTO oscost.schema_version VALUES ($1)", &[&SCHEMA])?;
            }
            // Versions before 3 never existed here; later migrations go here, step by step.
            if found.is_some_and(|v| v < 4) {
                recompute_identities(&mut tx)?;
                tx.execute("UPDATE oscost.schema_version SET version = 4", &[])?;
            }
            if found.is_some_and(|v| v < 5) {
                tx.batch_execute("ALTER TABLE oscost.runs ADD COLUMN IF NOT EXISTS env_key TEXT")?;
                recompute_identities(&mut tx)?;
                tx.execute("UPDATE oscost.schema_version SET version = 5", &[])?;
            }
            if found.is_some_and(|v| v < 6) {
                recompute_identities(&mut tx)?;
                tx.execute("UPDATE oscost.schema_version SET version = 6", &[])?;
            }
            if found.is_some_and(|v| v < 7) {
                tx.batch_execute(
                    "ALTER TABLE oscost.results ADD COLUMN IF NOT EXISTS exit_witness_ns DOUBLE PRECISION",
                )?;
                compute_witnesses(&mut tx, RESULT_EXIT)?;
                tx.execute("UPDATE oscost.schema_version SET version = 7", &[])?;
            }
            if found.is_some_and(|v| v < 8) {
                tx.batch_execute(
                    "ALTER TABLE oscost.results ADD COLUMN IF NOT EXISTS speed_witness_ns DOUBLE PRECISION",
                )?;
                compute_witnesses(&mut tx, RESULT_SPEED)?;
                tx.execute("UPDATE oscost.schema_version SET version = 8", &[])?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                let v: Option<i32> = tx
                    .query_opt("SELECT version FROM oscost.schema_version", &[])
                    .map_err(|e| super::pg_err(&e))?
                    .map(|r| super::col(&r, 0, "schema_version"))
                    .transpose()?;
                if v.is_none() {
                    return Err(StoreError::NotOurs {
                        at,
                        why: "its schema 'oscost' holds tables of something else".into(),
                    });
                }
                tx.commit().map_err(|e| write_err(&at, e))
            }
            Err(e) => Err(write_err(&at, e)),
        }
    }

    /// Prove a run could be written now, before measuring: the server is not read-only (a
    /// standby) and this user may insert into every table. Asked, not tried: a trial insert
    /// would use up an id of the sequence.
    pub(super) fn probe_write(&mut self) -> Result<(), StoreError> {
        let row = self
            .client
            .query_one(
                // Every right a save uses: INSERT into each table, the id sequence, SELECT
                // on runs (RETURNING id, and finding a run already there), the schema.
                "SELECT current_setting('transaction_read_only') = 'on',
                        has_schema_privilege('oscost', 'USAGE')
                        AND has_table_privilege('oscost.runs', 'INSERT')
                        AND has_table_privilege('oscost.runs', 'SELECT')
                        AND has_table_privilege('oscost.results', 'INSERT')
                        AND has_table_privilege('oscost.samples', 'INSERT')
                        AND has_sequence_privilege('oscost.runs_id_seq', 'USAGE')",
                &[],
            )
            .map_err(|e| super::pg_err(&e))?;
        let flag = |i: usize| super::col::<bool>(&row, i, "privileges");
        let why = if flag(0)? {
            "the server is read-only (a standby?)"
        } else if !flag(1)? {
            "this user lacks a right a save needs (USAGE on schema oscost, INSERT on runs, results and samples, SELECT on runs, USAGE on oscost.runs_id_seq)"
        } else {
            return self.probe_locks();
        };
        Err(StoreError::ReadOnly {
            at: self.at.clone(),
            why: why.into(),
        })
    }
}

impl Pg {
    /// Take, and give back at once, the lock a save takes on every table, without waiting: a
    /// table another session holds (a forgotten `LOCK TABLE`, a migration) is found before
    /// measuring, not 30 s after it.
    fn probe_locks(&mut self) -> Result<(), StoreError> {
        let at = self.at.clone();
        let mut tx = self.client.transaction().map_err(|e| super::pg_err(&e))?;
        let r = tx.batch_execute(
            "LOCK TABLE oscost.runs, oscost.results, oscost.samples IN ROW EXCLUSIVE MODE NOWAIT",
        );
        let _ = tx.rollback();
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                Err(StoreError::Locked(at))
            }
            Err(e) => Err(super::pg_err(&e)),
        }
    }
}

/// One witness column of the results table and how a stored result's value is computed.
struct ResultWitness {
    /// The results table's column.
    column: &'static str,
    /// Its value for one result, from the result's repetitions.
    of: fn(&crate::base::model::BenchResult) -> Option<f64>,
    /// What a run that cannot be read keeps none of, for the line that names it.
    what: &'static str,
}

/// Schema 7's column: the exit witness (`witness::result_exit_witness`).
const RESULT_EXIT: ResultWitness = ResultWitness {
    column: "exit_witness_ns",
    of: crate::analysis::witness::result_exit_witness,
    what: "exit witnesses",
};

/// Schema 8's column: the speed witness (`witness::result_speed_witness`).
const RESULT_SPEED: ResultWitness = ResultWitness {
    column: "speed_witness_ns",
    of: crate::analysis::witness::result_speed_witness,
    what: "speed witnesses",
};

/// Schemas 7 and 8: each stored result's witness `w`, from its run's repetitions; a run that
/// cannot be read keeps none, and is named.
fn compute_witnesses(
    tx: &mut postgres::Transaction,
    w: ResultWitness,
) -> Result<(), postgres::Error> {
    let ids: Vec<i64> = tx
        .query(
            "SELECT id FROM oscost.runs WHERE run_z IS NOT NULL ORDER BY id",
            &[],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let set = tx.prepare(&format!(
        "UPDATE oscost.results SET {} = $3 WHERE run_id = $1 AND bench = $2",
        w.column
    ))?;
    for id in ids {
        let run_z: Vec<u8> = tx
            .query_one("SELECT run_z FROM oscost.runs WHERE id = $1", &[&id])?
            .try_get(0)?;
        let fetched = Fetched::Compact {
            run_z,
            samples: vec![],
        };
        match crate::effects::store::rows::decode(id, fetched, false) {
            Ok(run) => {
                for r in &run.results {
                    let value = (w.of)(r);
                    if value.is_some() {
                        tx.execute(&set, &[&id, &r.id, &value])?;
                    }
                }
            }
            Err(e) => crate::say!(
                "oscost: stored run {id} keeps no {} ({e}); the other runs were migrated",
                w.what
            ),
        }
    }
    Ok(())
}

/// Schema 4: every run's identity computed anew (schema 3's digests did not survive a JSON
/// round trip); schema 5: with its environment key. A run that cannot be read keeps what it
/// had, and is named.
fn recompute_identities(tx: &mut postgres::Transaction) -> Result<(), postgres::Error> {
    let ids: Vec<i64> = tx
        .query("SELECT id FROM oscost.runs ORDER BY id", &[])?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    for id in ids {
        let row = tx.query_one(
            "SELECT run_z, run_json FROM oscost.runs WHERE id = $1",
            &[&id],
        )?;
        let fetched = match row.try_get::<_, Option<Vec<u8>>>(0)? {
            None => Fetched::Json(row.try_get(1)?),
            Some(run_z) => {
                let samples = tx
                    .query(
                        "SELECT idx, data FROM oscost.samples WHERE run_id = $1",
                        &[&id],
                    )?
                    .iter()
                    .map(|r| Ok((i64::from(r.try_get::<_, i32>(0)?), r.try_get(1)?)))
                    .collect::<Result<_, postgres::Error>>()?;
                Fetched::Compact { run_z, samples }
            }
        };
        match crate::effects::store::rows::decode(id, fetched, false) {
            Ok(run) => {
                tx.execute(
                    "UPDATE oscost.runs SET digest = $2, env_key = $3 WHERE id = $1",
                    &[
                        &id,
                        &crate::effects::store::rows::digest(&run),
                        &crate::effects::store::rows::env_key(&run),
                    ],
                )?;
            }
            Err(e) => crate::say!(
                "oscost: stored run {id} was kept as it was while migrating the store ({e}); the other runs were migrated"
            ),
        }
    }
    Ok(())
}
