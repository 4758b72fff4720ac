//! The bodies of scale/'s cases: what one copy does, in a loop, until its board says stop.
//! Each follows will-it-scale's test of the same name (what one iteration does and what it
//! counts); the helpers are the files, descriptors and mappings the bodies share.

use std::ffi::CString;
use std::sync::atomic::AtomicU32;

use super::{BUF, FILE_1MIB, MIB128, PAGE, Prepared};
use crate::measuring::scaling::Mode;
use crate::measuring::scaling::board::{Task, TaskError};

type R = Result<(), TaskError>;

/// Start with the others, then `op` until stopped; `op` says how many operations it did.
fn looped(t: &Task, mut op: impl FnMut() -> Result<u64, TaskError>) -> R {
    if !t.start() {
        return Ok(());
    }
    while t.running() {
        let k = op()?;
        t.done(k);
    }
    Ok(())
}

/// A descriptor closed on drop.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closing a descriptor this value owns.
        unsafe { libc::close(self.0) };
    }
}

fn check(rc: libc::c_long, what: &'static str) -> Result<libc::c_long, TaskError> {
    if rc < 0 {
        Err(TaskError::last(what))
    } else {
        Ok(rc)
    }
}

/// A file of the copy's own in `dir`, unlinked at once, with `bytes` of zeros written.
fn own_file(p: &Prepared, t: &Task, bytes: usize) -> Result<Fd, TaskError> {
    // SAFETY: a NUL-terminated path; O_TMPFILE makes a file with no name.
    let mut fd = unsafe { libc::open(p.dir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) };
    if fd < 0 {
        // A filesystem without O_TMPFILE: a name of the copy's own, unlinked at once.
        let name = format!(
            "{}/t{}-{}\0",
            p.dir.to_string_lossy(),
            t.index,
            t.mode.word()
        );
        // SAFETY: a NUL-terminated path.
        fd = unsafe {
            libc::open(
                name.as_ptr().cast(),
                libc::O_CREAT | libc::O_RDWR | libc::O_TRUNC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(TaskError::last("creating its file"));
        }
        // SAFETY: as above.
        unsafe { libc::unlink(name.as_ptr().cast()) };
    }
    let f = Fd(fd);
    let buf = [0u8; BUF];
    let mut left = bytes;
    while left > 0 {
        let k = left.min(BUF);
        check(
            // SAFETY: writing from a live buffer of at least k bytes.
            unsafe { libc::write(f.0, buf.as_ptr().cast(), k) } as libc::c_long,
            "writing its file",
        )?;
        left -= k;
    }
    Ok(f)
}

/// A sparse file of `bytes` of the copy's own, unlinked, read through once so that its pages
/// are in the page cache before timing: will-it-scale's first second does that work, and a
/// repetition (a fresh worker, a fresh file) is shorter than one pass over 128 MiB.
fn own_sparse_file(p: &Prepared, t: &Task, bytes: usize) -> Result<Fd, TaskError> {
    let f = own_file(p, t, 0)?;
    check(
        // SAFETY: a descriptor we own.
        unsafe { libc::ftruncate(f.0, bytes as libc::off_t) } as libc::c_long,
        "ftruncate of its file",
    )?;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0usize;
    while off < bytes {
        let n = check(
            // SAFETY: reading into a live buffer of its length.
            unsafe { libc::pread(f.0, buf.as_mut_ptr().cast(), buf.len(), off as libc::off_t) }
                as libc::c_long,
            "reading its file",
        )?;
        if n == 0 {
            break;
        }
        off += n as usize;
    }
    Ok(f)
}

fn open_path(path: &CString, flags: i32) -> Result<Fd, TaskError> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return Err(TaskError::last("opening its file"));
    }
    Ok(Fd(fd))
}

pub(super) fn b_getppid(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        // SAFETY: no arguments.
        std::hint::black_box(unsafe { libc::getppid() });
        Ok(1)
    })
}

fn map(len: usize, flags: i32, fd: i32) -> Result<*mut u8, TaskError> {
    // SAFETY: a new mapping at an address the kernel chooses.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(TaskError::last("mmap"));
    }
    Ok(p.cast())
}

fn unmap(p: *mut u8, len: usize) {
    // SAFETY: unmapping a mapping `map` made.
    unsafe { libc::munmap(p.cast(), len) };
}

/// will-it-scale's fault loop: map 128 MiB, write a byte of each page (one operation each),
/// unmap; again. Stops between pages.
fn fault_loop(t: &Task, flags: i32, fd: i32) -> R {
    if !t.start() {
        return Ok(());
    }
    while t.running() {
        let p = map(MIB128, flags, fd)?;
        for off in (0..MIB128).step_by(PAGE) {
            if !t.running() {
                break;
            }
            // SAFETY: inside the writable mapping just made.
            unsafe { p.add(off).write_volatile(0) };
            t.done(1);
        }
        unmap(p, MIB128);
    }
    Ok(())
}

pub(super) fn b_page_fault_anon(t: &Task, _: &Prepared) -> R {
    fault_loop(t, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
}

pub(super) fn b_page_fault_file(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    fault_loop(t, libc::MAP_PRIVATE, f.0)
}

pub(super) fn b_page_fault_shared(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    fault_loop(t, libc::MAP_SHARED, f.0)
}

pub(super) fn b_mmap_anon(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        let p = map(MIB128, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)?;
        unmap(p, MIB128);
        Ok(1)
    })
}

pub(super) fn b_mmap_file(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    looped(t, || {
        let m = map(MIB128, libc::MAP_PRIVATE, f.0)?;
        unmap(m, MIB128);
        Ok(1)
    })
}

pub(super) fn b_brk(t: &Task, p: &Prepared) -> R {
    let base = p.brk_base;
    if base == 0 {
        return Err(TaskError {
            what: "the break was not read",
            errno: 0,
        });
    }
    let r = looped(t, || {
        for addr in [base + PAGE, base] {
            // SAFETY: moving the break between the one read before the copies started and a
            // page above it; brk returns the break it set (the old one on failure).
            let now = unsafe { libc::syscall(libc::SYS_brk, addr) } as usize;
            if now != addr {
                return Err(TaskError::last("brk"));
            }
        }
        Ok(2)
    });
    // SAFETY: the break back where it was.
    unsafe { libc::syscall(libc::SYS_brk, base) };
    r
}

pub(super) fn b_tlb_flush(t: &Task, p: &Prepared) -> R {
    let f = own_sparse_file(p, t, MIB128)?;
    if !t.start() {
        return Ok(());
    }
    while t.running() {
        let m = map(MIB128, libc::MAP_PRIVATE, f.0)?;
        let mut bad = false;
        for off in (0..MIB128).step_by(PAGE) {
            if !t.running() {
                break;
            }
            // SAFETY: inside the mapping; madvise of one of its pages.
            unsafe {
                let a = m.add(off);
                a.write_volatile(1);
                libc::madvise(a.cast(), PAGE, libc::MADV_DONTNEED);
                bad |= a.read_volatile() != 0;
            }
            t.done(1);
        }
        unmap(m, MIB128);
        if bad {
            return Err(TaskError {
                what: "a page read back after MADV_DONTNEED was not zero",
                errno: 0,
            });
        }
    }
    Ok(())
}

pub(super) fn b_open(t: &Task, p: &Prepared) -> R {
    let path = &p.own[t.index];
    looped(t, || {
        drop(open_path(path, libc::O_RDWR)?);
        Ok(1)
    })
}

pub(super) fn b_open_same(t: &Task, p: &Prepared) -> R {
    looped(t, || {
        drop(open_path(&p.shared, libc::O_RDWR)?);
        Ok(1)
    })
}

pub(super) fn b_dup(t: &Task, p: &Prepared) -> R {
    let f = own_file(p, t, 0)?;
    looped(t, || {
        // SAFETY: duplicating a descriptor we own; the copy is closed at once.
        let d = check(unsafe { libc::dup(f.0) } as libc::c_long, "dup")?;
        drop(Fd(d as i32));
        Ok(1)
    })
}

fn lseek_loop(t: &Task, f: &Fd) -> R {
    looped(t, || {
        check(
            // SAFETY: a descriptor we own.
            unsafe { libc::lseek(f.0, 0, libc::SEEK_SET) } as libc::c_long,
            "lseek",
        )?;
        Ok(1)
    })
}

pub(super) fn b_lseek_separate(t: &Task, p: &Prepared) -> R {
    lseek_loop(t, &own_file(p, t, 0)?)
}

pub(super) fn b_lseek_same(t: &Task, p: &Prepared) -> R {
    lseek_loop(t, &open_path(&p.shared, libc::O_RDWR)?)
}

fn read_loop(t: &Task, f: &Fd) -> R {
    let mut buf = [0u8; BUF];
    looped(t, || {
        let n = check(
            // SAFETY: reading into a live buffer of BUF bytes.
            unsafe { libc::read(f.0, buf.as_mut_ptr().cast(), BUF) } as libc::c_long,
            "read",
        )?;
        if n == 0 {
            // SAFETY: a descriptor we own.
            unsafe { libc::lseek(f.0, 0, libc::SEEK_SET) };
        }
        Ok(1)
    })
}

pub(super) fn b_read_separate(t: &Task, p: &Prepared) -> R {
    read_loop(t, &own_file(p, t, FILE_1MIB)?)
}

pub(super) fn b_read_same(t: &Task, p: &Prepared) -> R {
    read_loop(t, &open_path(&p.shared, libc::O_RDONLY)?)
}

fn pread_loop(t: &Task, f: &Fd) -> R {
    let mut buf = [0u8; BUF];
    looped(t, || {
        check(
            // SAFETY: reading into a live buffer of BUF bytes.
            unsafe { libc::pread(f.0, buf.as_mut_ptr().cast(), BUF, 0) } as libc::c_long,
            "pread",
        )?;
        Ok(1)
    })
}

pub(super) fn b_pread_separate(t: &Task, p: &Prepared) -> R {
    pread_loop(t, &own_file(p, t, BUF)?)
}

pub(super) fn b_pread_same(t: &Task, p: &Prepared) -> R {
    pread_loop(t, &open_path(&p.shared, libc::O_RDONLY)?)
}

pub(super) fn b_write_separate(t: &Task, p: &Prepared) -> R {
    let f = own_file(p, t, 0)?;
    let buf = [0u8; BUF];
    let mut size = 0usize;
    looped(t, || {
        let n = check(
            // SAFETY: writing from a live buffer of BUF bytes.
            unsafe { libc::write(f.0, buf.as_ptr().cast(), BUF) } as libc::c_long,
            "write",
        )?;
        size += n as usize;
        if size >= FILE_1MIB {
            size = 0;
            // SAFETY: a descriptor we own.
            unsafe { libc::lseek(f.0, 0, libc::SEEK_SET) };
        }
        Ok(1)
    })
}

fn pwrite_loop(t: &Task, f: &Fd) -> R {
    let buf = [0u8; BUF];
    looped(t, || {
        check(
            // SAFETY: writing from a live buffer of BUF bytes.
            unsafe { libc::pwrite(f.0, buf.as_ptr().cast(), BUF, 0) } as libc::c_long,
            "pwrite",
        )?;
        Ok(1)
    })
}

pub(super) fn b_pwrite_separate(t: &Task, p: &Prepared) -> R {
    pwrite_loop(t, &own_file(p, t, 0)?)
}

pub(super) fn b_pwrite_same(t: &Task, p: &Prepared) -> R {
    pwrite_loop(t, &open_path(&p.shared, libc::O_RDWR)?)
}

fn lock_loop(t: &Task, f: &Fd) -> R {
    // SAFETY: a zeroed flock is valid; its fields are set below.
    let mut lk: libc::flock = unsafe { std::mem::zeroed() };
    lk.l_whence = libc::SEEK_SET as i16;
    lk.l_start = 0;
    lk.l_len = 1;
    looped(t, || {
        for kind in [libc::F_WRLCK, libc::F_UNLCK] {
            lk.l_type = kind as i16;
            check(
                // SAFETY: a descriptor we own and a valid flock.
                unsafe { libc::fcntl(f.0, libc::F_SETLKW, &lk) } as libc::c_long,
                "fcntl(F_SETLKW)",
            )?;
        }
        Ok(2)
    })
}

pub(super) fn b_lock_separate(t: &Task, p: &Prepared) -> R {
    lock_loop(t, &own_file(p, t, 0)?)
}

pub(super) fn b_lock_same(t: &Task, p: &Prepared) -> R {
    lock_loop(t, &open_path(&p.shared, libc::O_RDWR)?)
}

pub(super) fn b_unlink(t: &Task, p: &Prepared) -> R {
    let path = &p.own[t.index];
    looped(t, || {
        drop(open_path(path, libc::O_RDWR | libc::O_CREAT)?);
        check(
            // SAFETY: a NUL-terminated path.
            unsafe { libc::unlink(path.as_ptr()) } as libc::c_long,
            "unlink",
        )?;
        Ok(1)
    })
}

/// A futex call that returns at once, each operation: a wake with no waiter, or a wait on a
/// value the word does not hold (0, not 1).
fn futex_loop(t: &Task, wake: bool, private: bool) -> R {
    let word = AtomicU32::new(0);
    looped(t, || {
        if wake {
            crate::bench::futex_wake(&word, private);
        } else {
            crate::bench::futex_wait(&word, 1, private);
        }
        Ok(1)
    })
}

pub(super) fn b_futex_wake(t: &Task, _: &Prepared) -> R {
    futex_loop(t, true, true)
}

pub(super) fn b_futex_wake_shared(t: &Task, _: &Prepared) -> R {
    futex_loop(t, true, false)
}

pub(super) fn b_futex_wait(t: &Task, _: &Prepared) -> R {
    futex_loop(t, false, true)
}

pub(super) fn b_futex_wait_shared(t: &Task, _: &Prepared) -> R {
    futex_loop(t, false, false)
}

fn pipe_pair_fds() -> Result<[Fd; 4], TaskError> {
    let (mut a, mut b) = ([0i32; 2], [0i32; 2]);
    // SAFETY: valid out arrays of two descriptors.
    if unsafe { libc::pipe2(a.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(TaskError::last("pipe"));
    }
    // SAFETY: as above.
    if unsafe { libc::pipe2(b.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = TaskError::last("pipe");
        drop((Fd(a[0]), Fd(a[1])));
        return Err(e);
    }
    Ok([Fd(a[0]), Fd(a[1]), Fd(b[0]), Fd(b[1])])
}

/// The partner: a byte in from `r`, a byte out to `w`, until end of file.
fn partner(r: i32, w: i32) {
    let mut c = 0u8;
    loop {
        // SAFETY: one byte into a live byte, then out of it.
        let n = unsafe { libc::read(r, (&raw mut c).cast(), 1) };
        if n == 1 {
            // SAFETY: as above.
            if unsafe { libc::write(w, (&raw const c).cast(), 1) } != 1 {
                return;
            }
        } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

pub(super) fn b_pipe_pair(t: &Task, _: &Prepared) -> R {
    let [to_r, to_w, back_r, back_w] = pipe_pair_fds()?;
    let (pr, pw) = (to_r.0, back_w.0);
    // The partner runs on the copy's CPU (it inherits the copy's affinity), as
    // will-it-scale's new_task does.
    let pingpong = |tw: i32, br: i32| {
        let mut c = 0u8;
        looped(t, || {
            // SAFETY: one byte out of and back into a live byte.
            unsafe {
                if libc::write(tw, (&raw const c).cast(), 1) != 1 {
                    return Err(TaskError::last("write to the partner"));
                }
                if libc::read(br, (&raw mut c).cast(), 1) != 1 {
                    return Err(TaskError::last("read from the partner"));
                }
            }
            Ok(2)
        })
    };
    match t.mode {
        Mode::Thread => std::thread::scope(|s| {
            let h = std::thread::Builder::new()
                .spawn_scoped(s, move || partner(pr, pw))
                .map_err(|_| TaskError::last("starting the partner thread"))?;
            let r = pingpong(to_w.0, back_r.0);
            // End of file tells the partner to leave.
            drop(to_w);
            let _ = h.join();
            r
        }),
        Mode::Process => {
            // SAFETY: the child pins nothing new (it inherits the copy's CPU), makes only
            // read/write calls, and leaves with _exit.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(TaskError::last("fork of the partner"));
            }
            if pid == 0 {
                // SAFETY: integer prctl; the write end to itself closed so EOF can come.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    libc::close(to_w.0);
                    libc::close(back_r.0);
                }
                partner(pr, pw);
                // SAFETY: leaves without destructors.
                unsafe { libc::_exit(0) };
            }
            drop((to_r, back_w));
            let r = pingpong(to_w.0, back_r.0);
            drop(to_w);
            // SAFETY: our own child, which leaves at end of file (killed if it did not).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            r
        }
    }
}

pub(super) fn b_eventfd(t: &Task, _: &Prepared) -> R {
    // SAFETY: a new eventfd.
    let f = Fd(check(unsafe { libc::eventfd(0, 0) } as libc::c_long, "eventfd")? as i32);
    let one: u64 = 1;
    let mut got: u64 = 0;
    looped(t, || {
        // SAFETY: 8 bytes out of and into live u64s.
        unsafe {
            if libc::write(f.0, (&raw const one).cast(), 8) != 8 {
                return Err(TaskError::last("write to the eventfd"));
            }
            if libc::read(f.0, (&raw mut got).cast(), 8) != 8 {
                return Err(TaskError::last("read of the eventfd"));
            }
        }
        Ok(1)
    })
}

fn poll_loop(t: &Task, p: &Prepared, n: usize) -> R {
    let files: Vec<Fd> = (0..n)
        .map(|_| own_file(p, t, 0))
        .collect::<Result<_, _>>()?;
    let mut fds: Vec<libc::pollfd> = files
        .iter()
        .map(|f| libc::pollfd {
            fd: f.0,
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    looped(t, || {
        check(
            // SAFETY: a live array of n pollfds; timeout 0.
            unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, 0) } as libc::c_long,
            "poll",
        )?;
        Ok(1)
    })
}

pub(super) fn b_poll_1(t: &Task, p: &Prepared) -> R {
    poll_loop(t, p, 1)
}

pub(super) fn b_poll_128(t: &Task, p: &Prepared) -> R {
    poll_loop(t, p, 128)
}

pub(super) fn b_posix_sem(t: &Task, _: &Prepared) -> R {
    // SAFETY: a zeroed sem_t initialised below, private to this copy, destroyed after.
    let mut sem: libc::sem_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialising the semaphore we own.
    if unsafe { libc::sem_init(&mut sem, 0, 1) } != 0 {
        return Err(TaskError::last("sem_init"));
    }
    let r = looped(t, || {
        // SAFETY: an initialised semaphore of value 1: the wait takes it, the post gives it
        // back.
        unsafe {
            libc::sem_wait(&mut sem);
            libc::sem_post(&mut sem);
        }
        Ok(1)
    });
    // SAFETY: no one waits on it.
    unsafe { libc::sem_destroy(&mut sem) };
    r
}

pub(super) fn b_signal(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        // SAFETY: SIGUSR1's handler (set before the copies started) does nothing.
        if unsafe { libc::raise(libc::SIGUSR1) } != 0 {
            return Err(TaskError::last("raise"));
        }
        Ok(1)
    })
}

pub(super) fn b_sched_yield(t: &Task, _: &Prepared) -> R {
    looped(t, || {
        // SAFETY: no arguments.
        unsafe { libc::sched_yield() };
        Ok(1)
    })
}

pub(super) fn b_unix(t: &Task, _: &Prepared) -> R {
    let mut sv = [0i32; 2];
    // SAFETY: a valid out array of two descriptors.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) } != 0 {
        return Err(TaskError::last("socketpair"));
    }
    let (a, b) = (Fd(sv[0]), Fd(sv[1]));
    let mut c = 0u8;
    looped(t, || {
        // SAFETY: one byte out of and into a live byte.
        unsafe {
            if libc::write(a.0, (&raw const c).cast(), 1) != 1 {
                return Err(TaskError::last("write to the socket"));
            }
            if libc::read(b.0, (&raw mut c).cast(), 1) != 1 {
                return Err(TaskError::last("read from the socket"));
            }
        }
        Ok(1)
    })
}
