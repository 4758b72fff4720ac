//! tracefs, where the kernel lists its tracepoints: each one's id (what perf_event_open takes)
//! and format (where each field of its record lies on this kernel). Some machines do not
//! mount it; `oscost __tracefs` (`helper_main`, started by `tracefs_text`) enters a mount
//! namespace of its own, uses the tracefs mounted there already (found in mountinfo) or mounts
//! it, prints what oscost needs and exits: a mount it made dies with the namespace, so nothing
//! is left mounted even if it is killed. `syscount.rs` (counting a
//! program's calls) and `trace.rs` (a traced pass) both read it through `Formats`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where tracefs is usually mounted.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Set for `oscost __tracefs`, so that it never starts another.
const HELPER_ENV: &str = "OSCOST_TRACEFS_HELPER";

/// The events `oscost predict` counts.
const COUNTED: &[&str] = &[
    "task/task_newtask",
    "sched/sched_process_exec",
    "raw_syscalls/sys_enter",
];

/// The events `oscost explain` always traces, as tracefs names them (`events/<sys>/<name>`):
/// the scheduler's and the idle CPUs' (the idle one is optional).
pub const SCHED_EVENTS: &[&str] = &[
    "sched/sched_waking",
    "sched/sched_wakeup",
    "sched/sched_switch",
    "power/cpu_idle",
];

/// The system call events, traced only when asked: an enabled system call tracepoint sends
/// every call of every task through the kernel's slow path, about 0.25 us a call here.
pub const SYSCALL_EVENTS: &[&str] = &["raw_syscalls/sys_enter", "raw_syscalls/sys_exit"];

/// The filter a traced event is recorded under. Each recorded event costs the traced thread
/// about 0.3 us on these guests, so the system call events leave out what no stage needs: the
/// idle task's, and the sampler's own calls between batches (getrusage for its preemption
/// probe, a clock read that fell back to a system call).
pub fn filter_of(ev: &str) -> Option<&'static str> {
    ev.starts_with("raw_syscalls/")
        .then_some("common_pid != 0 && id != 98 && id != 228")
}

#[derive(Debug, thiserror::Error)]
/// Why tracing could not be set up or was cut short.
pub enum CountError {
    #[error(
        "this needs the kernel's tracepoints: {0}; run as root (or with CAP_PERFMON and \
         CAP_SYS_ADMIN, kernel.perf_event_paranoid <= 1)"
    )]
    /// This user may not trace.
    NoRights(String),
    #[error("this kernel has no system call tracepoints (CONFIG_FTRACE_SYSCALLS): {0}")]
    /// The kernel lacks the tracepoints.
    NoTracepoints(String),
    #[error("cannot start '{0}': {1}")]
    /// The traced program could not be started.
    Start(String, std::io::Error),
    #[error("{0}")]
    /// Reading or writing tracefs failed.
    Io(String),
    #[error(transparent)]
    /// A signal stopped it.
    Interrupted(#[from] crate::base::stop::Interrupted),
}

/// `field:pid_t next_pid; offset:56; size:4; signed:1;` (tab-separated) -> ("next_pid", 56, 4).
pub fn parse_field_line(line: &str) -> Option<(String, usize, usize)> {
    let line = line.trim();
    let decl = line.strip_prefix("field:")?.split(';').next()?;
    let name = decl.split_whitespace().last()?;
    let name = name.split('[').next()?.to_string();
    let num = |key: &str| -> Option<usize> {
        line.split(';')
            .map(str::trim)
            .find_map(|p| p.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((name, num("offset:")?, num("size:")?))
}

/// The ids of the events oscost uses and the traced ones' field layouts, on this kernel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Formats {
    /// Event name ("sched:sched_switch") to its id.
    pub ids: BTreeMap<String, u64>,
    /// (event, field) -> (offset, size).
    pub fields: BTreeMap<(String, String), (usize, usize)>,
}

impl Formats {
    /// Read `event` and `field` lines of `oscost __tracefs`'s output.
    pub fn parse(text: &str) -> Formats {
        let mut f = Formats::default();
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["event", ev, id] => {
                    if let Ok(id) = id.parse() {
                        f.ids.insert(ev.to_string(), id);
                    }
                }
                ["field", ev, name, off, size] => {
                    if let (Ok(o), Ok(s)) = (off.parse(), size.parse()) {
                        f.fields.insert((ev.to_string(), name.to_string()), (o, s));
                    }
                }
                _ => {}
            }
        }
        f
    }

    /// A character array field in a raw record (a command name), up to its first NUL.
    pub fn text<'a>(&self, event: &str, field: &str, raw: &'a [u8]) -> Option<&'a [u8]> {
        let &(off, size) = self.fields.get(&(event.to_string(), field.to_string()))?;
        let b = raw.get(off..off + size)?;
        Some(b.split(|&c| c == 0).next().unwrap_or(b))
    }

    /// A field's value in a raw record (little-endian, as the kernel wrote it on this host).
    pub fn get(&self, event: &str, field: &str, raw: &[u8]) -> Option<i64> {
        let &(off, size) = self.fields.get(&(event.to_string(), field.to_string()))?;
        let b = raw.get(off..off + size)?;
        Some(match size {
            1 => i64::from(b[0] as i8),
            2 => i64::from(i16::from_ne_bytes([b[0], b[1]])),
            4 => i64::from(i32::from_ne_bytes(b.try_into().ok()?)),
            8 => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// What tracefs says under `root`, as `Formats::parse` reads it: `event SYS/NAME ID` for every
/// event oscost uses, and `field SYS/NAME FIELD OFFSET SIZE` for the traced ones' fields, from
/// each event's format file (they differ between kernels).
pub fn list(root: &Path) -> String {
    let mut out = String::new();
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    let traced = || SCHED_EVENTS.iter().chain(SYSCALL_EVENTS);
    let counted_only = COUNTED.iter().filter(|e| !traced().any(|t| t == *e));
    for event in counted_only.chain(traced()) {
        let dir = root.join("events").join(event);
        if let Some(id) = read(dir.join("id")) {
            out.push_str(&format!("event {event} {}\n", id.trim()));
        }
        for line in read(dir.join("format")).unwrap_or_default().lines() {
            if let Some(f) = parse_field_line(line) {
                out.push_str(&format!("field {event} {} {} {}\n", f.0, f.1, f.2));
            }
        }
    }
    out
}

/// Where tracefs is mounted in this process's mount namespace (from /proc/self/mountinfo),
/// if it is.
pub fn mount_point() -> Option<PathBuf> {
    mounted(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// A mounted tracefs, if any: one in the mount table, else debugfs's `tracing`, which the
/// kernel mounts on first access and so is in no table until then.
fn mounted_tracefs() -> Option<PathBuf> {
    mount_point().or_else(|| {
        TRACEFS
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("events/raw_syscalls").is_dir())
    })
}

/// Mount tracefs in a private mount namespace of this process's own, which must be
/// single-threaded (a mount namespace cannot be entered by one thread of many); the mount
/// dies with the namespace. Returns where it is mounted.
pub fn mount_private() -> Result<PathBuf, String> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    unshare(CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("cannot enter a mount namespace of its own to mount tracefs: {e}"))?;
    // Private, so that nothing mounted here propagates back to the host's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the mount namespace private: {e}"))?;
    // Where the host already mounts it (systemd at boot, perf or bpftrace on first use), the
    // namespace's copy of that mount is used: tracefs is one file system whatever mounts it,
    // and mounting it again on the same path is EBUSY.
    if let Some(root) = mount_point() {
        return Ok(root);
    }
    let target = TRACEFS[0];
    mount(
        Some("tracefs"),
        target,
        Some("tracefs"),
        MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| format!("cannot mount tracefs on {target}: {e}"))?;
    Ok(PathBuf::from(target))
}

/// Where tracefs is mounted, from a `/proc/PID/mountinfo` text: the usual place first, else
/// the first mount of it (a mount point with an escaped character is passed over).
fn mounted(mountinfo: &str) -> Option<PathBuf> {
    let points = crate::measuring::os::mount_points(mountinfo, "tracefs");
    TRACEFS
        .iter()
        .find(|t| points.contains(t))
        .map(|t| PathBuf::from(*t))
        .or_else(|| points.first().map(PathBuf::from))
}

/// Entry point of `oscost __tracefs`: mount tracefs privately, print the ids, exit.
pub fn helper_main() -> i32 {
    match mount_private() {
        Ok(root) => {
            crate::tell_part!("{}", list(&root));
            0
        }
        Err(e) => {
            crate::say!("{e}");
            1
        }
    }
}

/// The command that starts this binary as the helper `word` (`__tracefs`, `__ftrace`), marked
/// so that a binary that is not oscost (a test, an example), started as its own helper, does
/// not start itself again and again.
pub fn helper_command(word: &str) -> Result<Command, CountError> {
    if std::env::var_os(HELPER_ENV).is_some() {
        return Err(CountError::Io(format!(
            "oscost {word} started a program that is not oscost"
        )));
    }
    let exe = std::env::current_exe().map_err(|e| CountError::Io(e.to_string()))?;
    let mut c = Command::new(exe);
    c.arg(word).env(HELPER_ENV, "1");
    Ok(c)
}

/// What tracefs says of the events oscost uses (ids, and the traced events' fields), as
/// `oscost __tracefs` prints it: from a mounted tracefs, or mounted by the helper.
pub fn tracefs_text() -> Result<String, CountError> {
    let text = match mounted_tracefs() {
        Some(root) => list(&root),
        None => {
            let out = helper_command(crate::base::helpers::TRACEFS)?
                .stdin(Stdio::null())
                .output()
                .map_err(|e| CountError::Io(format!("cannot start oscost __tracefs: {e}")))?;
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                return Err(CountError::NoRights(format!(
                    "tracefs is not mounted and could not be mounted ({why})"
                )));
            }
            String::from_utf8_lossy(&out.stdout).to_string()
        }
    };
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_lines_give_names_offsets_and_sizes() {
        assert_eq!(
            parse_field_line("\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;"),
            Some(("next_pid".into(), 56, 4))
        );
        assert_eq!(
            parse_field_line("\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;"),
            Some(("prev_comm".into(), 8, 16))
        );
        assert_eq!(parse_field_line("format:"), None);
    }

    #[test]
    fn a_tracefs_already_mounted_is_found_in_mountinfo() {
        let line = |id: u32, point: &str, fs: &str| {
            format!("{id} 1 0:{id} / {point} rw,nosuid shared:{id} - {fs} {fs} rw\n")
        };
        let host = [
            line(22, "/sys", "sysfs"),
            line(40, "/sys/kernel/debug/tracing", "tracefs"),
            line(41, "/sys/kernel/tracing", "tracefs"),
        ]
        .concat();
        assert_eq!(mounted(&host), Some(PathBuf::from("/sys/kernel/tracing")));
        let elsewhere = [line(22, "/sys", "sysfs"), line(50, "/mnt/t", "tracefs")].concat();
        assert_eq!(mounted(&elsewhere), Some(PathBuf::from("/mnt/t")));
        assert_eq!(mounted(&line(22, "/sys", "sysfs")), None);
    }
}
