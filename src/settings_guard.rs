//! Kernel settings changed for a measurement, and always put back.
//!
//! `prepare` turns each side's `NAME=VALUE`s into resolved settings and refuses what cannot
//! be done before anything is written: an unknown name, a path outside `/proc/sys` and `/sys`,
//! a setting given twice on one side with two values, a read-only file, not root. `Guard::start`
//! reads the original value of every file any side touches before the first write, writes them
//! to a state file (`$XDG_DATA_HOME/oscost/settings/pending-PID.json`, atomically), and forks a
//! guard (`harness::group_guard::Watch`, the watcher predict's program group has too): a child
//! in a process group of its own, blocked on a pipe whose only write end oscost
//! holds, with the originals prepared as raw bytes. When oscost ends the guard normally it
//! writes `d`; when the pipe closes without it (oscost killed, SIGKILL included) the guard
//! writes every original back, removes the state file and exits, using only async-signal-safe
//! calls (open, write, close, unlink). When even the guard dies (the whole session killed), the
//! state file remains, and the next oscost command puts the values back and says so
//! (`recover`). `Guard::trial` writes each side's values once, reads them back and puts the
//! originals back, so a value the kernel refuses is exit 2 before measuring; `Guard::apply`
//! switches to a side between repetitions (only the files that differ), reads back and fails
//! the comparison if the kernel did not keep the value, then waits the settle time. Nothing
//! outside `/proc/sys` and `/sys` (debugfs included) is ever written.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::group_guard::Watch;
use crate::harness::settings::{self, Kind, Scope, Setting, SettingError};

/// One side's settings: system-wide ones (written by oscost) and per-task ones (applied by the
/// worker to itself).
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// System-wide settings and the values to write.
    pub system: Vec<(Setting, String)>,
    /// Per-task settings (name, value), applied by each worker to itself.
    pub task: Vec<(String, String)>,
    /// `NAME=VALUE` as given, for the run's record and the side's name.
    pub given: Vec<String>,
}

impl Side {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// The side named by its settings: `halt-poll-ns=200000 thp=never`.
    pub fn text(&self) -> Option<String> {
        (!self.given.is_empty()).then(|| self.given.join(" "))
    }
}

/// Each side's assignments resolved, refused before any write when they cannot be done.
pub fn prepare(sides: &[&[String]], cpus: &[usize]) -> Result<Vec<Side>, SettingError> {
    let mut out = Vec::new();
    for assigns in sides {
        let mut side = Side::default();
        let mut seen: Vec<(String, String)> = Vec::new();
        for a in assigns.iter() {
            let (name, value) = settings::parse_assignment(a)?;
            if let Some((_, v)) = seen.iter().find(|(n, _)| *n == name) {
                if *v != value {
                    return Err(SettingError::Twice {
                        name,
                        a: v.clone(),
                        b: value,
                    });
                }
                continue;
            }
            seen.push((name.clone(), value.clone()));
            let s = settings::resolve(&name, cpus)?;
            settings::changeable(&s).map_err(|why| SettingError::Refused {
                name: name.clone(),
                why,
            })?;
            side.given.push(format!("{name}={value}"));
            match s.scope {
                Scope::Task => side.task.push((name, value)),
                Scope::System => side.system.push((s, value)),
            }
        }
        out.push(side);
    }
    Ok(out)
}

/// Where a guard's state file is kept.
pub fn state_dir() -> Option<PathBuf> {
    crate::store::data_dir().ok().map(|d| d.join("settings"))
}

/// The originals, as the state file holds them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct State {
    pid: u32,
    /// The process's start time (`harness::os::start_time`): a reused pid is not it.
    #[serde(default)]
    start: u64,
    /// (file, value to write back).
    files: Vec<(PathBuf, String)>,
}

/// Settings changed and the guard that puts them back.
pub struct Guard {
    originals: Vec<(PathBuf, String)>,
    /// Every system setting any side touches, with its kind.
    touched: Vec<Setting>,
    /// Which side is applied now (`None`: the originals).
    current: Option<usize>,
    sides: Vec<Side>,
    settle: Duration,
    state_file: Option<PathBuf>,
    watch: Option<Watch>,
}

impl Guard {
    /// Read the originals, write the state file, start the guard. Nothing is changed yet.
    pub fn start(sides: Vec<Side>, settle: Duration) -> std::io::Result<Guard> {
        let mut touched: Vec<Setting> = Vec::new();
        for s in sides.iter().flat_map(|s| &s.system) {
            if !touched.iter().any(|t| t.files == s.0.files) {
                touched.push(s.0.clone());
            }
        }
        let mut originals = Vec::new();
        for s in &touched {
            for (f, v) in s.files.iter().zip(settings::read(s)?) {
                originals.push((f.clone(), v));
            }
        }
        let state_file = match (state_dir(), originals.is_empty()) {
            (Some(dir), false) => {
                let state = State {
                    pid: std::process::id(),
                    start: crate::harness::os::start_time(std::process::id()).unwrap_or(0),
                    files: originals.clone(),
                };
                let bytes = serde_json::to_vec(&state).map_err(std::io::Error::other)?;
                let name = format!("pending-{}.json", std::process::id());
                let _ = std::fs::remove_file(dir.join(&name));
                Some(crate::output::write_new(&dir, &name, &bytes)?)
            }
            _ => None,
        };
        let watch = if originals.is_empty() {
            None
        } else {
            Some(fork_guard(&originals, state_file.as_deref())?)
        };
        Ok(Guard {
            originals,
            touched,
            current: None,
            sides,
            settle,
            state_file,
            watch,
        })
    }

    /// The per-task settings of side `i`, for its workers.
    pub fn task_settings(&self, i: usize) -> Vec<(String, String)> {
        self.sides
            .get(i)
            .map(|s| s.task.clone())
            .unwrap_or_default()
    }

    /// Every side's values written once, read back, and the originals put back: a value the
    /// kernel refuses (EINVAL) or does not keep is found before measuring.
    pub fn trial(&mut self) -> Result<(), SettingError> {
        let mut result = Ok(());
        'sides: for side in &self.sides {
            for (s, value) in &side.system {
                if let Err(why) = write_and_check(s, value) {
                    result = Err(SettingError::Refused {
                        name: s.name.clone(),
                        why,
                    });
                    break 'sides;
                }
            }
        }
        self.put_back();
        result
    }

    /// Switch to side `i`: write the files whose value differs, read them back (an error when
    /// the kernel did not keep one), then wait the settle time.
    pub fn apply(&mut self, i: usize) -> Result<(), String> {
        if self.current == Some(i) {
            return Ok(());
        }
        let Some(side) = self.sides.get(i) else {
            return Ok(());
        };
        // A setting the other side changed and this one does not name goes back to its
        // original.
        let mut want: Vec<(Setting, String)> = Vec::new();
        for t in &self.touched {
            match side.system.iter().find(|(s, _)| s.files == t.files) {
                Some((s, v)) => want.push((s.clone(), v.clone())),
                None => {
                    for f in &t.files {
                        if let Some((_, v)) = self.originals.iter().find(|(p, _)| p == f) {
                            let one = Setting {
                                files: vec![f.clone()],
                                ..t.clone()
                            };
                            want.push((one, v.clone()));
                        }
                    }
                }
            }
        }
        for (s, v) in &want {
            let now = settings::read(s).map_err(|e| format!("{}: {e}", s.name))?;
            if now.iter().any(|x| x != v) {
                write_and_check(s, v).map_err(|why| format!("{}: {why}", s.name))?;
            }
        }
        self.current = Some(i);
        if !want.is_empty() {
            std::thread::sleep(self.settle);
        }
        Ok(())
    }

    /// Write every original back; the files that would not take theirs, said.
    fn put_back(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for (f, v) in &self.originals {
            let kind = self
                .touched
                .iter()
                .find(|t| t.files.contains(f))
                .map_or(Kind::Plain, |t| t.kind);
            let now = std::fs::read_to_string(f).map(|t| settings::value_of(kind, &t));
            if now.as_deref().ok() == Some(v.as_str()) {
                continue;
            }
            if let Err(e) = settings::write_file(f, v) {
                failed.push(format!("{} could not be put back to {v}: {e}", f.display()));
            }
        }
        self.current = None;
        failed
    }

    /// Put everything back, end the guard, remove the state file; what could not be put back.
    pub fn restore(mut self) -> Vec<String> {
        self.finish()
    }

    fn finish(&mut self) -> Vec<String> {
        let failed = self.put_back();
        if let Some(w) = &mut self.watch {
            w.release();
        }
        if failed.is_empty()
            && let Some(p) = self.state_file.take()
        {
            let _ = std::fs::remove_file(p);
        }
        failed
    }
}

impl Drop for Guard {
    /// An error path or an unwinding panic: everything is put back all the same.
    fn drop(&mut self) {
        for l in self.finish() {
            crate::say!("oscost: {l}");
        }
    }
}

/// Write `value` to every file of `s` and read it back.
fn write_and_check(s: &Setting, value: &str) -> Result<(), String> {
    for f in &s.files {
        settings::write_file(f, value).map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                format!("the kernel refuses '{value}' ({})", f.display())
            } else {
                format!("cannot write {}: {e}", f.display())
            }
        })?;
    }
    let now = settings::read(s).map_err(|e| e.to_string())?;
    if let Some(kept) = now.iter().find(|v| *v != value) {
        return Err(format!(
            "the kernel did not keep '{value}' (it reads '{kept}')"
        ));
    }
    Ok(())
}

/// Start the guard (`harness::group_guard::Watch`): if oscost dies without releasing it, it
/// writes every original back and removes the state file.
fn fork_guard(
    originals: &[(PathBuf, String)],
    state_file: Option<&Path>,
) -> std::io::Result<Watch> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    // Everything the child touches is made before fork: it may not allocate.
    let files: Vec<(CString, Vec<u8>)> = originals
        .iter()
        .map(|(p, v)| Ok((c(p)?, v.as_bytes().to_vec())))
        .collect::<std::io::Result<_>>()?;
    let state = state_file.map(c).transpose()?;
    Watch::start(&|| {
        for (path, value) in &files {
            // SAFETY: open, write, close and unlink are async-signal-safe, on buffers made
            // before the fork.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, value.as_ptr().cast(), value.len());
                    libc::close(fd);
                }
            }
        }
        if let Some(s) = &state {
            // SAFETY: as above.
            unsafe { libc::unlink(s.as_ptr()) };
        }
    })
}

/// Put back what a killed oscost left changed (its state file remains and its process is
/// gone); the lines say what was put back.
pub fn recover() -> Vec<String> {
    let Some(dir) = state_dir() else {
        return vec![];
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut said = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        let is_state = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("pending-") && n.ends_with(".json"));
        if !is_state {
            continue;
        }
        let Some(state) = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
        else {
            continue;
        };
        let alive = crate::harness::os::start_time(state.pid) == Some(state.start);
        if alive && state.pid != std::process::id() {
            continue; // its oscost still runs (its guard puts the values back if it dies)
        }
        let mut put = Vec::new();
        for (f, v) in &state.files {
            // Only the kernel's own trees, whatever the file says.
            if settings::ALLOWED_TREES.iter().any(|t| f.starts_with(t))
                && settings::write_file(f, v).is_ok()
            {
                put.push(format!("{}={v}", f.display()));
            }
        }
        let _ = std::fs::remove_file(&p);
        said.push(format!(
            "put back {} kernel setting(s) a killed oscost (pid {}) had changed: {}",
            put.len(),
            state.pid,
            put.join(", ")
        ));
    }
    said
}
