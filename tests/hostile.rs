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

#[test]
fn every_wait_ends_within_a_second_of_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    // A "server" that accepts connections and never says a word.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "postgresql://u@127.0.0.1:{}/db",
        mute.local_addr().unwrap().port()
    );
    let fifo = dir.path().join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut cases: Vec<(&str, std::process::Command, u64)> = Vec::new();
    let mut c = oscost(&unique_tag("mute"));
    c.args(["history", "--db", &url]);
    cases.push(("history against a mute server", c, 500));
    let mut c = oscost(&unique_tag("mute"));
    c.args(["run", "--samples", "40", "call/f0", "--db", &url]);
    cases.push(("run against a mute server", c, 500));
    let mut c = oscost(&unique_tag("fifo"));
    c.args(["run", "--samples", "40", "call/f0", "--no-save", "--json"])
        .arg(&fifo);
    cases.push(("run --json FIFO with no reader", c, 1500));
    for (what, cmd, after) in cases {
        let (took, code, err) = interrupt_after(cmd, std::time::Duration::from_millis(after));
        assert_eq!(code, Some(130), "{what}: {err}");
        assert!(took.as_secs_f64() < 1.0, "{what}: took {took:?}");
    }
    // Nothing was left beside the FIFO (no temporary file).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // Without a signal, the wait is bounded by the URL's connect_timeout.
    let t = std::time::Instant::now();
    let out = oscost(&unique_tag("mute"))
        .args(["history", "--db", &format!("{url}?connect_timeout=1")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no answer within 1 s"),
        "{}",
        stderr(&out)
    );
    assert!(t.elapsed().as_secs_f64() < 3.0);
}

/// Labels with terminal escapes and bidirectional overrides are shown escaped by every view
/// that prints them: matrix (terminal and Markdown), export --markdown -, history.
#[test]
fn labels_cannot_drive_the_terminal() {
    let f = StoreFixture::new();
    let evil = "L\u{1b}]0;pwned\u{7}\u{202e}txt.exe";
    let out = f.oscost(&["run", "--samples", "40", "call/f0", "--label", evil], &[]);
    assert_success(&out);
    for args in [
        vec!["matrix"],
        vec!["matrix", "--markdown", "-"],
        vec!["export", "last", "--markdown", "-"],
        vec!["history"],
        vec!["show", "last"],
        vec!["compare", "1", "2"],
    ] {
        let out = f.oscost(&args, &[]);
        assert_success(&out);
        let all = [out.stdout.clone(), out.stderr.clone()].concat();
        let text = String::from_utf8_lossy(&all);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
            "{args:?} printed a raw control character: {text:?}"
        );
        if args[0] != "show" && args[0] != "compare" {
            assert!(text.contains("pwned"), "{args:?} lost the label: {text}");
        }
    }
}

/// A password in the store's URL (either spelling) is never printed: not in an error, not in
/// "saved as run N in ...".
#[test]
fn passwords_in_store_urls_are_never_printed() {
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = mute.local_addr().unwrap().port();
    drop(mute);
    for url in [
        format!("postgresql://alice:s3cr3t-a@127.0.0.1:{port}/db"),
        format!("postgresql://alice@127.0.0.1:{port}/db?password=s3cr3t-b"),
        format!("postgresql://alice@127.0.0.1:{port}/db&password=s3cr3t-c"),
    ] {
        for args in [vec!["history"], vec!["run", "--samples", "40", "call/f0"]] {
            let out = oscost(&unique_tag("pw"))
                .args(&args)
                .args(["--db", &url])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).to_string();
            assert!(!text.contains("s3cr3t"), "{args:?} {url}: {text}");
            assert!(text.contains("alice"), "{text}");
        }
    }
}

/// References and selections that name nothing say so, never wrapping to another run.
#[test]
fn references_beyond_the_store_and_empty_selections_say_so() {
    let f = StoreFixture::new();
    for back in ["last~18446744073709551615", "last~1"] {
        let out = f.oscost(&["show", back], &[]);
        assert_eq!(out.status.code(), Some(2), "{back}: {}", stderr(&out));
        assert!(stderr(&out).contains("no run"), "{back}: {}", stderr(&out));
    }
    let out = f.oscost(&["history", "--where", "label=nomatch"], &[]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("none of the 1 stored runs has label=nomatch"),
        "{text}"
    );
}

/// A report whose index.html is a FIFO nobody reads: the page waits, and Ctrl-C ends it.
#[test]
fn a_report_blocked_on_a_fifo_ends_on_ctrl_c() {
    let f = StoreFixture::new();
    let rep = f.dir.path().join("rep");
    std::fs::create_dir(&rep).unwrap();
    nix::unistd::mkfifo(&rep.join("index.html"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut cmd = oscost(&unique_tag("fifo"));
    cmd.args(["matrix", "--db", &f.db(), "--report"]).arg(&rep);
    let (took, code, err) = interrupt_after(cmd, std::time::Duration::from_millis(800));
    assert_eq!(code, Some(130), "{err}");
    assert!(took.as_secs_f64() < 1.0, "took {took:?}");
    let index = std::fs::symlink_metadata(rep.join("index.html")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&index.file_type()));
}
