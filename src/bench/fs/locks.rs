//! `fs/fcntl-lock`: an fcntl write lock handed between two processes, in lmbench lat_fcntl's
//! ping-pong over two files.

use super::*;

/// A write lock on byte 0 (`F_WRLCK`), or its release (`F_UNLCK`).
fn byte_lock(kind: i32) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value, filled in below.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as i16;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_len = 1;
    l
}

/// Wait for the lock on `fd` (F_SETLKW).
fn wait_on(fd: i32) -> bool {
    let l = byte_lock(libc::F_WRLCK);
    // SAFETY: a live flock.
    unsafe { libc::fcntl(fd, libc::F_SETLKW, &l) == 0 }
}

/// Release the lock on `fd` (F_SETLK of F_UNLCK).
fn release(fd: i32) -> bool {
    let l = byte_lock(libc::F_UNLCK);
    // SAFETY: a live flock.
    unsafe { libc::fcntl(fd, libc::F_SETLK, &l) == 0 }
}

pub(super) fn fcntl_lock(m: &Meter, c: &Case) -> Measured {
    let t = Tree::new(m)?;
    let one = open_at(t.fd(), c"lock1", libc::O_CREAT | libc::O_RDWR)?;
    let two = open_at(t.fd(), c"lock2", libc::O_CREAT | libc::O_RDWR)?;
    let (fd1, fd2) = (one.as_raw_fd(), two.as_raw_fd());
    // lat_fcntl's start: this process holds both locks (a forked child inherits neither).
    if !(wait_on(fd1) && wait_on(fd2)) {
        return Err(BenchError::failed("fcntl lock", errno()));
    }
    let peer = crate::measuring::os::PeerProc::spawn(
        c.peer_cpu(),
        &m.allowed,
        // lat_fcntl's process B; it ends when killed.
        || while release(fd1) && wait_on(fd2) && release(fd2) && wait_on(fd1) {},
        || {},
    )?;
    // Process A's cycle in two halves, each a blocking wait and a release: lmbench reports
    // the cycle over two.
    let mut half = 0u64;
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            let ok = if half.is_multiple_of(2) {
                wait_on(fd1) && release(fd2)
            } else {
                wait_on(fd2) && release(fd1)
            };
            half += 1;
            if !ok {
                return Err(BenchError::failed("fcntl lock", errno()));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    Ok(t.with_fs(o?))
}
