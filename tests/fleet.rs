//! The fleet store from the command line: `import` and `push` into PostgreSQL (a server named
//! by `OSCOST_TEST_PG`; `.ci/run` starts a throwaway one), eight hosts pushing at once, and
//! pushes killed with SIGKILL at spread moments, which must leave whole runs only. Without a
//! server these tests pass at once and say so in one line. Copies between SQLite files need no
//! server and always run.
// Tests and examples print to a terminal the harness owns; a failed write there is the
// harness's to report.
#![allow(clippy::disallowed_macros)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use oscost::effects::store::{Location, Store};

/// A database of its own on the test server, dropped after; `None` without a server.
struct Db {
    admin: String,
    name: String,
    url: String,
}

impl Db {
    fn fresh(tag: &str) -> Option<Db> {
        let Some(admin) = std::env::var("OSCOST_TEST_PG")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            skip_needing(
                tag,
                &["postgres"],
                "no PostgreSQL server given (set OSCOST_TEST_PG)",
            );
            return None;
        };
        let name = format!("oscost_fleet_{}_{tag}", std::process::id());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let (base, query) = admin
            .split_once('?')
            .map_or((admin.as_str(), None), |(b, q)| (b, Some(q)));
        let (scheme, rest) = base.split_once("://").unwrap();
        let host = rest.split_once('/').map_or(rest, |(h, _)| h);
        let url = match query {
            Some(q) => format!("{scheme}://{host}/{name}?{q}"),
            None => format!("{scheme}://{host}/{name}"),
        };
        Some(Db { admin, name, url })
    }

    fn store(&self) -> Store {
        Store::open_existing(&Location::Postgres(self.url.clone())).unwrap()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// One real run's JSON, measured once per test process.
fn measured_run() -> serde_json::Value {
    static RUN: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let _g = measuring();
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let out = oscost(&unique_tag("fleet"))
            .args([
                "run",
                "--no-save",
                "--quick",
                "call/f0",
                "syscall/getppid",
                "--json",
            ])
            .arg(&json)
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
    })
    .clone()
}

/// `n` distinct run files (the measured run under other labels) in `dir`.
fn run_files(dir: &Path, prefix: &str, n: usize) -> Vec<PathBuf> {
    let base = measured_run();
    (0..n)
        .map(|i| {
            let mut r = base.clone();
            r["label"] = serde_json::Value::String(format!("{prefix}-{i}"));
            let p = dir.join(format!("{prefix}-{i}.json"));
            std::fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
            p
        })
        .collect()
}

/// A source SQLite store holding `n` distinct runs, made by `import`.
fn source_store(dir: &Path, prefix: &str, n: usize) -> PathBuf {
    let db = dir.join(format!("{prefix}.db"));
    let out = oscost("import")
        .arg("import")
        .args(run_files(dir, prefix, n))
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    db
}

/// Every run in the store loads whole: its results rows are all there and its samples decode.
fn all_whole(s: &mut Store) -> usize {
    let list = s.list().unwrap();
    for r in &list {
        let run = s.load(r.id).unwrap();
        assert_eq!(run.results.len() as i64, r.benchmarks, "run {}", r.id);
        assert_eq!(s.result_rows(&[r.id]).unwrap().len() as i64, r.benchmarks);
    }
    list.len()
}

#[test]
fn import_then_push_copies_runs_once_between_files() {
    let dir = tempfile::tempdir().unwrap();
    let src = source_store(dir.path(), "a", 3);
    let target = dir.path().join("target.db");
    for round in 0..2 {
        let out = oscost("push")
            .args(["push", "all", "--db"])
            .arg(&src)
            .arg("--to")
            .arg(&target)
            .output()
            .unwrap();
        assert_success(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        let expect = if round == 0 {
            "3 new, 0 already"
        } else {
            "0 new, 3 already"
        };
        assert!(err.contains(expect), "{err}");
    }
    let mut t = Store::open_existing(&Location::File(target)).unwrap();
    assert_eq!(all_whole(&mut t), 3);
    // Pushing a store onto itself is refused before anything is done.
    let out = oscost("push")
        .args(["push", "last", "--db"])
        .arg(&src)
        .arg("--to")
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn eight_hosts_pushing_at_once_leave_every_run_whole() {
    let Some(db) = Db::fresh("concurrent") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sources: Vec<PathBuf> = (0..8)
        .map(|h| source_store(dir.path(), &format!("host{h}"), 25))
        .collect();
    let pushes: Vec<std::process::Child> = sources
        .iter()
        .map(|src| {
            oscost("push")
                .args(["push", "all", "--db"])
                .arg(src)
                .args(["--to", &db.url])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for p in pushes {
        assert_success(&p.wait_with_output().unwrap());
    }
    assert_eq!(all_whole(&mut db.store()), 200);
}

#[test]
fn a_push_killed_at_any_moment_leaves_no_partial_run() {
    let Some(db) = Db::fresh("killed") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = source_store(dir.path(), "k", 25);
    // How long a whole push into the (then emptied) store takes here, to spread the kills
    // over it: the first push also creates the schema, so it is not the one timed.
    let push = || {
        assert_success(
            &oscost("push")
                .args(["push", "all", "--db"])
                .arg(&src)
                .args(["--to", &db.url])
                .output()
                .unwrap(),
        )
    };
    let empty = || {
        let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        c.batch_execute("TRUNCATE oscost.runs CASCADE").unwrap();
    };
    push();
    empty();
    let t = Instant::now();
    push();
    let whole = t.elapsed();
    empty();
    let mut completed = 0;
    // Ten random moments over the time a whole push takes (the seed is printed, so a
    // failure can be replayed).
    let seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    eprintln!("kill moments seeded with {seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    for _ in 0..10 {
        let at = whole.mul_f64(rand::RngExt::random_range(&mut rng, 0.0..1.0));
        let mut child = oscost("push")
            .args(["push", "all", "--db"])
            .arg(&src)
            .args(["--to", &db.url])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        completed += usize::from(child.wait().unwrap().success());
        // The server notices the lost connection and rolls back; give it a moment.
        std::thread::sleep(Duration::from_millis(50));
        if let Ok(mut s) = Store::open_existing(&Location::Postgres(db.url.clone())) {
            let n = all_whole(&mut s);
            assert!(
                n == 0 || n == 25,
                "{n} runs after a kill at {at:?}: a push is all or nothing"
            );
            // Empty again, so that the next push inserts everything (one that found its runs
            // already there would finish too early to be caught mid-transaction).
            empty();
        }
    }
    eprintln!("{completed} of 10 pushes completed before their kill (a push takes {whole:?})");
}

#[test]
fn matrix_and_selection_read_the_store_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = source_store(dir.path(), "m", 3);
    let run = |args: &[&str]| {
        oscost("matrix")
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap()
    };
    // Every run, the first as base: one CSV line per benchmark and run, JSON that parses.
    let csv = dir.path().join("m.csv");
    let json = dir.path().join("m.json");
    let out = run(&[
        "matrix",
        "--csv",
        csv.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--report",
        dir.path().join("page").to_str().unwrap(),
    ]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(base)") && text.contains("label m-2"),
        "{text}"
    );
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let benches = m["rows"].as_array().unwrap().len();
    assert_eq!(m["columns"].as_array().unwrap().len(), 3);
    assert_eq!(m["differs"], serde_json::json!(["label"]));
    let lines = std::fs::read_to_string(&csv).unwrap().lines().count();
    assert_eq!(lines, 1 + 3 * benches);
    let page = std::fs::read_to_string(dir.path().join("page/index.html")).unwrap();
    assert_eq!(page.matches("class=\"cell").count(), 3 * benches);
    // Equal runs (the same samples under other labels): nothing is called changed.
    for row in m["rows"].as_array().unwrap() {
        for cell in &row["cells"].as_array().unwrap()[1..] {
            let v = &cell["verdict"];
            assert!(v.is_null() || v == "no_change", "{row}");
            if cell["slowdown"].is_number() {
                assert_eq!(cell["slowdown"], 1.0, "{row}");
            }
        }
    }
    // A selection and a base inside it; `last` counts within the selection.
    let out = run(&[
        "matrix",
        "--where",
        "label~m-",
        "--where",
        "label!=m-0",
        "--base",
        "last",
    ]);
    assert_success(&out);
    let m2 = String::from_utf8_lossy(&out.stdout);
    assert!(
        !m2.contains("label m-0") && m2.contains("label m-1"),
        "{m2}"
    );
    for bad in [
        vec!["matrix", "--where", "label=nope"],
        vec!["matrix", "--where", "colour=red"],
        vec!["matrix", "--base", "999"],
        vec!["history", "--where", "date>=x", "--where", "id=q"],
    ] {
        let out = run(&bad.iter().map(|s| &**s).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).lines().count(),
            1,
            "{bad:?}"
        );
    }
    // The history page of one benchmark over the three runs.
    let page_dir = dir.path().join("hist");
    let out = oscost("history")
        .args(["history", "call/f0", "--report"])
        .arg(&page_dir)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    let page = std::fs::read_to_string(page_dir.join("index.html")).unwrap();
    assert!(
        page.contains("f0 across 3 runs") && page.contains("<svg"),
        "{page}"
    );
    let out = oscost("history")
        .args(["history", "--where", "label=m-1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("m-1") && !listing.contains("m-2"),
        "{listing}"
    );
}

/// `run --json r.json --db A; import r.json --db B; push last --db A --to B` keeps one run in
/// B: the run's identity survives the JSON round trip (SQLite, and PostgreSQL when given).
#[test]
fn a_run_exported_imported_and_pushed_is_kept_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("A.db");
    let json = dir.path().join("r.json");
    {
        let _g = measuring();
        let out = oscost(&unique_tag("identity"))
            .args([
                "run",
                "--samples",
                "200",
                "call/f0",
                "syscall/getppid",
                "--db",
            ])
            .arg(&a)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert_success(&out);
    }
    let pg = Db::fresh("identity");
    let mut targets = vec![dir.path().join("B.db").display().to_string()];
    targets.extend(pg.as_ref().map(|d| d.url.clone()));
    for b in targets {
        let out = oscost("import")
            .arg("import")
            .arg(&json)
            .args(["--db", &b])
            .output()
            .unwrap();
        assert_success(&out);
        let out = oscost("push")
            .args(["push", "last", "--db"])
            .arg(&a)
            .args(["--to", &b])
            .output()
            .unwrap();
        assert_success(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("0 new, 1 already"), "{b}: {err}");
    }
}

/// Runs `oscost run --quick syscall/` into `url` (about 2 s of measuring), calling `during`
/// once the store was opened and measuring is under way.
fn measure_into(url: &str, env: &[(&str, &str)], during: impl FnOnce()) -> std::process::Output {
    let _g = measuring();
    let tag = unique_tag("pgsave");
    let mut cmd = oscost(&tag);
    cmd.args(["run", "--quick", "syscall/", "--db", url]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The store is opened (and proven) before the first worker starts.
    assert!(
        wait_for_process(&tag, "__worker", Duration::from_secs(30)),
        "measuring never started"
    );
    during();
    child.wait_with_output().unwrap()
}

fn admin_sql(db: &Db, sql: &str) {
    let mut c = postgres::Client::connect(&db.admin, postgres::NoTls).unwrap();
    c.batch_execute(sql).unwrap();
}

/// The connection opened before measuring is gone when the run is saved (the server ended
/// it; an idle_session_timeout shorter than the run): the run is saved over a new one.
#[test]
fn a_run_is_saved_when_its_first_connection_was_lost_while_measuring() {
    let Some(db) = Db::fresh("lost") else { return };
    let terminate = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()",
        db.name
    );
    let out = measure_into(&db.url, &[], || admin_sql(&db, &terminate));
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("saved as run"));
    admin_sql(
        &db,
        &format!(
            "ALTER DATABASE {} SET idle_session_timeout = '300ms'",
            db.name
        ),
    );
    let out = measure_into(&db.url, &[], || {});
    assert_success(&out);
    assert_eq!(all_whole(&mut db.store()), 2);
}

/// A role that may insert but not update saves (no ON CONFLICT DO UPDATE); a role that may not
/// insert is refused before measuring.
#[test]
fn a_least_privileged_role_saves_and_one_without_insert_is_refused_first() {
    let Some(db) = Db::fresh("roles") else { return };
    drop(Store::open(&Location::Postgres(db.url.clone())).unwrap());
    let role = format!("{}_w", db.name);
    admin_sql(
        &db,
        &format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;
             GRANT CONNECT ON DATABASE {db} TO {role};",
            db = db.name
        ),
    );
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    c.batch_execute(&format!(
        "GRANT USAGE ON SCHEMA oscost TO {role};
         GRANT SELECT ON ALL TABLES IN SCHEMA oscost TO {role};
         GRANT USAGE ON SEQUENCE oscost.runs_id_seq TO {role};"
    ))
    .unwrap();
    let as_role = db.url.replacen("oscost@", &format!("{role}@"), 1);
    let out = oscost("noinsert")
        .args(["run", "--samples", "40", "call/f0", "--db", &as_role])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("lacks a right"));
    c.batch_execute(&format!(
        "GRANT INSERT ON ALL TABLES IN SCHEMA oscost TO {role};"
    ))
    .unwrap();
    let out = oscost("insertonly")
        .args(["run", "--samples", "40", "call/f0", "--db", &as_role])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(all_whole(&mut db.store()), 1);
    drop(c);
    admin_sql(&db, &format!("DROP OWNED BY {role} CASCADE"));
    let _ = std::panic::catch_unwind(|| admin_sql(&db, &format!("DROP ROLE IF EXISTS {role}")));
}

/// A run the store cannot take after measuring (the server stopped taking connections) is
/// kept as a run file; the message names it and `import` brings it in once the store is back.
#[test]
fn a_run_that_cannot_be_saved_is_kept_where_import_finds_it() {
    let Some(db) = Db::fresh("keep") else { return };
    let home = tempfile::tempdir().unwrap();
    let data = home.path().display().to_string();
    let out = measure_into(&db.url, &[("XDG_DATA_HOME", &data)], || {
        admin_sql(
            &db,
            &format!(
                "ALTER DATABASE {n} ALLOW_CONNECTIONS false;
                 SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{n}';",
                n = db.name
            ),
        )
    });
    admin_sql(
        &db,
        &format!("ALTER DATABASE {} ALLOW_CONNECTIONS true", db.name),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let kept: Vec<PathBuf> = std::fs::read_dir(home.path().join("oscost/unsaved"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{err}");
    assert!(err.contains(&kept[0].display().to_string()), "{err}");
    let out = oscost("import")
        .arg("import")
        .arg(&kept[0])
        .args(["--db", &db.url])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(all_whole(&mut db.store()), 1);
}

/// Pushes of the same runs in opposite orders, at once, many times: none fails (no deadlock
/// reaches the user) and every run is there once.
#[test]
fn pushes_of_the_same_runs_in_opposite_orders_all_succeed() {
    let Some(db) = Db::fresh("orders") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = source_store(dir.path(), "o", 6);
    for round in 0..4 {
        let pushes: Vec<_> = [
            ["1", "2", "3", "4", "5", "6"],
            ["6", "5", "4", "3", "2", "1"],
        ]
        .into_iter()
        .map(|ids| {
            oscost("push")
                .arg("push")
                .args(ids)
                .arg("--db")
                .arg(&src)
                .args(["--to", &db.url])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
        for p in pushes {
            let out = p.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert_eq!(all_whole(&mut db.store()), 6);
}

/// A table another session holds locked: `history` waits (bounded by lock_timeout), and a
/// Ctrl-C ends it within a second.
#[test]
fn a_locked_table_wait_ends_on_ctrl_c() {
    let Some(db) = Db::fresh("locked") else {
        return;
    };
    drop(Store::open(&Location::Postgres(db.url.clone())).unwrap());
    let mut holder = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("LOCK TABLE oscost.runs IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let mut cmd = oscost("locked");
    cmd.args(["history", "--db", &db.url]);
    let (took, code, err) = interrupt_after(cmd, Duration::from_millis(700));
    assert_eq!(code, Some(130), "{err}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    tx.rollback().unwrap();
}

/// The fleet's store over TLS, as libpq users spell it: `.ci/run`'s throwaway server listens
/// on localhost with TLS only (`OSCOST_TEST_PG_TLS`, its CA in `OSCOST_TEST_PG_CA`); the role
/// `pwuser` needs the password `pw-secret` there.
#[test]
fn the_fleet_store_is_reached_over_tls_with_libpq_settings() {
    let (Some(tls_url), Some(ca)) = (
        std::env::var("OSCOST_TEST_PG_TLS")
            .ok()
            .filter(|v| !v.is_empty()),
        std::env::var("OSCOST_TEST_PG_CA")
            .ok()
            .filter(|v| !v.is_empty()),
    ) else {
        skip_needing(
            "tls",
            &["postgres-tls"],
            "no TLS server given (set OSCOST_TEST_PG_TLS and OSCOST_TEST_PG_CA)",
        );
        return;
    };
    let Some(db) = Db::fresh("tls") else { return };
    let base = tls_url.rsplit_once('/').unwrap().0.to_string();
    let url = format!("{base}/{}", db.name);
    let try_db = |url: &str, env: &[(&str, &str)]| {
        let mut c = oscost("tls");
        c.args(["run", "--samples", "40", "call/f0", "--db", url]);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let ok = |(code, err): (Option<i32>, String), what: &str| {
        assert_eq!(code, Some(0), "{what}: {err}");
    };
    let refused = |(code, err): (Option<i32>, String), what: &str, says: &str| {
        assert_eq!(code, Some(2), "{what}: {err}");
        assert!(err.contains(says), "{what}: {err}");
    };
    ok(try_db(&format!("{url}?sslmode=require"), &[]), "require");
    ok(
        try_db(&format!("{url}?sslmode=verify-full&sslrootcert={ca}"), &[]),
        "verify-full",
    );
    ok(
        try_db(
            &url,
            &[("PGSSLMODE", "verify-full"), ("PGSSLROOTCERT", &ca)],
        ),
        "PGSSLMODE",
    );
    // The server takes no plain TCP connection: disable (from the URL or PGSSLMODE) fails.
    refused(
        try_db(&format!("{url}?sslmode=disable"), &[]),
        "disable",
        "no encryption",
    );
    refused(
        try_db(&url, &[("PGSSLMODE", "disable")]),
        "PGSSLMODE",
        "no encryption",
    );
    // The certificate names localhost, not 127.0.0.1: verify-full refuses, verify-ca does not.
    let by_ip = url.replacen("@localhost:", "@127.0.0.1:", 1);
    refused(
        try_db(
            &format!("{by_ip}?sslmode=verify-full&sslrootcert={ca}"),
            &[],
        ),
        "name",
        "not valid for name",
    );
    ok(
        try_db(&format!("{by_ip}?sslmode=verify-ca&sslrootcert={ca}"), &[]),
        "verify-ca",
    );
    // A root that did not sign the server's certificate: refused.
    let other = tempfile::tempdir().unwrap();
    let wrong = other.path().join("wrong.crt");
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=someone else", "-keyout"])
        .arg(other.path().join("k"))
        .arg("-out")
        .arg(&wrong)
        .output()
        .unwrap();
    assert!(made.status.success());
    refused(
        try_db(
            &format!("{url}?sslmode=verify-full&sslrootcert={}", wrong.display()),
            &[],
        ),
        "wrong root",
        "UnknownIssuer",
    );
    // A password from PGPASSWORD, then from a pgpass file (ignored unless private).
    let pw_url = format!("{}?sslmode=require", url.replacen("oscost@", "pwuser@", 1));
    admin_sql(&db, &format!("GRANT ALL ON DATABASE {} TO pwuser", db.name));
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    c.batch_execute(
        "GRANT USAGE ON SCHEMA oscost TO pwuser; GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA oscost TO pwuser;
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA oscost TO pwuser;",
    )
    .unwrap();
    refused(try_db(&pw_url, &[]), "no password", "password");
    ok(
        try_db(&pw_url, &[("PGPASSWORD", "pw-secret")]),
        "PGPASSWORD",
    );
    let pass = other.path().join("pgpass");
    std::fs::write(&pass, "localhost:*:*:pwuser:pw-secret\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let passfile = pass.display().to_string();
    refused(
        try_db(&pw_url, &[("PGPASSFILE", &passfile)]),
        "open pgpass",
        "password",
    );
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    ok(try_db(&pw_url, &[("PGPASSFILE", &passfile)]), "pgpass");
    assert_eq!(all_whole(&mut db.store()), 6);
    drop(c);
    admin_sql(
        &db,
        &format!("REVOKE ALL ON DATABASE {} FROM pwuser", db.name),
    );
}

/// Odd stores are refused as usage errors (exit 2), each saying what is wrong.
#[test]
fn odd_postgresql_stores_are_refused_with_exit_2() {
    let Some(db) = Db::fresh("odd") else { return };
    drop(Store::open(&Location::Postgres(db.url.clone())).unwrap());
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let history = || {
        let out = oscost("odd")
            .args(["history", "--db", &db.url])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    c.batch_execute("INSERT INTO oscost.schema_version VALUES (4)")
        .unwrap();
    let (code, err) = history();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("2 rows"), "{err}");
    c.batch_execute("DELETE FROM oscost.schema_version; INSERT INTO oscost.schema_version VALUES (4); DROP TABLE oscost.samples")
        .unwrap();
    let (code, err) = history();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("lacks 1 of the runs"), "{err}");
}

/// A store whose tables were altered outside oscost (a NULL where oscost never writes one, a
/// column's type changed), a role without the rights to read it, and a table another session
/// holds: each is one line and exit 2, never a panic; the held table is found before
/// measuring.
#[test]
fn altered_tables_missing_rights_and_a_held_lock_are_said_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    std::fs::write(&file, serde_json::to_vec(&measured_run()).unwrap()).unwrap();
    let oscost_on = |url: &str, args: &[&str]| {
        let out = oscost("altered")
            .args(args)
            .args(["--db", url])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let reading: &[&[&str]] = &[
        &["history"],
        &["history", "call/f0"],
        &["show", "last"],
        &["matrix"],
        &["export", "last", "--json", "-"],
        &["compare", "last", "last"],
    ];
    for (name, sql, column) in [
        (
            "nullstart",
            "ALTER TABLE oscost.runs ALTER COLUMN started_at DROP NOT NULL;
             UPDATE oscost.runs SET started_at = NULL",
            "started_at",
        ),
        (
            "bigidx",
            "ALTER TABLE oscost.samples ALTER COLUMN idx TYPE bigint",
            "idx",
        ),
        (
            "textmedian",
            "ALTER TABLE oscost.results ALTER COLUMN median TYPE text",
            "median",
        ),
    ] {
        let Some(db) = Db::fresh(name) else { return };
        let (code, err) = oscost_on(&db.url, &["import", file.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{err}");
        let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        c.batch_execute(sql).unwrap();
        let mut said = false;
        for args in reading {
            let (code, err) = oscost_on(&db.url, args);
            assert_ne!(code, Some(101), "{name} {args:?}: {err}");
            assert!(!err.contains("panicked"), "{name} {args:?}: {err}");
            if code == Some(2) && err.contains(column) {
                said = true;
            }
        }
        assert!(said, "{name}: no command named the column {column}");
    }

    let Some(db) = Db::fresh("norights") else {
        return;
    };
    drop(Store::open(&Location::Postgres(db.url.clone())).unwrap());
    let role = format!("{}_r", db.name);
    admin_sql(
        &db,
        &format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;
             GRANT CONNECT ON DATABASE {db} TO {role};",
            db = db.name
        ),
    );
    let as_role = db.url.replacen("oscost@", &format!("{role}@"), 1);
    let (code, err) = oscost_on(&as_role, &["history"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("may not read"), "{err}");
    admin_sql(&db, &format!("DROP OWNED BY {role} CASCADE"));
    let _ = std::panic::catch_unwind(|| admin_sql(&db, &format!("DROP ROLE IF EXISTS {role}")));

    let Some(db) = Db::fresh("held") else { return };
    drop(Store::open(&Location::Postgres(db.url.clone())).unwrap());
    let mut holder = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("LOCK TABLE oscost.results IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let t = Instant::now();
    let (code, err) = oscost_on(&db.url, &["run", "--samples", "40", "call/f0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("locked"), "{err}");
    assert!(!err.contains("benchmark(s)"), "measured first: {err}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    tx.rollback().unwrap();
}
