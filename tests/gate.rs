//! The gate, driven by clap's own command tree: every path-valued argument of every command
//! (so a flag added tomorrow is covered without anyone adding it here) is aimed at the store
//! (five spellings, a hard link, its journal), at a run file the command reads, and at report
//! directories whose `index.html` or `fig/` file is one of those. After every case the store
//! still holds its runs, the run file its bytes, and nothing panicked.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::CommandFactory;
use common::*;
use oscost::effects::store::{Location, Store};

/// The smallest valid invocation of each command, `{run}` the run file. A command missing
/// here fails the test: a new command must say how it is called before it can be checked.
const INVOCATIONS: &[(&str, &[&str])] = &[
    ("", &["--samples", "40", "call/f0"]),
    ("run", &["run", "--samples", "40", "call/f0"]),
    (
        "ab",
        &[
            "ab",
            "--b",
            "env",
            "--rounds",
            "1",
            "--samples",
            "40",
            "call/f0",
        ],
    ),
    ("predict", &["predict", "--under", "env", "--", "/bin/true"]),
    (
        "watch",
        &[
            "watch",
            "--windows",
            "1",
            "--interval",
            "1",
            "--ids",
            "call/f0",
        ],
    ),
    ("explain", &["explain", "switch/pipe-proc@same"]),
    ("ctx", &["ctx", "2"]),
    ("scale", &["scale", "getppid", "--copies", "1"]),
    ("report", &["report", "{run}", "-o", "{dir}"]),
    ("history", &["history"]),
    ("show", &["show", "last"]),
    ("export", &["export", "{run}", "--json", "{out}"]),
    ("compare", &["compare", "{run}", "last"]),
    ("matrix", &["matrix"]),
    ("push", &["push", "last", "--to", "{other}"]),
    ("import", &["import", "{run}"]),
    ("list", &["list"]),
    ("env", &["env"]),
    ("settings", &["settings"]),
    ("completions", &["completions", "bash"]),
    ("man", &["man"]),
];

/// Arguments that name the store itself, aimed at it by design.
const THE_STORE: &[&str] = &["db"];

/// Every (command, flag) whose value is a path, from clap's tree; a positional path argument
/// is given as `None` for its flag.
fn path_args() -> Vec<(String, Option<String>, String)> {
    use clap::ValueHint;
    let root = oscost::cli::Cli::command();
    let mut out = Vec::new();
    let mut cmds: Vec<(String, &clap::Command)> = vec![(String::new(), &root)];
    cmds.extend(
        root.get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| (c.get_name().to_string(), c)),
    );
    for (name, c) in cmds {
        for a in c.get_arguments() {
            let pathy = matches!(
                a.get_value_hint(),
                ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
            ) || a.get_value_names().is_some_and(|v| {
                v.iter()
                    .any(|n| ["FILE", "DIR", "PATH|URL"].contains(&n.as_str()))
            });
            if !pathy || THE_STORE.contains(&a.get_id().as_str()) {
                continue;
            }
            let flag = a
                .get_long()
                .map(|l| format!("--{l}"))
                .or_else(|| a.get_short().map(|s| format!("-{s}")));
            out.push((name.clone(), flag, a.get_id().to_string()));
        }
    }
    out
}

fn runs_in(db: &Path) -> Option<usize> {
    let mut s = Store::open_existing(&Location::File(db.to_path_buf())).ok()?;
    s.list().ok().map(|l| l.len())
}

struct World {
    dir: tempfile::TempDir,
    db: PathBuf,
    runfile: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let runfile = dir.path().join("r.json");
        let out = oscost(&unique_tag("gate"))
            .args(["run", "--samples", "40", "call/f0", "--json"])
            .arg(&runfile)
            .env("OSCOST_DB", &db)
            .output()
            .unwrap();
        assert_success(&out);
        World { dir, db, runfile }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The hostile targets: name -> path, made fresh for each case.
    fn targets(&self) -> Vec<(&'static str, PathBuf)> {
        let d = self.dir.path();
        let _ = std::fs::create_dir_all(d.join("sub"));
        let link = |name: &str, to: &Path| {
            let p = d.join(name);
            let _ = std::fs::remove_file(&p);
            std::os::unix::fs::symlink(to, &p).unwrap();
            p
        };
        let page_dir = |name: &str, file: &str, to: &Path, hard: bool| {
            let dir = d.join(name);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("fig")).unwrap();
            if hard {
                std::fs::hard_link(to, dir.join(file)).unwrap();
            } else {
                std::os::unix::fs::symlink(to, dir.join(file)).unwrap();
            }
            dir
        };
        let hard = d.join("hard.db");
        let _ = std::fs::remove_file(&hard);
        std::fs::hard_link(&self.db, &hard).unwrap();
        vec![
            ("store", self.db.clone()),
            ("store ./", PathBuf::from(format!("{}/./s.db", d.display()))),
            ("store ..", d.join("sub/../s.db")),
            ("store symlink", link("link.db", &self.db)),
            ("store hard link", hard),
            ("store journal", d.join("s.db-journal")),
            ("store wal", d.join("s.db-wal")),
            ("run file", self.runfile.clone()),
            ("run file symlink", link("link.json", &self.runfile)),
            (
                "dir whose index.html is the store",
                page_dir("p1", "index.html", &self.db, false),
            ),
            (
                "dir whose fig/ links to the store",
                page_dir("p2", "fig/a.svg", &self.db, false),
            ),
            (
                "dir whose index.html is the run file",
                page_dir("p3", "index.html", &self.runfile, true),
            ),
        ]
    }
}

fn expand(args: &[&str], w: &World) -> Vec<String> {
    args.iter()
        .map(|a| {
            a.replace("{run}", &w.runfile.display().to_string())
                .replace("{dir}", &w.p("page").display().to_string())
                .replace("{out}", &w.p("out.json").display().to_string())
                .replace("{other}", &w.p("other.db").display().to_string())
        })
        .collect()
}

#[test]
fn every_path_argument_of_every_command_is_kept_off_the_store_and_the_inputs() {
    let _m = measuring();
    let root = oscost::cli::Cli::command();
    for c in root.get_subcommands().filter(|c| !c.is_hide_set()) {
        assert!(
            INVOCATIONS.iter().any(|(n, _)| *n == c.get_name()),
            "`{}` has no invocation in INVOCATIONS: add one so the gate test covers it",
            c.get_name()
        );
    }
    let args = path_args();
    let names: Vec<String> = args
        .iter()
        .map(|(c, f, id)| format!("{c} {}", f.clone().unwrap_or_else(|| id.clone())))
        .collect();
    // The writers this test must see (a sanity check that clap's tree was read).
    for must in [
        "run --json",
        "run --report",
        " --csv",
        "ab --markdown",
        "predict --json",
        "predict --report",
        "explain --json",
        "explain --report",
        "ctx --json",
        "report --report",
        "history --report",
        "compare --report",
        "matrix --report",
        "export --json",
        "push --to",
    ] {
        assert!(
            names.iter().any(|n| n.contains(must)),
            "{must} not found among {names:?}"
        );
    }
    let w = World::new();
    let runs_before = runs_in(&w.db).unwrap();
    let store_bytes = std::fs::read(&w.db).unwrap();
    let run_bytes = std::fs::read(&w.runfile).unwrap();
    let mut failures = Vec::new();
    let mut cases = 0;
    for (cmd, flag, id) in &args {
        let base = INVOCATIONS
            .iter()
            .find(|(n, _)| n == cmd)
            .map(|(_, a)| *a)
            .unwrap();
        for (tname, target) in w.targets() {
            cases += 1;
            let mut argv = expand(base, &w);
            // The argument's own value replaced, or added.
            let t = target.display().to_string();
            match flag {
                Some(f) => {
                    if let Some(i) = argv.iter().position(|a| a == f) {
                        argv[i + 1] = t;
                    } else if f == "--report" && argv.contains(&"-o".to_string()) {
                        let i = argv.iter().position(|a| a == "-o").unwrap();
                        argv[i + 1] = t;
                    } else {
                        // Right after the command's name: before predict's `--`.
                        let at = usize::from(!cmd.is_empty());
                        argv.insert(at, t);
                        argv.insert(at, f.clone());
                    }
                }
                None => {
                    // A positional path (import's files): the target replaces the run file.
                    let r = w.runfile.display().to_string();
                    argv = argv
                        .into_iter()
                        .map(|a| if a == r { t.clone() } else { a })
                        .collect();
                }
            }
            let t0 = Instant::now();
            let mut child = oscost(&unique_tag("gate"))
                .args(&argv)
                .env("OSCOST_DB", &w.db)
                .env("XDG_DATA_HOME", w.p("data"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if t0.elapsed() > Duration::from_secs(60) {
                    let _ = child.kill();
                    break child.wait().unwrap();
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let mut wrong = Vec::new();
            if status.code() == Some(101) || err.contains("panicked") {
                wrong.push("panic".to_string());
            }
            match runs_in(&w.db) {
                None => wrong.push("the store was replaced".into()),
                Some(n) if n < runs_before => wrong.push(format!("runs lost ({n})")),
                _ => {}
            }
            let reads_run_file = base.contains(&"{run}");
            if reads_run_file && std::fs::read(&w.runfile).ok().as_deref() != Some(&run_bytes[..]) {
                wrong.push("the run file was changed".into());
            }
            // A command that does not read it may write it (`run --json r.json`): put it back.
            if std::fs::read(&w.runfile).ok().as_deref() != Some(&run_bytes[..]) {
                let _ = std::fs::remove_file(&w.runfile);
                std::fs::write(&w.runfile, &run_bytes).unwrap();
            }
            if !wrong.is_empty() {
                // Put the world back, so that one failure does not spill into the next cases.
                for j in ["s.db-journal", "s.db-wal", "s.db-shm"] {
                    let p = w.p(j);
                    let _ = std::fs::remove_dir_all(&p);
                    let _ = std::fs::remove_file(&p);
                }
                let _ = std::fs::remove_file(&w.db);
                std::fs::write(&w.db, &store_bytes).unwrap();
                std::fs::write(&w.runfile, &run_bytes).unwrap();
                failures.push(format!(
                    "{cmd} {} -> {tname}: {} (exit {:?})\n    {argv:?}\n    {}",
                    flag.as_deref().unwrap_or(id),
                    wrong.join(", "),
                    status.code(),
                    err.trim()
                ));
            }
        }
    }
    assert!(cases >= 150, "only {cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
