//! Kernel settings that can be changed on a running kernel, as a catalogue like the
//! benchmarks': each entry's name, where it lives, what it means, whether it is system-wide or
//! per task, and which benchmarks it is expected to move. This module resolves a name (or an
//! absolute path under `/proc/sys`, `/sys` or debugfs, a glob naming per-CPU files) to the
//! files behind it, reads and writes their values, and applies the per-task speculation
//! controls to the calling thread with `prctl`. Keeping what it changes put back is
//! `settings_guard.rs`'s job (the effects layer).

use std::path::{Path, PathBuf};

mod task;
use task::{
    PR_SPEC_INDIRECT_BRANCH, PR_SPEC_L1D_FLUSH, PR_SPEC_PRCTL, PR_SPEC_STORE_BYPASS,
    read_speculation, speculation_word,
};
pub use task::{apply_to_self, check_task_value, try_task};

/// How a setting's value reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The file holds the value (a number, a word).
    Plain,
    /// The file lists the choices with the current one in brackets (`always [madvise] never`);
    /// a write names one choice.
    Bracketed,
    /// A per-task speculation control (`PR_SET_SPECULATION_CTRL`, which control), applied by
    /// the worker to itself: nothing system-wide changes.
    Speculation(i32),
}

/// System-wide, or for the measuring task only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One value for the whole machine.
    System,
    /// Applied by the worker to itself (prctl).
    Task,
}

impl Scope {
    /// The scope as `oscost settings` prints it.
    pub fn word(self) -> &'static str {
        match self {
            Scope::System => "system",
            Scope::Task => "per task",
        }
    }
}

/// One catalogue entry. `path` may hold `{cpu}` (one file per CPU oscost uses) or `{arg}`
/// (the part of the name after the first `.`: `mthp.2048kB`, `idle-state.1`).
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The setting's name, as `--set` takes it.
    pub name: &'static str,
    /// Its file, with `{cpu}` or `{arg}` where it has one per CPU or per argument.
    pub path: &'static str,
    /// What it changes, in a sentence.
    pub meaning: &'static str,
    /// What values it takes.
    pub kind: Encoding,
    /// System-wide or per task.
    pub scope: Scope,
    /// Benchmark ids or prefixes it is expected to move.
    pub moves: &'static [&'static str],
    /// The values the kernel takes, as far as oscost can tell without writing: checked for
    /// every side before anything is written (`check_value`).
    pub values: Values,
    /// Whether changing it can move anything on this machine, where a file that exists does
    /// not say so (halt-poll-ns's module loaded while another cpuidle driver is in use): why
    /// not, said by `oscost settings` and refusing `--set` as a skipped benchmark says why.
    pub in_effect: Option<fn() -> Result<(), String>>,
}

/// halt-poll-ns polls only where the cpuidle driver in use is haltpoll's.
fn haltpoll_in_use() -> Result<(), String> {
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .map(|d| d.trim().to_string())
        .unwrap_or_else(|_| "none".into());
    if driver == "haltpoll" {
        Ok(())
    } else {
        Err(format!(
            "the cpuidle driver in use here is '{driver}', not haltpoll: its poll time moves nothing on this machine"
        ))
    }
}

/// What values a setting takes, known before any write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// Only the kernel can tell (a trial write under the guard does).
    Any,
    /// One of these words.
    Words(&'static [&'static str]),
    /// A decimal number of 0 or more.
    Unsigned,
    /// One of the choices the file itself lists (`always [madvise] never`).
    Listed,
}

/// The catalogue.
pub const CATALOGUE: &[Entry] = &[
    Entry {
        name: "thp",
        path: "/sys/kernel/mm/transparent_hugepage/enabled",
        meaning: "transparent huge pages: always, madvise (only where asked), never",
        kind: Encoding::Bracketed,
        scope: Scope::System,
        moves: &["mem/"],
        values: Values::Listed,
        in_effect: None,
    },
    Entry {
        name: "thp-defrag",
        path: "/sys/kernel/mm/transparent_hugepage/defrag",
        meaning: "whether a fault that wants a huge page compacts memory to get one",
        kind: Encoding::Bracketed,
        scope: Scope::System,
        moves: &["mem/fault-thp", "mem/mmap/"],
        values: Values::Listed,
        in_effect: None,
    },
    Entry {
        name: "mthp.{arg}",
        path: "/sys/kernel/mm/transparent_hugepage/hugepages-{arg}/enabled",
        meaning: "multi-size THP: whether faults map folios of this size (e.g. mthp.64kB)",
        kind: Encoding::Bracketed,
        scope: Scope::System,
        moves: &["mem/"],
        values: Values::Listed,
        in_effect: None,
    },
    Entry {
        name: "halt-poll-ns",
        path: "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
        meaning: "how long an idle vCPU of a haltpoll guest polls before it halts (ns)",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["switch/", "ipc/", "wake/"],
        values: Values::Unsigned,
        in_effect: Some(haltpoll_in_use),
    },
    Entry {
        name: "idle-state.{arg}",
        path: "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{arg}/disable",
        meaning: "idle state N disabled (1) or allowed (0) on every CPU oscost uses",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["switch/", "ipc/", "wake/"],
        values: Values::Words(&["0", "1"]),
        in_effect: None,
    },
    Entry {
        name: "smt",
        path: "/sys/devices/system/cpu/smt/control",
        meaning: "simultaneous multithreading: on, off, forceoff",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["switch/", "syscall/"],
        values: Values::Words(&["on", "off", "forceoff"]),
        in_effect: None,
    },
    Entry {
        name: "autogroup",
        path: "/proc/sys/kernel/sched_autogroup_enabled",
        meaning: "the scheduler groups tasks by session (1) or not (0)",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["switch/"],
        values: Values::Words(&["0", "1"]),
        in_effect: None,
    },
    Entry {
        name: "numa-balancing",
        path: "/proc/sys/kernel/numa_balancing",
        meaning: "automatic NUMA balancing (hinting faults) on (1) or off (0)",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["mem/"],
        values: Values::Words(&["0", "1", "2", "3"]),
        in_effect: None,
    },
    Entry {
        name: "aslr",
        path: "/proc/sys/kernel/randomize_va_space",
        meaning: "address-space layout randomisation: 0 off, 1 stack and libraries, 2 also brk",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["spawn/"],
        values: Values::Words(&["0", "1", "2"]),
        in_effect: None,
    },
    Entry {
        name: "preempt",
        path: "/sys/kernel/debug/sched/preempt",
        meaning: "a PREEMPT_DYNAMIC kernel's preemption model: none, voluntary, full, lazy (debugfs)",
        kind: Encoding::Bracketed,
        scope: Scope::System,
        moves: &["switch/", "syscall/"],
        values: Values::Listed,
        in_effect: None,
    },
    Entry {
        name: "fault-around",
        path: "/sys/kernel/debug/fault_around_bytes",
        meaning: "how many bytes of a file mapping a read fault maps at once (debugfs)",
        kind: Encoding::Plain,
        scope: Scope::System,
        moves: &["mem/"],
        values: Values::Unsigned,
        in_effect: None,
    },
    Entry {
        name: "spec-store-bypass",
        path: "prctl PR_SPEC_STORE_BYPASS",
        meaning: "the worker's speculative store bypass mitigation: enable, disable, force-disable",
        kind: Encoding::Speculation(PR_SPEC_STORE_BYPASS),
        scope: Scope::Task,
        moves: &["syscall/", "call/"],
        values: Values::Words(&["enable", "disable", "force-disable"]),
        in_effect: None,
    },
    Entry {
        name: "indirect-branch",
        path: "prctl PR_SPEC_INDIRECT_BRANCH",
        meaning: "the worker's indirect branch speculation: enable, disable, force-disable",
        kind: Encoding::Speculation(PR_SPEC_INDIRECT_BRANCH),
        scope: Scope::Task,
        moves: &["switch/", "call/"],
        values: Values::Words(&["enable", "disable", "force-disable"]),
        in_effect: None,
    },
    Entry {
        name: "l1d-flush",
        path: "prctl PR_SPEC_L1D_FLUSH",
        meaning: "flush the L1 data cache when the worker is switched out: enable, disable",
        kind: Encoding::Speculation(PR_SPEC_L1D_FLUSH),
        scope: Scope::Task,
        moves: &["switch/"],
        values: Values::Words(&["enable", "disable"]),
        in_effect: None,
    },
];

/// The trees a setting may live in; nothing outside them is ever written.
pub const ALLOWED_TREES: &[&str] = &["/proc/sys", "/sys"];

/// Why a setting cannot be used; each is the user's to fix (exit 2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingError {
    #[error(
        "'{0}' is not a setting oscost knows (`oscost settings` lists them), nor a path under /proc/sys or /sys"
    )]
    /// A name neither in the catalogue nor a path.
    Unknown(String),
    #[error("{0} is outside /proc/sys, /sys and debugfs; oscost writes nothing else")]
    /// A path outside what oscost writes.
    Outside(String),
    #[error("{name}: no such file on this kernel ({path})")]
    /// The setting's file does not exist on this kernel.
    Missing {
        /// The setting.
        name: String,
        /// Its file.
        path: String,
    },
    #[error("'{0}' is not NAME=VALUE (e.g. thp=never)")]
    /// Not NAME=VALUE.
    Malformed(String),
    #[error("{name} is given twice on one side, as {a} and as {b}; give it once")]
    /// The same setting twice on one side.
    Twice {
        /// The setting.
        name: String,
        /// Its first value.
        a: String,
        /// Its second value.
        b: String,
    },
    #[error("{a} and {b} name one file ({file}) on one side; give it once")]
    /// Two names or spellings of one file on one side.
    SameFile {
        /// The first name.
        a: String,
        /// The second.
        b: String,
        /// The file both name.
        file: String,
    },
    #[error("{name}: {why}")]
    /// It cannot be changed now: another oscost holds it changed, or the state that guards it
    /// cannot be kept.
    NotNow {
        /// The setting.
        name: String,
        /// Why, in words.
        why: String,
    },
    #[error("{name}: {why}")]
    /// The value is not one the setting takes, or the file refused it.
    Refused {
        /// The setting.
        name: String,
        /// Why, in words.
        why: String,
    },
}

/// A setting resolved to its files on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// As the user named it (`thp`, `mthp.64kB`, `/proc/sys/vm/swappiness`).
    pub name: String,
    /// What values it takes.
    pub kind: Encoding,
    /// System-wide or per task.
    pub scope: Scope,
    /// The files (none for a per-task setting).
    pub files: Vec<PathBuf>,
}

/// The catalogue entry `name` is an instance of, and its argument (`mthp.64kB` -> "64kB").
pub fn entry(name: &str) -> Option<(&'static Entry, String)> {
    CATALOGUE
        .iter()
        .find_map(|e| match e.name.strip_suffix("{arg}") {
            Some(prefix) => name
                .strip_prefix(prefix)
                .filter(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric()))
                .map(|a| (e, a.to_string())),
            None => (e.name == name).then(|| (e, String::new())),
        })
}

/// Whether `p`, resolved, lies in a tree a setting may live in.
fn allowed(p: &Path) -> bool {
    let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    ALLOWED_TREES.iter().any(|t| real.starts_with(t)) && !real.as_os_str().is_empty()
}

/// Resolve `name` to its files: a catalogue name (per-CPU entries on `cpus`), or an absolute
/// path (a glob may name several files) under `/proc/sys` or `/sys` (debugfs included).
pub fn resolve(name: &str, cpus: &[usize]) -> Result<Setting, SettingError> {
    if name.starts_with('/') {
        if name.split('/').any(|c| c == "..") {
            return Err(SettingError::Outside(name.into()));
        }
        let files: Vec<PathBuf> = glob::glob(name)
            .map_err(|_| SettingError::Unknown(name.into()))?
            .filter_map(Result::ok)
            .collect();
        if files.is_empty() {
            if !ALLOWED_TREES.iter().any(|t| Path::new(name).starts_with(t)) {
                return Err(SettingError::Outside(name.into()));
            }
            return Err(SettingError::Missing {
                name: name.into(),
                path: name.into(),
            });
        }
        if let Some(f) = files.iter().find(|f| !allowed(f)) {
            return Err(SettingError::Outside(f.display().to_string()));
        }
        let files = resolved(files);
        let bracketed = files
            .first()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .is_some_and(|t| selected(&t).is_some());
        return Ok(Setting {
            name: name.into(),
            kind: if bracketed {
                Encoding::Bracketed
            } else {
                Encoding::Plain
            },
            scope: Scope::System,
            files,
        });
    }
    let (e, arg) = entry(name).ok_or_else(|| SettingError::Unknown(name.into()))?;
    if e.scope == Scope::Task {
        return Ok(Setting {
            name: name.into(),
            kind: e.kind,
            scope: e.scope,
            files: vec![],
        });
    }
    let path = e.path.replace("{arg}", &arg);
    let files: Vec<PathBuf> = if path.contains("{cpu}") {
        cpus.iter()
            .map(|c| PathBuf::from(path.replace("{cpu}", &c.to_string())))
            .collect()
    } else {
        vec![PathBuf::from(&path)]
    };
    if let Some(f) = files.iter().find(|f| !f.exists()) {
        let debugfs = Path::new("/sys/kernel/debug");
        let mounted = std::fs::read_dir(debugfs).is_ok_and(|mut d| d.next().is_some());
        if f.starts_with(debugfs) && !mounted {
            return Err(SettingError::Refused {
                name: name.into(),
                why: "debugfs is not mounted (or not readable) at /sys/kernel/debug: mount -t debugfs none /sys/kernel/debug".into(),
            });
        }
        return Err(SettingError::Missing {
            name: name.into(),
            path: f.display().to_string(),
        });
    }
    Ok(Setting {
        name: name.into(),
        kind: e.kind,
        scope: e.scope,
        files: resolved(files),
    })
}

/// Each file by its resolved path (no `./`, `//` or link), so that two spellings of one file
/// are seen to be one, and the file that is locked and recorded is the one written.
fn resolved(files: Vec<PathBuf>) -> Vec<PathBuf> {
    files
        .into_iter()
        .map(|f| std::fs::canonicalize(&f).unwrap_or(f))
        .collect()
}

/// The selected choice of a bracketed list (`always [madvise] never` -> madvise).
pub fn selected(text: &str) -> Option<&str> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(&text[start..end])
}

/// Whether `value` is one `s` takes, as far as can be told without writing: the catalogue's
/// words and numbers, a choice list's choices. `Ok` where only the kernel can tell.
pub fn check_value(s: &Setting, value: &str) -> Result<(), SettingError> {
    let refused = |why: String| SettingError::Refused {
        name: s.name.clone(),
        why,
    };
    let values = match entry(&s.name) {
        Some((e, _)) => e.values,
        None if s.kind == Encoding::Bracketed => Values::Listed,
        None => Values::Any,
    };
    match values {
        Values::Any => Ok(()),
        Values::Words(words) if words.contains(&value) => Ok(()),
        Values::Words(words) => Err(refused(format!(
            "'{value}' is not one of {}; nothing was written",
            words.join(", ")
        ))),
        Values::Unsigned if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(())
        }
        Values::Unsigned => Err(refused(format!(
            "'{value}' is not a number of 0 or more; nothing was written"
        ))),
        Values::Listed => {
            for f in &s.files {
                let Ok(text) = std::fs::read_to_string(f) else {
                    continue;
                };
                let choices: Vec<&str> = text
                    .split_whitespace()
                    .map(|w| w.trim_start_matches('[').trim_end_matches(']'))
                    .collect();
                if !choices.contains(&value) {
                    return Err(refused(format!(
                        "'{value}' is not one of {} ({}); nothing was written",
                        choices.join(", "),
                        f.display()
                    )));
                }
            }
            Ok(())
        }
    }
}

/// Whether a value of `s` is judged before any write (`check_value`), not only by the kernel.
pub fn judged_before_writing(s: &Setting) -> bool {
    entry(&s.name).is_some_and(|(e, _)| e.values != Values::Any) || s.kind == Encoding::Bracketed
}

/// A file's value as a setting holds it.
pub fn value_of(kind: Encoding, text: &str) -> String {
    match kind {
        Encoding::Bracketed => selected(text).unwrap_or(text.trim()).to_string(),
        _ => text.trim().to_string(),
    }
}

/// Each file's value now (a per-task setting reads the calling thread's control).
pub fn read(s: &Setting) -> std::io::Result<Vec<String>> {
    if let Encoding::Speculation(which) = s.kind {
        return Ok(vec![speculation_word(read_speculation(which)?).into()]);
    }
    s.files
        .iter()
        .map(|f| std::fs::read_to_string(f).map(|t| value_of(s.kind, &t)))
        .collect()
}

/// The value as one word: the files' common value, or `mixed (a, b)` when they differ.
pub fn shown(values: &[String]) -> String {
    match values {
        [] => "-".into(),
        [first, rest @ ..] if rest.iter().all(|v| v == first) => first.clone(),
        v => {
            let mut distinct: Vec<&String> = Vec::new();
            for x in v {
                if !distinct.contains(&x) {
                    distinct.push(x);
                }
            }
            let d: Vec<&str> = distinct.iter().map(|s| s.as_str()).collect();
            format!("mixed ({})", d.join(", "))
        }
    }
}

/// Write `value` to one file (opened for writing, never created or truncated away: these are
/// kernel files).
pub fn write_file(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(value.as_bytes())
}

/// Every catalogue setting this machine has, by name: entries with an argument expanded to
/// what exists (`idle-state.0`, `idle-state.1`, `mthp.64kB`, ...).
pub fn instances() -> Vec<String> {
    let mut out = Vec::new();
    for e in CATALOGUE {
        match e.name.strip_suffix("{arg}") {
            None => out.push(e.name.to_string()),
            Some(prefix) => {
                let (dir, strip) = if prefix == "idle-state." {
                    ("/sys/devices/system/cpu/cpu0/cpuidle", "state")
                } else {
                    ("/sys/kernel/mm/transparent_hugepage", "hugepages-")
                };
                let mut args: Vec<String> = std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|d| {
                        d.file_name()
                            .to_str()?
                            .strip_prefix(strip)
                            .map(String::from)
                    })
                    .collect();
                args.sort_by_key(|a| (a.len(), a.clone()));
                out.extend(args.into_iter().map(|a| format!("{prefix}{a}")));
            }
        }
    }
    out
}

/// Every catalogue setting readable here and its value now (the calling task's for per-task
/// ones); per-CPU ones over `cpus`.
pub fn snapshot(cpus: &[usize]) -> std::collections::BTreeMap<String, String> {
    instances()
        .into_iter()
        .filter_map(|n| {
            let s = resolve(&n, cpus).ok()?;
            let v = read(&s).ok()?;
            Some((n, shown(&v)))
        })
        .collect()
}

/// Parse `NAME=VALUE`.
pub fn parse_assignment(text: &str) -> Result<(String, String), SettingError> {
    let (n, v) = text
        .split_once('=')
        .filter(|(n, v)| !n.trim().is_empty() && !v.trim().is_empty())
        .ok_or_else(|| SettingError::Malformed(text.into()))?;
    Ok((n.trim().to_string(), v.trim().to_string()))
}

/// Whether this setting could be changed here, and if not why (for `oscost settings`).
pub fn changeable(s: &Setting) -> Result<(), String> {
    if s.scope == Scope::Task {
        if let Encoding::Speculation(which) = s.kind {
            let state = read_speculation(which).map_err(|e| e.to_string())?;
            if state & PR_SPEC_PRCTL == 0 {
                return Err("this CPU or kernel does not let a task control it".into());
            }
        }
        return Ok(());
    }
    if let Some((e, _)) = entry(&s.name)
        && let Some(in_effect) = e.in_effect
    {
        in_effect()?;
    }
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    // A control file that says the machine has no such control (SMT on a guest without it).
    if let Ok(v) = read(s)
        && v.iter()
            .any(|x| x == "notsupported" || x == "notimplemented")
    {
        return Err(
            "this machine does not support changing it (the kernel reads 'notsupported')".into(),
        );
    }
    for f in &s.files {
        nix::unistd::access(f.as_path(), nix::unistd::AccessFlags::W_OK)
            .map_err(|e| format!("{} is read-only here ({e})", f.display()))?;
        let mode = std::fs::metadata(f).map_err(|e| e.to_string())?;
        use std::os::unix::fs::PermissionsExt;
        if mode.permissions().mode() & 0o222 == 0 {
            return Err(format!("{} is read-only", f.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
