//! A cgroup the run makes for the benchmarks that start processes in one (clone3 with
//! CLONE_INTO_CGROUP), and removes on every exit path.
//!
//! Made as a child of the coordinator's own cgroup (cgroup v2 only), named
//! `oscost-<pid>-<nonce>-<PID namespace inode>`, with no controller enabled: it holds processes for the instant they
//! live and changes no limit of anything. The guard process (`put_back`) is told of it before
//! it exists, so a SIGKILL of oscost or of its worker still removes it (`Alteration::Cgroup`, an
//! rmdir, retried while the last child is being reaped); the run removes it itself at its end.
//! rmdir removes only an empty cgroup with no children, so nothing else can be lost by it.

use std::path::{Path, PathBuf};

use super::put_back::{Alteration, Guardian, remove_cgroup};

/// The run's cgroup: removed, and its guard released, on drop.
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    guardian: Option<Guardian>,
}

/// Where the unified (v2) hierarchy is mounted, from a mountinfo text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    crate::measuring::os::mount_points(mountinfo, "cgroup2")
        .first()
        .map(PathBuf::from)
}

/// This process's cgroup in the unified hierarchy, from a /proc/self/cgroup text (`0::/path`),
/// relative to the hierarchy's root.
fn own_cgroup(text: &str) -> Option<String> {
    crate::measuring::confinement::parse_cgroup(text)
        .remove("")
        .map(|p| p.trim_start_matches('/').to_string())
}

/// The unified hierarchy's directory of this process's own cgroup.
fn own_dir() -> Option<PathBuf> {
    let mount =
        cgroup2_mount(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())?;
    let own = own_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default())?;
    Some(mount.join(own))
}

/// The pid in a run cgroup's name (`oscost-<pid>-<8 hex digits>`), if it is one.
#[cfg(test)]
fn maker_of(name: &str) -> Option<i32> {
    maker_and_namespace(name).map(|(pid, _)| pid)
}

/// The pid in a run cgroup's name and the PID namespace (inode) that pid is in:
/// `oscost-<pid>-<8 hex digits>-<inode>`; `None` for the namespace in a name from before it
/// was written (`oscost-<pid>-<8 hex digits>`).
fn maker_and_namespace(name: &str) -> Option<(i32, Option<u64>)> {
    let mut parts = name.strip_prefix("oscost-")?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let nonce = parts.next()?;
    if !(nonce.len() == 8 && nonce.chars().all(|c| c.is_ascii_hexdigit())) {
        return None;
    }
    let ns = match parts.next() {
        None => None,
        Some(n) => Some(n.parse().ok()?),
    };
    parts.next().is_none().then_some((pid, ns))
}

/// This process's PID namespace, by inode.
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// The initial PID namespace's inode (the kernel's PROC_PID_INIT_INO), where every pid of the
/// machine is visible.
const INIT_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// Remove the run cgroups under this process's own whose maker is gone: left where every oscost
/// process, its guard included, was killed at once. Only an empty cgroup can be removed (rmdir),
/// and one whose maker lives is left alone. Returns those removed.
pub fn reclaim() -> Vec<PathBuf> {
    let Some(dir) = own_dir() else {
        return vec![];
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut gone = Vec::new();
    let ours = pid_namespace();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, ns)) = maker_and_namespace(&name) else {
            continue;
        };
        // Its pid means something only in its maker's PID namespace: a cgroup made from
        // another is left alone (its maker may live, unseen from here); one from before the
        // namespace was named, only from the initial namespace.
        let same = match ns {
            Some(ns) => ours == Some(ns),
            None => ours == Some(INIT_PID_NAMESPACE),
        };
        if !same {
            continue;
        }
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
        if !alive && std::fs::remove_dir(e.path()).is_ok() {
            gone.push(e.path());
        }
    }
    gone
}

impl RunCgroup {
    /// Make the run's cgroup under this process's own, its removal kept by a guard first; or
    /// say why it cannot be made (the benchmarks that need it are then skipped with it).
    pub fn create() -> Result<RunCgroup, String> {
        let mount =
            cgroup2_mount(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
                .ok_or("no cgroup v2 hierarchy is mounted here (CLONE_INTO_CGROUP needs one)")?;
        let own = own_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default())
            .ok_or("this process is in no cgroup v2 cgroup (a v1-only system)")?;
        let parent = mount.join(own);
        let nonce: u32 = rand::random();
        let dir = parent.join(format!(
            "oscost-{}-{nonce:08x}-{}",
            std::process::id(),
            pid_namespace().unwrap_or(0)
        ));
        let mut guardian =
            Guardian::start().map_err(|e| format!("cannot start the guard of a cgroup: {e}"))?;
        guardian
            .keep(&Alteration::Cgroup { dir: dir.clone() }, None)
            .map_err(|e| format!("the guard did not take the cgroup: {e}"))?;
        if let Err(e) = std::fs::create_dir(&dir) {
            guardian.release();
            return Err(format!(
                "cannot make a cgroup in {} ({e}): CLONE_INTO_CGROUP needs a writable cgroup \
                 v2 hierarchy (root, or a delegated subtree)",
                parent.display()
            ));
        }
        Ok(RunCgroup {
            dir,
            guardian: Some(guardian),
        })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if remove_cgroup(&self.dir) {
            if let Some(g) = self.guardian.take() {
                g.release();
            }
        } else {
            crate::say!(
                "oscost: could not remove the cgroup {}; its guard tries again as it exits",
                self.dir.display()
            );
        }
        // A guardian still held is dropped here: its socket closes and the guard removes it.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unified_hierarchy_and_own_cgroup_are_read() {
        let mi = "24 30 0:21 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n\
                  25 30 0:22 / /proc rw - proc proc rw\n";
        assert_eq!(cgroup2_mount(mi), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(
            cgroup2_mount("25 30 0:22 / /proc rw - proc proc rw\n"),
            None
        );
        assert_eq!(
            own_cgroup("0::/user.slice/a.scope\n"),
            Some("user.slice/a.scope".into())
        );
        assert_eq!(own_cgroup("0::/\n"), Some(String::new()));
        assert_eq!(own_cgroup("1:name=systemd:/x\n"), None);
        assert_eq!(maker_of("oscost-14851-d871b9de"), Some(14851));
        assert_eq!(
            maker_and_namespace("oscost-14851-d871b9de-4026531836"),
            Some((14851, Some(4026531836)))
        );
        assert_eq!(maker_and_namespace("oscost-14851-d871b9de-x"), None);
        assert_eq!(maker_of("oscost-14851-d871b9"), None);
        assert_eq!(maker_of("oscost-notes"), None);
        assert_eq!(maker_of("user.slice"), None);
    }
}
