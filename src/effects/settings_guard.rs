//! Kernel settings changed for a measurement, and always put back.
//!
//! `prepare` turns each side's `NAME=VALUE`s into resolved settings and refuses what cannot
//! be done before anything is written: an unknown name, a path outside `/proc/sys` and `/sys`,
//! a setting given twice on one side with two values, two names or spellings of one file on
//! one side (a catalogue name and its path, `./`, `//`, a glob), a per-task value that is not
//! one, a read-only file, not root. `Guard::start` starts the guard process
//! (`put_back::Guardian`) before anything is changed, then holds every file any side touches
//! (`put_back::state::hold`: the machine-wide lock, refused when another live oscost holds
//! the file changed, and the original recorded once) and hands each original and its lock to
//! the guard, which puts them back if oscost dies however it dies. `Guard::trial` writes each
//! side's values once, reads them back and puts the originals back, and tries each per-task
//! value in a child, so a value the kernel refuses is exit 2 before measuring; `Guard::apply`
//! switches to a side between repetitions (only the files that differ), reads back and fails
//! the comparison if the kernel did not keep the value, then waits the settle time. The end
//! (`restore`, or the drop on an error path) puts everything back, removes the states it put
//! back, keeps with the reason those it could not, and releases the guard. Nothing outside
//! `/proc/sys` and `/sys` (debugfs included) is ever written.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use crate::effects::put_back::state::{self, Held, StateError};
use crate::effects::put_back::{Alteration, Guardian};
use crate::machine::settings::{self, Encoding, Scope, Setting, SettingError};

/// One side's settings: system-wide ones (written by oscost) and per-task ones (applied by the
/// worker to itself).
#[derive(Debug, Clone, Default)]
pub struct SideSettings {
    /// System-wide settings and the values to write.
    pub system: Vec<(Setting, String)>,
    /// Per-task settings (name, value), applied by each worker to itself.
    pub task: Vec<(String, String)>,
    /// `NAME=VALUE` as given, for the run's record and the side's name.
    pub given: Vec<String>,
}

impl SideSettings {
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
pub fn prepare(sides: &[&[String]], cpus: &[usize]) -> Result<Vec<SideSettings>, SettingError> {
    let mut out = Vec::new();
    for assigns in sides {
        let mut side = SideSettings::default();
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
            // One file, one value: another name or spelling of a file already named.
            for f in &s.files {
                if let Some((other, _)) = side.system.iter().find(|(o, _)| o.files.contains(f)) {
                    return Err(SettingError::SameFile {
                        a: other.name.clone(),
                        b: name,
                        file: f.display().to_string(),
                    });
                }
            }
            match s.scope {
                Scope::Task => settings::check_task_value(&name, &value)?,
                Scope::System => settings::check_value(&s, &value)?,
            }
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

/// Settings changed and the guard that puts them back.
pub struct Guard {
    /// Every system setting any side touches, with its kind.
    touched: Vec<Setting>,
    /// Which side is applied now (`None`: the originals).
    current: Option<usize>,
    sides: Vec<SideSettings>,
    settle: Duration,
    /// Each file's lock and state: its original, as recorded once by the first holder.
    held: Vec<Held>,
    guardian: Option<Guardian>,
}

impl Guard {
    /// Start the guard process, hold every file any side touches (refused when another live
    /// oscost holds one changed) and hand each original to the guard. Nothing is changed yet.
    /// Lines about state files found untrusted go to `said`.
    pub fn start(
        sides: Vec<SideSettings>,
        settle: Duration,
        said: &mut Vec<String>,
    ) -> Result<Guard, SettingError> {
        let mut touched: Vec<Setting> = Vec::new();
        for s in sides.iter().flat_map(|s| &s.system) {
            if !touched.iter().any(|t| t.files == s.0.files) {
                touched.push(s.0.clone());
            }
        }
        let mut guard = Guard {
            touched: touched.clone(),
            current: None,
            sides,
            settle,
            held: Vec::new(),
            guardian: None,
        };
        if touched.is_empty() {
            return Ok(guard);
        }
        let not_now = |name: &str, why: String| SettingError::NotNow {
            name: name.into(),
            why,
        };
        let guardian = Guardian::start()
            .map_err(|e| not_now(&touched[0].name, format!("cannot start its guard: {e}")))?;
        // The guard is the Guard's from here: a refusal below (another oscost holds a file)
        // releases it through `finish`, so it writes nothing and says nothing, since nothing
        // was changed yet.
        guard.guardian = Some(guardian);
        let holder = state::describe_self();
        for s in &touched {
            for f in &s.files {
                let kind = s.kind;
                let read = || std::fs::read_to_string(f).map(|t| settings::value_of(kind, &t));
                let held = state::hold(f, &holder, &read, said).map_err(|e| match e {
                    StateError::Busy { holder, .. } => not_now(
                        &s.name,
                        format!(
                            "another oscost is changing it ({holder}); run this when it has ended"
                        ),
                    ),
                    StateError::Unusable(why) => not_now(&s.name, why),
                })?;
                let change = Alteration::File {
                    file: f.clone(),
                    original: held.record.original.clone(),
                    state: held.path.clone(),
                };
                let kept = match guard.guardian.as_mut() {
                    Some(g) => g.keep(&change, Some(held.lock_file().as_fd())),
                    None => Err(std::io::Error::other("no guard")),
                };
                guard.held.push(held);
                kept.map_err(|e| not_now(&s.name, format!("its guard did not take it: {e}")))?;
            }
        }
        Ok(guard)
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
        for side in &self.sides {
            for (name, value) in &side.task {
                settings::try_task(name, value)?;
            }
        }
        // Values only the kernel can judge first: where one is refused, that refused write is
        // the only one made (values `prepare` judged before writing cannot be refused for
        // their value, so they come after).
        let mut order: Vec<&(Setting, String)> =
            self.sides.iter().flat_map(|side| &side.system).collect();
        order.sort_by_key(|(s, _)| settings::judged_before_writing(s));
        let tried = || {
            for (written, (s, value)) in order.into_iter().enumerate() {
                if let Err(e) = write_and_check(s, value) {
                    let others = match written {
                        0 => "no other value was written".to_string(),
                        n => format!(
                            "the {n} value(s) written before it were put back at once, none kept"
                        ),
                    };
                    return Err(SettingError::Refused {
                        name: s.name.clone(),
                        why: format!("{}; {others}", e.why()),
                    });
                }
            }
            Ok(())
        };
        let result = match &self.guardian {
            Some(g) => g.while_guarded(tried).unwrap_or_else(|| {
                Err(SettingError::NotNow {
                    name: self
                        .touched
                        .first()
                        .map_or_else(String::new, |t| t.name.clone()),
                    why: "its guard process died before the trial".into(),
                })
            }),
            None => tried(),
        };
        self.put_back();
        result
    }

    /// Switch to side `i`: write the files whose value differs, read them back (an error when
    /// the kernel did not keep one), then wait the settle time.
    pub fn apply(&mut self, i: usize) -> Result<(), NotHeld> {
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
                        if let Some(v) = self.original(f) {
                            let one = Setting {
                                files: vec![f.clone()],
                                ..t.clone()
                            };
                            want.push((one, v.to_string()));
                        }
                    }
                }
            }
        }
        let switch = || {
            for (s, v) in &want {
                let now = settings::read(s).map_err(|e| NotHeld::Unreadable {
                    setting: s.name.clone(),
                    why: e.to_string(),
                })?;
                if now.iter().any(|x| x != v) {
                    write_and_check(s, v)?;
                }
            }
            Ok(())
        };
        match &self.guardian {
            // Never a write after the guard died: the watcher put the originals back.
            Some(g) => g.while_guarded(switch).unwrap_or(Err(NotHeld::GuardLost))?,
            None => switch()?,
        }
        self.current = Some(i);
        if !want.is_empty() {
            std::thread::sleep(self.settle);
        }
        Ok(())
    }

    /// The original of `file`, as its held state recorded it.
    fn original(&self, file: &std::path::Path) -> Option<&str> {
        self.held
            .iter()
            .find(|h| h.record.file == file)
            .map(|h| h.record.original.as_str())
    }

    /// Write every original back; the files that would not take theirs, with why.
    fn put_back(&mut self) -> Vec<(PathBuf, String)> {
        let mut failed = Vec::new();
        for (f, v) in self
            .held
            .iter()
            .map(|h| (&h.record.file, &h.record.original))
        {
            let kind = self
                .touched
                .iter()
                .find(|t| t.files.contains(f))
                .map_or(Encoding::Plain, |t| t.kind);
            let now = std::fs::read_to_string(f).map(|t| settings::value_of(kind, &t));
            if now.as_deref().ok() == Some(v.as_str()) {
                continue;
            }
            if let Err(e) = settings::write_file(f, v) {
                failed.push((f.clone(), format!("{e}")));
            }
        }
        self.current = None;
        failed
    }

    /// Put everything back, end the guard, remove the states; what could not be put back.
    pub fn restore(mut self) -> Vec<String> {
        self.finish()
    }

    fn finish(&mut self) -> Vec<String> {
        let failed = self.put_back();
        let mut said = Vec::new();
        for h in self.held.drain(..) {
            match failed.iter().find(|(f, _)| *f == h.record.file) {
                None => h.finish(Ok(())),
                Some((f, why)) => {
                    said.push(format!(
                        "{} could not be put back to {} ({why}); its state is kept in {} and every oscost command tries again",
                        f.display(),
                        h.record.original,
                        h.path.display()
                    ));
                    h.finish(Err(why.clone()));
                }
            }
        }
        if let Some(g) = self.guardian.take() {
            g.release();
        }
        said
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
fn write_and_check(s: &Setting, value: &str) -> Result<(), NotHeld> {
    let setting = s.name.clone();
    for f in &s.files {
        settings::write_file(f, value).map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                NotHeld::Refused {
                    setting: setting.clone(),
                    value: value.to_string(),
                    file: f.display().to_string(),
                }
            } else {
                NotHeld::Unwritable {
                    setting: setting.clone(),
                    file: f.display().to_string(),
                    why: e.to_string(),
                }
            }
        })?;
    }
    let now = settings::read(s).map_err(|e| NotHeld::Unreadable {
        setting: setting.clone(),
        why: e.to_string(),
    })?;
    if let Some(kept) = now.iter().find(|v| *v != value) {
        return Err(NotHeld::NotKept {
            setting,
            value: value.to_string(),
            kept: kept.clone(),
        });
    }
    Ok(())
}

impl NotHeld {
    /// What went wrong, without the setting's name (for a message that names it already).
    pub fn why(&self) -> String {
        match self {
            NotHeld::Unreadable { why, .. } => format!("cannot read it: {why}"),
            NotHeld::Refused { value, file, .. } => {
                format!("the kernel refuses '{value}' ({file})")
            }
            NotHeld::Unwritable { file, why, .. } => format!("cannot write {file}: {why}"),
            NotHeld::NotKept { value, kept, .. } => {
                format!("the kernel did not keep '{value}' (it reads '{kept}')")
            }
            NotHeld::GuardLost => GUARD_LOST.into(),
        }
    }
}

/// Why nothing more is written once the guard died.
const GUARD_LOST: &str =
    "its guard process died: every original was put back, and nothing more is changed";

/// Why a side's kernel setting could not be made to hold: what was measured would not be of
/// that side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotHeld {
    /// Its file could not be read (before or after writing).
    #[error("{setting}: cannot read it: {why}")]
    Unreadable {
        /// The setting's name.
        setting: String,
        /// The error.
        why: String,
    },
    /// The kernel refused the value (EINVAL).
    #[error("{setting}: the kernel refuses '{value}' ({file})")]
    Refused {
        /// The setting's name.
        setting: String,
        /// The value written.
        value: String,
        /// The file.
        file: String,
    },
    /// The file could not be written.
    #[error("{setting}: cannot write {file}: {why}")]
    Unwritable {
        /// The setting's name.
        setting: String,
        /// The file.
        file: String,
        /// The error.
        why: String,
    },
    /// The guard process died: the originals were put back, and nothing more is written.
    #[error("{GUARD_LOST}")]
    GuardLost,
    /// Written, but it reads another value back.
    #[error("{setting}: the kernel did not keep '{value}' (it reads '{kept}')")]
    NotKept {
        /// The setting's name.
        setting: String,
        /// The value written.
        value: String,
        /// What it reads.
        kept: String,
    },
}
