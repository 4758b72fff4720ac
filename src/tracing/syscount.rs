//! What a program asks of the kernel: its system calls by name, its new processes, threads
//! and successful execs, over all its processes and threads, counted by the kernel's own
//! tracepoints through perf_event_open (never ptrace or strace: they would need installing
//! and would change what they count).
//!
//! How: one counting event per system call this architecture has (numbers and names from the
//! `syscalls` crate), each on `raw_syscalls:sys_enter` with the filter `id == NR`, and for
//! `task:task_newtask` (all new tasks, and again filtered on CLONE_THREAD) and
//! `sched:sched_process_exec`, opened on the calling thread, disabled, inherited and enabled
//! on exec. One tracepoint with filters, not the `syscalls:sys_enter_NAME` tracepoint of each
//! call: closing an event that is the last user of its tracepoint waits for the kernel to
//! unhook it (35 ms here), and closing 360 of those took 13 s; events sharing one tracepoint
//! wait once. The price is a filter test per event on each system call of the counted run,
//! which is not timed. The program is then started from this same thread: the child inherits every
//! event, the kernel turns them on when the child execs the program, and each descendant's
//! counts join the parent event when it exits. The program's first execve is entered before
//! the events are on, so it is added by hand (`+1`).
//!
//! The tracepoint ids come from tracefs (`tracefs.rs`).

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

use perf_event::events::Tracepoint;
use perf_event::{Builder, Counter};
use syscalls::Sysno;

pub use super::tracefs::CountError;
use super::tracefs::{Formats, tracefs_text};

/// CLONE_THREAD: a new task that is a thread of its creator.
const CLONE_THREAD: u64 = 0x10000;

/// The tracepoint ids counting needs: every system call's entry, and the task events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TracepointIds {
    /// `raw_syscalls:sys_enter`.
    pub sys_enter: Option<u64>,
    /// `task:task_newtask`.
    pub newtask: Option<u64>,
    /// `sched:sched_process_exec`.
    pub exec: Option<u64>,
}

impl TracepointIds {
    /// The counting events' ids among what tracefs listed.
    pub fn of(formats: &Formats) -> TracepointIds {
        let id = |ev: &str| formats.ids.get(ev).copied();
        TracepointIds {
            sys_enter: id("raw_syscalls/sys_enter"),
            newtask: id("task/task_newtask"),
            exec: id("sched/sched_process_exec"),
        }
    }

    /// Parse `oscost __tracefs`'s output.
    pub fn parse(text: &str) -> TracepointIds {
        TracepointIds::of(&Formats::parse(text))
    }
}

/// The tracepoint ids: from a mounted tracefs, or from `oscost __tracefs`.
pub fn tracepoint_ids() -> Result<TracepointIds, CountError> {
    let text = tracefs_text()?;
    let ids = TracepointIds::parse(&text);
    // SAFETY: geteuid cannot fail.
    if ids.sys_enter.is_none() && unsafe { libc::geteuid() } != 0 {
        return Err(CountError::NoRights(
            "the tracepoint ids in tracefs cannot be read by this user".into(),
        ));
    }
    if ids.sys_enter.is_none() {
        return Err(CountError::NoTracepoints(
            "tracefs has no events/raw_syscalls/sys_enter".into(),
        ));
    }
    Ok(ids)
}

/// What one run of a program did, over all its processes and threads.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProgramCounts {
    /// System call entries by name (the first execve included).
    pub syscalls: BTreeMap<String, u64>,
    /// New processes (tasks that are not threads of their creator).
    pub processes: u64,
    /// New threads.
    pub threads: u64,
    /// Successful execs (the first one included).
    pub execs: u64,
    /// The program's exit status (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// What could not be counted, and why.
    pub uncounted: Vec<String>,
}

impl ProgramCounts {
    /// Every system call the program made.
    pub fn total_syscalls(&self) -> u64 {
        self.syscalls.values().sum()
    }
}

fn open(id: u64, filter: Option<&str>) -> std::io::Result<Counter> {
    let mut b = Builder::new(Tracepoint::with_id(id));
    b.observe_self()
        .any_cpu()
        .inherit(true)
        .enabled(false)
        .enable_on_exec(true)
        // The task events fire in kernel context; perf-event2 excludes the kernel by default
        // (system call entries carry the user's registers, so they counted either way).
        .exclude_kernel(false)
        .exclude_hv(false);
    let c = b.build()?;
    if let Some(f) = filter {
        set_filter(&c, f)?;
    }
    Ok(c)
}

/// Attach a tracepoint filter (ftrace's syntax) to an event: the kernel then drops what does
/// not match before writing anything.
pub fn set_filter(c: &Counter, f: &str) -> std::io::Result<()> {
    {
        let text = std::ffi::CString::new(f).map_err(std::io::Error::other)?;
        // SAFETY: PERF_EVENT_IOC_SET_FILTER takes a NUL-terminated string that outlives the
        // call; the descriptor is the counter's own.
        let rc = unsafe {
            libc::ioctl(
                c.as_raw_fd(),
                nix::request_code_write!(b'$', 6, std::mem::size_of::<*mut libc::c_char>()),
                text.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Run `argv` once, plainly (stdin, stdout and stderr on /dev/null), and count what it does.
/// Must be called from the thread that will not start anything else meanwhile: the events
/// are inherited by children of this thread only.
pub fn count(
    argv: &[String],
    cpu: Option<usize>,
    ids: &TracepointIds,
    stop: &crate::base::stop::Stop,
) -> Result<ProgramCounts, CountError> {
    let Some(sys_enter) = ids.sys_enter else {
        return Err(CountError::NoTracepoints(
            "no raw_syscalls:sys_enter".into(),
        ));
    };
    let (counters, mut uncounted) = open_syscalls(sys_enter)?;
    let task = |id: Option<u64>, filter: Option<&str>, what: &str, un: &mut Vec<String>| match id
        .map(|i| open(i, filter))
    {
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            un.push(format!("{what}: {e}"));
            None
        }
        None => {
            un.push(format!("{what}: no tracepoint on this kernel"));
            None
        }
    };
    let mut tasks = task(ids.newtask, None, "new tasks", &mut uncounted);
    let thread_filter = format!("clone_flags & {CLONE_THREAD}");
    let mut threads = task(
        ids.newtask,
        Some(&thread_filter),
        "new threads",
        &mut uncounted,
    );
    let mut execs = task(ids.exec, None, "execs", &mut uncounted);

    let status = run_watched(argv, cpu, stop)?;

    let read = |c: &mut Counter| c.read().map_err(|e| CountError::Io(e.to_string()));
    let mut counts = ProgramCounts {
        exit_code: status.code(),
        ..Default::default()
    };
    for (name, mut c) in counters {
        let n = read(&mut c)?;
        if n > 0 {
            counts.syscalls.insert(name, n);
        }
    }
    // The first execve was entered before the events were on.
    *counts.syscalls.entry("execve".into()).or_default() += 1;
    let all = tasks.as_mut().map(read).transpose()?.unwrap_or(0);
    counts.threads = threads.as_mut().map(read).transpose()?.unwrap_or(0);
    counts.processes = all.saturating_sub(counts.threads);
    counts.execs = execs.as_mut().map(read).transpose()?.unwrap_or(0);
    counts.uncounted = uncounted;
    Ok(counts)
}

/// Run `argv` plainly (stdin, stdout and stderr on /dev/null), on `cpu` if given, in a process
/// group that dies with oscost however oscost ends; once it exits, what it left in its group
/// (a background job) is killed too. A signal recorded in `stop` kills the group at once.
fn run_watched(
    argv: &[String],
    cpu: Option<usize>,
    stop: &crate::base::stop::Stop,
) -> Result<std::process::ExitStatus, CountError> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(c) = cpu {
        crate::measuring::placement::pin_on_exec(&mut cmd, c);
    }
    crate::measuring::group_guard::own_group_dying_with_us(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| CountError::Start(argv[0].clone(), e))?;
    let guard = crate::measuring::group_guard::GroupGuard::watch(child.id() as i32)
        .map_err(|e| CountError::Io(e.to_string()))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(CountError::Io(e.to_string())),
        }
        if let Err(i) = stop.check() {
            // Dropping the guard kills the group; the leader is reaped here.
            drop(guard);
            let _ = child.wait();
            return Err(i.into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    // SAFETY: kill on the process group this function started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    guard.release();
    Ok(status)
}

/// One event per system call number on `raw_syscalls:sys_enter`, and what could not be opened.
#[allow(clippy::type_complexity)]
fn open_syscalls(sys_enter: u64) -> Result<(Vec<(String, Counter)>, Vec<String>), CountError> {
    raise_nofile(Sysno::count() as u64 + 64);
    let mut counters = Vec::with_capacity(Sysno::count());
    let mut uncounted = Vec::new();
    for call in Sysno::iter() {
        let filter = format!("id == {}", call.id());
        match open(sys_enter, Some(&filter)) {
            Ok(c) => counters.push((call.name().to_string(), c)),
            Err(e) if counters.is_empty() => {
                return Err(CountError::NoRights(format!(
                    "perf_event_open of raw_syscalls:sys_enter: {e}"
                )));
            }
            Err(e) => uncounted.push(format!("system call {}: {e}", call.name())),
        }
    }
    Ok((counters, uncounted))
}

/// One descriptor per tracepoint: lift the soft limit on open files to the hard one if needed.
fn raise_nofile(want: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < want
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, want.min(hard), hard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracefs_listing_is_parsed_into_ids() {
        let ids = TracepointIds::parse(
            "event task/task_newtask 301\nevent sched/sched_process_exec 290\n\
             event raw_syscalls/sys_enter 21\ngarbage\nevent raw_syscalls/sys_exit x\n",
        );
        assert_eq!(ids.newtask, Some(301));
        assert_eq!(ids.exec, Some(290));
        assert_eq!(ids.sys_enter, Some(21));
    }
}
