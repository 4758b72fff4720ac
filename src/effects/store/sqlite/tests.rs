//! Tests of `sqlite`.

use super::super::{Location, Store};
use super::*;
use crate::base::model::testdata;

#[test]
fn a_store_left_with_a_hot_journal_is_recovered_by_a_reader_not_called_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    Store::open(&Location::File(db.clone()))
        .unwrap()
        .save(&testdata::run())
        .unwrap();
    // A writer in the middle of a big transaction, its pages spilled to the file: a copy
    // of the file and its journal taken now is what a SIGKILL at this instant leaves.
    let c = Connection::open(&db).unwrap();
    c.execute_batch("PRAGMA cache_size = 1; BEGIN IMMEDIATE;")
        .unwrap();
    for _ in 0..500 {
        c.execute(
            "INSERT INTO runs (started_at, benchmarks, run_json) VALUES ('x', 0, ?1)",
            [&"y".repeat(2000)],
        )
        .unwrap();
    }
    let crashed = dir.path().join("crashed");
    std::fs::create_dir(&crashed).unwrap();
    std::fs::copy(&db, crashed.join("s.db")).unwrap();
    std::fs::copy(
        dir.path().join("s.db-journal"),
        crashed.join("s.db-journal"),
    )
    .unwrap();
    drop(c);
    assert!(
        std::fs::metadata(crashed.join("s.db-journal"))
            .unwrap()
            .len()
            > 0
    );
    let mut s = Store::open_existing(&Location::File(crashed.join("s.db"))).unwrap();
    assert_eq!(
        s.list().unwrap().len(),
        1,
        "the store's last committed state"
    );
}

#[test]
fn garbage_foreign_and_newer_databases_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![0x42u8; 8192]).unwrap();
    let e = Sqlite::open(&junk).err().unwrap();
    assert!(
        e.is_usage() && e.to_string().contains("not an oscost store"),
        "{e}"
    );

    let e = refused(dir.path(), "CREATE TABLE t (x);");
    assert!(e.to_string().contains("something else"), "{e}");
    let e = refused(dir.path(), "PRAGMA user_version = 99;");
    assert!(e.to_string().contains("newer oscost"), "{e}");
    // A file that says schema 1 but holds someone else's tables.
    let e = refused(dir.path(), "CREATE TABLE t (x); PRAGMA user_version = 1;");
    assert!(e.to_string().contains("no runs and results"), "{e}");
}

/// The error opening a new file made by `sql` gives.
fn refused(dir: &Path, sql: &str) -> StoreError {
    let p = dir.join(format!("{}.db", sql.len()));
    Connection::open(&p).unwrap().execute_batch(sql).unwrap();
    Sqlite::open(&p).err().unwrap()
}

/// A store of the first schema at `p` holding `run` as JSON text.
fn first_schema_store(p: &Path, run: &crate::base::model::Run) {
    let c = Connection::open(p).unwrap();
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
        [serde_json::to_string(run).unwrap()],
    )
    .unwrap();
}

#[test]
fn a_first_schema_store_is_migrated_in_place_to_compact_samples_and_digests() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v1.db");
    let mut run = testdata::run();
    // Realistic samples: many, rounded to picoseconds as the analysis rounds them.
    let samples: Vec<f64> = (0..5000)
        .map(|i| ((150.0 + (i * 7919 % 97) as f64 * 0.37) * 1000.0).round() / 1000.0)
        .collect();
    run.results[0].samples_ns = samples.clone();
    first_schema_store(&p, &run);
    let s = Sqlite::open(&p).unwrap();
    assert_eq!(s.version().unwrap(), SCHEMA);
    // The samples now take a few bytes each, not the ~16 of JSON text.
    let stored: i64 = s
        .conn
        .query_row("SELECT sum(length(data)) FROM samples", [], |r| r.get(0))
        .unwrap();
    let per = stored as f64 / samples.len() as f64;
    assert!(per < 3.0, "{per:.2} bytes a sample");
    drop(s);
    let mut s = Store::open(&Location::File(p.clone())).unwrap();
    let (back, d) = s.load_with_digest(1).unwrap();
    assert_eq!(back.results, run.results);
    assert_eq!(d, Some(super::super::rows::digest(&run)));
    // A new save is compact too and loads back equal.
    let id = s.save(&run).unwrap();
    assert_eq!(s.load(id).unwrap().results, run.results);
}

#[test]
fn schema_3_identities_are_recomputed_and_an_unreadable_run_is_kept_not_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v3.db");
    let run = testdata::run();
    {
        let mut s = Store::open(&Location::File(p.clone())).unwrap();
        s.save(&run).unwrap();
        s.save(&run).unwrap();
    }
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(
            "UPDATE runs SET digest = 'schema-3', env_key = NULL; UPDATE runs SET run_z = x'00' WHERE id = 2;
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let s = Sqlite::open(&p).unwrap();
    assert_eq!(s.version().unwrap(), SCHEMA);
    let digests: Vec<String> = s
        .conn
        .prepare("SELECT digest FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        digests,
        vec![super::super::rows::digest(&run), "schema-3".into()]
    );
    // Schema 5's environment key, filled in for the run that can be read.
    let keys: Vec<Option<String>> = s
        .conn
        .prepare("SELECT env_key FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys[0], Some(super::super::rows::env_key(&run)));
    drop(s);
    // The unreadable run is still there, still refused with its id, and the other loads.
    let mut s = Store::open_existing(&Location::File(p)).unwrap();
    assert_eq!(s.list().unwrap().len(), 2);
    assert!(s.load(1).is_ok());
    assert!(matches!(s.load(2), Err(StoreError::BadRun { id: 2, .. })));
}

#[test]
fn a_first_schema_store_is_read_without_migrating_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v1.db");
    let run = testdata::run();
    first_schema_store(&p, &run);
    // As on read-only media: opened to read, never migrated, and every run reads.
    let mut s = Store::open_existing(&Location::File(p.clone())).unwrap();
    assert_eq!(s.load(1).unwrap().results, run.results);
    assert_eq!(s.load_bare(1).unwrap().started_at, run.started_at);
    drop(s);
    let version: i32 = Connection::open(&p)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1);
}

#[test]
#[ignore = "slow: waits out the 10 s a reader gives a writer's lock"]
fn a_store_locked_while_reading_is_said_to_be_locked() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("locked.db");
    drop(Store::open(&Location::File(p.clone())).unwrap());
    let holder = Connection::open(&p).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE;").unwrap();
    let e = Store::open_existing(&Location::File(p)).err().unwrap();
    assert!(matches!(e, StoreError::Locked(_)), "{e}");
    assert!(e.to_string().contains("locked by another process"), "{e}");
    holder.execute_batch("ROLLBACK;").unwrap();
}

#[test]
fn reading_creates_nothing_and_special_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("typo/results.db");
    assert!(matches!(
        Sqlite::open_existing(&p),
        Err(StoreError::NoStore(_))
    ));
    assert!(!dir.path().join("typo").exists());
    let e = Sqlite::open(Path::new("/dev/null")).err().unwrap();
    assert!(matches!(e, StoreError::NotAFile(_)) && e.is_usage());
    assert!(!Path::new("/dev/null-journal").exists());
}

#[test]
fn a_locked_or_read_only_database_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("results.db");
    drop(Sqlite::open(&p).unwrap());
    let holder = Connection::open(&p).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let t = std::time::Instant::now();
    let e = Sqlite::open(&p).err().unwrap();
    assert!(matches!(e, StoreError::Locked(_)), "{e}");
    assert!(t.elapsed() < std::time::Duration::from_secs(2));
    holder.execute_batch("ROLLBACK;").unwrap();
    drop(holder);
    // Read-only file (root ignores the mode: then the open must simply succeed).
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    match Sqlite::open(&p) {
        Err(e) => assert!(matches!(e, StoreError::ReadOnly { .. }), "{e}"),
        Ok(_) => assert!(nix::unistd::geteuid().is_root()),
    }
    assert!(Sqlite::open_existing(&p).is_ok());
}

#[test]
fn concurrent_first_uses_of_a_fresh_file_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let at = Location::File(dir.path().join("fresh.db"));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let at = at.clone();
            std::thread::spawn(move || Store::open(&at).map(|mut s| s.save(&testdata::run())))
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().unwrap().is_ok());
    }
    assert_eq!(Store::open_existing(&at).unwrap().list().unwrap().len(), 8);
}
