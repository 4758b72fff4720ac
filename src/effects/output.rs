//! Putting bytes where the user asked, in one place. Users run oscost as root on test boxes,
//! so an output path may name a device, a FIFO, a symlink or a file in /proc, and what it names
//! must never be replaced:
//! - `-` is standard output;
//! - a symlink is followed (to any depth) and the link kept: what it points at is written;
//! - a regular file, or a path that does not exist yet, is written atomically (a temporary file
//!   beside it, then a rename), so an interrupted or failed write leaves the old file or none;
//!   a replaced file keeps its permissions, a new one gets 0666 less the umask;
//! - a character or block device, a FIFO, or anything under /proc or /sys (`/dev/stdout` is a
//!   link into /proc) is written through (opened for writing, never created, truncated or
//!   renamed over); a socket is refused.
//!
//! A replaced file keeps its owner and permission bits (never a setuid, setgid or sticky bit);
//! one with hard links, or whose owner cannot be kept, is written in place instead, so that
//! its other names see the new bytes.
//!
//! Outputs are checked before any work by the gate (`crate::effects::gate`: writable, not the store,
//! not an input, not one another; `check_writable` and `check_report_dir` here), and a set of
//! exports is serialised whole before the first file is written; a file that fails does not
//! stop the others (`export` names every one that failed). Files oscost keeps for itself (an
//! unsaved run) are written whole under a new name (`write_new`). This module is the only
//! writer of files a user named.

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::report::Exporter;
use crate::report::html::Page;

/// What an output path turned out to name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `-`.
    Stdout,
    /// A regular file (after following symlinks), replaced atomically.
    Regular(PathBuf),
    /// Nothing yet: created atomically.
    New(PathBuf),
    /// A device, FIFO or pseudo-file: written through.
    Special(PathBuf),
}

/// The longest file name, in bytes.
const NAME_MAX: usize = 255;

/// Symlinks followed before giving up (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Pseudo-filesystems whose files must be written in place, never renamed over; their
/// symlinks (`/proc/self/fd/1` -> `pipe:[1234]`) are magic and only open() follows them.
fn is_pseudo(p: &Path) -> bool {
    ["/proc", "/sys"].iter().any(|d| p.starts_with(d))
}

/// Follow `path` to what it names. Errors are sentences a user can act on.
pub fn resolve(path: &Path) -> Result<Target, String> {
    // Our own standard output by any of its names: written to the descriptor we hold (opening
    // /proc/self/fd/1 anew is refused when fd 1 is a pipe another user made, e.g. under sudo).
    if ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]
        .iter()
        .any(|n| path.as_os_str() == *n)
    {
        return Ok(Target::Stdout);
    }
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if is_pseudo(&p) {
            return match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => Err(format!(
                    "{} is a directory; give a file name",
                    path.display()
                )),
                Ok(_) => Ok(Target::Special(p)),
                Err(e) => Err(format!("cannot write {}: {e}", path.display())),
            };
        }
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return if p.file_name().is_none() {
                    Err(format!("{}: give a file name", path.display()))
                } else {
                    Ok(Target::New(p))
                };
            }
            Err(e) => return Err(format!("cannot use {}: {e}", path.display())),
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let to = std::fs::read_link(&p)
                .map_err(|e| format!("cannot follow {}: {e}", p.display()))?;
            p = parent_dir(&p).join(to);
            continue;
        }
        return if ft.is_dir() {
            Err(format!(
                "{} is a directory; give a file name",
                path.display()
            ))
        } else if ft.is_socket() {
            Err(format!(
                "{} is a socket; oscost writes files, devices and FIFOs",
                path.display()
            ))
        } else if ft.is_file() {
            Ok(Target::Regular(p))
        } else {
            Ok(Target::Special(p))
        };
    }
    Err(format!(
        "{}: too many levels of symbolic links",
        path.display()
    ))
}

/// Where a file at `path` would be created.
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Check, before any work, that `path` can be written, leaving nothing behind.
pub fn check_writable(path: &Path) -> Result<Target, String> {
    let target = resolve(path)?;
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    match &target {
        Target::Stdout => {}
        Target::Special(p) => {
            nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::W_OK)
                .map_err(|e| cannot(e.into()))?;
        }
        Target::Regular(p) => {
            nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::W_OK)
                .map_err(|e| cannot(e.into()))?;
            tempfile::NamedTempFile::new_in(parent_dir(p))
                .map(drop)
                .map_err(cannot)?;
        }
        Target::New(p) => {
            // Creating the very name finds what a temporary name cannot: a name too long, a
            // read-only directory, a file system that refuses the name.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(cannot)?;
            // The same directory took the name itself: the temporary file beside it will do.
            std::fs::remove_file(p).map_err(cannot)?;
        }
    }
    Ok(target)
}

/// A file an output must never replace, and what it is ("the results store").
pub struct Kept {
    /// The file.
    pub path: PathBuf,
    /// What it is, for the message.
    pub what: &'static str,
}

/// The files of an SQLite database at `db`: the file, its rollback journal and its WAL files.
/// An export over any of them loses the store (or its last commits).
pub fn store_files(db: &Path) -> Vec<Kept> {
    let mut v = vec![Kept {
        path: db.to_path_buf(),
        what: "the results store",
    }];
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        v.push(Kept {
            path: PathBuf::from(name),
            what: "a journal of the results store",
        });
    }
    v
}

/// Whether any of `paths` is standard output (then the table goes to stderr).
pub fn any_stdout(paths: &[&PathBuf]) -> bool {
    paths
        .iter()
        .any(|p| matches!(resolve(p), Ok(Target::Stdout)))
}

/// The process's umask (read from /proc; 022 when it cannot be).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Write `bytes` to what `path` names (see the module doc for each kind).
pub fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let fail = |e: std::io::Error| anyhow::anyhow!("cannot write {}: {e}", path.display());
    match resolve(path).map_err(|e| anyhow::anyhow!(e))? {
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|_| out.flush()).map_err(fail)
        }
        Target::Special(p) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(fail)?;
            f.write_all(bytes).and_then(|_| f.flush()).map_err(fail)
        }
        Target::Regular(p) => {
            let meta = std::fs::metadata(&p).map_err(fail)?;
            // A file with other names (hard links) is one file the user linked on purpose:
            // a rename would split it, so it is written in place.
            if meta.nlink() > 1 {
                return in_place(&p, bytes).map_err(fail);
            }
            // The replacement keeps the file's owner and its permission bits, never a setuid,
            // setgid or sticky bit (a file written by root must not become runnable as root).
            let owner = Some((meta.uid(), meta.gid()));
            match replace(&p, bytes, meta.permissions().mode() & 0o777, owner) {
                // The owner could not be kept (not root): the file is written in place
                // rather than handed to this user.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    in_place(&p, bytes).map_err(fail)
                }
                r => r.map_err(fail),
            }
        }
        Target::New(p) => replace(&p, bytes, 0o666 & !umask(), None).map_err(fail),
    }
}

/// Append `line` and a newline to oscost's own journal at `path` (created 0600 when new; a
/// symlink is refused, never followed), in one `write` on a descriptor opened `O_APPEND`, then
/// `fdatasync`ed: a process killed mid-write leaves at most its last line cut, which a reader
/// of the journal skips (`watch`'s windows).
pub fn append_line(path: &Path, line: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut all = Vec::with_capacity(line.len() + 1);
    all.extend_from_slice(line);
    all.push(b'\n');
    f.write_all(&all)?;
    f.sync_data()
}

/// Truncate and write `path` where it is (its inode, owner, mode and links kept).
fn in_place(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_data()
}

/// A temporary file beside `path` with `bytes`, `mode` and `owner` (uid, gid) when it differs
/// from ours, renamed over it.
fn replace(path: &Path, bytes: &[u8], mode: u32, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(parent_dir(path))?;
    let tmp_path = tmp.path().to_path_buf();
    crate::effects::signals::track_temp(tmp_path.clone());
    let r = (|| {
        tmp.write_all(bytes)?;
        if let Some((uid, gid)) = owner {
            let m = tmp.as_file().metadata()?;
            if (m.uid(), m.gid()) != (uid, gid) {
                std::os::unix::fs::fchown(tmp.as_file(), Some(uid), Some(gid))?;
            }
        }
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
        tmp.as_file().sync_data()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    })();
    crate::effects::signals::untrack_temp(&tmp_path);
    r
}

/// Write `bytes` as a new file `name` in `dir`, whole or not at all: a temporary file in `dir`,
/// synced, then linked to `name` only if nothing has that name (an existing file is never
/// replaced). A write that fails part-way (the disk filled) leaves nothing behind.
pub fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    write_new_with(dir, name, &mut |w| w.write_all(bytes))
}

/// `write_new` with the bytes streamed by `fill` through a small buffer (a run of a million
/// samples is written without its JSON ever being whole in memory).
pub fn write_new_with(
    dir: &Path,
    name: &str,
    fill: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let tmp_path = tmp.path().to_path_buf();
    crate::effects::signals::track_temp(tmp_path.clone());
    let target = dir.join(name);
    let r = (|| {
        {
            let mut w = std::io::BufWriter::with_capacity(8192, tmp.as_file_mut());
            fill(&mut w)?;
            w.flush()?;
        }
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o666 & !umask()))?;
        tmp.as_file().sync_all()?;
        tmp.persist_noclobber(&target).map_err(|e| e.error)?;
        Ok(target)
    })();
    crate::effects::signals::untrack_temp(&tmp_path);
    r
}

/// A directory a report can be written into: it exists and accepts files, or the nearest
/// existing directory above it does (it is made when the report is written, not now, so a
/// refusal later leaves nothing).
pub fn check_report_dir(dir: &Path) -> Result<(), String> {
    // A name the file system cannot hold is found now, not after measuring (NAME_MAX is 255
    // bytes on every Linux file system oscost meets; the kernel refuses longer ones anyway).
    if let Some(c) = dir.components().find(|c| c.as_os_str().len() > NAME_MAX) {
        return Err(format!(
            "{}: the name '{}...' is longer than {NAME_MAX} bytes; give a shorter one",
            dir.display(),
            c.as_os_str()
                .to_string_lossy()
                .chars()
                .take(20)
                .collect::<String>()
        ));
    }
    // What the page writes inside: its figures under fig/, and index.html.
    for (name, want_dir) in [("fig", true), ("index.html", false)] {
        if let Ok(m) = std::fs::metadata(dir.join(name))
            && m.is_dir() != want_dir
        {
            let what = if want_dir { "a directory" } else { "a file" };
            return Err(format!(
                "{} exists and is not {what}, which the report needs there; remove it or give another directory",
                dir.join(name).display()
            ));
        }
    }
    writable_ancestor(dir).map(drop)
}

/// Where something at `path` would be made: `path` itself or its nearest existing ancestor
/// (`.` for a relative name with none), which must be a directory this process may create
/// files in. Nothing is created.
pub fn writable_ancestor(path: &Path) -> Result<PathBuf, String> {
    let mut probe = path.to_path_buf();
    loop {
        match std::fs::metadata(&probe) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(format!("{} exists and is not a directory", probe.display())),
            Err(_) => match probe.parent() {
                Some(p) if !p.as_os_str().is_empty() => probe = p.to_path_buf(),
                _ => {
                    probe = PathBuf::from(".");
                    break;
                }
            },
        }
    }
    use nix::unistd::{AccessFlags, access};
    access(probe.as_path(), AccessFlags::W_OK | AccessFlags::X_OK)
        .map_err(|e| format!("cannot write into {}: {e}", probe.display()))?;
    Ok(probe)
}

/// Serialise `x` in every format first (a failing format leaves no file of the set), then
/// write each file; one that cannot be written does not stop the others, and the error names
/// every one that failed.
pub fn export<T>(x: &T, files: &[(PathBuf, Box<dyn Exporter<T>>)]) -> anyhow::Result<()> {
    let bytes = files
        .iter()
        .map(|(p, e)| Ok((p, e.serialize(x)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let failed: Vec<String> = bytes
        .iter()
        .filter_map(|(p, b)| write_file(p, b).err().map(|e| e.to_string()))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(failed.join("; ")))
    }
}

/// Write a rendered page into `dir`: its figure files, then index.html last (a reader never
/// finds a page whose figures are missing). `stop` is asked between files; once a signal has
/// come, the files written so far are removed and the error is `Interrupted`. Returns the
/// paths written.
pub fn write_page(
    dir: &Path,
    page: &Page,
    stop: &crate::base::stop::Stop,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    // The directories this write creates, outermost first, so a failed write removes them.
    let mut made: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    made.reverse();
    let result = (|| {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        for (rel, bytes) in &page.files {
            stop.check()?;
            let p = dir.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
            }
            write_file(&p, bytes)?;
            written.push(p);
        }
        stop.check()?;
        let index = dir.join("index.html");
        write_file(&index, page.html.as_bytes())?;
        written.push(index);
        Ok(())
    })();
    match result {
        Ok(()) => Ok(written),
        Err(e) => {
            for p in &written {
                let _ = std::fs::remove_file(p);
                if let Some(d) = p.parent().filter(|d| d.starts_with(dir) && *d != dir) {
                    let _ = std::fs::remove_dir(d);
                }
            }
            for d in made.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_checks_refuse_directories() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_file(&p, b"one").unwrap();
        write_file(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(check_writable(dir.path()).is_err());
        assert!(check_writable(&dir.path().join("no/such/dir/x.json")).is_err());
        assert!(check_writable(&p).is_ok());
        let long = dir.path().join("x".repeat(300));
        assert!(check_writable(&long).unwrap_err().contains("too long"));
    }

    #[test]
    fn a_symlink_is_followed_and_kept_and_a_fifo_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        write_file(&link, b"data").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"data");

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(resolve(&fifo), Ok(Target::Special(_))));
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_file(&fifo, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }

    #[test]
    fn devices_are_written_through_and_their_errors_said() {
        assert!(matches!(
            resolve(Path::new("/dev/null")),
            Ok(Target::Special(_))
        ));
        assert!(matches!(resolve(Path::new("-")), Ok(Target::Stdout)));
        assert!(matches!(
            resolve(Path::new("/dev/stdout")),
            Ok(Target::Stdout)
        ));
        // /dev/stderr -> /proc/self/fd/2 -> whatever fd 2 is: written through.
        assert!(matches!(
            resolve(Path::new("/dev/stderr")),
            Ok(Target::Special(_))
        ));
        write_file(Path::new("/dev/null"), b"x").unwrap();
        if Path::new("/dev/full").exists() {
            let e = write_file(Path::new("/dev/full"), b"x").unwrap_err();
            assert!(e.to_string().contains("No space left"), "{e}");
        }
    }

    #[test]
    fn a_hard_linked_file_stays_linked_and_a_setuid_bit_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        let q = dir.path().join("b.json");
        std::fs::write(&p, b"old").unwrap();
        std::fs::hard_link(&p, &q).unwrap();
        write_file(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&q).unwrap(), b"new");
        std::fs::remove_file(&q).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
        write_file(&p, b"newer").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn a_new_file_is_written_whole_under_its_own_name_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_new(dir.path(), "run.json", b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        assert!(write_new(dir.path(), "run.json", b"other").is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        if Path::new("/dev/full").exists() {
            // A directory on a full disk cannot be had here; a name that cannot be made can.
            assert!(write_new(Path::new("/proc"), "x", b"x").is_err());
        }
    }

    #[test]
    fn a_new_file_gets_the_umask_and_a_replaced_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.csv");
        write_file(&p, b"a").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&p, b"b").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn a_page_is_written_with_its_figures_and_index_last_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let page = Page {
            html: "<html></html>".into(),
            files: vec![("fig/a.svg".into(), b"<svg/>".to_vec())],
        };
        let written = write_page(dir.path(), &page, &crate::base::stop::Stop::never()).unwrap();
        assert_eq!(written.len(), 2);
        assert!(written[1].ends_with("index.html"));
        assert_eq!(
            std::fs::read(dir.path().join("fig/a.svg")).unwrap(),
            b"<svg/>"
        );
        // A signal before the first file: the directories made for the page go again.
        let other = tempfile::tempdir().unwrap();
        let signalled = crate::base::stop::Stop::never();
        signalled.raise(libc::SIGINT);
        let fresh = other.path().join("new/report");
        assert!(check_report_dir(&fresh).is_ok());
        assert!(!fresh.exists(), "checking makes nothing");
        let e = write_page(&fresh, &page, &signalled).unwrap_err();
        assert!(e.is::<crate::base::stop::Interrupted>(), "{e}");
        assert_eq!(std::fs::read_dir(other.path()).unwrap().count(), 0);
        // A file that cannot be written after one that was: the one written goes too.
        let third = tempfile::tempdir().unwrap();
        let blocked = Page {
            html: "<html></html>".into(),
            files: vec![
                ("fig/a.svg".into(), b"<svg/>".to_vec()),
                ("fig/a.svg/b.svg".into(), b"<svg/>".to_vec()),
            ],
        };
        let fresh = third.path().join("report");
        assert!(write_page(&fresh, &blocked, &crate::base::stop::Stop::never()).is_err());
        assert_eq!(std::fs::read_dir(third.path()).unwrap().count(), 0);
    }
}
