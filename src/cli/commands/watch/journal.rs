//! A watch's journals: one per watch process, each held by a lock for as long as its watch
//! lives, so two watches of the same benchmarks into the same store never share one.
//!
//! A watch's journal is `watch/<key>-<pid>-<start>.json` (the key names the store, the
//! benchmarks and the label; pid and start time name the process), its lock the `flock` of
//! `<same name>.lock`, taken before the first window and held to the end (descriptors are
//! close-on-exec: no worker inherits it). At its start a watch adopts every journal of its
//! key whose lock it can take (its watch is gone: killed outright, or ended with the store
//! unreachable), holding that lock too, so a third watch starting at the same moment cannot
//! adopt it as well; their windows are saved with its first save and only then removed. A
//! journal from before the locks (`<key>.json`) is adopted the same way, its lock
//! `<key>.lock`.

use std::path::{Path, PathBuf};

use crate::base::model::Run;

/// A journal and its held lock.
struct Locked {
    journal: PathBuf,
    lock_path: PathBuf,
    _lock: std::fs::File,
}

/// This watch's journal and those it adopted.
pub struct Journals {
    own: PathBuf,
    own_lock: Option<Locked>,
    adopted: Vec<Locked>,
}

/// The lock file of a journal: its name with `.lock` for `.json`.
fn lock_of(journal: &Path) -> PathBuf {
    journal.with_extension("lock")
}

/// Take the lock at `lock_path` now (made if missing), for `journal`; `None` where its watch
/// lives (the lock is taken) or it cannot be opened.
fn take(journal: &Path, lock_path: &Path) -> Option<Locked> {
    let f = crate::measuring::os::open_untrusted(lock_path, true).ok()?;
    if !f.metadata().ok()?.file_type().is_file() {
        return None;
    }
    crate::measuring::os::lock_now(&f).ok()?;
    Some(Locked {
        journal: journal.to_path_buf(),
        lock_path: lock_path.to_path_buf(),
        _lock: f,
    })
}

impl Journals {
    /// This process's journal in `dir` for `key`, locked, and every journal of `key` whose
    /// watch is gone, adopted. Where the directory cannot be made the journal is only named
    /// (its first write says why it cannot be kept).
    pub fn open(dir: &Path, key: &str) -> Journals {
        let pid = std::process::id();
        let start = crate::measuring::os::start_time(pid).unwrap_or(0);
        Journals::open_as(dir, key, &format!("{pid}-{start}"))
    }

    /// `open` for the process named `ident` (`<pid>-<start>`).
    fn open_as(dir: &Path, key: &str, ident: &str) -> Journals {
        let own = dir.join(format!("{key}-{ident}.json"));
        let _ = std::fs::create_dir_all(dir);
        let own_lock = take(&own, &lock_of(&own));
        let mut adopted = Vec::new();
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                        name.is_some_and(|n| {
                            n.ends_with(".json")
                                && (n == format!("{key}.json") || n.starts_with(&format!("{key}-")))
                        })
                    })
                    .filter(|p| *p != own)
                    .collect()
            })
            .unwrap_or_default();
        // Oldest first: windows are resumed in the order they were measured.
        found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        for journal in found {
            if let Some(l) = take(&journal, &lock_of(&journal)) {
                adopted.push(l);
            }
        }
        Journals {
            own,
            own_lock,
            adopted,
        }
    }

    /// The windows the adopted journals hold, oldest journal first, and how many lines were
    /// cut short (a kill mid-write) and skipped.
    pub fn adopted_windows(&self) -> (Vec<Run>, usize) {
        let mut runs = Vec::new();
        let mut cut = 0;
        for l in &self.adopted {
            let Ok(text) = std::fs::read_to_string(&l.journal) else {
                continue;
            };
            let before = runs.len();
            runs.extend(
                text.lines()
                    .filter_map(|line| serde_json::from_str::<Run>(line).ok()),
            );
            cut += text.lines().count() - (runs.len() - before);
        }
        (runs, cut)
    }

    /// The journals adopted, for messages.
    pub fn adopted_shown(&self) -> String {
        self.adopted
            .iter()
            .map(|l| l.journal.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// This watch's own journal.
    pub fn own(&self) -> &Path {
        &self.own
    }

    /// Append one window to this watch's journal.
    pub fn append(&self, run: &Run) -> std::io::Result<()> {
        if let Some(dir) = self.own.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let line = serde_json::to_vec(run).map_err(std::io::Error::other)?;
        crate::effects::output::append_line(&self.own, &line)
    }

    /// Every window journalled so far is in the store: this watch's journal is emptied and
    /// the adopted ones are removed with their locks.
    pub fn saved(&mut self) {
        let _ = std::fs::remove_file(&self.own);
        for l in self.adopted.drain(..) {
            let _ = std::fs::remove_file(&l.journal);
            // Unlinked while still locked: a watch starting now takes a lock on a file that
            // is gone or made anew, and finds no journal beside it.
            let _ = std::fs::remove_file(&l.lock_path);
        }
    }
}

impl Drop for Journals {
    /// A watch ending with its own journal empty (everything saved) takes its lock file with
    /// it; one with windows left keeps both for the next start to adopt.
    fn drop(&mut self) {
        if let Some(l) = self.own_lock.take()
            && !l.journal.exists()
        {
            let _ = std::fs::remove_file(&l.lock_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    /// Two watches of one key keep two journals; the windows of one whose lock is free (its
    /// watch gone) are adopted by the next, once, and removed only when saved.
    #[test]
    fn each_watch_has_its_journal_and_a_gone_watch_is_adopted_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A journal whose watch is gone: its lock file exists and is free.
        let gone = d.join("k-1-1.json");
        std::fs::write(
            &gone,
            format!(
                "{}\n{{cut",
                serde_json::to_string(&testdata::run()).unwrap()
            ),
        )
        .unwrap();
        std::fs::write(lock_of(&gone), "").unwrap();
        // One whose watch lives: its lock is held.
        let live = d.join("k-2-2.json");
        std::fs::write(
            &live,
            format!("{}\n", serde_json::to_string(&testdata::run()).unwrap()),
        )
        .unwrap();
        let held = take(&live, &lock_of(&live)).unwrap();
        // Another key's journal is never touched.
        std::fs::write(d.join("other-3-3.json"), "").unwrap();

        let mut a = Journals::open_as(d, "k", "10-10");
        let (runs, cut) = a.adopted_windows();
        assert_eq!((runs.len(), cut), (1, 1));
        assert_ne!(a.own(), gone.as_path());
        a.append(&testdata::run()).unwrap();
        // A second watch starting now adopts nothing: the first holds the gone one's lock.
        let b = Journals::open_as(d, "k", "11-11");
        assert_eq!(b.adopted_windows().0.len(), 0);
        assert_ne!(a.own(), b.own());
        a.saved();
        assert!(!gone.exists() && !lock_of(&gone).exists());
        assert!(live.exists(), "a live watch's journal was taken");
        drop(held);
        drop(a);
        drop(b);
        let c = Journals::open_as(d, "k", "12-12");
        assert_eq!(
            c.adopted_windows().0.len(),
            1,
            "the live one, once its watch is gone"
        );
        assert!(d.join("other-3-3.json").exists());
    }
}
