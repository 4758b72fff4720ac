//! Bad input across every subcommand and every file oscost reads, table-driven: each case
//! gives its exit status (2 for usage, checked before any measuring) and a word its one-line
//! message must hold; every case must leave no panic, no second line and no file behind.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

/// Files the cases refer to, made once: a real small run and broken copies of it.
struct Fixtures {
    dir: tempfile::TempDir,
}

impl Fixtures {
    fn new() -> Fixtures {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.json");
        let out = oscost(&unique_tag("fixture"))
            .args(["run", "--no-save", "--samples", "40", "call/f0", "--json"])
            .arg(&ok)
            .output()
            .unwrap();
        assert_success(&out);
        let run: serde_json::Value = serde_json::from_slice(&std::fs::read(&ok).unwrap()).unwrap();
        let broken = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = run.clone();
            edit(&mut v["results"][0]);
            std::fs::write(dir.path().join(name), serde_json::to_vec(&v).unwrap()).unwrap();
        };
        let fill = |x: f64| {
            move |r: &mut serde_json::Value| {
                let n = r["samples_ns"].as_array().unwrap().len();
                r["samples_ns"] = serde_json::json!(vec![x; n]);
                r["stats"]["median"] = serde_json::json!(x);
            }
        };
        broken("negative.json", &fill(-5.0));
        broken("zero.json", &fill(0.0));
        broken("denormal.json", &fill(1e-310));
        broken("huge.json", &fill(1e308));
        broken("empty-samples.json", &|r| {
            r["samples_ns"] = serde_json::json!([])
        });
        let whole = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = run.clone();
            edit(&mut v);
            std::fs::write(dir.path().join(name), serde_json::to_vec(&v).unwrap()).unwrap();
        };
        whole("odd-date.json", &|v| {
            v["started_at"] = serde_json::json!("\u{e9}2026-11-24T00:00:00Z")
        });
        whole("nul-label.json", &|v| {
            v["label"] = serde_json::json!("a\u{0}b")
        });
        whole("bad-id.json", &|v| {
            v["results"][0]["id"] = serde_json::json!("no slash\u{1b}[2J")
        });
        let mut v = run.clone();
        v["schema_version"] = serde_json::json!(99);
        std::fs::write(dir.path().join("v99.json"), serde_json::to_vec(&v).unwrap()).unwrap();
        std::fs::write(dir.path().join("garbage.json"), b"{not json").unwrap();
        std::fs::write(dir.path().join("garbage.db"), vec![0x42u8; 8192]).unwrap();
        std::fs::write(dir.path().join("a-file"), b"x").unwrap();
        let sql = |name: &str, script: &str| {
            let p = dir.path().join(name);
            let status = std::process::Command::new("sqlite3")
                .arg(&p)
                .arg(script)
                .status();
            if !status.is_ok_and(|s| s.success()) {
                // No sqlite3 binary: an oscost store made by oscost, then altered by the test.
                std::fs::write(&p, b"").unwrap();
            }
        };
        sql("foreign.db", "CREATE TABLE t (x);");
        sql(
            "foreign-v1.db",
            "CREATE TABLE t (x); PRAGMA user_version = 1;",
        );
        sql(
            "newer.db",
            "CREATE TABLE runs (x); CREATE TABLE results (y); PRAGMA user_version = 99;",
        );
        std::os::unix::fs::symlink("nowhere.db", dir.path().join("dangling.db")).unwrap();
        std::os::unix::fs::symlink("loop.db", dir.path().join("loop.db")).unwrap();
        Fixtures { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// One case: arguments (`{f}` is replaced by the fixtures directory, `{o}` by an empty
/// directory for outputs), the exit status, and a word of the message.
struct Case {
    args: &'static str,
    code: i32,
    says: &'static str,
}

const fn case(args: &'static str, code: i32, says: &'static str) -> Case {
    Case { args, code, says }
}

const CASES: &[Case] = &[
    // Values that start with a hyphen reach their option's own check.
    case("run --precision -inf call/f0", 2, "out of range"),
    case("run --budget -nan call/f0", 2, "out of range"),
    case("run --runs -1 call/f0", 2, "--runs"),
    case("ab --rounds -1 --b env call/f0", 2, "--rounds"),
    case(
        "compare --threshold -inf {f}ok.json {f}ok.json",
        2,
        "out of range",
    ),
    // A newline in what the user gave stays inside the one line.
    case("run 'no\nsuch/x'", 2, "\\n"),
    // Stores that are links to nothing.
    case(
        "run --samples 40 call/f0 --db {f}dangling.db",
        2,
        "symbolic link",
    ),
    case("history --db {f}loop.db", 2, "symbolic link"),
    // Outputs over a run file the command reads, a report's page over its input.
    case(
        "compare {f}ok.json {f}ok.json --json {f}ok.json",
        2,
        "reads",
    ),
    case("export {f}ok.json --csv {f}ok.json", 2, "reads"),
    // run: numbers
    case("run --samples 0 call/f0", 2, "--samples"),
    case("run --samples -1 call/f0", 2, "--samples"),
    case("run --samples abc call/f0", 2, "--samples"),
    case("run --samples 1e308 call/f0", 2, "--samples"),
    case("run --precision 0", 2, "out of range"),
    case("run --precision -1", 2, "out of range"),
    case("run --precision 1e308", 2, "'1e308' is out of range"),
    case("run --precision nan", 2, "out of range"),
    case("run --timeout 0", 2, "out of range"),
    case("run --timeout -5", 2, "--timeout"),
    case("run --timeout 1e308", 2, "out of range"),
    case("run --budget 0", 2, "out of range"),
    case("run --budget inf", 2, "out of range"),
    case("run --cpu 9999", 2, "not an allowed CPU"),
    case("run --cpu -1", 2, "--cpu"),
    case("run --placement nowhere switch/pipe-proc", 2, "nowhere"),
    case("run --fork-sizes -1 spawn/fork-rss", 2, "--fork-sizes"),
    case("run --fork-sizes 64T spawn/fork-rss", 2, "unit"),
    case("run --fork-sizes xyz spawn/fork-rss", 2, "--fork-sizes"),
    case("run --fork-sizes 900G spawn/fork-rss", 2, "MiB"),
    // run: what to run
    case("run nosuch/bench", 2, "nosuch/bench"),
    case("run syscall/getpid@mars", 2, "mars"),
    case("run syscall/getpdi", 2, "did you mean"),
    case("run --under \\'unbalanced", 2, "unbalanced"),
    case("run --under '' call/f0", 2, "--under needs a command"),
    case("run --bogus", 2, "--bogus"),
    case("run --json", 2, "--json"),
    // run: outputs and the store, refused before measuring
    case("run call/f0 --json {o}", 2, "is a directory"),
    case("run call/f0 --json {o}/no/such/x.json", 2, "cannot write"),
    case("run call/f0 --json {o}/x --csv {o}/./x", 2, "same file"),
    case("run call/f0 --json {o}/x --markdown {o}/x", 2, "same file"),
    case("run call/f0 --json {o}/LONGNAME", 2, "too long"),
    case("run call/f0 --report {f}/a-file", 2, "not a directory"),
    case("run call/f0 --json {o}/x.sock", 2, "socket"),
    case("run call/f0 --db /dev/null", 2, "not a regular file"),
    case("run call/f0 --db {f}/foreign.db", 2, "not an oscost store"),
    case(
        "run call/f0 --db {f}/foreign-v1.db",
        2,
        "not an oscost store",
    ),
    case("run call/f0 --db {f}/newer.db", 2, "newer oscost"),
    case("run call/f0 --db {f}/garbage.db", 2, "not an oscost store"),
    case("run call/f0 --db {o}", 2, "not a regular file"),
    // A PostgreSQL URL is a store; nothing listens there (CI's server is on a Unix socket).
    case(
        "run call/f0 --db postgres://u@127.0.0.1:9/db",
        2,
        "cannot reach the PostgreSQL store",
    ),
    case(
        "history --db postgresql://127.0.0.1:9/db",
        2,
        "cannot reach the PostgreSQL store",
    ),
    case("history --db sqlite://x.db", 2, "file path or a postgres"),
    case(
        "push last --to mysql://h/db --db {o}/none.db",
        2,
        "no mysql:// store",
    ),
    case("push --to {o}/x.db", 2, "RUN"),
    case("import {o}/missing.json --db {o}/x.db", 2, "missing.json"),
    case("import {f}/odd-date.json --db {o}/x.db", 2, "not a time"),
    case("import {f}/nul-label.json --db {o}/x.db", 2, "NUL"),
    case(
        "import {f}/bad-id.json --db {o}/x.db",
        2,
        "not a benchmark id",
    ),
    case("history --where date>=banana", 2, "not a date"),
    case("history --where date=2026-13-45", 2, "not a date"),
    // run --runs
    case(
        "run --runs 2 --no-save call/f0",
        2,
        "--runs saves every run",
    ),
    case(
        "run --runs 2 call/f0 --json {o}/x.json",
        2,
        "--runs writes no files",
    ),
    case("run --runs 0 call/f0", 2, "--runs"),
    case("run --runs 101 call/f0", 2, "--runs"),
    case("run --pause 3 call/f0", 2, "--runs"),
    // ab
    // ab has no --runs and no --under: its help does not list them, and clap refuses them.
    case("ab --runs 2 call/f0", 2, "unexpected argument '--runs'"),
    case("ab --b /nonexistent/wrapper call/f0", 2, "not a program"),
    case("ab --b '' call/f0", 2, "--b needs a command"),
    case("ab --a \\'x call/f0", 2, "--a"),
    case(
        "ab --under true call/f0",
        2,
        "unexpected argument '--under'",
    ),
    case("ab --set aslr=2 call/f0", 2, "unexpected argument '--set'"),
    case("ab --rounds 0 call/f0", 2, "--rounds"),
    case("ab --rounds 1001 call/f0", 2, "--rounds"),
    case("ab --threshold -1 call/f0", 2, "--threshold"),
    // compare and the run files it reads
    case("compare", 2, "required"),
    case("compare {f}/ok.json", 2, "required"),
    case(
        "compare {f}/missing.json {f}/ok.json",
        2,
        "neither a file nor a stored run",
    ),
    case(
        "compare {f}/garbage.json {f}/ok.json",
        2,
        "not an oscost run file",
    ),
    case(
        "compare {f}/negative.json {f}/ok.json",
        2,
        "no measurement gives",
    ),
    case(
        "compare {f}/ok.json {f}/zero.json",
        2,
        "no measurement gives",
    ),
    case(
        "compare {f}/denormal.json {f}/ok.json",
        2,
        "no measurement gives",
    ),
    case(
        "compare {f}/huge.json {f}/ok.json",
        2,
        "no measurement gives",
    ),
    case(
        "compare {f}/empty-samples.json {f}/ok.json",
        2,
        "no samples",
    ),
    case("compare {f}/v99.json {f}/ok.json", 2, "schema_version 99"),
    case(
        "compare {f}/ok.json {f}/ok.json --fail-above -3",
        2,
        "--fail-above",
    ),
    case("compare 999 1 --db {o}/none.db", 2, "no results store"),
    case(
        "compare {f}/ok.json {f}/ok.json --json {o}",
        2,
        "is a directory",
    ),
    // report
    case("report {f}/empty-samples.json -o {o}/r", 2, "no samples"),
    case("report {f}/huge.json -o {o}/r", 2, "no measurement gives"),
    case("report {f}/ok.json -o {f}/a-file", 2, "not a directory"),
    case("report {f}/ok.json", 2, "--report"),
    case(
        "report last -o {o}/r --db {o}/none.db",
        2,
        "no results store",
    ),
    // show, history, export
    case("show 999 --db {o}/typo/x.db", 2, "no results store"),
    case("show last --db {f}/garbage.db", 2, "not an oscost store"),
    case("show garbage", 2, "neither a file nor a stored run"),
    case("history --db {o}/typo/x.db", 2, "no results store"),
    case("history --db /dev/null", 2, "not a regular file"),
    case(
        "export {f}/negative.json --json {o}/x.json",
        2,
        "no measurement gives",
    ),
    case("export {f}/ok.json --json {o}", 2, "is a directory"),
    // ctx
    case("ctx 1", 2, "1"),
    case("ctx 0", 2, "0"),
    case("ctx -s 99999999999 2", 2, "MiB"),
    case("ctx -W 100000000 2", 2, "-W"),
    case("ctx -P 0 2", 2, "-P"),
    case("ctx", 2, "required"),
    // anything
    case("bogus-subcommand", 2, "bogus-subcommand"),
    case("run --label x nosuch/\u{1b}[2J", 2, "\\u{1b}[2J"),
    case("__worker syscall/getpid {}", 2, "internal"),
];

fn expand(args: &str, fx: &Fixtures, out: &Path) -> Vec<String> {
    let long = "x".repeat(300);
    shlex::split(args)
        .unwrap()
        .into_iter()
        .map(|a| {
            a.replace("{f}", &fx.path(""))
                .replace("{o}", &out.display().to_string())
                .replace("LONGNAME", &long)
        })
        .collect()
}

#[test]
fn bad_input_is_refused_in_one_line_before_any_work_and_leaves_nothing() {
    let fx = Fixtures::new();
    let before: Vec<PathBuf> = list(fx.dir.path());
    let mut failures = Vec::new();
    for c in CASES {
        let out_dir = tempfile::tempdir().unwrap();
        let sock_path = out_dir.path().join("x.sock");
        let _sock = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
        let args = expand(c.args, &fx, out_dir.path());
        let t0 = Instant::now();
        let out = oscost(&unique_tag("bad")).args(&args).output().unwrap();
        let took = t0.elapsed();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let lines = err.lines().filter(|l| !l.trim().is_empty()).count();
        let left: Vec<PathBuf> = list(out_dir.path())
            .into_iter()
            .filter(|p| p != &sock_path)
            .collect();
        let mut wrong = Vec::new();
        if out.status.code() != Some(c.code) {
            wrong.push(format!("exit {:?}", out.status.code()));
        }
        if !err.contains(c.says) {
            wrong.push(format!("no '{}'", c.says));
        }
        if lines != 1 || err.contains("panicked") {
            wrong.push(format!("{lines} lines"));
        }
        if !left.is_empty() {
            wrong.push(format!("left {left:?}"));
        }
        if took > Duration::from_secs(3) {
            wrong.push(format!("took {took:?} (measured?)"));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{}: {}\n    {}",
                c.args,
                wrong.join(", "),
                err.trim()
            ));
        }
    }
    assert_eq!(list(fx.dir.path()), before, "a fixture was changed");
    assert!(CASES.len() >= 60);
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walk(dir);
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    rd.flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() {
                let mut v = walk(&p);
                v.push(p);
                v
            } else {
                vec![p]
            }
        })
        .collect()
}

/// A run file larger than the address space oscost may take (`ulimit -v`) is refused before
/// any work, exit 2, in one line that says its size; never an allocation failure (exit 134).
/// The same limit lets a small run in, so the refusal is about the file, not the limit.
#[test]
fn an_import_too_large_for_the_address_space_is_refused_not_aborted() {
    use std::os::unix::process::CommandExt;
    let fx = Fixtures::new();
    let mut run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.dir.path().join("ok.json")).unwrap()).unwrap();
    let samples: Vec<f64> = (0..3_000_000).map(|i| 1.0 + (i % 7) as f64).collect();
    run["results"][0]["samples_ns"] = serde_json::json!(samples);
    run["results"][0]["preempted"] = serde_json::json!([]);
    let big = fx.dir.path().join("big.json");
    std::fs::write(&big, serde_json::to_vec(&run).unwrap()).unwrap();
    let import = |file: &Path| {
        let db = fx.dir.path().join("limited.db");
        let mut cmd = oscost(&unique_tag("import-limit"));
        cmd.arg("import").arg(file).arg("--db").arg(&db);
        // SAFETY: only setrlimit between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 60_000 << 10,
                    rlim_max: 60_000 << 10,
                };
                libc::setrlimit(libc::RLIMIT_AS, &lim);
                Ok(())
            });
        }
        cmd.output().unwrap()
    };
    let out = import(&big);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("3000000 samples") && err.contains("MiB"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_success(&import(&fx.dir.path().join("ok.json")));
}

/// Strings read from a store, a file or the environment reach no terminal raw: a label, a
/// host name and a note holding an escape sequence, a bell and a right-to-left override come
/// out escaped from every view and export that shows them, and so does a message naming an
/// `XDG_DATA_HOME` that holds them.
#[test]
fn stored_and_environment_strings_reach_no_terminal_raw() {
    let fx = Fixtures::new();
    let mut run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.dir.path().join("ok.json")).unwrap()).unwrap();
    let evil = "a\u{1b}[2J\u{1b}]0;t\u{7}b\u{202e}c";
    run["label"] = serde_json::json!(evil);
    run["env"]["hostname"] = serde_json::json!(evil);
    run["results"][0]["notes"] = serde_json::json!([format!("kept: {evil}")]);
    let file = fx.dir.path().join("evil.json");
    std::fs::write(&file, serde_json::to_vec(&run).unwrap()).unwrap();
    let db = fx.dir.path().join("evil.db");
    let db = db.to_str().unwrap();
    let tag = unique_tag("escaping");
    assert_success(
        &oscost(&tag)
            .args(["import", file.to_str().unwrap(), "--db", db])
            .output()
            .unwrap(),
    );
    let raw = |text: &[u8]| {
        let t = String::from_utf8_lossy(text);
        t.contains('\u{1b}') || t.contains('\u{7}') || t.contains('\u{202e}')
    };
    for args in [
        vec!["history", "--db", db],
        vec!["show", "1", "--db", db],
        vec!["export", "1", "--db", db, "--csv", "-"],
        vec!["export", "1", "--db", db, "--markdown", "-"],
        vec!["matrix", "1", "--db", db, "--csv", "-"],
    ] {
        let out = oscost(&tag).args(&args).output().unwrap();
        assert!(
            !raw(&out.stdout) && !raw(&out.stderr),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.code() != Some(101), "{args:?} panicked");
    }
    let out = oscost(&tag)
        .args(["history"])
        .env("XDG_DATA_HOME", format!("/nonexistent/{evil}"))
        .env_remove("OSCOST_DB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!raw(&out.stderr) && err.contains("\\u{1b}"), "{err}");
}
