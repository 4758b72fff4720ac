//! A process group that dies with oscost, however oscost dies.
//!
//! A program oscost runs for the user (predict's counted and timed program) is started as the
//! leader of a process group of its own, with `PR_SET_PDEATHSIG` = SIGKILL on the leader, and
//! watched by a guard: a forked child, in a process group of its own too (so that killing
//! oscost's whole group does not take it), that blocks reading a pipe whose only write end
//! oscost holds. When oscost ends the watch normally it writes `d` (the group was reaped) and
//! the guard exits; when the pipe closes without it (oscost killed, SIGKILL included, or a
//! panic) the guard sends SIGKILL to the whole group, so the program's children (`sh -c
//! 'sleep 600'`'s sleep) die as well as the leader. The guard runs only async-signal-safe
//! calls (read, kill, _exit) after fork, as a multi-threaded parent requires. The watcher
//! itself (`Watch`) is shared with `settings_guard`, whose guard writes settings back instead.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

/// Set on `cmd`: a process group of its own, and SIGKILL when oscost's thread that started it
/// dies.
pub fn own_group_dying_with_us(cmd: &mut std::process::Command) {
    cmd.process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls (`die_with_parent`).
    unsafe {
        cmd.pre_exec(move || {
            super::os::die_with_parent(parent, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A forked watcher: a child in a process group of its own (so that killing oscost's whole
/// group does not take it), blocked on a close-on-exec pipe whose only write end oscost
/// holds. `release` writes `d` and reaps it; if the pipe closes without `d` (oscost killed,
/// SIGKILL included) the child runs `on_abandon` and exits. `on_abandon` runs after fork in a
/// multi-threaded process: it may call only async-signal-safe functions on memory prepared
/// before `start` (no allocation).
#[derive(Debug)]
pub struct Watch {
    pid: i32,
    to_watcher: Option<OwnedFd>,
}

impl Watch {
    /// Fork the watcher; `on_abandon` runs in it when this process dies without disarming it.
    pub fn start(on_abandon: &dyn Fn()) -> std::io::Result<Watch> {
        // Close-on-exec: a program started later must not hold the write end open past us.
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        // SAFETY: the child calls only async-signal-safe functions (setpgid, close, read,
        // and what `on_abandon` promises) before `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; every call is async-signal-safe and on plain integers.
            unsafe {
                libc::setpgid(0, 0);
                libc::close(write.as_raw_fd());
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(read.as_raw_fd(), (&raw mut b).cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break n;
                    }
                };
                if !(n == 1 && b == b'd') {
                    on_abandon();
                }
                libc::_exit(0);
            }
        }
        drop(read);
        Ok(Watch {
            pid,
            to_watcher: Some(write),
        })
    }

    /// Tell the watcher all is well and reap it (once; later calls do nothing).
    pub fn release(&mut self) {
        let Some(fd) = self.to_watcher.take() else {
            return;
        };
        let _ = nix::unistd::write(&fd, b"d");
        drop(fd);
        // SAFETY: waitpid on our own child, the watcher.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
    }
}

/// The watch over one process group: `release` once the group is reaped.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: i32,
    watch: Watch,
    released: bool,
}

impl GroupGuard {
    /// Start a guard over process group `pgid`: it is killed if oscost dies.
    pub fn watch(pgid: i32) -> std::io::Result<GroupGuard> {
        // SAFETY: kill is async-signal-safe; pgid is a plain integer copied into the closure.
        let watch = Watch::start(&|| unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        })?;
        Ok(GroupGuard {
            pgid,
            watch,
            released: false,
        })
    }

    /// The group was reaped: the guard leaves it alone and exits.
    pub fn release(mut self) {
        self.released = true;
        self.watch.release();
    }
}

impl Drop for GroupGuard {
    /// Dropped without `release` (an error path, an unwinding panic): the group is killed.
    fn drop(&mut self) {
        if !self.released {
            // SAFETY: kill on a process group id we started.
            unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        }
        self.watch.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: i32) -> bool {
        // Zombies count as gone: they have exited.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()))
            .is_some_and(|r| !r.starts_with('Z'))
    }

    #[test]
    fn a_group_watched_by_a_guard_dies_when_the_watch_is_dropped() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo $! ; wait"])
            .stdout(std::process::Stdio::piped());
        own_group_dying_with_us(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let pgid = child.id() as i32;
        let guard = GroupGuard::watch(pgid).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let sleeper: i32 = line.trim().parse().unwrap();
        assert!(alive(sleeper));
        drop(guard);
        let _ = child.wait();
        let t = Instant::now();
        while alive(sleeper) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(sleeper), "the group's grandchild outlived the watch");
    }

    #[test]
    fn a_released_guard_leaves_the_group_alone() {
        let mut cmd = std::process::Command::new("true");
        own_group_dying_with_us(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let guard = GroupGuard::watch(child.id() as i32).unwrap();
        child.wait().unwrap();
        guard.release();
    }
}
