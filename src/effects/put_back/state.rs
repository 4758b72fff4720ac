//! The machine-wide record of what oscost has changed outside itself, and its one lock.
//!
//! It lives in `/run/oscost` (`STATE_DIR`), a directory of root's own (0700), whatever the
//! user's `XDG_DATA_HOME` or PID namespace: every oscost on the machine sees the same one.
//! Each kernel setting file being changed has one state file in `held/`, named by the file's
//! resolved path. Its `flock` is the lock: the run that changes the setting holds it, and so
//! does that run's guard (they share the open file description, passed over the guard's
//! socket), so the lock lives exactly as long as someone is responsible for putting the value
//! back; liveness is the lock, never a pid. Its content (`SettingRecord`) is the original value,
//! written once by the first holder before anything is changed, the holder's description
//! (for the one line a refused run prints) and the boot it belongs to.
//!
//! A state whose lock nobody holds belongs to an oscost that died with its guard: every
//! oscost command puts its original back first (`recover`) and removes it, or keeps it with
//! the reason when the value cannot be written (said again at every command until done). A
//! run that finds such a state for a file it is about to change adopts its original instead
//! of reading the changed value as one.
//!
//! Nothing here trusts a file it finds: a state is opened without following links and
//! without blocking, must be a regular file of the euid's no larger than `MAX_STATE_BYTES`,
//! and its path must be a kernel setting file after resolution (no `..`, no link, under
//! `/proc/sys` or `/sys`, on procfs, sysfs, debugfs or tracefs) that its name agrees with.
//! Anything else is moved to `ignored/`, named once, and never written from (kept there for
//! root to read). The last state to go takes `held/`, and `/run/oscost` when that is then
//! empty, with it: a machine oscost has finished with has no `/run/oscost`.

use std::io::{Read, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the state lives: one directory for the whole machine.
pub const STATE_DIR: &str = crate::measuring::os::STATE_DIR;
/// The states of the settings being changed (or left changed by a killed oscost).
const HELD: &str = "held";
/// Where what was found in `held/` and not trusted is moved.
const IGNORED: &str = "ignored";
/// A state larger than this is not one oscost wrote.
pub const MAX_STATE_BYTES: u64 = 64 << 10;
/// A value larger than this is not a setting's.
const MAX_VALUE_BYTES: usize = 4096;

// statfs magic numbers of the kernel's own file systems (linux/magic.h).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const SYSFS_MAGIC: i64 = 0x6265_6572;
const DEBUGFS_MAGIC: i64 = 0x6462_6720;
const TRACEFS_MAGIC: i64 = 0x7472_6163;

/// One setting file's state: what to put back, and who holds it changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SettingRecord {
    /// The kernel file, resolved.
    pub file: PathBuf,
    /// Its value before the first holder changed it.
    pub original: String,
    /// Who holds it changed: pid, PID namespace, command line, since when.
    pub holder: String,
    /// The boot it was recorded in (`/proc/sys/kernel/random/boot_id`): a reboot has reset
    /// what it changed.
    pub boot: String,
    /// Why the original could not be written back, when it could not.
    #[serde(default)]
    pub unput: Option<String>,
    /// The namespaces that named `file` when it was written (`namespaces`): a path under
    /// /proc/sys is another file in another net, IPC or UTS namespace, or behind another
    /// mount or PID namespace's /proc. Only a process in all of them writes it back. Empty in
    /// a state from before it was recorded (put back from anywhere, as then).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub namespaces: std::collections::BTreeMap<String, u64>,
    /// An oscost in other namespaces found it and said it left it alone (said once).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub told_elsewhere: bool,
}

/// The namespaces a setting file's path depends on, by kind.
const NAMESPACE_KINDS: &[&str] = &["mnt", "net", "ipc", "uts", "pid", "user"];

/// This process's namespaces of `NAMESPACE_KINDS`, each by its inode (those the kernel does
/// not show are left out).
pub fn namespaces() -> std::collections::BTreeMap<String, u64> {
    NAMESPACE_KINDS
        .iter()
        .filter_map(|k| {
            let m = std::fs::metadata(format!("/proc/self/ns/{k}")).ok()?;
            Some(((*k).to_string(), m.ino()))
        })
        .collect()
}

/// The kinds in which `recorded` (a state's namespaces) differ from `ours`; empty when the
/// state was written here, or recorded none.
pub fn other_namespaces(
    recorded: &std::collections::BTreeMap<String, u64>,
    ours: &std::collections::BTreeMap<String, u64>,
) -> Vec<String> {
    recorded
        .iter()
        .filter(|(k, v)| ours.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Why a setting cannot be held.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Another live oscost holds it changed.
    #[error("{file} is being changed by another oscost ({holder}); run this when it has ended")]
    Busy {
        /// The setting file.
        file: String,
        /// The other run, as it described itself.
        holder: String,
    },
    /// The state directory cannot be trusted or made.
    #[error("{0}")]
    Unusable(String),
}

/// A setting file held: its lock (this open file) and its record.
#[derive(Debug)]
pub struct Held {
    /// What was recorded.
    pub record: SettingRecord,
    /// The state file.
    pub path: PathBuf,
    lock: std::fs::File,
}

impl Held {
    /// The locked state file, to share with the guard (the lock lives while either holds it).
    pub fn lock_file(&self) -> &std::fs::File {
        &self.lock
    }

    /// The value was put back (`Ok`) or could not be (`Err`, why): the state is removed, or
    /// kept with the reason for every later command to try again.
    pub fn finish(mut self, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => unlink_if_same(&self.path, self.lock.as_fd()),
            Err(why) => {
                self.record.unput = Some(why);
                let _ = write_record(&mut self.lock, &self.record);
            }
        }
    }
}

/// Remove `path` if it is still the file `held` is open on (never another run's new one).
pub fn unlink_if_same(path: &Path, held: std::os::fd::BorrowedFd) {
    let same = match (nix::sys::stat::fstat(held), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.st_dev == b.dev() && a.st_ino == b.ino(),
        _ => false,
    };
    if same {
        crate::measuring::os::remove_kept(path);
    }
}

/// The boot this is (empty where the kernel does not say).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// This process as a holder names itself: pid, PID namespace, command line, since when.
pub fn describe_self() -> String {
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut command: String = std::env::args()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(120)
        .collect();
    command = crate::base::text::printable(&command).into_owned();
    format!(
        "pid {} in {ns}: oscost {command}, since {} UTC",
        std::process::id(),
        chrono::Utc::now().format("%H:%M:%S")
    )
}

/// The state file's name for a setting file: its path with `%` and `/` escaped.
pub fn state_name(file: &Path) -> String {
    let mut out = String::new();
    for &b in file.as_os_str().as_bytes() {
        match b {
            b'%' => out.push_str("%25"),
            b'/' => out.push_str("%2F"),
            b if b.is_ascii_graphic() => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A directory of the euid's own (`measuring::os::private_dir`); why not, in a sentence that
/// says what to do.
fn private_dir(path: &Path, create: bool) -> Result<bool, String> {
    crate::measuring::os::private_dir(path, create).map_err(|why| {
        format!(
            "{why}: oscost keeps the state of the kernel settings it changes there and cannot trust it; remove it"
        )
    })
}

/// `STATE_DIR/held`, checked (and made when `create`); `None` when it does not exist.
fn held_dir(create: bool) -> Result<Option<PathBuf>, String> {
    let top = Path::new(STATE_DIR);
    if !private_dir(top, create)? {
        return Ok(None);
    }
    let held = top.join(HELD);
    Ok(private_dir(&held, create)?.then_some(held))
}

/// Why an open file is not a state oscost wrote, if it is not.
fn untrusted(f: &std::fs::File) -> Option<String> {
    let m = match f.metadata() {
        Ok(m) => m,
        Err(e) => return Some(e.to_string()),
    };
    let euid = nix::unistd::geteuid().as_raw();
    if !m.file_type().is_file() {
        Some("not a regular file".into())
    } else if m.uid() != euid {
        Some(format!("owned by uid {}", m.uid()))
    } else if m.len() > MAX_STATE_BYTES {
        Some(format!("{} bytes, larger than any state", m.len()))
    } else {
        None
    }
}

fn open_state(path: &Path, create: bool) -> std::io::Result<std::fs::File> {
    crate::measuring::os::open_untrusted(path, create)
}

fn try_lock(f: &std::fs::File) -> bool {
    crate::measuring::os::lock_now(f).is_ok()
}

fn read_capped(f: &mut std::fs::File) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    f.rewind()?;
    f.take(MAX_STATE_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn write_record(f: &mut std::fs::File, r: &SettingRecord) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(r).map_err(std::io::Error::other)?;
    f.set_len(0)?;
    f.rewind()?;
    f.write_all(&bytes)?;
    f.sync_data()
}

/// Whether `file` is a kernel setting file as resolved: absolute, no `.`, `..`, doubled
/// slash or link in it, under `/proc/sys` or `/sys`, a regular file on one of the kernel's
/// own file systems. Why not, when it is not.
pub fn setting_file(file: &Path) -> Result<(), String> {
    let shown = file.display();
    let real = std::fs::canonicalize(file).map_err(|e| format!("{shown}: {e}"))?;
    if real.as_os_str() != file.as_os_str() {
        return Err(format!(
            "{shown} is not a resolved path ({})",
            real.display()
        ));
    }
    if !crate::machine::settings::ALLOWED_TREES
        .iter()
        .any(|t| real.starts_with(t))
    {
        return Err(format!("{shown} is outside /proc/sys and /sys"));
    }
    let fs = nix::sys::statfs::statfs(&real).map_err(|e| format!("{shown}: {e}"))?;
    let magic = fs.filesystem_type().0 as i64;
    if ![PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC].contains(&magic) {
        return Err(format!("{shown} is not on a kernel file system"));
    }
    if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        return Err(format!("{shown} is not a file"));
    }
    Ok(())
}

/// A state's text parsed and checked against the name it was found under.
fn trusted_record(text: &str, name: &str) -> Result<SettingRecord, String> {
    let r: SettingRecord =
        serde_json::from_str(text).map_err(|e| format!("not a state oscost wrote ({e})"))?;
    if state_name(&r.file) != name {
        return Err(format!(
            "it names {}, not the file its name does",
            r.file.display()
        ));
    }
    if r.original.len() > MAX_VALUE_BYTES || r.original.contains('\0') {
        return Err("its value is not a setting's".into());
    }
    setting_file(&r.file)?;
    Ok(r)
}

/// Move an untrusted entry of `held/` aside (rename: nothing is opened or followed), so it is
/// named once; the line that names it.
fn ignore(path: &Path, why: &str) -> String {
    let name = path.file_name().map(|n| n.to_owned()).unwrap_or_default();
    let aside = Path::new(STATE_DIR).join(IGNORED);
    let moved = private_dir(&aside, true).is_ok_and(|_| {
        let mut to = aside.join(&name);
        to.as_mut_os_string().push(format!(
            ".{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::rename(path, to).is_ok()
    });
    if !moved {
        let _ = std::fs::remove_file(path);
    }
    format!(
        "ignored {} ({why}): nothing was written from it; {}",
        crate::base::text::printable(&path.display().to_string()),
        if moved {
            format!("moved to {}/", aside.display())
        } else {
            "removed".into()
        }
    )
}

/// Hold `file` (resolved) for a run described by `holder`: take its lock and record its
/// original, read by `read_original` unless a killed oscost's state already holds the true
/// one. Refused (`Busy`) when another live oscost holds it. Lines for what was ignored go to
/// `said`.
pub fn hold(
    file: &Path,
    holder: &str,
    read_original: &dyn Fn() -> std::io::Result<String>,
    said: &mut Vec<String>,
) -> Result<Held, StateError> {
    let name = state_name(file);
    let path = Path::new(STATE_DIR).join(HELD).join(&name);
    let boot = boot_id();
    // A few tries: a state found untrusted is moved aside, one removed under us is made anew,
    // and so is a directory another oscost's last state took with it as it went (between our
    // making it and our opening in it: `measuring::os::remove_kept`).
    let mut gone = None;
    for _ in 0..8 {
        if let Err(why) = held_dir(true) {
            gone = Some(why);
            continue;
        }
        let Some(mut f) = open_to_hold(&path, said)? else {
            continue;
        };
        if !try_lock(&f) {
            let holder = read_capped(&mut f)
                .ok()
                .and_then(|t| serde_json::from_str::<SettingRecord>(&t).ok())
                .map_or_else(|| "it did not say who it is".into(), |r| r.holder);
            return Err(StateError::Busy {
                file: file.display().to_string(),
                holder,
            });
        }
        if f.metadata().map_or(true, |m| m.nlink() == 0) {
            continue; // removed by its last holder between our open and our lock
        }
        if let Some(why) = written_elsewhere(&mut f, &name, &boot) {
            return Err(StateError::Unusable(why));
        }
        let adopted = match recorded_original(&mut f, &name, &boot) {
            Ok(a) => a,
            Err(why) => {
                drop(f);
                said.push(ignore(&path, &why));
                continue;
            }
        };
        let original = match adopted {
            Some(o) => o,
            None => match read_original() {
                Ok(o) => o,
                Err(e) => {
                    // Nothing recorded, nothing changed: the state goes with the refusal.
                    unlink_if_same(&path, f.as_fd());
                    return Err(StateError::Unusable(format!(
                        "cannot read {} ({e}): oscost changes only what it can read back and put back (a write-only control is not a setting)",
                        file.display()
                    )));
                }
            },
        };
        let record = SettingRecord {
            file: file.to_path_buf(),
            original,
            holder: holder.to_string(),
            boot: boot.clone(),
            unput: None,
            namespaces: namespaces(),
            told_elsewhere: false,
        };
        write_record(&mut f, &record)
            .map_err(|e| StateError::Unusable(format!("cannot write {}: {e}", path.display())))?;
        return Ok(Held {
            record,
            path,
            lock: f,
        });
    }
    Err(StateError::Unusable(gone.unwrap_or_else(|| {
        format!("{} keeps changing under oscost; remove it", path.display())
    })))
}

/// The state at `path` opened (made if absent) for `hold`; `None`, said in `said`, when what
/// is there is not to be trusted (a link, not a regular file, not root's): the caller tries
/// again, and a state moved aside is made anew.
fn open_to_hold(path: &Path, said: &mut Vec<String>) -> Result<Option<std::fs::File>, StateError> {
    let f = match open_state(path, true) {
        Ok(f) => f,
        // Its directory went with another oscost's last state: made anew on the next try.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            said.push(ignore(path, "a link"));
            return Ok(None);
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR | libc::ENXIO)) => {
            said.push(ignore(path, "not a regular file"));
            return Ok(None);
        }
        Err(e) => {
            return Err(StateError::Unusable(format!(
                "cannot open {}: {e}",
                path.display()
            )));
        }
    };
    if let Some(why) = untrusted(&f) {
        drop(f);
        said.push(ignore(path, &why));
        return Ok(None);
    }
    Ok(Some(f))
}

/// The original a killed oscost's state (locked by us now) recorded in this boot, which is the
/// true one (the file may still hold that oscost's value); `None` for an empty state or one of
/// another boot (the reboot reset what it changed); `Err` (why) for a record not to be
/// trusted.
fn recorded_original(
    f: &mut std::fs::File,
    name: &str,
    boot: &str,
) -> Result<Option<String>, String> {
    let text = read_capped(f).unwrap_or_default();
    if text.is_empty() {
        return Ok(None);
    }
    let r = trusted_record(&text, name)?;
    Ok((r.boot == boot).then_some(r.original))
}

/// Why a killed oscost's state (locked by us now) cannot be adopted here: it was written in
/// other namespaces, where its path names another file. `None` for an empty state, one of
/// another boot, or one written in these namespaces.
fn written_elsewhere(f: &mut std::fs::File, name: &str, boot: &str) -> Option<String> {
    let text = read_capped(f).ok().filter(|t| !t.is_empty())?;
    let r = trusted_record(&text, name).ok()?;
    let other = other_namespaces(&r.namespaces, &namespaces());
    (r.boot == boot && !other.is_empty()).then(|| {
        format!(
            "an oscost killed with its guard in other namespaces ({}) left {} changed; only a command run there can put it back, so this one changes nothing (its state: {})",
            other.join(", "),
            r.file.display(),
            Path::new(STATE_DIR).join(HELD).join(name).display()
        )
    })
}

/// Put back what oscosts that died with their guards left changed; the lines say what was put
/// back, what could not be (kept, said again next time) and what was ignored.
pub fn recover() -> Vec<String> {
    let mut said = Vec::new();
    let dir = match held_dir(false) {
        Ok(Some(d)) => d,
        Ok(None) => return said,
        // Not root: the directory is not ours to read, and nothing of ours is in it.
        Err(_) if !nix::unistd::geteuid().is_root() => return said,
        Err(why) => {
            said.push(why);
            return said;
        }
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return said;
    };
    let boot = boot_id();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        recover_one(&e.path(), &name, &boot, &mut said);
    }
    // What was found untrusted went aside and is no file's state: `held/` may now be empty.
    crate::measuring::os::prune_state_dir(&dir);
    said
}

/// Put back what the state at `path` (named `name`) records, if no live oscost holds it and
/// it was recorded in this boot (`boot`); what happened goes to `said`.
fn recover_one(path: &Path, name: &str, boot: &str, said: &mut Vec<String>) {
    let mut f = match open_state(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            let why = match e.raw_os_error() {
                Some(libc::ELOOP) => "a link".to_string(),
                Some(libc::EISDIR | libc::ENXIO) => "not a regular file".to_string(),
                _ => e.to_string(),
            };
            said.push(ignore(path, &why));
            return;
        }
    };
    if let Some(why) = untrusted(&f) {
        drop(f);
        said.push(ignore(path, &why));
        return;
    }
    if !try_lock(&f) || f.metadata().map_or(true, |m| m.nlink() == 0) {
        return; // a live oscost (or its guard) holds it, or it is already gone
    }
    let text = read_capped(&mut f).unwrap_or_default();
    if text.is_empty() {
        // Killed between making the state and recording it: nothing was changed yet.
        unlink_if_same(path, f.as_fd());
        return;
    }
    let mut record = match trusted_record(&text, name) {
        Ok(r) => r,
        Err(why) => {
            drop(f);
            said.push(ignore(path, &why));
            return;
        }
    };
    let shown = format!("{}={}", record.file.display(), record.original);
    if record.boot != boot {
        unlink_if_same(path, f.as_fd());
        said.push(format!(
            "not putting back {shown}: it was recorded before the last boot, which reset it"
        ));
        return;
    }
    let other = other_namespaces(&record.namespaces, &namespaces());
    if !other.is_empty() {
        // Here its path is another file: writing it would change this namespace's value and
        // lose the state, leaving the true one changed for good.
        if !record.told_elsewhere {
            said.push(format!(
                "not putting back {shown} from here: it was changed in other namespaces ({}), where that path is another file; any oscost command run there puts it back",
                other.join(", ")
            ));
            record.told_elsewhere = true;
            let _ = write_record(&mut f, &record);
        }
        return;
    }
    match crate::machine::settings::write_file(&record.file, &record.original) {
        Ok(()) => {
            unlink_if_same(path, f.as_fd());
            said.push(format!(
                "put back {shown}, which an oscost killed with its guard had changed ({})",
                record.holder
            ));
        }
        Err(e) => {
            said.push(format!(
                "could not put back {shown} ({e}); its state is kept in {} and every oscost command tries again",
                path.display()
            ));
            record.unput = Some(e.to_string());
            let _ = write_record(&mut f, &record);
        }
    }
}

/// States an oscost before this one kept in the user's data directory: never written from (a
/// file there could be anyone's), renamed so each is named once.
pub fn ignore_legacy(data_dir: &Path) -> Vec<String> {
    let dir = data_dir.join("settings");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut said = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("pending-") && name.ends_with(".json")) {
            continue;
        }
        let to = dir.join(format!("ignored-{name}"));
        let path = e.path();
        if std::fs::rename(&path, &to).is_ok() {
            said.push(format!(
                "ignored {}: kernel settings are no longer put back from the data directory (a file there could be anyone's); nothing was written from it, it is now {}",
                crate::base::text::printable(&path.display().to_string()),
                crate::base::text::printable(&to.display().to_string())
            ));
        }
    }
    said
}

#[cfg(test)]
mod tests;
