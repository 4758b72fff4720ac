//! mem/: the kernel's memory paths: mapping and unmapping, page faults on fresh anonymous
//! memory (read: the shared zero page; write: a zeroed page of one's own; THP: a 2 MiB page),
//! reads from the page cache, and waiting on many descriptors with select, poll and epoll.
//!
//! Faults are timed over a fresh region of many pages and reported per page, the region being
//! mapped and unmapped outside the timed part. The 4 KiB fault benchmarks ask for no huge pages
//! (MADV_NOHUGEPAGE) so THP cannot turn 512 faults into one. The descriptor benchmarks make the
//! last descriptor ready, so each call scans all of them and returns at once. Outside the
//! default suite: memfd_create, mremap growth (the mmap and munmap around it the baseline) and
//! MADV_DONTNEED against MADV_FREE over written pages, per page; process_vm_readv from a child;
//! a fault resolved through userfaultfd by a handler thread; mseal and the mprotect it refuses.

use std::ptr::null_mut;

use serde_json::json;

use super::PAGE_AND_MIB;
use crate::catalogue;

use crate::bench::entry::{Among, Cases, Expect, Param, Variant};
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::clock::{Clock, Monotonic};
use crate::measuring::os::{Mapping, close, ensure_fds, errno, eventfd, eventfd_post};

mod mseal;
mod userfaultfd;
use mseal::{mseal, mseal_mprotect_refused};
use userfaultfd::userfaultfd_copy;

catalogue! {
    family { memory_watch: true };
    "mem/mmap" => mmap {
        cases: Cases::Fixed(MMAP_SIZES),
        events: crate::expect_events![
            (Among::Suffix("/4KiB-touched"), "minor-faults", Expect::ONE),
            (Among::Suffix("/4KiB-untouched"), "minor-faults", Expect::NONE),
        ],
        ladder: Some("mem/mmap/4KiB-touched"),
    }:
        "mmap + munmap of anonymous memory (4 KiB and 1 MiB), untouched and with every page written";
    "mem/fault-read" => fault_read { events: crate::expect_events![(Among::All, "minor-faults", Expect::ONE)] }:
        "first read of a 4 KiB page of fresh anonymous memory (maps the zero page), per page";
    "mem/fault-write" => fault_write {
        events: crate::expect_events![(Among::All, "minor-faults", Expect::ONE)],
        ladder: Some("mem/fault-write"),
    }:
        "first write to a 4 KiB page of fresh anonymous memory (allocates and zeroes it), per page";
    "mem/fault-thp" => fault_thp:
        "first write to a 2 MiB transparent huge page (MADV_HUGEPAGE), per huge page";
    "mem/fault-2MiB" => fault_2mib { default: false }:
        "every 4 KiB page of a fresh 2 MiB-aligned anonymous region written (MADV_HUGEPAGE), per 2 MiB: one huge page fault where THP gives one, 512 small faults where it does not (minor-faults per op say which)";
    "mem/read-file" => read_file { cases: Cases::Fixed(PAGE_AND_MIB) }:
        "pread of 4 KiB and 1 MiB of a file in the page cache";
    "mem/select" => select { cases: Cases::Fixed(FD_COUNTS) }:
        "select over 10 and 1000 eventfds, the last one ready";
    "mem/poll" => poll { cases: Cases::Fixed(FD_COUNTS) }:
        "poll over 10 and 1000 eventfds, the last one ready";
    "mem/epoll" => epoll { cases: Cases::Fixed(FD_COUNTS) }:
        "epoll_wait on an epoll set of 10 and 1000 eventfds, the last one ready";
    "mem/mmap-only" => mmap_only { default: false, events: crate::expect_events![(Among::All, "minor-faults", Expect::NONE)], peer: Some("LEBench mmap (small)") }:
        "mmap of 4 KiB of anonymous memory, timed alone (the munmap after it untimed)";
    "mem/munmap-only" => munmap_only { default: false, peer: Some("LEBench munmap (small)") }:
        "munmap of an untouched 4 KiB anonymous mapping, timed alone (the mmap before it untimed)";
    "mem/brk" => brk { default: false }:
        "brk moving the heap's end up 4 KiB and back down in turn, per call (skipped where the worker holds other threads, whose malloc could race it)";
    "mem/mprotect" => mprotect { default: false }:
        "mprotect of a written 4 KiB page, read-only and read-write in turn";
    "mem/memfd-create" => memfd_create { default: false }:
        "memfd_create + close of an empty anonymous file";
    "mem/mremap-grow" => mremap_grow { default: false }:
        "mremap growing an untouched 4 KiB mapping to 64 KiB (MREMAP_MAYMOVE); the mmap and munmap around it are the baseline, subtracted";
    "mem/madvise-dontneed" => madvise_dontneed { default: false }:
        "madvise(MADV_DONTNEED) over 64 written 4 KiB pages (unmapped and freed at once), per page";
    "mem/madvise-free" => madvise_free { default: false }:
        "madvise(MADV_FREE) over 64 written 4 KiB pages (marked lazily freeable), per page";
    "mem/process-vm-readv" => process_vm_readv { cases: Cases::Fixed(VM_READ_SIZES), default: false }:
        "process_vm_readv of 8 bytes and of 64 KiB from a child process's memory into one's own";
    "mem/userfaultfd-copy" => userfaultfd_copy {
        default: false,
        preempts: true,
        // The faulting thread blocks (one switch to the handler on its CPU) and the handler
        // blocks again once it has copied (one switch back); the fault itself is one.
        events: crate::expect_events![
            (Among::All, "context-switches", Expect::ROUND_TRIP),
            (Among::All, "minor-faults", Expect::ONE),
        ],
    }:
        "a write to a missing page of a userfaultfd-registered region, resolved by UFFDIO_COPY of a 4 KiB page from a handler thread on the same CPU";
    "mem/mseal" => mseal { default: false }:
        "mseal (6.10) of one 4 KiB page of a larger PROT_NONE reservation: the page can no longer be unmapped or have its protection changed";
    "mem/mseal-mprotect-refused" => mseal_mprotect_refused { default: false }:
        "mprotect of a sealed 4 KiB page, refused with EPERM: the price of the seal's check";
}

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

static MMAP_SIZES: &[Variant] = &[
    touched_variant!("/4KiB-untouched", PAGE as i64, false),
    touched_variant!("/4KiB-touched", PAGE as i64, true),
    touched_variant!("/1MiB-untouched", 1 << 20, false),
    touched_variant!("/1MiB-touched", 1 << 20, true),
];

static FD_COUNTS: &[Variant] = &[
    Variant {
        suffix: "/10",
        params: &[("fds", Param::Int(10))],
    },
    Variant {
        suffix: "/1000",
        params: &[("fds", Param::Int(1000))],
    },
];

fn mmap(m: &Meter, c: &Case) -> Measured {
    let (len, touch) = (c.int("bytes")? as usize, c.flag("touched"));
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            let r = Mapping::anonymous(len, false, 0)?;
            if touch {
                r.touch_pages();
            }
            drop(r);
        }
        Ok(())
    })
}

/// Time first touches of `pages` pages of `step` bytes in a fresh region; per page, ns.
fn fault_bench(
    m: &Meter,
    c: &Case,
    step: usize,
    pages: usize,
    advice: i32,
    write: bool,
) -> Measured {
    let clock = Monotonic;
    // A sample is `pages` first touches: events per page.
    crate::measuring::counters::set_unit(pages as f64);
    let mut o = m.individual(&mut || {
        // Over-allocate by one step so the touched range can start step-aligned (THP needs it).
        let r = Mapping::anonymous(step * (pages + 1), false, 0)?;
        r.advise(advice)?;
        let start = (r.ptr() as usize).next_multiple_of(step) as *mut u8;
        let mut sum = 0u8;
        let t0 = clock.now_ns();
        for i in 0..pages {
            // SAFETY: page i of `pages` after the aligned start is inside the mapping.
            let p = unsafe { start.add(i * step) };
            if write {
                // SAFETY: as above; the mapping is writable.
                unsafe { p.write_volatile(1) };
            } else {
                // SAFETY: as above; the mapping is readable.
                sum = sum.wrapping_add(unsafe { p.read_volatile() });
            }
        }
        let t1 = clock.now_ns();
        std::hint::black_box(sum);
        drop(r);
        Ok(m.per_unit(t1 - t0, pages))
    })?;
    o.definition = Some(format!(
        "{} (a sample: first touches of {pages} fresh pages, divided by {pages})",
        c.definition
    ));
    Ok(o.param("page_bytes", step).param("pages_per_sample", pages))
}

fn fault_read(m: &Meter, c: &Case) -> Measured {
    fault_bench(m, c, PAGE, 256, libc::MADV_NOHUGEPAGE, false)
}

fn fault_write(m: &Meter, c: &Case) -> Measured {
    fault_bench(m, c, PAGE, 256, libc::MADV_NOHUGEPAGE, true)
}

/// The selected mode in /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
pub fn thp_mode() -> Option<String> {
    let t = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = t.find('[')? + 1;
    let end = t[start..].find(']')? + start;
    Some(t[start..end].to_string())
}

fn fault_thp(m: &Meter, c: &Case) -> Measured {
    match thp_mode().as_deref() {
        None => {
            return Err(BenchError::Skipped(
                "this kernel has no transparent huge pages".into(),
            ));
        }
        Some("never") => {
            return Err(BenchError::Skipped(
                "transparent huge pages are off (transparent_hugepage/enabled is never)".into(),
            ));
        }
        _ => {}
    }
    let mut o = fault_bench(m, c, HUGE, 4, libc::MADV_HUGEPAGE, true)?;
    // Whether the kernel really gave huge pages: AnonHugePages grows while a region is held.
    let r = Mapping::anonymous(HUGE * 2, false, 0)?;
    r.advise(libc::MADV_HUGEPAGE)?;
    let before = anon_huge_kb();
    let start = (r.ptr() as usize).next_multiple_of(HUGE) as *mut u8;
    // SAFETY: the aligned start is inside the 4 MiB mapping, which is writable.
    unsafe { start.write_volatile(1) };
    let got = anon_huge_kb().zip(before).map(|(a, b)| a > b);
    drop(r);
    o.params.insert("thp_mode".into(), json!(thp_mode()));
    if got == Some(false) {
        o.notes.push(
            "the kernel did not hand out a huge page (fragmented memory or defrag policy): these are 4 KiB faults"
                .into(),
        );
    }
    Ok(o)
}

/// Write every 4 KiB page of a fresh, 2 MiB-aligned region that asked for huge pages: what a
/// program touching 2 MiB pays under each THP mode (the comparison `ab --a-set thp=never
/// --b-set thp=always` is about). One sample is one region.
fn fault_2mib(m: &Meter, _c: &Case) -> Measured {
    let clock = Monotonic;
    crate::measuring::counters::set_unit(1.0);
    let mut o = m.individual(&mut || {
        let r = Mapping::anonymous(HUGE * 2, false, 0)?;
        // Refused (EINVAL) on a kernel without THP: the region is then plain small pages.
        let _ = r.advise(libc::MADV_HUGEPAGE);
        let start = (r.ptr() as usize).next_multiple_of(HUGE) as *mut u8;
        let t0 = clock.now_ns();
        for i in (0..HUGE).step_by(4096) {
            // SAFETY: the 2 MiB after the aligned start lie inside the 4 MiB writable mapping.
            unsafe { start.add(i).write_volatile(1) };
        }
        let t1 = clock.now_ns();
        drop(r);
        Ok(t1.saturating_sub(t0) as f64)
    })?;
    o.params.insert("thp_mode".into(), json!(thp_mode()));
    Ok(o)
}

fn anon_huge_kb() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let l = t.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

fn read_file(m: &Meter, c: &Case) -> Measured {
    use std::os::fd::AsRawFd;
    let len = c.int("bytes")? as usize;
    let f = super::cached_file(m, len)?;
    let fd = f.as_raw_fd();
    let mut buf = vec![0u8; len];
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: buf holds len bytes.
            if unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), len, 0) } != len as isize {
                return Err(BenchError::failed("pread", errno()));
            }
        }
        Ok(())
    })
}

/// `n` eventfds, the last one readable; closed on drop.
struct Fds(Vec<i32>);

impl Fds {
    fn new(n: usize) -> Result<Fds, BenchError> {
        ensure_fds(n as u64 + 64)?;
        let mut fds = Fds(Vec::with_capacity(n));
        for _ in 0..n {
            fds.0.push(eventfd()?);
        }
        eventfd_post(*fds.0.last().expect("n > 0"));
        Ok(fds)
    }

    /// The case's descriptors.
    fn of(c: &Case) -> Result<Fds, BenchError> {
        Fds::new(c.int("fds")? as usize)
    }
}

impl Drop for Fds {
    fn drop(&mut self) {
        self.0.iter().copied().for_each(close);
    }
}

fn select(m: &Meter, c: &Case) -> Measured {
    let fds = Fds::of(c)?;
    let max = *fds.0.iter().max().expect("fds");
    if max >= libc::FD_SETSIZE as i32 {
        return Err(BenchError::Skipped(format!(
            "descriptor {max} is beyond select's FD_SETSIZE ({})",
            libc::FD_SETSIZE
        )));
    }
    // SAFETY: an all-zero fd_set is the empty set.
    let mut all: libc::fd_set = unsafe { std::mem::zeroed() };
    for &fd in &fds.0 {
        // SAFETY: fd is below FD_SETSIZE (checked above).
        unsafe { libc::FD_SET(fd, &mut all) };
    }
    m.batched_fallible(&mut |k| {
        for _ in 0..k {
            let mut set = all;
            let mut tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            // SAFETY: valid set and timeout.
            let r = unsafe { libc::select(max + 1, &mut set, null_mut(), null_mut(), &mut tv) };
            if r != 1 {
                return Err(BenchError::failed("select", errno()));
            }
        }
        Ok(())
    })
}

fn poll(m: &Meter, c: &Case) -> Measured {
    let fds = Fds::of(c)?;
    let mut pfds: Vec<libc::pollfd> = fds
        .0
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    m.batched_fallible(&mut |k| {
        for _ in 0..k {
            // SAFETY: valid array of pollfds.
            let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
            if r != 1 {
                return Err(BenchError::failed("poll", errno()));
            }
        }
        Ok(())
    })
}

fn epoll(m: &Meter, c: &Case) -> Measured {
    let fds = Fds::of(c)?;
    // SAFETY: plain syscall.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(BenchError::failed("epoll_create1", errno()));
    }
    struct Ep(i32);
    impl Drop for Ep {
        fn drop(&mut self) {
            close(self.0);
        }
    }
    let ep = Ep(ep);
    for &fd in &fds.0 {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: valid epoll fd, fd and event.
        if unsafe { libc::epoll_ctl(ep.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(BenchError::failed("epoll_ctl", errno()));
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; fds.0.len()];
    m.batched_fallible(&mut |k| {
        for _ in 0..k {
            // SAFETY: events has room for every descriptor.
            let r = unsafe { libc::epoll_wait(ep.0, events.as_mut_ptr(), events.len() as i32, 0) };
            if r != 1 {
                return Err(BenchError::failed("epoll_wait", errno()));
            }
        }
        Ok(())
    })
}

fn memfd_create(m: &Meter, _: &Case) -> Measured {
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: a NUL-terminated name; the descriptor is closed at once.
            let fd = unsafe { libc::memfd_create(c"oscost".as_ptr(), libc::MFD_CLOEXEC) };
            if fd < 0 {
                return Err(BenchError::failed("memfd_create", errno()));
            }
            close(fd);
        }
        Ok(())
    })
}

/// Map 4 KiB, let `between` act on it, unmap what is there; false when a call failed.
fn map_act_unmap(between: &mut dyn FnMut(*mut libc::c_void) -> (*mut libc::c_void, usize)) -> bool {
    let Ok(p) = map_page() else {
        return false;
    };
    let (q, len) = between(p);
    // SAFETY: unmapping what was mapped (moved or not).
    q != libc::MAP_FAILED && unsafe { libc::munmap(q, len) } == 0
}

fn mremap_grow(m: &Meter, _: &Case) -> Measured {
    const GROWN: usize = 64 * 1024;
    m.batched_with_baseline_fallible(
        &mut |n| {
            for _ in 0..n {
                let ok = map_act_unmap(&mut |p| {
                    (
                        // SAFETY: growing the mapping just made; it may move.
                        unsafe { libc::mremap(p, PAGE, GROWN, libc::MREMAP_MAYMOVE) },
                        GROWN,
                    )
                });
                if !ok {
                    return Err(BenchError::failed("mmap, mremap or munmap", errno()));
                }
            }
            Ok(())
        },
        &mut |n| {
            for _ in 0..n {
                std::hint::black_box(map_act_unmap(&mut |p| (p, PAGE)));
            }
        },
    )
}

/// madvise(`advice`) over 64 pages written just before, untimed; per page, ns.
fn madvise_pages(m: &Meter, advice: i32, name: &str) -> Measured {
    const PAGES: usize = 64;
    let clock = Monotonic;
    let r = Mapping::anonymous(PAGES * PAGE, false, 0)?;
    // Small pages only, so 64 pages are 64 pages to free.
    let _ = r.advise(libc::MADV_NOHUGEPAGE);
    crate::measuring::counters::set_unit(PAGES as f64);
    m.individual(&mut || {
        r.touch_pages();
        let t0 = clock.now_ns();
        // SAFETY: advice over the benchmark's own mapping.
        let rc = unsafe { libc::madvise(r.ptr().cast(), PAGES * PAGE, advice) };
        let t1 = clock.now_ns();
        if rc != 0 {
            let e = errno();
            return Err(if e.raw_os_error() == Some(libc::EINVAL) {
                BenchError::Skipped(format!("this kernel refuses {name} (EINVAL)"))
            } else {
                BenchError::failed(name, e)
            });
        }
        Ok(m.per_unit(t1.saturating_sub(t0), PAGES))
    })
}

fn madvise_dontneed(m: &Meter, _: &Case) -> Measured {
    madvise_pages(m, libc::MADV_DONTNEED, "MADV_DONTNEED")
}

fn madvise_free(m: &Meter, _: &Case) -> Measured {
    madvise_pages(m, libc::MADV_FREE, "MADV_FREE (Linux 4.5)")
}

/// A fresh anonymous 4 KiB mapping, or the failure.
fn map_page() -> Result<*mut libc::c_void, BenchError> {
    // SAFETY: a fresh private anonymous mapping.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(BenchError::failed("mmap", errno()));
    }
    Ok(p)
}

fn unmap_page(p: *mut libc::c_void) -> Result<(), BenchError> {
    // SAFETY: unmapping a page `map_page` mapped.
    if unsafe { libc::munmap(p, PAGE) } != 0 {
        return Err(BenchError::failed("munmap", errno()));
    }
    Ok(())
}

fn mmap_only(m: &Meter, _: &Case) -> Measured {
    let clock = Monotonic;
    m.individual(&mut || {
        let t0 = clock.now_ns();
        let p = map_page()?;
        let t1 = clock.now_ns();
        unmap_page(p)?;
        Ok(t1.saturating_sub(t0) as f64)
    })
}

fn munmap_only(m: &Meter, _: &Case) -> Measured {
    let clock = Monotonic;
    m.individual(&mut || {
        let p = map_page()?;
        let t0 = clock.now_ns();
        unmap_page(p)?;
        Ok(clock.now_ns().saturating_sub(t0) as f64)
    })
}

fn brk(m: &Meter, _: &Case) -> Measured {
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    if threads != 1 {
        return Err(BenchError::Skipped(format!(
            "the worker holds {threads} threads; moving the heap's end beside them could race glibc's malloc"
        )));
    }
    // SAFETY: brk with 0 reads the current end of the heap and changes nothing.
    let end = unsafe { libc::syscall(libc::SYS_brk, 0) };
    let mut grown = false;
    // Nothing between a grow and its shrink allocates: only raw system calls run here, on the
    // only thread, so glibc's idea of the break is right again whenever it could look.
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            let want = if grown { end } else { end + PAGE as i64 };
            // SAFETY: moves the break to `want`: up past the heap glibc knows, or back to it.
            if unsafe { libc::syscall(libc::SYS_brk, want) } != want {
                return Err(BenchError::failed("brk", errno()));
            }
            grown = !grown;
        }
        Ok(())
    });
    if grown {
        // SAFETY: back to the break glibc knows.
        unsafe { libc::syscall(libc::SYS_brk, end) };
    }
    o
}

fn mprotect(m: &Meter, _: &Case) -> Measured {
    let r = Mapping::anonymous(PAGE, false, 0)?;
    r.touch_pages();
    let mut writable = true;
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            writable = !writable;
            let prot = if writable {
                libc::PROT_READ | libc::PROT_WRITE
            } else {
                libc::PROT_READ
            };
            // SAFETY: the benchmark's own mapping.
            if unsafe { libc::mprotect(r.ptr().cast(), PAGE, prot) } != 0 {
                return Err(BenchError::failed("mprotect", errno()));
            }
        }
        Ok(())
    })
}

static VM_READ_SIZES: &[Variant] = &[
    Variant {
        suffix: "/8B",
        params: &[("bytes", Param::Int(8))],
    },
    Variant {
        suffix: "/64KiB",
        params: &[("bytes", Param::Int(64 << 10))],
    },
];

fn process_vm_readv(m: &Meter, c: &Case) -> Measured {
    let len = c.int("bytes")? as usize;
    // Written before the fork, so the child holds the same bytes at the same address.
    let theirs = vec![0x5au8; len];
    let mut ours = vec![0u8; len];
    let peer = crate::measuring::os::PeerProc::spawn(
        None,
        &m.allowed,
        || loop {
            // SAFETY: waits for a signal; the master's SIGKILL ends it.
            unsafe { libc::pause() };
        },
        || {},
    )?;
    let pid = peer.pid();
    let remote = libc::iovec {
        iov_base: theirs.as_ptr() as *mut libc::c_void,
        iov_len: len,
    };
    let local = libc::iovec {
        iov_base: ours.as_mut_ptr().cast(),
        iov_len: len,
    };
    // SAFETY: one local iovec over a live buffer of `len` bytes; the remote one is the child's.
    let read = || unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if read() != len as isize {
        let e = errno();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) => BenchError::Skipped(
                "reading the child's memory was refused (EPERM: a ptrace policy such as \
                 kernel.yama.ptrace_scope=3)"
                    .into(),
            ),
            Some(libc::ENOSYS) => BenchError::of_call("process_vm_readv", "3.2"),
            _ => BenchError::failed("process_vm_readv", e),
        });
    }
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            std::hint::black_box(read());
        }
    });
    drop(peer);
    Ok(o.param("bytes", len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thp_mode_reads_the_bracketed_word() {
        // The machine's own file, when there is one, parses to one of the three modes.
        if let Some(m) = thp_mode() {
            assert!(["always", "madvise", "never"].contains(&m.as_str()), "{m}");
        }
    }
}
