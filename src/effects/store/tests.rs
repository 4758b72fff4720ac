//! One test suite for every backend: each test is a function of a fresh, empty store's
//! location, run once on an SQLite file and once on a PostgreSQL database. The PostgreSQL runs
//! need a server: `OSCOST_TEST_PG` gives its URL (`.ci/run` starts a throwaway one with
//! `scripts/throwaway-pg.sh`); each test makes its own database there and drops it after.
//! Without the variable those tests pass at once, and the first says so in one line.

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::base::stop::{Interrupted, Stop};

use super::rows::{digest, env_key};
use super::*;
use crate::base::model::testdata;

/// A fresh store location, and what keeps it alive.
pub struct Fresh {
    pub at: Location,
    _dir: Option<tempfile::TempDir>,
    pg: Option<(String, String)>,
}

impl Drop for Fresh {
    fn drop(&mut self) {
        if let Some((admin, db)) = &self.pg
            && let Ok(mut c) = postgres::Client::connect(admin, postgres::NoTls)
        {
            let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
        }
    }
}

pub fn fresh_sqlite() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    Fresh {
        at: Location::File(dir.path().join("sub/results.db")),
        _dir: Some(dir),
        pg: None,
    }
}

/// A new database on the server `OSCOST_TEST_PG` names, or `None` (said once) without one.
pub fn fresh_pg() -> Option<Fresh> {
    static SAID: Once = Once::new();
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let Some(admin) = std::env::var("OSCOST_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        SAID.call_once(|| {
            // Straight to the terminal: the test harness captures eprintln! of passing tests.
            let _ = std::io::stderr().write_all(
                b"PostgreSQL store tests skipped: no server given (set OSCOST_TEST_PG=postgresql://...; .ci/run starts one)\n",
            );
        });
        return None;
    };
    let db = format!(
        "oscost_t{}_{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::SeqCst)
    );
    let mut c = postgres::Client::connect(&admin, postgres::NoTls)
        .unwrap_or_else(|e| panic!("OSCOST_TEST_PG={admin}: {e}"));
    c.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    Some(Fresh {
        at: Location::Postgres(with_database(&admin, &db)),
        _dir: None,
        pg: Some((admin, db)),
    })
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (scheme, rest) = base.split_once("://").unwrap_or(("postgresql", base));
    let host = rest.split_once('/').map_or(rest, |(h, _)| h);
    match query {
        Some(q) => format!("{scheme}://{host}/{db}?{q}"),
        None => format!("{scheme}://{host}/{db}"),
    }
}

/// The suite, instantiated for each backend.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite_backend {
            $( #[test] fn $name() { super::$name(&super::fresh_sqlite()); } )*
        }
        mod postgres_backend {
            $( #[test] fn $name() {
                if let Some(f) = super::fresh_pg() { super::$name(&f); }
            } )*
        }
    };
}

on_every_backend!(
    saves_lists_loads_and_resolves,
    reopening_keeps_runs_and_schema,
    reading_never_creates,
    runs_saved_together_are_saved_together_or_not_at_all,
    a_run_copied_in_twice_is_kept_once,
    runs_of_failures_started_together_are_three_runs,
    concurrent_copies_lose_nothing,
    bare_runs_and_summary_rows_need_no_samples,
    a_store_altered_outside_oscost_is_refused_naming_what,
    what_was_added_to_a_table_is_refused_before_a_save,
    a_schema_6_store_gains_each_results_exit_witness,
    a_schema_7_store_gains_each_results_speed_witness,
);

/// Schema 7: a store of schema 6 gains `results.exit_witness_ns`, each result's the median of
/// its repetitions' exit witnesses (what `run_to_run::learn` projects by); a result with none
/// keeps none.
fn a_schema_6_store_gains_each_results_exit_witness(f: &Fresh) {
    a_store_gains_a_witness(
        f,
        "exit_witness_ns",
        6,
        |rep, w| rep.exit_witness_ns = Some(w),
        |r| (r.exit_witness_ns, r.speed_witness_ns.is_none()),
    );
}

/// Schema 8: a store of schema 7 gains `results.speed_witness_ns`, the same way.
fn a_schema_7_store_gains_each_results_speed_witness(f: &Fresh) {
    a_store_gains_a_witness(
        f,
        "speed_witness_ns",
        7,
        |rep, w| rep.witness_ns = Some(w),
        |r| (r.speed_witness_ns, r.exit_witness_ns.is_none()),
    );
}

/// The first result's repetitions given witnesses (4500-4540 ns) by `set`, the run saved, the
/// store taken back to `version` without `column`, read (nothing to see, no error) and then
/// opened to write: `get` (the witness, and that the other one is absent) gives the median.
fn a_store_gains_a_witness(
    f: &Fresh,
    column: &str,
    version: i32,
    set: fn(&mut crate::base::model::Repetition, f64),
    get: fn(&crate::base::model::ResultRow) -> (Option<f64>, bool),
) {
    let mut run = testdata::run();
    run.results[0].repetitions = (0..5)
        .map(|i| {
            let mut rep = testdata::repetition(100.0, f64::from(i));
            set(&mut rep, 4500.0 + 10.0 * f64::from(i));
            rep
        })
        .collect();
    let id = Store::open(&f.at).unwrap().save(&run).unwrap();
    outside(
        f,
        &format!("ALTER TABLE {{s}}results DROP COLUMN {column};"),
    );
    match &f.at {
        Location::File(_) => outside(f, &format!("PRAGMA user_version = {version};")),
        Location::Postgres(_) => outside(
            f,
            &format!("UPDATE {{s}}schema_version SET version = {version};"),
        ),
    }
    // Read as it is (a store opened to read is not migrated): no witness, no error.
    let mut s = Store::open_existing(&f.at).unwrap();
    let read = s.result_rows(&[id]).unwrap();
    assert_eq!(read.len(), run.results.len());
    assert!(read.iter().all(|(_, r)| get(r).0.is_none()));
    assert!(s.history(&run.results[0].id).is_ok());
    drop(s);
    let mut s = Store::open(&f.at).unwrap();
    let rows = s.result_rows(&[id]).unwrap();
    let first = rows
        .iter()
        .find(|(_, r)| r.bench == run.results[0].id)
        .unwrap();
    assert_eq!(get(&first.1), (Some(4520.0), true));
    let others = rows.iter().filter(|(_, r)| r.bench != run.results[0].id);
    assert!(others.map(|(_, r)| get(r).0).all(|w| w.is_none()));
    let h = s.history(&run.results[0].id).unwrap();
    assert_eq!((h[0].exit_witness_ns, h[0].speed_witness_ns), {
        let w = get(&first.1).0;
        if column == "exit_witness_ns" {
            (w, None)
        } else {
            (None, w)
        }
    });
}

fn labelled(label: &str) -> Run {
    let mut r = testdata::run();
    r.label = Some(label.into());
    r
}

fn saves_lists_loads_and_resolves(f: &Fresh) {
    let mut s = Store::open(&f.at).unwrap();
    let run = testdata::run();
    let a = s.save(&run).unwrap();
    let b = s.save(&labelled("second")).unwrap();
    assert!(b > a);
    let list = s.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[1].label.as_deref(), Some("second"));
    assert_eq!(list[0].benchmarks, run.results.len() as i64);
    assert_eq!(list[0].host, run.env.hostname);
    // The environment key: the same for runs of one environment, another when THP differs.
    assert_eq!(list[0].env_key, Some(env_key(&run)));
    assert_eq!(list[0].env_key, list[1].env_key);
    let mut thp = run.clone();
    thp.env.thp_enabled = Some("always [madvise] never".into());
    assert_ne!(Some(env_key(&thp)), list[0].env_key);
    // What confined the workers: nothing confining keeps the key a run had before it was
    // recorded; a seccomp filter makes an environment of its own.
    let mut open = run.clone();
    open.env.confinement = Some(crate::base::model::Confinement {
        seccomp_mode: Some(0),
        seccomp_filters: Some(0),
        nice: Some(0),
        ..Default::default()
    });
    assert_eq!(env_key(&open), env_key(&run));
    let mut sandboxed = open.clone();
    if let Some(c) = sandboxed.env.confinement.as_mut() {
        c.seccomp_mode = Some(2);
        c.seccomp_filters = Some(1);
    }
    assert_ne!(env_key(&sandboxed), env_key(&run));
    // What is attached to the system, and a program run during: nothing attached keeps the
    // key; a BPF program, or a --during program, makes an environment of its own.
    let mut bare = run.clone();
    bare.env.attached = Some(vec![]);
    assert_eq!(env_key(&bare), env_key(&run));
    let mut traced = run.clone();
    traced.env.attached = Some(vec!["BPF tracepoint sys_enter".into()]);
    assert_ne!(env_key(&traced), env_key(&run));
    let mut during = run.clone();
    during.during = Some("perf stat -a".into());
    assert_ne!(env_key(&during), env_key(&run));
    assert_eq!(s.resolve("last").unwrap(), b);
    assert_eq!(s.resolve("last~1").unwrap(), a);
    assert_eq!(s.resolve(&a.to_string()).unwrap(), a);
    assert!(matches!(s.resolve("last~2"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.resolve("first"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.resolve("999"), Err(StoreError::NoSuchRun(_))));
    let back = s.load(a).unwrap();
    assert_eq!(back, run);
    let h = s.history("call/f0").unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].median, Some(1.5));
    let h = s.history("timer/rdtscp").unwrap();
    assert_eq!(h[0].status, "skipped");
    assert_eq!(h[0].median, None);
    assert!(
        s.known_benchmarks()
            .unwrap()
            .contains(&"call/f0".to_string())
    );
}

fn reopening_keeps_runs_and_schema(f: &Fresh) {
    Store::open(&f.at).unwrap().save(&testdata::run()).unwrap();
    let mut s = Store::open(&f.at).unwrap();
    assert_eq!(s.list().unwrap().len(), 1);
    let mut r = Store::open_existing(&f.at).unwrap();
    assert_eq!(r.list().unwrap().len(), 1);
}

fn reading_never_creates(f: &Fresh) {
    for _ in 0..2 {
        assert!(matches!(
            Store::open_existing(&f.at),
            Err(StoreError::NoStore(_))
        ));
    }
}

fn runs_saved_together_are_saved_together_or_not_at_all(f: &Fresh) {
    let mut s = Store::open(&f.at).unwrap();
    let run = testdata::run();
    let signalled = Stop::never();
    signalled.raise(libc::SIGTERM);
    let e = s.save_all(&[&run, &run], &signalled).unwrap_err();
    assert!(matches!(
        e,
        StoreError::Interrupted(Interrupted(libc::SIGTERM))
    ));
    assert!(s.list().unwrap().is_empty());
    let e = s.copy_in(&[&run, &labelled("x")], &signalled).unwrap_err();
    assert!(matches!(
        e,
        StoreError::Interrupted(Interrupted(libc::SIGTERM))
    ));
    assert!(s.list().unwrap().is_empty());
    // A measured run is saved even when an equal one is there (only copies are kept once).
    let ids = s.save_all(&[&run, &run], &Stop::never()).unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(s.list().unwrap().len(), 2);
}

fn a_run_copied_in_twice_is_kept_once(f: &Fresh) {
    let mut s = Store::open(&f.at).unwrap();
    let (a, b) = (labelled("a"), labelled("b"));
    let first = s.copy_in(&[&a, &b], &Stop::never()).unwrap();
    assert!(first.iter().all(|x| x.new));
    // Again, one of them after a trip through JSON text that moved its floats by one ULP
    // (as a parser without exact float reading does): nothing new.
    let d = digest(&a);
    let mut a_moved = a.clone();
    for r in &mut a_moved.results {
        for x in &mut r.samples_ns {
            *x = f64::from_bits(x.to_bits() + 1);
        }
        if let Some(st) = &mut r.stats {
            st.median = f64::from_bits(st.median.to_bits() + 1);
        }
    }
    assert_ne!(a_moved, a);
    let again = s.copy_in(&[&b, &a_moved], &Stop::never()).unwrap();
    assert_eq!(
        again,
        vec![
            Saved {
                id: first[1].id,
                new: false
            },
            Saved {
                id: first[0].id,
                new: false
            }
        ]
    );
    assert_eq!(s.list().unwrap().len(), 2);
    let (back, stored) = s.load_with_digest(first[0].id).unwrap();
    assert_eq!(back, a);
    assert_eq!(stored.as_deref(), Some(d.as_str()));
    assert_ne!(digest(&a), digest(&b));
}

/// Three runs whose every result failed or was skipped (no samples), started in the same
/// second: different reasons, environment or clock make them three runs, never one.
fn runs_of_failures_started_together_are_three_runs(f: &Fresh) {
    let failed = |why: &str| {
        let mut r = testdata::run();
        for x in &mut r.results {
            x.samples_ns.clear();
            x.stats = None;
            x.status = crate::base::model::Status::Failed { reason: why.into() };
        }
        r
    };
    let a = failed("worker killed by signal 9");
    let b = failed("timed out after 30 s");
    let mut c = failed("worker killed by signal 9");
    c.env.thp_enabled = Some("never".into());
    let mut d = failed("worker killed by signal 9");
    d.clock.cost_ns += 1.0;
    let digests: std::collections::BTreeSet<String> =
        [&a, &b, &c, &d].iter().map(|r| digest(r)).collect();
    assert_eq!(digests.len(), 4);
    let mut s = Store::open(&f.at).unwrap();
    let saved = s.copy_in(&[&a, &b, &c], &Stop::never()).unwrap();
    assert!(saved.iter().all(|x| x.new), "{saved:?}");
    assert_eq!(s.list().unwrap().len(), 3);
}

fn concurrent_copies_lose_nothing(f: &Fresh) {
    // Eight writers at once, 25 runs each, every copy one transaction: 200 whole runs.
    let handles: Vec<_> = (0..8)
        .map(|w| {
            let at = f.at.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&at).unwrap();
                let runs: Vec<Run> = (0..25).map(|i| labelled(&format!("{w}-{i}"))).collect();
                let with: Vec<&Run> = runs.iter().collect();
                s.copy_in(&with, &Stop::never()).unwrap()
            })
        })
        .collect();
    let mut ids: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .map(|s| s.id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 200);
    let mut s = Store::open_existing(&f.at).unwrap();
    let list = s.list().unwrap();
    assert_eq!(list.len(), 200);
    let rows = s.result_rows(&ids).unwrap();
    assert_eq!(rows.len(), 200 * testdata::run().results.len());
    for id in [ids[0], ids[99], ids[199]] {
        assert_eq!(s.load(id).unwrap().results, testdata::run().results);
    }
}

fn bare_runs_and_summary_rows_need_no_samples(f: &Fresh) {
    let mut s = Store::open(&f.at).unwrap();
    let run = testdata::run();
    let id = s.save(&run).unwrap();
    let bare = s.load_bare(id).unwrap();
    assert_eq!(bare.env, run.env);
    assert!(bare.results.iter().all(|r| r.samples_ns.is_empty()));
    assert_eq!(
        bare.results.iter().map(|r| &r.stats).collect::<Vec<_>>(),
        run.results.iter().map(|r| &r.stats).collect::<Vec<_>>()
    );
    let rows = s.result_rows(&[id]).unwrap();
    assert_eq!(rows.len(), run.results.len());
    let f0 = rows.iter().find(|(_, r)| r.bench == "call/f0").unwrap();
    assert_eq!((f0.0, f0.1.median), (id, Some(1.5)));
}

#[test]
fn urls_choose_the_backend_and_others_are_refused_not_made_into_directories() {
    for url in ["postgres://u@h:5432/db", "postgresql://h/db"] {
        assert_eq!(
            classify(PathBuf::from(url)).unwrap(),
            Location::Postgres(url.into())
        );
    }
    for url in ["sqlite://x.db", "mysql://h/db", "http://x"] {
        let e = classify(PathBuf::from(url)).unwrap_err();
        assert!(matches!(e, StoreError::Url(_)) && e.is_usage(), "{e}");
    }
    assert_eq!(
        classify(PathBuf::from("./a://b")).unwrap(),
        Location::File("./a://b".into())
    );
    assert_eq!(
        locate(Some(Path::new("/x/y.db"))).unwrap(),
        Location::File("/x/y.db".into())
    );
}

#[test]
fn passwords_are_never_shown() {
    let at = Location::Postgres("postgresql://me:s3cret@db.lan:5432/fleet?sslmode=disable".into());
    assert_eq!(
        at.shown(),
        "postgresql://me:***@db.lan:5432/fleet?sslmode=disable"
    );
    let plain = Location::Postgres("postgres://me@db/fleet".into());
    assert_eq!(plain.shown(), "postgres://me@db/fleet");
    let query = "postgresql://me@db/fleet?connect_timeout=3&password=s3cret&PassWord=two";
    assert_eq!(
        Location::Postgres(query.into()).shown(),
        "postgresql://me@db/fleet?connect_timeout=3&password=***&PassWord=***"
    );
    assert_eq!(
        scrub_passwords(
            "database \"fleet&password=s3cret\" does not exist",
            "postgresql://me:two@db/fleet&password=s3cret"
        ),
        "database \"fleet&password=***\" does not exist"
    );
    assert_eq!(
        with_database("postgresql://u@%2Ftmp%2Fx/a?x=1", "b"),
        "postgresql://u@%2Ftmp%2Fx/b?x=1"
    );
}

#[test]
fn an_unreachable_server_is_a_usage_error_that_says_what_to_check() {
    let at = Location::Postgres("postgresql://nobody@%2Fnonexistent%2Fdir/x".into());
    let e = Store::open(&at).err().unwrap();
    assert!(
        matches!(e, StoreError::Unreachable { .. }) && e.is_usage(),
        "{e}"
    );
    assert!(e.to_string().contains("server runs"), "{e}");
}

#[test]
fn a_postgres_store_that_is_newer_or_foreign_is_refused() {
    let Some(f) = fresh_pg() else { return };
    let Location::Postgres(url) = &f.at else {
        unreachable!()
    };
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE SCHEMA oscost; CREATE TABLE oscost.runs (x int);")
        .unwrap();
    let e = Store::open(&f.at).err().unwrap();
    assert!(matches!(e, StoreError::NotOurs { .. }), "{e}");
    c.batch_execute(
        "DROP TABLE oscost.runs; CREATE TABLE oscost.schema_version (version int);
         INSERT INTO oscost.schema_version VALUES (99);",
    )
    .unwrap();
    let e = Store::open(&f.at).err().unwrap();
    assert!(matches!(e, StoreError::Newer { found: 99, .. }), "{e}");
    let e = Store::open_existing(&f.at).err().unwrap();
    assert!(matches!(e, StoreError::Newer { .. }), "{e}");
}

/// SQL run on a store as someone else would run it (sqlite3, psql): `{s}` is the schema's
/// prefix (`oscost.` on PostgreSQL, nothing on SQLite).
fn outside(f: &Fresh, sql: &str) {
    match &f.at {
        Location::File(p) => rusqlite::Connection::open(p)
            .unwrap()
            .execute_batch(&sql.replace("{s}", ""))
            .unwrap(),
        Location::Postgres(url) => postgres::Client::connect(url, postgres::NoTls)
            .unwrap()
            .batch_execute(&sql.replace("{s}", "oscost."))
            .unwrap(),
    }
}

/// A store altered outside oscost (a column renamed or dropped, a view in place of a table)
/// is refused when opened, to save or to read, naming the table and the column; put back as
/// it was, it opens again.
fn a_store_altered_outside_oscost_is_refused_naming_what(f: &Fresh) {
    let mut s = Store::open(&f.at).unwrap();
    s.save(&testdata::run()).unwrap();
    drop(s);
    let refused = |table: &str, column: Option<&str>| {
        for e in [
            Store::open(&f.at).err().unwrap(),
            Store::open_existing(&f.at).err().unwrap(),
        ] {
            match (&e, column) {
                (
                    StoreError::Altered {
                        table: t,
                        column: c,
                        ..
                    },
                    Some(col),
                ) => {
                    assert_eq!((t.as_str(), c.as_str()), (table, col), "{e}")
                }
                (StoreError::AlteredTable { table: t, .. }, None) => assert_eq!(t, table, "{e}"),
                _ => panic!("not refused as altered: {e}"),
            }
        }
    };
    outside(f, "ALTER TABLE {s}results RENAME COLUMN median TO med;");
    refused("results", Some("median"));
    outside(f, "ALTER TABLE {s}results RENAME COLUMN med TO median;");
    outside(
        f,
        "ALTER TABLE {s}samples RENAME TO samples_kept;
         CREATE VIEW {s}samples AS SELECT run_id, idx, data FROM {s}samples_kept;",
    );
    refused("samples", None);
    outside(
        f,
        "DROP VIEW {s}samples; ALTER TABLE {s}samples_kept RENAME TO samples;",
    );
    assert_eq!(
        Store::open_existing(&f.at).unwrap().list().unwrap().len(),
        1
    );
    outside(f, "ALTER TABLE {s}runs DROP COLUMN env_key;");
    refused("runs", Some("env_key"));
}

/// A trigger that deletes earlier runs, one that raises on `results`, a CHECK on `samples`:
/// each is refused when the store is opened to save (before any work), naming the table and
/// what was added; reading is not refused, and the runs stay.
fn what_was_added_to_a_table_is_refused_before_a_save(f: &Fresh) {
    Store::open(&f.at).unwrap().save(&testdata::run()).unwrap();
    let refused = |table: &str, what: &str| {
        let e = Store::open(&f.at).err().unwrap();
        match &e {
            StoreError::AlteredTable { table: t, why } => {
                assert_eq!(t, table, "{e}");
                assert!(why.contains(what), "{e}");
            }
            _ => panic!("not refused as altered: {e}"),
        }
        assert!(e.is_usage());
        assert_eq!(
            Store::open_existing(&f.at).unwrap().list().unwrap().len(),
            1
        );
    };
    let (sqlite, pg) = (
        matches!(f.at, Location::File(_)),
        matches!(f.at, Location::Postgres(_)),
    );
    if sqlite {
        outside(
            f,
            "CREATE TRIGGER trim AFTER INSERT ON runs BEGIN DELETE FROM runs WHERE id < NEW.id; END;",
        );
        refused("runs", "trigger trim");
        outside(f, "DROP TRIGGER trim;");
        outside(
            f,
            "CREATE TRIGGER no_results BEFORE INSERT ON results BEGIN SELECT RAISE(ABORT, 'no'); END;",
        );
        refused("results", "trigger no_results");
        outside(f, "DROP TRIGGER no_results;");
        // A CHECK needs the table rebuilt: the same columns and key, one constraint more.
        let conn = rusqlite::Connection::open(match &f.at {
            Location::File(p) => p,
            Location::Postgres(_) => unreachable!(),
        })
        .unwrap();
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'samples'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let checked = format!(
            "{}, CHECK (run_id > 0))",
            sql.trim_end().trim_end_matches(')')
        );
        conn.execute_batch(&format!(
            "PRAGMA foreign_keys = OFF; ALTER TABLE samples RENAME TO samples_old; {checked};
             INSERT INTO samples SELECT * FROM samples_old; DROP TABLE samples_old;"
        ))
        .unwrap();
        drop(conn);
        refused("samples", "CHECK");
    }
    if pg {
        outside(
            f,
            "CREATE FUNCTION oscost.trim() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN DELETE FROM oscost.runs WHERE id < NEW.id; RETURN NULL; END $$;
             CREATE TRIGGER trim AFTER INSERT ON oscost.runs FOR EACH ROW EXECUTE FUNCTION oscost.trim();",
        );
        refused("runs", "trigger trim");
        outside(f, "DROP TRIGGER trim ON oscost.runs;");
        outside(
            f,
            "CREATE RULE keep AS ON INSERT TO oscost.results DO INSTEAD NOTHING;",
        );
        refused("results", "rule keep");
        outside(f, "DROP RULE keep ON oscost.results;");
        outside(
            f,
            "ALTER TABLE oscost.samples ADD CONSTRAINT tiny CHECK (run_id < 0) NOT VALID;",
        );
        refused("samples", "constraint tiny");
        outside(f, "ALTER TABLE oscost.samples DROP CONSTRAINT tiny;");
        Store::open(&f.at).unwrap();
    }
}

/// An insert trigger added outside oscost that refuses a run's row: found by the write probe
/// before any work, the table named (exit 2), not a database error after measuring.
#[test]
fn an_insert_trigger_that_refuses_runs_is_found_before_work() {
    let f = fresh_sqlite();
    Store::open(&f.at).unwrap().save(&testdata::run()).unwrap();
    outside(
        &f,
        "CREATE TRIGGER no_runs BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no'); END;",
    );
    let e = Store::open(&f.at).err().unwrap();
    assert!(
        matches!(&e, StoreError::AlteredTable { table, .. } if table == "runs"),
        "{e}"
    );
    // Reading is not refused: nothing is written.
    assert_eq!(
        Store::open_existing(&f.at).unwrap().list().unwrap().len(),
        1
    );
}

/// A store with a zeroed page inside it is refused as damaged when opened to save (exit 2,
/// before any work), not found "malformed" after measuring.
#[test]
fn a_store_with_a_zeroed_page_is_refused_as_damaged_before_work() {
    let f = fresh_sqlite();
    let mut s = Store::open(&f.at).unwrap();
    for _ in 0..6 {
        s.save(&testdata::run()).unwrap();
    }
    drop(s);
    let Location::File(path) = &f.at else {
        unreachable!()
    };
    let page = 4096u64;
    let pages = std::fs::metadata(path).unwrap().len() / page;
    assert!(pages >= 4, "{pages} pages");
    {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.seek(SeekFrom::Start(page * (pages / 2))).unwrap();
        file.write_all(&vec![0u8; page as usize]).unwrap();
    }
    let e = Store::open(&f.at).err().unwrap();
    assert!(matches!(e, StoreError::Damaged { .. }), "{e}");
    assert!(e.is_usage());
}

/// A file that cannot take a journal (in /proc) is refused when opened to save, as a store
/// this user cannot write, not a database error after measuring.
#[test]
fn a_store_path_that_cannot_hold_a_journal_is_refused_before_work() {
    let e = Store::open(&Location::File("/proc/version".into()))
        .err()
        .unwrap();
    assert!(matches!(e, StoreError::ReadOnly { .. }), "{e}");
}
