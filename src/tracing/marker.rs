//! Markers of what a helper process put on the whole system (an ftrace instance, an audit
//! rule): a file named for the thing in `/run/oscost/<kind>/` (root's), locked for as long as
//! its helper lives. A helper removes its thing and its marker when it ends; one killed with
//! SIGKILL leaves the marker with its lock free, which is how the next helper, or the next run
//! as it starts, knows the thing is nobody's and removes it. A thing without a marker is never
//! touched, whatever its name. The last marker of a kind to go takes its directory, and the
//! state directory when that is then empty, with it (`os::remove_kept`).

use std::path::{Path, PathBuf};

/// Where the markers of `kind` are (beside the state of the settings oscost changes).
fn dir(kind: &str) -> PathBuf {
    Path::new(crate::measuring::os::STATE_DIR).join(kind)
}

/// A marker opened without following a link or blocking; `None` unless a regular file.
fn open(path: &Path, create: bool) -> Option<std::fs::File> {
    let f = crate::measuring::os::open_untrusted(path, create).ok()?;
    f.metadata().ok()?.file_type().is_file().then_some(f)
}

/// A helper's mark on the thing it made: locked while the helper lives, removed on drop.
pub struct Marker {
    path: PathBuf,
    _lock: std::fs::File,
}

impl Marker {
    /// Mark `name` of `kind`. `None` where no marker can be made (not root, a directory not
    /// root's own): the thing is then removed by its helper alone.
    pub fn make(kind: &str, name: &str) -> Option<Marker> {
        // A few tries: another helper's last marker going can take an empty directory away
        // between our making it and our file in it (`os::remove_kept`).
        (0..4).find_map(|_| Self::try_make(kind, name))
    }

    fn try_make(kind: &str, name: &str) -> Option<Marker> {
        let dir = dir(kind);
        crate::measuring::os::private_dir(Path::new(crate::measuring::os::STATE_DIR), true).ok()?;
        crate::measuring::os::private_dir(&dir, true).ok()?;
        let path = dir.join(name);
        let lock = open(&path, true)?;
        crate::measuring::os::lock_now(&lock).ok()?;
        Some(Marker { path, _lock: lock })
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        crate::measuring::os::remove_kept(&self.path);
    }
}

/// A marker whose helper is gone, its lock now held by the caller.
pub struct Stale {
    /// The thing's name.
    pub name: String,
    path: PathBuf,
    _lock: std::fs::File,
}

impl Stale {
    /// The thing is gone: remove its marker.
    pub fn forget(self) {
        crate::measuring::os::remove_kept(&self.path);
    }
}

/// The markers of `kind` whose names begin with `prefix` and whose helpers are gone.
pub fn stale(kind: &str, prefix: &str) -> Vec<Stale> {
    let Ok(entries) = std::fs::read_dir(dir(kind)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.starts_with(prefix) || name.contains('/') {
                return None;
            }
            let lock = open(&e.path(), false)?;
            crate::measuring::os::lock_now(&lock).ok()?;
            Some(Stale {
                name,
                path: e.path(),
                _lock: lock,
            })
        })
        .collect()
}
