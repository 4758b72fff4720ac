//! The PostgreSQL backend: one database shared by a fleet (`postgres://` or `postgresql://`
//! URL, as libpq accepts them; TLS and libpq's environment in `pg_connect`).
//! Its tables live in their own schema, `oscost`, so that the database may hold anything else.
//! The schema's version is the one row of `oscost.schema_version`; creating and migrating run
//! under a transaction-scoped advisory lock, so hosts that first use a fresh database at once
//! create it once. A save is one transaction: a client killed at any point (SIGKILL included)
//! loses its connection and the server rolls the transaction back, leaving no partial run;
//! concurrent saves from many hosts each get their own ids (`BIGSERIAL`) and lose nothing.

use postgres::error::SqlState;
use postgres::{Client, NoTls};

use super::rows::{Encoded, Fetched};
use super::{Backend, ResultRow, SCHEMA, Saved, StoreError};
use crate::base::model::{HistoryPoint, RunSummary};

pub struct Pg {
    client: Client,
    /// The URL as given, to connect again: a run measured for minutes may find its first
    /// connection closed (idle_session_timeout, a server restart, a dropped link).
    url: String,
    at: String,
    /// Whether the runs table has schema 5's env_key (a store read, not migrated, may not).
    has_env_key: bool,
    /// Whether the results table has schema 7's exit_witness_ns (the same).
    has_exit_witness: bool,
    /// Whether the results table has schema 8's speed_witness_ns (the same).
    has_speed_witness: bool,
}

/// How long connecting may take, when the URL says nothing (`connect_timeout`): libpq would
/// wait forever on a server that accepts the connection and never answers.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a statement waits for a lock another session holds before giving up (a table
/// locked by a migration, a dump, a forgotten transaction): said, not waited out forever.
const LOCK_WAIT: &str = "30s";

/// Connect, bounded by the URL's `connect_timeout` or `CONNECT_WAIT` as a whole: the driver's
/// own timeout covers the socket's connect only, not a server that never answers the startup.
fn connect(url: &str, at: &str) -> Result<Client, StoreError> {
    // The server may echo part of the URL back (a database name that swallowed a
    // `&password=` meant as a parameter): no password reaches a message.
    let unreachable = |why: String| StoreError::Unreachable {
        at: at.to_string(),
        why: super::scrub_passwords(&why, url),
    };
    let super::pg_connect::Endpoint { mut config, tls } =
        super::pg_connect::endpoint(url).map_err(unreachable)?;
    let wait = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(CONNECT_WAIT);
    config.connect_timeout(wait);
    config.keepalives(true);
    // Added to what the URL's `options` asks for, which still wins where both set one.
    let options = format!(
        "-c lock_timeout={LOCK_WAIT} {}",
        config.get_options().unwrap_or_default()
    );
    config.options(options.trim_end());
    let (tx, rx) = std::sync::mpsc::channel();
    // A thread of its own, so that the wait is ours to bound; one that never returns is left
    // behind as the command ends with the error.
    std::thread::spawn(move || {
        let _ = tx.send(match tls {
            Some(tls) => config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls)),
            None => config.connect(NoTls),
        });
    });
    match rx.recv_timeout(wait + std::time::Duration::from_millis(500)) {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(unreachable(pg_text(&e))),
        Err(_) => Err(unreachable(format!(
            "no answer within {} s (connect_timeout in the URL sets this)",
            wait.as_secs()
        ))),
    }
}

/// Whether a failed statement lost the connection (then connecting again and retrying is
/// safe: the transaction was never committed, or a commit that did land is found by its
/// identity on the retry).
fn connection_lost(e: &postgres::Error, client: &Client) -> bool {
    client.is_closed()
        || e.is_closed()
        || e.code().is_some_and(|c| {
            c.code().starts_with("08")
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::IDLE_SESSION_TIMEOUT
        })
}

/// Whether the server gave up on this transaction for another's sake (a deadlock, a
/// serialization failure): trying again is what it asks for.
fn contention(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

mod schema;

/// Column `i` of a row read from `table`, checked: a store whose tables were altered outside
/// oscost (a column's type changed, a NULL where oscost never writes one) is said, naming the
/// table and column, never a panic.
fn col<'a, T: postgres::types::FromSql<'a>>(
    r: &'a postgres::Row,
    i: usize,
    table: &str,
) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| {
        let name = r.columns().get(i).map_or("?", |c| c.name());
        StoreError::Altered {
            table: format!("oscost.{table}"),
            column: name.to_string(),
            why: pg_text(&e),
        }
    })
}

impl Pg {
    /// Connect; with `create`, make the schema when missing, migrate it, and prove a run could
    /// be written now. Without, the store must exist and nothing is created.
    pub fn open(url: &str, at: &str, create: bool) -> Result<Pg, StoreError> {
        let client = connect(url, at)?;
        let mut pg = Pg {
            client,
            url: url.to_string(),
            at: at.to_string(),
            has_env_key: true,
            has_exit_witness: true,
            has_speed_witness: true,
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
        if pg.version()? == Some(SCHEMA) {
            super::altered(&mut |t| table_seen(&mut pg.client, t), create)?;
        }
        if create {
            pg.probe_write()?;
        }
        pg.has_env_key = create || version.is_some_and(|v| v >= 5);
        pg.has_exit_witness = create || version.is_some_and(|v| v >= 7);
        pg.has_speed_witness = create || version.is_some_and(|v| v >= 8);
        Ok(pg)
    }
}

/// One table of schema oscost as the server holds it (`None`: no such table or view). Read
/// from pg_catalog, which shows every table whatever this user's rights on it
/// (information_schema hides the keys of a table this user may only read).
fn table_seen(
    client: &mut postgres::Client,
    table: &str,
) -> Result<Option<super::TableSeen>, StoreError> {
    let kind = client
        .query_opt(
            "SELECT c.relkind::text FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'oscost' AND c.relname = $1 AND c.relkind IN ('r', 'p', 'v', 'm')",
            &[&table],
        )
        .map_err(|e| pg_err(&e))?;
    let Some(kind) = kind else {
        return Ok(None);
    };
    let kind: String = kind.try_get(0).map_err(|e| pg_err(&e))?;
    let names = |sql: &str, client: &mut postgres::Client| -> Result<Vec<String>, StoreError> {
        client
            .query(sql, &[&table])
            .map_err(|e| pg_err(&e))?
            .iter()
            .map(|r| r.try_get(0).map_err(|e| pg_err(&e)))
            .collect()
    };
    let columns = names(
        "SELECT a.attname::text FROM pg_catalog.pg_attribute a
         JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'oscost' AND c.relname = $1 AND a.attnum > 0 AND NOT a.attisdropped",
        client,
    )?;
    let key = names(
        "SELECT a.attname::text FROM pg_catalog.pg_index i
         JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
         WHERE n.nspname = 'oscost' AND c.relname = $1 AND i.indisprimary",
        client,
    )?;
    // oscost makes only primary keys and its foreign keys; anything else on its tables was
    // added outside it.
    let added = names(
        "SELECT 'trigger ' || t.tgname::text FROM pg_catalog.pg_trigger t
         JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'oscost' AND c.relname = $1 AND NOT t.tgisinternal
         UNION ALL
         SELECT 'rule ' || r.rulename::text FROM pg_catalog.pg_rewrite r
         JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'oscost' AND c.relname = $1 AND r.rulename <> '_RETURN'
         UNION ALL
         SELECT 'constraint ' || k.conname::text FROM pg_catalog.pg_constraint k
         JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'oscost' AND c.relname = $1 AND k.contype IN ('c', 't', 'x')
         UNION ALL
         SELECT 'row security' FROM pg_catalog.pg_class c
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'oscost' AND c.relname = $1 AND c.relrowsecurity",
        client,
    )?;
    Ok(Some(super::TableSeen {
        added,
        is_table: kind == "r" || kind == "p",
        columns,
        key,
    }))
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
        _ => pg_err(&e),
    }
}

/// The server's own message where there is one (the driver's Display says only "db error").
/// A failed statement as a store error: one this user may not run (a right missing on the
/// schema or a table) is the user's to fix (exit 2), naming what to ask for.
fn pg_err(e: &postgres::Error) -> StoreError {
    if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
        StoreError::NoRights(pg_text(e))
    } else {
        StoreError::Pg(pg_text(e))
    }
}

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
                                      run_z, digest, env_key)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            &[
                &e.started_at,
                &e.label,
                &e.host,
                &e.kernel,
                &e.wrapper,
                &(e.results.len() as i64),
                &e.run_z,
                &e.digest,
                &e.env_key,
            ],
        )?
        .try_get(0)?;
    let ins = tx.prepare("INSERT INTO oscost.samples (run_id, idx, data) VALUES ($1, $2, $3)")?;
    for (idx, data) in &e.samples {
        tx.execute(&ins, &[&id, &(*idx as i32), data])?;
    }
    let ins = tx.prepare(
        "INSERT INTO oscost.results
         (run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed, exit_witness_ns,
          speed_witness_ns)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (run_id, bench) DO NOTHING",
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
                &r.exit_witness_ns,
                &r.speed_witness_ns,
            ],
        )?;
    }
    Ok(id)
}

/// One try at saving `runs` in one transaction (`Ok(Err)`: a signal came, rolled back). Copies of
/// the same runs by several hosts at once take their identities' locks first, in one order,
/// so two copies in opposite orders wait for each other instead of deadlocking.
fn try_insert_all(
    client: &mut Client,
    runs: &[Encoded],
    skip_known: bool,
    stop: &crate::base::stop::Stop,
) -> Result<Result<Vec<Saved>, crate::base::stop::Interrupted>, postgres::Error> {
    let mut tx = client.transaction()?;
    if skip_known {
        let mut digests: Vec<&str> = runs.iter().map(|e| e.digest.as_str()).collect();
        digests.sort_unstable();
        digests.dedup();
        for d in digests {
            // The second of two hosts copying one run waits for the first's commit, then
            // finds it.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&d],
            )?;
        }
    }
    let mut saved = Vec::new();
    for e in runs {
        let known = if skip_known {
            tx.query_opt(
                "SELECT id FROM oscost.runs WHERE digest = $1 ORDER BY id LIMIT 1",
                &[&e.digest],
            )?
            .map(|r| r.try_get::<_, i64>(0))
            .transpose()?
        } else {
            None
        };
        saved.push(match known {
            Some(id) => Saved { id, new: false },
            None => Saved {
                id: insert(&mut tx, e)?,
                new: true,
            },
        });
    }
    if let Err(i) = stop.check() {
        tx.rollback()?;
        return Ok(Err(i));
    }
    tx.commit()?;
    Ok(Ok(saved))
}

fn row_of(r: &postgres::Row, from: usize) -> Result<ResultRow, StoreError> {
    let t = "results";
    Ok(ResultRow {
        bench: col(r, from, t)?,
        status: col(r, from + 1, t)?,
        median: col(r, from + 2, t)?,
        ci_lo: col(r, from + 3, t)?,
        ci_hi: col(r, from + 4, t)?,
        samples: col(r, from + 5, t)?,
        disturbed: col(r, from + 6, t)?,
        exit_witness_ns: col(r, from + 7, t)?,
        speed_witness_ns: col(r, from + 8, t)?,
    })
}

impl Pg {
    /// The results' two witness columns as a query reads them (`NULL` in a store read, not
    /// migrated, before schema 7 for the exit witness, 8 for the speed witness).
    fn witness_columns(&self) -> &'static str {
        match (self.has_exit_witness, self.has_speed_witness) {
            (true, true) => "results.exit_witness_ns, results.speed_witness_ns",
            (true, false) => "results.exit_witness_ns, NULL::double precision",
            _ => "NULL::double precision, NULL::double precision",
        }
    }
}

impl Backend for Pg {
    fn insert_all(
        &mut self,
        runs: &[Encoded],
        skip_known: bool,
        stop: &crate::base::stop::Stop,
    ) -> Result<Vec<Saved>, StoreError> {
        if self.client.is_closed() {
            self.client = connect(&self.url, &self.at)?;
        }
        let mut skip_known = skip_known;
        let mut reconnected = false;
        let mut tries = 0;
        loop {
            tries += 1;
            match try_insert_all(&mut self.client, runs, skip_known, stop) {
                Ok(Ok(saved)) => return Ok(saved),
                Ok(Err(i)) => return Err(StoreError::Interrupted(i)),
                Err(e) if !reconnected && connection_lost(&e, &self.client) => {
                    // Once: a fresh connection, and the runs found by identity if the lost
                    // commit did land.
                    self.client = connect(&self.url, &self.at)?;
                    reconnected = true;
                    skip_known = true;
                }
                Err(e) if contention(&e) && tries < 5 => {
                    std::thread::sleep(std::time::Duration::from_millis(20 * tries));
                }
                Err(e) => return Err(write_err(&self.at, e)),
            }
        }
    }

    fn list(&mut self) -> Result<Vec<RunSummary>, StoreError> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT id, started_at, label, host, kernel, wrapper, benchmarks, {}
                     FROM oscost.runs ORDER BY id",
                    if self.has_env_key {
                        "env_key"
                    } else {
                        "NULL::text"
                    }
                ),
                &[],
            )
            .map_err(|e| pg_err(&e))?;
        let t = "runs";
        rows.iter()
            .map(|r| {
                Ok(RunSummary {
                    id: col(r, 0, t)?,
                    started_at: col(r, 1, t)?,
                    label: col(r, 2, t)?,
                    host: col(r, 3, t)?,
                    kernel: col(r, 4, t)?,
                    wrapper: col(r, 5, t)?,
                    benchmarks: col(r, 6, t)?,
                    env_key: col(r, 7, t)?,
                })
            })
            .collect()
    }

    fn has_run(&mut self, id: i64) -> Result<bool, StoreError> {
        Ok(self
            .client
            .query_opt("SELECT 1 FROM oscost.runs WHERE id = $1", &[&id])
            .map_err(|e| pg_err(&e))?
            .is_some())
    }

    fn nth_last(&mut self, back: i64) -> Result<Option<i64>, StoreError> {
        self.client
            .query_opt(
                "SELECT id FROM oscost.runs ORDER BY id DESC LIMIT 1 OFFSET $1",
                &[&back],
            )
            .map_err(|e| pg_err(&e))?
            .map(|r| col(&r, 0, "runs"))
            .transpose()
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
            .map_err(|e| pg_err(&e))?
        else {
            return Ok(None);
        };
        let digest: Option<String> = col(&row, 2, "runs")?;
        let Some(run_z) = col::<Option<Vec<u8>>>(&row, 0, "runs")? else {
            return Ok(Some((Fetched::Json(col(&row, 1, "runs")?), digest)));
        };
        let mut samples = Vec::new();
        if with_samples {
            samples = c
                .query(
                    "SELECT idx, data FROM oscost.samples WHERE run_id = $1",
                    &[&id],
                )
                .map_err(|e| pg_err(&e))?
                .iter()
                .map(|r| {
                    Ok((
                        i64::from(col::<i32>(r, 0, "samples")?),
                        col(r, 1, "samples")?,
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
        }
        Ok(Some((Fetched::Compact { run_z, samples }, digest)))
    }

    fn history(&mut self, bench: &str) -> Result<Vec<HistoryPoint>, StoreError> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT runs.id, runs.started_at, runs.label, runs.wrapper, results.status,
                        results.median, results.ci_lo, results.ci_hi, results.disturbed, {}
                 FROM oscost.results results JOIN oscost.runs runs ON runs.id = results.run_id
                 WHERE results.bench = $1 ORDER BY runs.id",
                    self.witness_columns()
                ),
                &[&bench],
            )
            .map_err(|e| pg_err(&e))?;
        rows.iter()
            .map(|r| {
                let (runs, results) = ("runs", "results");
                Ok(HistoryPoint {
                    run_id: col(r, 0, runs)?,
                    started_at: col(r, 1, runs)?,
                    label: col(r, 2, runs)?,
                    wrapper: col(r, 3, runs)?,
                    status: col(r, 4, results)?,
                    median: col(r, 5, results)?,
                    ci_lo: col(r, 6, results)?,
                    ci_hi: col(r, 7, results)?,
                    disturbed: col(r, 8, results)?,
                    exit_witness_ns: col(r, 9, results)?,
                    speed_witness_ns: col(r, 10, results)?,
                })
            })
            .collect()
    }

    fn result_rows(&mut self, ids: &[i64]) -> Result<Vec<(i64, ResultRow)>, StoreError> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT run_id, bench, status, median, ci_lo, ci_hi, samples, disturbed, {}
                 FROM oscost.results results WHERE run_id = ANY($1) ORDER BY run_id",
                    self.witness_columns()
                ),
                &[&ids],
            )
            .map_err(|e| pg_err(&e))?;
        rows.iter()
            .map(|r| Ok((col(r, 0, "results")?, row_of(r, 1)?)))
            .collect()
    }

    fn known_benchmarks(&mut self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .client
            .query(
                "SELECT DISTINCT bench FROM oscost.results ORDER BY bench",
                &[],
            )
            .map_err(|e| pg_err(&e))?;
        rows.iter().map(|r| col(r, 0, "results")).collect()
    }
}
