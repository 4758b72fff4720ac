//! `mem/userfaultfd-copy`: a page fault resolved in user space, by a handler thread that reads
//! the fault from a userfaultfd and answers it with UFFDIO_COPY.

use super::*;

const UFFD_API: u64 = 0xaa;
const UFFD_USER_MODE_ONLY: i32 = 1;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
/// Pages registered: written in turn, then dropped (MADV_DONTNEED, untimed) to be missing
/// again.
const UFFD_PAGES: usize = 1024;

/// `struct uffdio_copy`.
#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

/// A userfaultfd for this process's user-mode faults (UFFD_USER_MODE_ONLY since 5.11, which
/// vm.unprivileged_userfaultfd=0 still allows; plain before). Non-blocking: poll can say a
/// message is there that a retried fault has already taken back, and a blocking read would
/// then wait for ever.
fn open_userfaultfd() -> Result<i32, BenchError> {
    let base = libc::O_CLOEXEC | libc::O_NONBLOCK;
    for flags in [base | UFFD_USER_MODE_ONLY, base] {
        // SAFETY: no pointer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd >= 0 {
            return Ok(fd as i32);
        }
        match errno().raw_os_error() {
            Some(libc::EINVAL) => continue,
            Some(libc::EPERM) => {
                return Err(BenchError::Skipped(
                    "userfaultfd is refused to this user (vm.unprivileged_userfaultfd=0 and no \
                     CAP_SYS_PTRACE)"
                        .into(),
                ));
            }
            _ => return Err(BenchError::of_call("userfaultfd", "4.3")),
        }
    }
    Err(BenchError::failed("userfaultfd", errno()))
}

pub(super) fn userfaultfd_copy(m: &Meter, _: &Case) -> Measured {
    let uffd = open_userfaultfd()?;
    let stop = eventfd()?;
    let r = userfaultfd_measure(m, uffd, stop);
    close(uffd);
    close(stop);
    r
}

/// The handler thread's loop: each page fault userfaultfd `uffd` reports answered by
/// UFFDIO_COPY of the page at `src`, until eventfd `stop` is posted.
fn serve_faults(uffd: i32, stop: i32, src: u64) {
    let mut fds = [
        libc::pollfd {
            fd: uffd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let mut msg = [0u8; 32];
    loop {
        // SAFETY: two live pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 || fds[1].revents != 0 {
            return;
        }
        // SAFETY: one `struct uffd_msg` into a live 32-byte buffer.
        if unsafe { libc::read(uffd, msg.as_mut_ptr().cast(), 32) } != 32
            || msg[0] != UFFD_EVENT_PAGEFAULT
        {
            continue;
        }
        let address = u64::from_ne_bytes(msg[16..24].try_into().unwrap_or_default());
        let mut copy = UffdioCopy {
            dst: address & !(PAGE as u64 - 1),
            src,
            len: PAGE as u64,
            mode: 0,
            copy: 0,
        };
        // SAFETY: UFFDIO_COPY of the live source page into the registered region.
        unsafe { libc::ioctl(uffd, UFFDIO_COPY, &mut copy) };
    }
}

fn userfaultfd_measure(m: &Meter, uffd: i32, stop: i32) -> Measured {
    let mut api = [UFFD_API, 0, 0];
    // SAFETY: UFFDIO_API with a live `struct uffdio_api`.
    if unsafe { libc::ioctl(uffd, UFFDIO_API, api.as_mut_ptr()) } != 0 {
        return Err(BenchError::failed("UFFDIO_API", errno()));
    }
    let region = Mapping::anonymous(UFFD_PAGES * PAGE, false, 0)?;
    // SAFETY: advice on the mapping just made.
    unsafe {
        libc::madvise(
            region.ptr().cast(),
            UFFD_PAGES * PAGE,
            libc::MADV_NOHUGEPAGE,
        )
    };
    let mut register = [
        region.ptr() as u64,
        (UFFD_PAGES * PAGE) as u64,
        UFFDIO_REGISTER_MODE_MISSING,
        0,
    ];
    // SAFETY: UFFDIO_REGISTER with a live `struct uffdio_register` over the mapping.
    if unsafe { libc::ioctl(uffd, UFFDIO_REGISTER, register.as_mut_ptr()) } != 0 {
        return Err(BenchError::failed("UFFDIO_REGISTER", errno()));
    }
    let source = Mapping::anonymous(PAGE, false, 0)?;
    // SAFETY: the source page is mapped, writable and PAGE long.
    unsafe { std::ptr::write_bytes(source.ptr(), 0x5a, PAGE) };
    let src = source.ptr() as u64;
    let handler = crate::measuring::os::PeerThread::spawn(
        Some(m.cpu),
        m.allowed.clone(),
        move |_| serve_faults(uffd, stop, src),
        move || {
            eventfd_post(stop);
        },
    )?;
    let clock = Monotonic;
    let mut next = 0usize;
    let o = m.individual(&mut || {
        if next == UFFD_PAGES {
            // SAFETY: dropping the region's pages; they fault through userfaultfd again.
            unsafe { libc::madvise(region.ptr().cast(), UFFD_PAGES * PAGE, libc::MADV_DONTNEED) };
            next = 0;
        }
        // SAFETY: a page inside the registered region.
        let p = unsafe { region.ptr().add(next * PAGE) };
        next += 1;
        let t0 = clock.now_ns();
        // SAFETY: as above; the handler maps the page, then the write lands.
        unsafe { std::ptr::write_volatile(p, 1) };
        Ok(clock.now_ns().saturating_sub(t0) as f64)
    });
    drop(handler);
    o
}
