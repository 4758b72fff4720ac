//! What oscost changes outside itself, put back on every exit path, SIGKILL of oscost
//! included: the guard process.
//!
//! A command that is about to change something outside itself (a kernel setting today; a
//! program or hook a side starts, next) starts a guard first (`Guardian::start`), before any
//! worker. The guard is `oscost __guard`, started as a grandchild whose parent exits at once,
//! with this process's child-subreaper flag off for that instant: it is reparented away from
//! oscost, in a session of its own, so neither worker reaping (which kills every child of
//! the coordinator), nor a SIGKILL of oscost's process group, nor a terminal's hangup reaches
//! it. It is told each thing to put back (`Alteration`) over a socket before the thing is
//! changed, with the thing's lock (`state::Held`) passed along so the lock outlives oscost
//! exactly as long as the guard does. When oscost ends it says `Release` (it put everything
//! back itself) and waits for the guard to be gone, so that the next command finds the locks
//! free; when the socket closes without that (oscost killed, a panic that aborts) or the
//! guard is sent SIGTERM, the guard puts every change back, newest first, within
//! milliseconds, removes the states it put back and exits. Its only output is a line per
//! change on the standard error oscost had.
//!
//! Where even the guard is killed (SIGKILL of every oscost process at once, a cgroup killed
//! whole), the states remain in `state::STATE_DIR` and the next oscost command puts them back
//! (`state::recover`).

pub mod state;

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use crate::base::helpers::GUARD as GUARD_ARG;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};

/// Something changed outside oscost and how to put it back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Alteration {
    /// A kernel setting file, its original value, and its state (removed once put back).
    File {
        /// The file, resolved.
        file: PathBuf,
        /// What to write back.
        original: String,
        /// Its state in `state::STATE_DIR`.
        state: PathBuf,
    },
    /// A cgroup the run made (`effects::cgroup`): removed (rmdir, which takes only an empty
    /// one).
    Cgroup {
        /// Its directory in the cgroup hierarchy.
        dir: PathBuf,
    },
}

/// What oscost tells its guard.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum Order {
    /// Put this back if oscost dies (its lock, if any, comes with the message).
    Keep(Alteration),
    /// oscost put everything back itself: exit, touching nothing.
    Release,
}

/// The largest message: a change is a path and a short value.
const MAX_ORDER_BYTES: usize = 64 << 10;
/// How long oscost waits for its guard to answer.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// What oscost's end knows of its guard, shared with the thread that watches it.
#[derive(Debug, Default)]
struct Link {
    /// Every change the guard took, in order.
    kept: Vec<Alteration>,
    /// oscost is releasing the guard: its going is expected.
    released: bool,
    /// The guard died first: oscost put its changes back itself, and nothing more may be
    /// changed (`Guardian::while_guarded`).
    lost: bool,
}

/// oscost's end of its guard. Dropped without `release`, its socket closes and the guard puts
/// everything back.
///
/// The guard is watched in turn: a thread (`oscost-guardwatch`) sleeps in `poll` on the
/// socket asking for nothing but its hangup, so it never wakes while the guard lives (and
/// never shares the measuring CPU). If the guard dies before `release` (SIGKILLed, OOM), the
/// thread, under the link's lock, writes back every original the guard was told of, marks
/// the link lost, says so, and sends this process SIGTERM, so the command stops at its next
/// safe point as on any SIGTERM: what was measured is kept as an interrupted run, and the exit
/// is non-zero. No run measures, and none is left to be killed, without a guard.
#[derive(Debug)]
pub struct Guardian {
    socket: OwnedFd,
    link: std::sync::Arc<std::sync::Mutex<Link>>,
    /// The watching thread and the pipe end that tells it to return.
    watcher: Option<(std::thread::JoinHandle<()>, OwnedFd)>,
}

impl Drop for Guardian {
    /// The watcher returns before the socket closes (it polls the socket's descriptor, which
    /// must not be reused under it).
    fn drop(&mut self) {
        if let Some((thread, wake)) = self.watcher.take() {
            // A byte, not only the close: a child forked without exec would keep the pipe
            // open.
            let _ = nix::unistd::write(&wake, b"x");
            drop(wake);
            let _ = thread.join();
        }
    }
}

impl Guardian {
    /// Start the guard: reparented away from oscost, in a session of its own, ready when this
    /// returns.
    pub fn start() -> std::io::Result<Guardian> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        let theirs_fd: RawFd = theirs.as_raw_fd();
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("/proc/self/exe");
        cmd.arg0("oscost")
            .arg(GUARD_ARG)
            .arg(theirs_fd.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        // The socket's end stays open across the guard's exec (fcntl: async-signal-safe).
        let spawned = crate::measuring::os::spawn_reparented(&mut cmd, move || {
            // SAFETY: fcntl on a plain integer descriptor.
            unsafe {
                let flags = libc::fcntl(theirs_fd, libc::F_GETFD);
                libc::fcntl(theirs_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            }
        });
        spawned?;
        drop(theirs);
        let mut g = Guardian {
            socket: ours,
            link: Default::default(),
            watcher: None,
        };
        match g.answer()?.as_str() {
            "ready" => {}
            other => {
                return Err(std::io::Error::other(format!(
                    "the guard did not start ({other})"
                )));
            }
        }
        // As a PID namespace's init (`unshare -pf oscost ...`) the guard cannot be reparented
        // away: it is our own child, which worker reaping ends with the others. It is not
        // watched there (as before the watch), so that reaping does not stop the run.
        if std::process::id() == 1 {
            return Ok(g);
        }
        let (wake_read, wake_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let socket = g.socket.as_raw_fd();
        let link = std::sync::Arc::clone(&g.link);
        let thread = std::thread::Builder::new()
            .name("oscost-guardwatch".into())
            .spawn(move || watch_guard(socket, &wake_read, &link))?;
        g.watcher = Some((thread, wake_write));
        Ok(g)
    }

    /// Run `change` (a write of a guarded file) only while the guard lives: `None`, and nothing
    /// done, once it was lost. The link's lock is held throughout, so the watcher's put-back
    /// cannot interleave with a write.
    pub fn while_guarded<T>(&self, change: impl FnOnce() -> T) -> Option<T> {
        let link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        (!link.lost).then(change)
    }

    /// Tell the guard to put `change` back if oscost dies, with the lock that goes with it;
    /// returns once the guard has it.
    pub fn keep(&mut self, change: &Alteration, lock: Option<BorrowedFd>) -> std::io::Result<()> {
        let bytes =
            serde_json::to_vec(&Order::Keep(change.clone())).map_err(std::io::Error::other)?;
        let fds: Vec<RawFd> = lock.iter().map(|f| f.as_raw_fd()).collect();
        let cmsg: Vec<ControlMessage> = if fds.is_empty() {
            vec![]
        } else {
            vec![ControlMessage::ScmRights(&fds)]
        };
        sendmsg::<()>(
            self.socket.as_raw_fd(),
            &[IoSlice::new(&bytes)],
            &cmsg,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
        match self.answer()?.as_str() {
            "kept" => {
                let mut link = self.link.lock().unwrap_or_else(|p| p.into_inner());
                link.kept.push(change.clone());
                Ok(())
            }
            other => Err(std::io::Error::other(format!(
                "the guard did not take it ({other})"
            ))),
        }
    }

    /// One line from the guard, waited for at most `ANSWER_WAIT`.
    fn answer(&mut self) -> std::io::Result<String> {
        let mut buf = [0u8; 64];
        if !readable(self.socket.as_fd(), ANSWER_WAIT) {
            return Err(std::io::Error::other("the guard did not answer"));
        }
        let n = nix::unistd::read(&self.socket, &mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other("the guard is gone"));
        }
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// Everything was put back by oscost itself: the guard exits without touching anything,
    /// and is gone (its locks with it) when this returns.
    pub fn release(self) {
        self.link.lock().unwrap_or_else(|p| p.into_inner()).released = true;
        let bytes = serde_json::to_vec(&Order::Release).unwrap_or_default();
        if nix::unistd::write(&self.socket, &bytes).is_ok() {
            // The guard closes its end when it exits, after its locks.
            let mut buf = [0u8; 16];
            while readable(self.socket.as_fd(), ANSWER_WAIT) {
                match nix::unistd::read(&self.socket, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
    }
}

/// The guard watcher (see `Guardian`): returns when `wake` closes or the guard was released;
/// puts back and stops the command when the guard died first.
fn watch_guard(socket: RawFd, wake: &OwnedFd, link: &std::sync::Mutex<Link>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // SAFETY: `Guardian::drop` joins this thread before its socket closes.
    let socket = unsafe { BorrowedFd::borrow_raw(socket) };
    loop {
        // No events asked of the socket: poll reports its hangup or error only.
        let mut fds = [
            PollFd::new(socket, PollFlags::empty()),
            PollFd::new(wake.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        let woken = |f: &PollFd| !f.revents().unwrap_or(PollFlags::empty()).is_empty();
        if woken(&fds[1]) {
            return;
        }
        if woken(&fds[0]) {
            break;
        }
    }
    let mut link = link.lock().unwrap_or_else(|p| p.into_inner());
    if link.released {
        return;
    }
    link.lost = true;
    let mut put = Vec::new();
    for c in &link.kept {
        if let Alteration::File { file, original, .. } = c {
            if already(file, original) {
                continue;
            }
            match crate::machine::settings::write_file(file, original) {
                Ok(()) => put.push(format!("{}={original}", file.display())),
                Err(e) => crate::say!(
                    "oscost: could not put back {}={original} ({e}); its state stays and every oscost command tries again",
                    file.display()
                ),
            }
        }
    }
    let put = if put.is_empty() {
        String::new()
    } else {
        format!("; put back {} at once", put.join(", "))
    };
    crate::say!(
        "oscost: its guard process (oscost-guard) died{put}; stopping: nothing is measured without it"
    );
    drop(link);
    // The command stops at its next safe point as on any SIGTERM (results so far kept as an
    // interrupted run, exit non-zero); its own put-back finds the originals in place.
    // SAFETY: kill of our own process with a standard signal.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
}

/// Whether `file` already holds `original` (read as a bracketed choice list reads, which is
/// the plain value for every other setting file).
fn already(file: &std::path::Path, original: &str) -> bool {
    std::fs::read_to_string(file).is_ok_and(|t| {
        crate::machine::settings::value_of(crate::machine::settings::Encoding::Bracketed, &t)
            == original
    })
}

/// Whether `fd` has something to read (or is closed) within `wait`.
fn readable(fd: BorrowedFd, wait: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(wait.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::MAX);
    loop {
        match poll(&mut fds, ms) {
            Ok(n) => return n > 0,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Set by SIGTERM in the guard.
static TERMINATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERMINATED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The guard process (`oscost __guard FD`): keeps what it is told until oscost releases it,
/// puts it all back when oscost is gone. Its exit status is 0 unless it was started wrongly.
pub fn guard_main(args: &[String]) -> i32 {
    let Some(fd) = args.first().and_then(|a| a.parse::<RawFd>().ok()) else {
        crate::say!("oscost: {GUARD_ARG} is started by oscost itself");
        return 2;
    };
    // SAFETY: the descriptor was left open for us by the oscost that started us.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    become_guard();
    if nix::unistd::write(&socket, b"ready").is_err() {
        return 0;
    }
    let mut kept: Vec<(Alteration, Option<OwnedFd>)> = Vec::new();
    let mut buf = vec![0u8; MAX_ORDER_BYTES];
    while !TERMINATED.load(std::sync::atomic::Ordering::SeqCst) {
        let (n, fds) = match receive(&socket, &mut buf) {
            Received::Message(n, fds) => (n, fds),
            Received::Again => continue,
            Received::Gone => break,
        };
        match serde_json::from_slice::<Order>(&buf[..n]) {
            Ok(Order::Keep(c)) => {
                kept.push((c, fds.into_iter().next()));
                let _ = nix::unistd::write(&socket, b"kept");
            }
            Ok(Order::Release) => return 0,
            Err(_) => {
                let _ = nix::unistd::write(&socket, b"not understood");
            }
        }
    }
    put_back_all(kept);
    0
}

/// This process as the guard: named, deaf to a terminal's signals, SIGTERM put-back-and-exit
/// (the handler interrupts the wait: no SA_RESTART), and never the one memory pressure kills.
fn become_guard() {
    // SAFETY: prctl with a static name; signal dispositions of our own process.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"oscost-guard".as_ptr(), 0, 0, 0);
        for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGPIPE, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    // SIGTERM (a shutdown, `pkill oscost`) puts everything back.
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_term),
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic.
    let _ = unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGTERM, &action) };
    // Memory running short must not take the one process that puts things back (root only;
    // best effort).
    let _ = crate::machine::settings::write_file(
        std::path::Path::new("/proc/self/oom_score_adj"),
        "-1000",
    );
}

/// What one wait on the socket gave.
enum Received {
    /// An order of this many bytes, with the descriptors passed beside it.
    Message(usize, Vec<OwnedFd>),
    /// A signal interrupted the wait.
    Again,
    /// oscost is gone (the socket closed or failed).
    Gone,
}

/// Wait for oscost's next order.
fn receive(socket: &OwnedFd, buf: &mut [u8]) -> Received {
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let got = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    );
    match got {
        Ok(msg) if msg.bytes == 0 => Received::Gone,
        Ok(msg) => {
            let mut fds: Vec<OwnedFd> = Vec::new();
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmRights(r) = c {
                        // SAFETY: descriptors just received are ours alone.
                        fds.extend(r.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
                    }
                }
            }
            Received::Message(msg.bytes, fds)
        }
        Err(nix::errno::Errno::EINTR) => Received::Again,
        Err(_) => Received::Gone,
    }
}

/// Remove a cgroup once it is empty: its last process may still be being reaped, so an
/// EBUSY is waited out for up to a second. True when it is gone.
pub fn remove_cgroup(dir: &std::path::Path) -> bool {
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(_) => return false,
        }
    }
    false
}

/// Put back every change kept, newest first, removing the state of each put back.
fn put_back_all(kept: Vec<(Alteration, Option<OwnedFd>)>) {
    for (change, lock) in kept.into_iter().rev() {
        match change {
            Alteration::File {
                file,
                original,
                state,
            } => {
                let shown = format!("{}={original}", file.display());
                if already(&file, &original) {
                    // Nothing was changed yet (a refusal before the first write, a trial
                    // put back): nothing to write and nothing to say.
                    if let Some(l) = &lock {
                        state::unlink_if_same(&state, l.as_fd());
                    }
                    drop(lock);
                    continue;
                }
                match crate::machine::settings::write_file(&file, &original) {
                    Ok(()) => {
                        if let Some(l) = &lock {
                            state::unlink_if_same(&state, l.as_fd());
                        }
                        crate::say!(
                            "oscost: put back {shown} (the oscost that changed it ended without doing so)"
                        );
                    }
                    Err(e) => crate::say!(
                        "oscost: could not put back {shown} ({e}); its state stays in {} and every oscost command tries again",
                        state.display()
                    ),
                }
            }
            Alteration::Cgroup { dir } => {
                if dir.exists() {
                    if remove_cgroup(&dir) {
                        crate::say!(
                            "oscost: removed the cgroup {} (the oscost that made it ended without doing so)",
                            dir.display()
                        );
                    } else {
                        crate::say!(
                            "oscost: could not remove the cgroup {}; remove it with rmdir once it is empty",
                            dir.display()
                        );
                    }
                }
            }
        }
        drop(lock);
    }
}
