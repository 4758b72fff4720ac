//! Stopping on SIGINT, SIGTERM and SIGHUP. A handler only records the signal (in the returned
//! `Stop`); the command checks it where stopping is safe (between repetitions, before a save
//! commits, between a report's files) and leaves nothing behind. Some waits cannot check a
//! flag: a PostgreSQL server that accepts a connection and never answers, a table another
//! session locked, an output FIFO with no reader. A watchdog thread ends those: once a signal
//! has come and the command has not finished within `GRACE`, it removes the temporary files
//! oscost was writing (`track_temp`) and exits 128+N. Nothing it cuts short is half-kept: a
//! store transaction that never committed is rolled back by SQLite's journal or the server,
//! and workers die with their coordinator (parent-death signals).
//!
//! Only commands that start processes become child subreapers (`guard_processes`), so that a
//! benchmark's grandchildren are theirs to reap.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::base::stop::Stop;

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A signal came after runs were saved: what was saved stays, the rest was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by signal {signal} after saving {saved}")]
pub struct InterruptedAfterSave {
    /// The signal's number.
    pub signal: i32,
    /// What was saved, for the message ("run 7 in results.db").
    pub saved: String,
}

/// How long a command has to stop by itself after a signal before the watchdog ends it.
const GRACE: Duration = Duration::from_millis(700);

/// Temporary files being written now (an atomic replace in progress).
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A temporary file oscost is writing: removed by the watchdog if the process is ended.
pub fn track_temp(path: PathBuf) {
    if let Ok(mut t) = TEMPS.lock() {
        t.push(path);
    }
}

/// The temporary file is gone (renamed into place, or removed).
pub fn untrack_temp(path: &std::path::Path) {
    if let Ok(mut t) = TEMPS.lock() {
        t.retain(|p| p != path);
    }
}

/// Record SIGINT, SIGTERM and SIGHUP in the returned `Stop`, and start the watchdog.
pub fn on_interrupt() -> std::io::Result<Stop> {
    let stop = Stop::never();
    let flag = stop.flag();
    // The watchdog sleeps in a read of this pair's other end until a signal writes a byte:
    // it never wakes while nothing comes, so it never shares a CPU with a measurement (a
    // thread polling the flag every 20 ms was found runnable on the measuring CPU).
    let (wake_read, wake_write) = std::os::unix::net::UnixStream::pair()?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // The flag first: actions run in the order registered, so the flag is set by the
        // time the watchdog wakes.
        signal_hook::flag::register_usize(sig, Arc::clone(flag), sig as usize)?;
        signal_hook::low_level::pipe::register(sig, wake_write.try_clone()?)?;
    }
    drop(wake_write);
    let watched = Arc::clone(flag);
    // Best effort: where no thread can be had (RLIMIT_NPROC reached), the command still runs
    // and stops at its own checks; only a wait that cannot poll the flag is then not cut.
    let _ = std::thread::Builder::new()
        .name("oscost-watchdog".into())
        .spawn(move || watchdog(&watched, wake_read));
    Ok(stop)
}

/// `on_interrupt`, and make this process a child subreaper: for commands that start workers.
pub fn guard_processes() -> std::io::Result<Stop> {
    let stop = on_interrupt()?;
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    Ok(stop)
}

fn watchdog(flag: &AtomicUsize, mut wake: std::os::unix::net::UnixStream) {
    use std::io::Read;
    let sig = loop {
        let mut byte = [0u8; 1];
        match wake.read(&mut byte) {
            // Every write end is the signal handlers': none closes while the process lives.
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
        match flag.load(Ordering::SeqCst) {
            0 => continue,
            s => break s,
        }
    };
    std::thread::sleep(GRACE);
    if let Ok(t) = TEMPS.lock() {
        for p in t.iter() {
            let _ = std::fs::remove_file(p);
        }
    }
    crate::say!("oscost: stopped by signal {sig} while waiting; nothing more was written");
    // SAFETY: _exit ends the process at once; nothing needs to run after the files above.
    unsafe { libc::_exit(128 + sig as i32) };
}
