//! The PostgreSQL backend: one database shared by a fleet (`postgres://` or `postgresql://`
//! URL, as libpq accepts them; TLS is not spoken, so use a Unix socket, loopback or a tunnel).
//! Its tables live in their own schema, `oscost`, so that the database may hold anything else.
//! The schema's version is the one row of `oscost.schema_version`; creating and migrating run
//! under a transaction-scoped advisory lock, so hosts that first use a fresh database at once
//! create it once. A save is one transaction: a client killed at any point (SIGKILL included)
//! loses its connection and the server rolls the transaction back, leaving no partial run;
//! concurrent saves from many hosts each get their own ids (`BIGSERIAL`) and lose nothing.

use postgres::error::SqlState;
use postgres::{Client, NoTls};

use super::{Backend, Encoded, Fetched, ResultRow, SCHEMA, Saved, StoreError};
use crate::model::{HistoryPoint, RunSummary};

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
        digest TEXT
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

pub struct Pg {
    client: Client,
    at: String,
}

impl Pg {
    /// Connect; with `create`, make the schema when missing, migrate it, and prove a run could
    /// be written now. Without, the store must exist and nothing is created.
    pub fn open(url: &str, at: &str, create: bool) -> Result<Pg, StoreError> {
        let client = Client::connect(url, NoTls).map_err(|e| StoreError::Unreachable {
            at: at.to_string(),
            why: pg_text(&e),
        })?;
        let mut pg = Pg {
            client,
            at: at.to_string(),
        };
        let version = pg.version()?;
        match version {
            Some(v) if v > SCHEMA => {
                return Err(StoreError::Newer {
                    at: at.to_string(),
                    found: v,
                });
            }
            None if !create => return Err(StoreError::NoStore(at.to_string())),
            Some(v) if v < SCHEMA && create => pg.migrate()?,
            None => pg.migrate()?,
            Some(_) => {}
        }
        if create {
            pg.probe_write()?;
        }
        Ok(pg)
    }

    /// The schema's version, `None` when this database has no oscost store. Tables of ours
    /// without a version row are someone else's (or a half-made store: refused, not guessed).
    fn version(&mut self) -> Result<Option<i32>, StoreError> {
        let c = &mut self.client;
        let has_schema = c
            .query_opt(
                "SELECT 1 FROM information_schema.tables
                 WHERE table_schema = 'oscost' AND table_name = 'schema_version'",
                &[],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?
            .is_some();
        if !has_schema {
            return Ok(None);
        }
        let row = c
            .query_opt("SELECT version FROM oscost.schema_version", &[])
            .map_err(|e| StoreError::Pg(pg_text(&e)))?;
        match row {
            Some(r) => Ok(Some(r.get(0))),
            None => Err(StoreError::NotOurs {
                at: self.at.clone(),
                why: "its oscost schema has no version".into(),
            }),
        }
    }

    /// Create or bring the schema up to `SCHEMA`, under the advisory lock, reading the
    /// version again once it is held.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let at = self.at.clone();
        let c = &mut self.client;
        let mut tx = c.transaction().map_err(|e| StoreError::Pg(pg_text(&e)))?;
        let r: Result<(), postgres::Error> = (|| {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(
                "CREATE SCHEMA IF NOT EXISTS oscost;
                 CREATE TABLE IF NOT EXISTS oscost.schema_version (version INTEGER NOT NULL);",
            )?;
            let found: Option<i32> = tx
                .query_opt("SELECT version FROM oscost.schema_version", &[])?
                .map(|r| r.get(0));
            if found.is_none() {
                let stray = tx.query_one(
                    "SELECT count(*) FROM information_schema.tables
                     WHERE table_schema = 'oscost' AND table_name <> 'schema_version'",
                    &[],
                )?;
                if stray.get::<_, i64>(0) > 0 {
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
            Ok(())
        })();
        match r {
            Ok(()) => {
                let v: Option<i32> = tx
                    .query_opt("SELECT version FROM oscost.schema_version", &[])
                    .map_err(|e| StoreError::Pg(pg_text(&e)))?
                    .map(|r| r.get(0));
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
    fn probe_write(&mut self) -> Result<(), StoreError> {
        let row = self
            .client
            .query_one(
                "SELECT current_setting('transaction_read_only') = 'on',
                        has_table_privilege('oscost.runs', 'INSERT')
                        AND has_table_privilege('oscost.results', 'INSERT')
                        AND has_table_privilege('oscost.samples', 'INSERT')
                        AND has_sequence_privilege('oscost.runs_id_seq', 'USAGE')",
                &[],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?;
        let why = if row.get::<_, bool>(0) {
            "the server is read-only (a standby?)"
        } else if !row.get::<_, bool>(1) {
            "this user may not insert into the oscost tables"
        } else {
            return Ok(());
        };
        Err(StoreError::ReadOnly {
            at: self.at.clone(),
            why: why.into(),
        })
    }
}

/// Schema 4: every run's identity computed anew (schema 3's digests did not survive a JSON
/// round trip). A run that cannot be read keeps the digest it had, and is named.
fn recompute_identities(tx: &mut postgres::Transaction) -> Result<(), postgres::Error> {
    let ids: Vec<i64> = tx
        .query("SELECT id FROM oscost.runs ORDER BY id", &[])?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for id in ids {
        let row = tx.query_one(
            "SELECT run_z, run_json FROM oscost.runs WHERE id = $1",
            &[&id],
        )?;
        let fetched = match row.get::<_, Option<Vec<u8>>>(0) {
            None => Fetched::Json(row.get(1)),
            Some(run_z) => {
                let samples = tx
                    .query(
                        "SELECT idx, data FROM oscost.samples WHERE run_id = $1",
                        &[&id],
                    )?
                    .iter()
                    .map(|r| (i64::from(r.get::<_, i32>(0)), r.get(1)))
                    .collect();
                Fetched::Compact { run_z, samples }
            }
        };
        match super::decode(id, fetched, false) {
            Ok(run) => {
                tx.execute(
                    "UPDATE oscost.runs SET digest = $2 WHERE id = $1",
                    &[&id, &super::digest(&run)],
                )?;
            }
            Err(e) => eprintln!(
                "oscost: stored run {id} was kept as it was while migrating the store ({e}); the other runs were migrated"
            ),
        }
    }
    Ok(())
}

/// A failed write: the user's to fix when the server is read-only or the user may not write.
fn write_err(at: &str, e: postgres::Error) -> StoreError {
    match e.code() {
        Some(c)
            if *c == SqlState::INSUFFICIENT_PRIVILEGE
                || *c == SqlState::READ_ONLY_SQL_TRANSACTION =>
        {
            StoreError::ReadOnly {
                at: at.to_string(),
                why: pg_text(&e),
            }
        }
        _ => StoreError::Pg(pg_text(&e)),
    }
}

/// The server's own message where there is one (the driver's Display says only "db error").
fn pg_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(x) = src {
                s = format!("{s}: {x}");
                src = x.source();
            }
            s
        }
    }
}

fn insert(tx: &mut postgres::Transaction, e: &Encoded) -> Result<i64, postgres::Error> {
    let id: i64 = tx
        .query_one(
            "INSERT INTO oscost.runs (started_at, label, host, kernel, wrapper, benchmarks,
                                      run_z, digest)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            &[
                &e.started_at,
                &e.label,
                &e.host,
                &e.kernel,
                &e.wrapper,
                &(e.results.len() as i64),
                &e.run_z,
                &e.digest,
            ],
        )?
        .get(0);
    let ins = tx.prepare("INSERT INTO oscost.samples (run_id, idx, data) VALUES ($1, $2, $3)")?;
    for (idx, data) in &e.samples {
        tx.execute(&ins, &[&id, &(*idx as i32), data])?;
    }
    let ins = tx.prepare(
        "INSERT INTO oscost.results
         (run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (run_id, bench) DO UPDATE SET status = EXCLUDED.status,
             median = EXCLUDED.median, ci_lo = EXCLUDED.ci_lo, ci_hi = EXCLUDED.ci_hi,
             samples = EXCLUDED.samples, disturbed = EXCLUDED.disturbed",
    )?;
    for r in &e.results {
        tx.execute(
            &ins,
            &[
                &id,
                &r.bench,
                &r.status,
                &r.median,
                &r.ci_lo,
                &r.ci_hi,
                &r.samples,
                &r.disturbed,
            ],
        )?;
    }
    Ok(id)
}

fn row_of(r: &postgres::Row, from: usize) -> ResultRow {
    ResultRow {
        bench: r.get(from),
        status: r.get(from + 1),
        median: r.get(from + 2),
        ci_lo: r.get(from + 3),
        ci_hi: r.get(from + 4),
        samples: r.get(from + 5),
        disturbed: r.get(from + 6),
    }
}

impl Backend for Pg {
    fn insert_all(
        &mut self,
        runs: &[Encoded],
        skip_known: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<Saved>, StoreError> {
        let client = &mut self.client;
        let r: Result<Option<Vec<Saved>>, postgres::Error> = (|| {
            let mut tx = client.transaction()?;
            let mut saved = Vec::new();
            for e in runs {
                let mut known = None;
                if skip_known {
                    // Two hosts copying the same run at once: the second waits for the first's
                    // commit and then finds it.
                    tx.execute(
                        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                        &[&e.digest],
                    )?;
                    known = tx
                        .query_opt(
                            "SELECT id FROM oscost.runs WHERE digest = $1 ORDER BY id LIMIT 1",
                            &[&e.digest],
                        )?
                        .map(|r| r.get::<_, i64>(0));
                }
                saved.push(match known {
                    Some(id) => Saved { id, new: false },
                    None => Saved {
                        id: insert(&mut tx, e)?,
                        new: true,
                    },
                });
            }
            if stop() {
                tx.rollback()?;
                return Ok(None);
            }
            tx.commit()?;
            Ok(Some(saved))
        })();
        match r {
            Ok(Some(saved)) => Ok(saved),
            Ok(None) => Err(StoreError::Interrupted),
            Err(e) => Err(write_err(&self.at, e)),
        }
    }

    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError> {
        let rows = self
            .client
            .query(
                "SELECT id, started_at, label, host, kernel, wrapper, benchmarks
                 FROM oscost.runs ORDER BY id",
                &[],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?;
        Ok(rows
            .iter()
            .map(|r| RunSummary {
                id: r.get(0),
                started_at: r.get(1),
                label: r.get(2),
                host: r.get(3),
                kernel: r.get(4),
                wrapper: r.get(5),
                benchmarks: r.get(6),
            })
            .collect())
    }

    fn has_run(&mut self, id: i64) -> Result<bool, StoreError> {
        Ok(self
            .client
            .query_opt("SELECT 1 FROM oscost.runs WHERE id = $1", &[&id])
            .map_err(|e| StoreError::Pg(pg_text(&e)))?
            .is_some())
    }

    fn nth_last(&mut self, back: i64) -> Result<Option<i64>, StoreError> {
        Ok(self
            .client
            .query_opt(
                "SELECT id FROM oscost.runs ORDER BY id DESC LIMIT 1 OFFSET $1",
                &[&back],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?
            .map(|r| r.get(0)))
    }

    fn fetch(
        &mut self,
        id: i64,
        with_samples: bool,
    ) -> Result<Option<(Fetched, Option<String>)>, StoreError> {
        let c = &mut self.client;
        let Some(row) = c
            .query_opt(
                "SELECT run_z, run_json, digest FROM oscost.runs WHERE id = $1",
                &[&id],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?
        else {
            return Ok(None);
        };
        let digest: Option<String> = row.get(2);
        let Some(run_z) = row.get::<_, Option<Vec<u8>>>(0) else {
            return Ok(Some((Fetched::Json(row.get(1)), digest)));
        };
        let mut samples = Vec::new();
        if with_samples {
            samples = c
                .query(
                    "SELECT idx, data FROM oscost.samples WHERE run_id = $1",
                    &[&id],
                )
                .map_err(|e| StoreError::Pg(pg_text(&e)))?
                .iter()
                .map(|r| (i64::from(r.get::<_, i32>(0)), r.get(1)))
                .collect();
        }
        Ok(Some((Fetched::Compact { run_z, samples }, digest)))
    }

    fn history(&mut self, bench: &str) -> Result<Vec<HistoryPoint>, StoreError> {
        let rows = self
            .client
            .query(
                "SELECT runs.id, runs.started_at, runs.label, runs.wrapper, results.status,
                        results.median, results.ci_lo, results.ci_hi, results.disturbed
                 FROM oscost.results results JOIN oscost.runs runs ON runs.id = results.run_id
                 WHERE results.bench = $1 ORDER BY runs.id",
                &[&bench],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?;
        Ok(rows
            .iter()
            .map(|r| HistoryPoint {
                run_id: r.get(0),
                started_at: r.get(1),
                label: r.get(2),
                wrapper: r.get(3),
                status: r.get(4),
                median: r.get(5),
                ci_lo: r.get(6),
                ci_hi: r.get(7),
                disturbed: r.get(8),
            })
            .collect())
    }

    fn result_rows(&mut self, ids: &[i64]) -> Result<Vec<(i64, ResultRow)>, StoreError> {
        let rows = self
            .client
            .query(
                "SELECT run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed
                 FROM oscost.results WHERE run_id = ANY($1) ORDER BY run_id",
                &[&ids],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?;
        Ok(rows.iter().map(|r| (r.get(0), row_of(r, 1))).collect())
    }

    fn known_benchmarks(&mut self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .client
            .query(
                "SELECT DISTINCT bench FROM oscost.results ORDER BY bench",
                &[],
            )
            .map_err(|e| StoreError::Pg(pg_text(&e)))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
