//! Hostile use of the store and of the files around it: an output aimed at the store, run
//! files with values no measurement writes, identities that must survive a round trip, secrets
//! and terminal escapes. Each case names the harm it guards against; none measures more than
//! a few tens of samples.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

/// A store holding one small run, in a fresh directory.
struct StoreFixture {
    dir: tempfile::TempDir,
}

impl StoreFixture {
    fn new() -> StoreFixture {
        let dir = tempfile::tempdir().unwrap();
        let f = StoreFixture { dir };
        let out = f.oscost(
            &["run", "--samples", "40", "call/f0", "--json"],
            &[&f.p("r.json")],
        );
        assert_success(&out);
        f
    }

    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn db(&self) -> String {
        self.p("s.db")
    }

    /// oscost with `args`, then `more`, against this store.
    fn oscost(&self, args: &[&str], more: &[&str]) -> Output {
        oscost(&unique_tag("hostile"))
            .args(args)
            .args(more)
            .args(["--db", &self.db()])
            .output()
            .unwrap()
    }

    /// The runs the store lists (it must still be a store).
    fn runs(&self) -> usize {
        let out = self.oscost(&["history"], &[]);
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .count()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn an_export_aimed_at_the_store_is_refused_before_measuring() {
    let f = StoreFixture::new();
    assert_eq!(f.runs(), 1);
    let db = f.db();
    let sub = f.dir.path().join("d");
    std::fs::create_dir(&sub).unwrap();
    let dotdot = format!("{}/../s.db", sub.display());
    let link = f.p("link.db");
    std::os::unix::fs::symlink("s.db", &link).unwrap();
    // The journal files of the store, whether they exist now or not.
    let wal = format!("{db}-wal");
    let journal = format!("{db}-journal");
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "--samples", "40", "call/f0", "--json", &db],
        vec!["run", "--samples", "40", "call/f0", "--csv", &dotdot],
        vec!["run", "--samples", "40", "call/f0", "--markdown", &link],
        vec!["run", "--samples", "40", "call/f0", "--json", &wal],
        vec![
            "run",
            "--samples",
            "40",
            "call/f0",
            "--no-save",
            "--csv",
            &journal,
        ],
        vec!["export", "last", "--json", &db],
        vec!["export", "last", "--csv", &link],
        vec!["matrix", "--json", &dotdot],
        vec!["compare", "last", "last", "--markdown", &db],
        vec![
            "ab", "--b", "env", "--rounds", "1", "call/f0", "--json", &db,
        ],
    ];
    for args in cases {
        let t = std::time::Instant::now();
        let out = f.oscost(&args, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("results store"), "{args:?}: {err}");
        assert!(t.elapsed().as_secs_f64() < 3.0, "{args:?} measured first");
        assert_eq!(f.runs(), 1, "{args:?} touched the store");
    }
    assert!(!Path::new(&wal).exists() || std::fs::metadata(&wal).unwrap().len() < 1 << 20);
    // An output over a run file the comparison reads is refused too.
    let r = f.p("r.json");
    let out = f.oscost(&["compare", &r, &r, "--json", &r], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("run file"), "{}", stderr(&out));
}

#[test]
fn a_report_directory_that_cannot_hold_the_page_is_refused_before_measuring() {
    let f = StoreFixture::new();
    let long = f.dir.path().join("x".repeat(300));
    let holder = f.dir.path().join("holder");
    std::fs::create_dir(&holder).unwrap();
    std::fs::write(holder.join("fig"), b"not a directory").unwrap();
    let index_dir = f.dir.path().join("idx");
    std::fs::create_dir_all(index_dir.join("index.html")).unwrap();
    for (dir, says) in [
        (&long, "longer than 255"),
        (&holder, "not a directory"),
        (&index_dir, "not a file"),
    ] {
        let d = dir.display().to_string();
        let out = f.oscost(&["run", "--samples", "40", "call/f0", "--report", &d], &[]);
        assert_eq!(out.status.code(), Some(2), "{d}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{d}: {}", stderr(&out));
        assert_eq!(f.runs(), 1, "measured and saved before refusing {d}");
    }
    assert_eq!(
        std::fs::read(holder.join("fig")).unwrap(),
        b"not a directory"
    );
}
