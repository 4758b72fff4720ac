//! Timing a whole program, plainly and under a wrapper, in rounds that alternate the two
//! (hyperfine's habits: a warm-up of each, then rounds, the order swapped every round so that
//! neither side always runs on a cache the other warmed).
//!
//! One timing: the wall time from just before the program is started until its process has
//! ended (a pidfd becomes readable: no polling delay), and the CPU time (user + system) of it
//! and every descendant it waited for (`wait4`'s rusage). The program runs in a process group
//! of its own with stdin, stdout and stderr on /dev/null; when it ends, or on an interrupt,
//! whatever is left of the group and any orphan reparented to us (we are a subreaper) is
//! killed and reaped, so nothing it started outlives a round.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use std::time::Instant;

use nix::unistd::Pid;

use crate::base::stop::{Interrupted, Stop};
use crate::measuring::group_guard::GroupGuard;
use crate::processes::worker::reap_group;

/// One timed execution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Wall-clock time from start to exit, ns.
    pub wall_ns: f64,
    /// CPU time it and its children used, ns.
    pub cpu_ns: f64,
    /// Exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

impl Timing {
    /// Whether it exited with status 0.
    pub fn succeeded(&self) -> bool {
        self.code == Some(0)
    }

    /// "exited with status 3" / "was killed by signal 9".
    pub fn ending(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exited with status {c}"),
            (None, Some(s)) => format!("was killed by signal {s}"),
            _ => "ended abnormally".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
/// Why a program could not be timed.
pub enum ProgramError {
    #[error("cannot start '{0}': {1}")]
    /// It could not be started.
    Start(String, std::io::Error),
    #[error("waiting for '{0}': {1}")]
    /// Waiting for it failed.
    Wait(String, std::io::Error),
    #[error(transparent)]
    /// A signal came; the program was killed.
    Interrupted(#[from] Interrupted),
}

fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just returned to us and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A command that starts `argv` with stdio on /dev/null in a process group of its own whose
/// leader dies with us, on `cpu` if given (the wrapper and the program it starts inherit it).
pub fn command(argv: &[String], cpu: Option<usize>) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    crate::measuring::group_guard::own_group_dying_with_us(&mut cmd);
    if let Some(c) = cpu {
        crate::measuring::placement::pin_on_exec(&mut cmd, c);
    }
    cmd
}

/// Run `argv` once (on `cpu`, if given) and time it. An interrupt kills its group and returns
/// `Interrupted`.
pub fn time_once(argv: &[String], cpu: Option<usize>, stop: &Stop) -> Result<Timing, ProgramError> {
    use std::os::fd::AsFd;
    let name = argv[0].clone();
    let start = Instant::now();
    let child = command(argv, cpu)
        .spawn()
        .map_err(|e| ProgramError::Start(name.clone(), e))?;
    let pid = child.id() as i32;
    let pgid = Pid::from_raw(pid);
    // The whole group dies with oscost, SIGKILL included (`measuring::group_guard`).
    let guard = GroupGuard::watch(pid).map_err(|e| ProgramError::Wait(name.clone(), e))?;
    let pidfd = pidfd_open(pid).map_err(|e| ProgramError::Wait(name.clone(), e))?;
    let wall = loop {
        let mut fds = [nix::poll::PollFd::new(
            pidfd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16)) {
            Ok(n) if n > 0 => break start.elapsed(),
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                reap_group(pgid);
                return Err(ProgramError::Wait(name, e.into()));
            }
        }
        if let Err(i) = stop.check() {
            reap_group(pgid);
            return Err(i.into());
        }
    };
    let mut status = 0;
    // SAFETY: rusage is plain data the kernel fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid with valid pointers to locals.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let err = (rc < 0).then(std::io::Error::last_os_error);
    // What the program left behind (a background job, a daemon) dies with its round.
    reap_group(pgid);
    guard.release();
    if let Some(e) = err {
        return Err(ProgramError::Wait(name, e));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    Ok(Timing {
        wall_ns: wall.as_nanos() as f64,
        cpu_ns: tv(usage.ru_utime) + tv(usage.ru_stime),
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
    })
}

/// The two sides' timings, round by round (`plain[i]` and `wrapped[i]` are round i).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timings {
    /// The plain program's timings.
    pub plain: Vec<Timing>,
    /// The wrapped program's timings.
    pub wrapped: Vec<Timing>,
}

/// Something that times one execution of a command line (a fake in tests).
pub trait Timer {
    /// Run `argv` once to its end and time it.
    fn time(&mut self, argv: &[String]) -> Result<Timing, ProgramError>;
}

/// The real timer: `time_once` on a CPU, asking `stop` while it waits.
pub struct ProcessTimer<'a> {
    /// The CPU to run it on.
    pub cpu: Option<usize>,
    /// A signal recorded here kills the program.
    pub stop: &'a Stop,
}

impl Timer for ProcessTimer<'_> {
    fn time(&mut self, argv: &[String]) -> Result<Timing, ProgramError> {
        time_once(argv, self.cpu, self.stop)
    }
}

/// Why the rounds stopped early: one side failed where the other did not.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundsEnd {
    /// Every round ran.
    Done,
    /// The plain program failed (its ending).
    PlainFailed(String),
    /// The program failed under the wrapper but not without it.
    WrappedFailed(String),
}

/// A warm-up of each side, then rounds alternating the order (plain first in even rounds),
/// until `min` rounds are done and `enough` says so, or `max` rounds. A side that fails (a
/// non-zero exit the other side did not have) ends the rounds.
pub fn alternate(
    timer: &mut dyn Timer,
    plain: &[String],
    wrapped: &[String],
    min: usize,
    max: usize,
    enough: &dyn Fn(&Timings) -> bool,
) -> Result<(Timings, RoundsEnd), ProgramError> {
    let mut r = Timings::default();
    let p = timer.time(plain)?;
    if !p.succeeded() {
        return Ok((r, RoundsEnd::PlainFailed(p.ending())));
    }
    let w = timer.time(wrapped)?;
    if !w.succeeded() {
        return Ok((r, RoundsEnd::WrappedFailed(w.ending())));
    }
    for i in 0..max {
        let (p, w) = if i % 2 == 0 {
            let p = timer.time(plain)?;
            (p, timer.time(wrapped)?)
        } else {
            let w = timer.time(wrapped)?;
            (timer.time(plain)?, w)
        };
        if !p.succeeded() {
            return Ok((r, RoundsEnd::PlainFailed(p.ending())));
        }
        if !w.succeeded() {
            return Ok((r, RoundsEnd::WrappedFailed(w.ending())));
        }
        r.plain.push(p);
        r.wrapped.push(w);
        if r.plain.len() >= min && enough(&r) {
            break;
        }
    }
    Ok((r, RoundsEnd::Done))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain takes 100 ns, wrapped 130 ns; a command line whose first word is "fail" exits 1.
    struct Fake {
        calls: Vec<String>,
        wrapped_fails_at: Option<usize>,
    }

    impl Timer for Fake {
        fn time(&mut self, argv: &[String]) -> Result<Timing, ProgramError> {
            self.calls.push(argv[0].clone());
            let wrapped = argv[0] == "wrap";
            let n = self.calls.iter().filter(|c| *c == "wrap").count();
            let code = if wrapped && self.wrapped_fails_at == Some(n) {
                1
            } else {
                0
            };
            Ok(Timing {
                wall_ns: if wrapped { 130.0 } else { 100.0 },
                cpu_ns: 0.0,
                code: Some(code),
                signal: None,
            })
        }
    }

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn rounds_warm_up_then_alternate_their_order() {
        let mut f = Fake {
            calls: vec![],
            wrapped_fails_at: None,
        };
        let (r, end) = alternate(&mut f, &argv("prog x"), &argv("wrap prog x"), 3, 3, &|_| {
            true
        })
        .unwrap();
        assert_eq!(end, RoundsEnd::Done);
        assert_eq!(r.plain.len(), 3);
        assert_eq!(
            f.calls,
            [
                "prog", "wrap", "prog", "wrap", "wrap", "prog", "prog", "wrap"
            ]
        );
    }

    #[test]
    fn rounds_stop_once_enough_after_the_minimum() {
        let mut f = Fake {
            calls: vec![],
            wrapped_fails_at: None,
        };
        let (r, _) = alternate(&mut f, &argv("prog"), &argv("wrap prog"), 2, 50, &|r| {
            r.plain.len() >= 4
        })
        .unwrap();
        assert_eq!(r.plain.len(), 4);
    }

    #[test]
    fn a_failure_under_the_wrapper_only_ends_the_rounds_and_says_so() {
        let mut f = Fake {
            calls: vec![],
            wrapped_fails_at: Some(3),
        };
        let (r, end) =
            alternate(&mut f, &argv("prog"), &argv("wrap prog"), 5, 5, &|_| false).unwrap();
        assert_eq!(end, RoundsEnd::WrappedFailed("exited with status 1".into()));
        assert_eq!(r.plain.len(), 1);
    }
}
