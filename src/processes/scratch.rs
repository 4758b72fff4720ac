//! The run's scratch directory (`$TMPDIR/oscost-XXXXXX`: benchmarks' temporary files) and the
//! reclaiming of those a killed run left behind.
//!
//! oscost removes only what it can prove is its own and dead. At creation a run writes a
//! marker, `oscost-scratch`, atomically (a temporary name, then a rename) with its pid and its
//! process start time, and holds an exclusive `flock` on `owner.lock` for its whole life (the
//! kernel drops it when the process dies, however it dies). A directory is reclaimed only when
//! it is this user's, a real directory (not a link), carries a well-formed marker, the process
//! the marker names is gone (no such pid, or one started at another time), and its lock can be
//! taken. A directory without the marker (a user's `oscost-notes`, a report written to
//! `$TMPDIR/oscost-report`, an older oscost's scratch) is never touched.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const PREFIX: &str = "oscost-";
const LOCK: &str = "owner.lock";
const MARKER: &str = "oscost-scratch";
/// The marker's first line: what says the directory is a scratch directory of oscost's.
const MARKER_HEAD: &str = "oscost scratch directory";

/// A live run's scratch directory: locked while this value lives, removed on drop.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
    _lock: std::fs::File,
}

impl Scratch {
    /// Make a private directory with its marker and lock.
    pub fn create() -> std::io::Result<Scratch> {
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir()?;
        let lock = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.path().join(LOCK))?;
        // Nothing else can hold the lock of a file this instant created.
        crate::measuring::os::lock_now(&lock)?;
        let pid = std::process::id();
        let text = format!(
            "{MARKER_HEAD}\npid {pid}\nstart {}\n",
            crate::measuring::os::start_time(pid).unwrap_or(0)
        );
        // Whole or absent: a reclaimer never reads half a marker.
        let mut tmp = tempfile::NamedTempFile::new_in(dir.path())?;
        std::io::Write::write_all(&mut tmp, text.as_bytes())?;
        tmp.persist(dir.path().join(MARKER)).map_err(|e| e.error)?;
        Ok(Scratch { dir, _lock: lock })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The (pid, start time) a well-formed marker names.
fn marker_owner(text: &str) -> Option<(u32, u64)> {
    let mut lines = text.lines();
    if lines.next()? != MARKER_HEAD {
        return None;
    }
    let pid = lines.next()?.strip_prefix("pid ")?.parse().ok()?;
    let start = lines.next()?.strip_prefix("start ")?.parse().ok()?;
    Some((pid, start))
}

/// Whether the process a marker names is gone.
fn owner_gone(pid: u32, start: u64) -> bool {
    crate::measuring::os::start_time(pid) != Some(start)
}

/// Remove the scratch directories of runs that are gone; returns what was removed.
pub fn reclaim() -> Vec<PathBuf> {
    reclaim_in(&std::env::temp_dir())
}

fn reclaim_in(tmp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return vec![];
    };
    // SAFETY: geteuid has no failure mode.
    let uid = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !name.starts_with(PREFIX) || !meta.is_dir() || meta.uid() != uid {
            continue;
        }
        let Some((pid, start)) = std::fs::read_to_string(e.path().join(MARKER))
            .ok()
            .and_then(|t| marker_owner(&t))
        else {
            continue;
        };
        let unlocked = std::fs::File::open(e.path().join(LOCK))
            .ok()
            .is_some_and(|f| crate::measuring::os::lock_now(&f).is_ok());
        if owner_gone(pid, start) && unlocked && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory as a run makes it, with a marker naming (pid, start).
    fn scratch_of(tmp: &Path, name: &str, pid: u32, start: u64) -> PathBuf {
        let d = tmp.join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join(LOCK), b"").unwrap();
        std::fs::write(
            d.join(MARKER),
            format!("{MARKER_HEAD}\npid {pid}\nstart {start}\n"),
        )
        .unwrap();
        d
    }

    #[test]
    fn only_a_marked_directory_of_a_dead_run_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let live = scratch_of(
            tmp.path(),
            "oscost-live",
            me,
            crate::measuring::os::start_time(me).unwrap(),
        );
        let held = std::fs::File::open(live.join(LOCK)).unwrap();
        crate::measuring::os::lock_now(&held).unwrap();
        // A pid that is ours but a start time that is not: a reused pid, the run is gone.
        let dead = scratch_of(
            tmp.path(),
            "oscost-dead",
            me,
            crate::measuring::os::start_time(me).unwrap() + 1,
        );
        std::fs::write(dead.join("file"), b"x").unwrap();
        // The user's own directories, even old and holding an unlocked owner.lock.
        let notes = tmp.path().join("oscost-notes");
        std::fs::create_dir(&notes).unwrap();
        std::fs::write(notes.join(LOCK), b"").unwrap();
        let report = tmp.path().join("oscost-report");
        std::fs::create_dir(&report).unwrap();
        std::fs::write(report.join("index.html"), b"<html>").unwrap();
        let forged = tmp.path().join("oscost-forged");
        std::fs::create_dir(&forged).unwrap();
        std::fs::write(forged.join(MARKER), b"something else\n").unwrap();

        assert_eq!(reclaim_in(tmp.path()), vec![dead]);
        assert!(live.exists() && notes.exists() && report.exists() && forged.exists());
        drop(held);
        // Unlocked now, but its process (this one) lives: kept.
        assert!(reclaim_in(tmp.path()).is_empty());
    }

    #[test]
    fn a_scratch_directory_carries_its_marker_and_goes_with_its_run() {
        let s = Scratch::create().unwrap();
        let text = std::fs::read_to_string(s.path().join(MARKER)).unwrap();
        let me = std::process::id();
        assert_eq!(
            marker_owner(&text),
            Some((me, crate::measuring::os::start_time(me).unwrap()))
        );
        let p = s.path().to_path_buf();
        drop(s);
        assert!(!p.exists());
    }
}
