//! `oscost watch`: windows at a stated duty, saved as one run (not a run a window), the
//! OpenMetrics file rewritten whole; SIGTERM saves the last window; SIGKILL leaves no worker
//! and a whole file, and the next start saves what the killed one left and goes on.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use common::*;

/// The stored runs of `db`, as `history --json`... read from the store with the library.
fn stored(db: &Path) -> Vec<oscost::base::model::Run> {
    let at = oscost::effects::store::locate(Some(db)).unwrap();
    let mut s = oscost::effects::store::Store::open_existing(&at).unwrap();
    let list = s.list().unwrap();
    list.iter().map(|r| s.load(r.id).unwrap()).collect()
}

/// Start `oscost watch ARGS` with its journal in `data`, and read its stderr until a line
/// contains `until` (`None` when it ended first); the child and what it said.
fn watch_until(
    tag: &str,
    data: &Path,
    args: &[&str],
    until: &str,
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    let mut child = oscost(tag)
        .arg("watch")
        .args(args)
        .env("XDG_DATA_HOME", data)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains(until) {
            break;
        }
    }
    // The rest of stderr keeps draining so the child never blocks on a full pipe; joined, it
    // is what the child said after `until`.
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    (child, seen, rest)
}

/// The bursts of each window a watch's log says it took ("lowest of N bursts", the first
/// benchmark's of each window line).
fn bursts(log: &str) -> Vec<usize> {
    log.lines()
        .filter(|l| l.starts_with("oscost: window "))
        .filter_map(|l| {
            l.split("lowest of ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn windows_are_saved_as_one_run_at_the_stated_duty_with_a_whole_metrics_file() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let (db, om) = (dir.path().join("w.db"), dir.path().join("w.prom"));
    let out = oscost(&unique_tag("watch"))
        .args([
            "watch",
            "--interval",
            "1",
            "--windows",
            "6",
            "--duty",
            "20",
            "--ids",
            "syscall/getppid",
            "--label",
            "w",
            "--openmetrics",
        ])
        .arg(&om)
        .arg("--db")
        .arg(&db)
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at most 20.0% of one CPU"), "{err}");
    // Every window says the duty so far, and the end the whole watch's: kept.
    let duties: Vec<f64> = err
        .lines()
        .filter_map(|l| l.split("the watch so far ").nth(1))
        .filter_map(|t| t.split('%').next()?.parse().ok())
        .collect();
    assert_eq!(duties.len(), 6, "{err}");
    let whole: f64 = err
        .lines()
        .find_map(|l| l.split("the watch took ").nth(1))
        .and_then(|t| t.split('%').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no duty at the end: {err}"));
    assert!(whole <= 20.0 * 1.05, "{whole}\n{err}");
    let runs = stored(&db);
    assert_eq!(
        runs.len(),
        1,
        "one run for the six windows, not one a window"
    );
    let r = &runs[0].results[0];
    assert_eq!(r.id, "syscall/getppid");
    // The first window one burst (what one costs here), the others as many as the duty
    // allows, up to five; each a repetition.
    let b = bursts(&err);
    assert_eq!(b.len(), 6, "{err}");
    assert_eq!(b[0], 1, "{err}");
    assert!(b.iter().all(|&n| (1..=5).contains(&n)), "{b:?}");
    assert_eq!(r.repetitions.len(), b.iter().sum::<usize>(), "{err}");
    let s = r.stats.as_ref().unwrap();
    assert!(s.ci95[0] <= s.median && s.median <= s.ci95[1]);
    let text = std::fs::read_to_string(&om).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("oscost_watch_windows_total"), "{text}");
    // No empty label value and no free-text one but the run info's.
    assert!(!text.contains("=\"\""), "{text}");
    assert!(text.contains("oscost_median_seconds{benchmark=\"syscall/getppid\""));
    // Nothing left for a next start.
    let journal = dir.path().join("oscost").join("watch");
    let left = std::fs::read_dir(&journal).map_or(0, |d| d.count());
    assert_eq!(left, 0, "the journal is emptied once saved");
}

#[test]
fn sigterm_saves_the_last_window_and_names_it() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let tag = unique_tag("watch-term");
    let dbs = db.to_string_lossy().into_owned();
    let (mut child, seen, _) = watch_until(
        &tag,
        dir.path(),
        &[
            "--interval",
            "1",
            "--duty",
            "50",
            "--ids",
            "syscall/getppid",
            "--db",
            &dbs,
        ],
        "window 2 at",
    );
    assert!(seen.contains("window 2 at"), "{seen}");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    // A watch's normal end: exit 0 (systemd's stop needs no SuccessExitStatus).
    assert_eq!(status.code(), Some(0), "{seen}");
    let runs = stored(&db);
    assert_eq!(runs.len(), 1);
    assert!(runs[0].results[0].repetitions.len() >= 2);
    assert!(wait_until_gone(&tag, Duration::from_secs(5)).is_empty());
}

#[test]
fn sigkill_leaves_no_worker_and_a_whole_file_and_the_next_start_resumes() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let (db, om) = (dir.path().join("k.db"), dir.path().join("k.prom"));
    let (dbs, oms) = (
        db.to_string_lossy().into_owned(),
        om.to_string_lossy().into_owned(),
    );
    let tag = unique_tag("watch-kill");
    let args = [
        "--interval",
        "1",
        "--duty",
        "50",
        "--ids",
        "syscall/getppid,spawn/fork",
        "--openmetrics",
        &oms,
        "--db",
        &dbs,
    ];
    let (mut child, seen, _) = watch_until(&tag, dir.path(), &args, "window 3 at");
    assert!(seen.contains("window 3 at"), "{seen}");
    // In the middle of a window, or between two: whichever, nothing may be left.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let left = wait_until_gone(&tag, Duration::from_secs(5));
    assert!(left.is_empty(), "workers left: {left:?}");
    let text = std::fs::read_to_string(&om).unwrap();
    assert!(text.ends_with("# EOF\n"), "a whole file: {text}");
    assert!(
        stored(&db).is_empty(),
        "nothing saved yet: the windows are in the journal"
    );
    // The next start saves what the killed one left, then goes on.
    let out = oscost(&unique_tag("watch-resume"))
        .arg("watch")
        .args(args)
        .args(["--windows", "1"])
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("resuming: 3 window(s)"), "{err}");
    let runs = stored(&db);
    assert_eq!(
        runs.len(),
        2,
        "the resumed windows, then the new one: {err}"
    );
    let reps: usize = runs.iter().map(|r| r.results[0].repetitions.len()).sum();
    let said: Vec<usize> = bursts(&seen).into_iter().chain(bursts(&err)).collect();
    assert_eq!(said.len(), 4, "four windows: {seen}{err}");
    assert_eq!(
        reps,
        said.iter().sum::<usize>(),
        "a repetition a burst: {seen}{err}"
    );
}

/// A store that cannot take the windows when the watch saves them (another process holds it
/// locked past the save's wait): nothing is lost; the journal keeps them (exit 1, said), and
/// the next start saves them.
#[test]
fn windows_a_store_refuses_wait_in_the_journal_and_are_saved_later() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let dbs = db.to_string_lossy().into_owned();
    let args = [
        "--interval",
        "1",
        "--duty",
        "50",
        "--ids",
        "syscall/getppid",
        "--db",
        &dbs,
    ];
    let first: Vec<&str> = args.iter().copied().chain(["--windows", "2"]).collect();
    let (child, seen, rest) =
        watch_until(&unique_tag("watch-lock"), dir.path(), &first, "window 1 at");
    assert!(seen.contains("window 1 at"), "{seen}");
    // Another process holds the store locked longer than a save waits (10 s).
    let lock = rusqlite::Connection::open(&db).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{seen}");
    let rest = rest.join().unwrap_or_default();
    lock.execute_batch("ROLLBACK").unwrap();
    drop(lock);
    assert!(stored(&db).is_empty());
    let out = oscost(&unique_tag("watch-unlocked"))
        .arg("watch")
        .args(args)
        .args(["--windows", "1"])
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("resuming: 2 window(s)"), "{err}");
    let reps: usize = stored(&db)
        .iter()
        .map(|r| r.results[0].repetitions.len())
        .sum();
    let said: Vec<usize> = [bursts(&seen), bursts(&rest), bursts(&err)].concat();
    assert_eq!(
        said.len(),
        3,
        "the two kept windows and the new one: {seen}{rest}{err}"
    );
    assert_eq!(
        reps,
        said.iter().sum::<usize>(),
        "a repetition a burst: {err}"
    );
}

/// Two watches of the same benchmarks into the same store keep a journal each: one SIGKILLed,
/// the other ended by SIGTERM (saving its own windows only), and a third start saves every
/// window the killed one measured. No window is lost, and none is saved twice.
#[test]
fn two_watches_keep_two_journals_and_a_killed_ones_windows_are_saved_by_the_next() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("two.db");
    let dbs = db.to_string_lossy().into_owned();
    let args = [
        "--interval",
        "1",
        "--duty",
        "50",
        "--ids",
        "syscall/getppid",
        "--db",
        &dbs,
    ];
    let (tag_a, tag_b) = (unique_tag("watch-two-a"), unique_tag("watch-two-b"));
    let (mut a, seen_a, _) = watch_until(&tag_a, dir.path(), &args, "window 2 at");
    let (mut b, seen_b, rest_b) = watch_until(&tag_b, dir.path(), &args, "window 2 at");
    assert!(seen_a.contains("window 2 at") && seen_b.contains("window 2 at"));
    // SAFETY: signals to our own children.
    unsafe { libc::kill(a.id() as i32, libc::SIGKILL) };
    a.wait().unwrap();
    // A repetition a burst: what each said it measured.
    let said_a: usize = bursts(&seen_a).iter().sum();
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(b.id() as i32, libc::SIGTERM) };
    assert_eq!(b.wait().unwrap().code(), Some(0));
    let said_b: usize = bursts(&format!("{seen_b}{}", rest_b.join().unwrap()))
        .iter()
        .sum();
    assert!(wait_until_gone(&tag_a, Duration::from_secs(5)).is_empty());
    let saved_b: usize = stored(&db)
        .iter()
        .map(|r| r.results[0].repetitions.len())
        .sum();
    assert_eq!(
        saved_b, said_b,
        "the SIGTERMed watch saved its own windows, only those"
    );
    let out = oscost(&unique_tag("watch-two-c"))
        .arg("watch")
        .args(args)
        .args(["--windows", "1"])
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("resuming:"), "{err}");
    let all: usize = stored(&db)
        .iter()
        .map(|r| r.results[0].repetitions.len())
        .sum();
    // The killed watch may have been cut between journalling a window and saying it: its
    // journal holds every burst it said, and at most one window (five bursts) more.
    let third: usize = bursts(&err).iter().sum();
    let resumed = all - saved_b - third;
    assert!(
        (said_a..=said_a + 5).contains(&resumed),
        "the killed watch said {said_a} window(s), {resumed} were resumed: {err}"
    );
}
