//! The run's scratch directory (`$TMPDIR/oscost-XXXXXX`: benchmarks' temporary files) and the
//! reclaiming of those a killed run left behind.
//!
//! A run holds an exclusive `flock` on `owner.lock` inside its directory for its whole life;
//! the kernel drops the lock when the process dies, however it dies. So a directory whose lock
//! can be taken belongs to no live run, and the next run removes it. A directory without the
//! lock file is either from an older oscost or being created this instant; it is removed only
//! once it is older than a minute. Only directories of this user are touched.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const PREFIX: &str = "oscost-";
const LOCK: &str = "owner.lock";
/// A lockless directory younger than this may be a run being set up.
const GRACE: Duration = Duration::from_secs(60);

/// A live run's scratch directory: locked while this value lives, removed on drop.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
    _lock: std::fs::File,
}

impl Scratch {
    pub fn create() -> std::io::Result<Scratch> {
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir()?;
        let lock = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.path().join(LOCK))?;
        // Nothing else can hold the lock of a file this instant created.
        try_lock(&lock)?;
        Ok(Scratch { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// An exclusive, non-blocking flock; the descriptor is close-on-exec (std opens files so), so
/// no worker or benchmark child keeps a dead run's lock alive.
fn try_lock(f: &std::fs::File) -> std::io::Result<()> {
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Remove the scratch directories of runs that are gone; returns what was removed.
pub fn reclaim() -> Vec<PathBuf> {
    reclaim_in(&std::env::temp_dir(), SystemTime::now())
}

fn reclaim_in(tmp: &Path, now: SystemTime) -> Vec<PathBuf> {
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
        let dead = match std::fs::File::open(e.path().join(LOCK)) {
            Ok(f) => try_lock(&f).is_ok(),
            Err(_) => meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > GRACE),
        };
        if dead && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_runs_directory_stays_and_a_dead_ones_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let live = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir_in(tmp.path())
            .unwrap();
        let lock = std::fs::File::create(live.path().join(LOCK)).unwrap();
        try_lock(&lock).unwrap();
        let dead = tmp.path().join("oscost-dead");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK), b"").unwrap();
        std::fs::write(dead.join("file"), b"x").unwrap();
        let young = tmp.path().join("oscost-young");
        std::fs::create_dir(&young).unwrap();
        let other = tmp.path().join("not-ours");
        std::fs::create_dir(&other).unwrap();

        let removed = reclaim_in(tmp.path(), SystemTime::now());
        assert_eq!(removed, vec![dead.clone()]);
        assert!(live.path().exists() && young.exists() && other.exists());
        // A lockless directory past the grace period is an old run's.
        let later = SystemTime::now() + GRACE + Duration::from_secs(1);
        assert_eq!(reclaim_in(tmp.path(), later), vec![young]);
        assert!(live.path().exists());
    }
}
