//! mem/: the kernel's memory paths: mapping and unmapping, page faults on fresh anonymous
//! memory (read: the shared zero page; write: a zeroed page of one's own; THP: a 2 MiB page),
//! reads from the page cache, and waiting on many descriptors with select, poll and epoll.
//!
//! Faults are timed over a fresh region of many pages and reported per page, the region being
//! mapped and unmapped outside the timed part. The 4 KiB fault benchmarks ask for no huge pages
//! (MADV_NOHUGEPAGE) so THP cannot turn 512 faults into one. The descriptor benchmarks make the
//! last descriptor ready, so each call scans all of them and returns at once.

use std::ptr::null_mut;

use serde_json::json;

use super::switch::{close, ensure_fds, errno, eventfd};
use super::{BenchError, Benchmark, Ctx, Outcome};
use crate::harness::clock::{Clock, Monotonic};

pub static BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        id: "mem/mmap",
        definition: "mmap + munmap of anonymous memory (4 KiB and 1 MiB), untouched and with every page written",
        default: true,
        run: mmap,
    },
    Benchmark {
        id: "mem/fault-read",
        definition: "first read of a 4 KiB page of fresh anonymous memory (maps the zero page), per page",
        default: true,
        run: fault_read,
    },
    Benchmark {
        id: "mem/fault-write",
        definition: "first write to a 4 KiB page of fresh anonymous memory (allocates and zeroes it), per page",
        default: true,
        run: fault_write,
    },
    Benchmark {
        id: "mem/fault-thp",
        definition: "first write to a 2 MiB transparent huge page (MADV_HUGEPAGE), per huge page",
        default: true,
        run: fault_thp,
    },
    Benchmark {
        id: "mem/read-file",
        definition: "pread of 4 KiB and 1 MiB of a file in the page cache",
        default: true,
        run: read_file,
    },
    Benchmark {
        id: "mem/select",
        definition: "select over 10 and 1000 eventfds, the last one ready",
        default: true,
        run: select,
    },
    Benchmark {
        id: "mem/poll",
        definition: "poll over 10 and 1000 eventfds, the last one ready",
        default: true,
        run: poll,
    },
    Benchmark {
        id: "mem/epoll",
        definition: "epoll_wait on an epoll set of 10 and 1000 eventfds, the last one ready",
        default: true,
        run: epoll,
    },
];

type R = Result<Vec<Outcome>, BenchError>;

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

/// Anonymous private mapping, unmapped on drop.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize) -> Result<Region, BenchError> {
        // SAFETY: anonymous private mapping, checked.
        let p = unsafe {
            libc::mmap(
                null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(BenchError::failed(&format!("mmap of {len} bytes"), errno()));
        }
        Ok(Region { ptr: p.cast(), len })
    }

    fn advise(&self, advice: i32) -> Result<(), BenchError> {
        // SAFETY: advising our own mapping.
        if unsafe { libc::madvise(self.ptr.cast(), self.len, advice) } != 0 {
            return Err(BenchError::failed("madvise", errno()));
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: what new() mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn mmap(ctx: &Ctx, b: &Benchmark) -> R {
    let mut outs = Vec::new();
    for (name, len) in [("4KiB", PAGE), ("1MiB", 1 << 20)] {
        for touch in [false, true] {
            let mut o = ctx.batched_fallible(b, &mut |n| {
                for _ in 0..n {
                    let r = Region::new(len)?;
                    if touch {
                        for off in (0..len).step_by(PAGE) {
                            // SAFETY: inside the mapping.
                            unsafe { r.ptr.add(off).write_volatile(1) };
                        }
                    }
                    drop(r);
                }
                Ok(())
            })?;
            o.id = format!(
                "{}/{name}-{}",
                b.id,
                if touch { "touched" } else { "untouched" }
            );
            o.params.insert("bytes".into(), json!(len));
            o.params.insert("touched".into(), json!(touch));
            outs.push(o);
        }
    }
    Ok(outs)
}

/// Time first touches of `pages` pages of `step` bytes in a fresh region; per page, ns.
fn fault_bench(
    ctx: &Ctx,
    b: &Benchmark,
    step: usize,
    pages: usize,
    advice: i32,
    write: bool,
) -> Result<Outcome, BenchError> {
    let clock = Monotonic;
    let mut o = ctx.individual(b, &mut || {
        // Over-allocate by one step so the touched range can start step-aligned (THP needs it).
        let r = Region::new(step * (pages + 1))?;
        r.advise(advice)?;
        let start = (r.ptr as usize).next_multiple_of(step) as *mut u8;
        let mut sum = 0u8;
        let t0 = clock.now_ns();
        for i in 0..pages {
            // SAFETY: inside the mapping.
            unsafe {
                let p = start.add(i * step);
                if write {
                    p.write_volatile(1);
                } else {
                    sum = sum.wrapping_add(p.read_volatile());
                }
            }
        }
        let t1 = clock.now_ns();
        std::hint::black_box(sum);
        drop(r);
        Ok((t1 - t0) as f64 / pages as f64)
    })?;
    o.params.insert("page_bytes".into(), json!(step));
    o.params.insert("pages_per_sample".into(), json!(pages));
    o.definition = format!(
        "{} (a sample: first touches of {pages} fresh pages, divided by {pages})",
        b.definition
    );
    Ok(o)
}

fn fault_read(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![fault_bench(
        ctx,
        b,
        PAGE,
        256,
        libc::MADV_NOHUGEPAGE,
        false,
    )?])
}

fn fault_write(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![fault_bench(
        ctx,
        b,
        PAGE,
        256,
        libc::MADV_NOHUGEPAGE,
        true,
    )?])
}

/// The selected mode in /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
pub fn thp_mode() -> Option<String> {
    let t = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = t.find('[')? + 1;
    let end = t[start..].find(']')? + start;
    Some(t[start..end].to_string())
}

fn fault_thp(ctx: &Ctx, b: &Benchmark) -> R {
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
    let mut o = fault_bench(ctx, b, HUGE, 4, libc::MADV_HUGEPAGE, true)?;
    // Whether the kernel really gave huge pages: AnonHugePages grows while a region is held.
    let r = Region::new(HUGE * 2)?;
    r.advise(libc::MADV_HUGEPAGE)?;
    let before = anon_huge_kb();
    let start = (r.ptr as usize).next_multiple_of(HUGE) as *mut u8;
    // SAFETY: inside the mapping.
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
    Ok(vec![o])
}

fn anon_huge_kb() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let l = t.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

fn read_file(ctx: &Ctx, b: &Benchmark) -> R {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let dir = ctx
        .opts
        .scratch_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir);
    let mut f = tempfile::tempfile_in(&dir)
        .map_err(|e| BenchError::failed(&format!("temporary file in {}", dir.display()), e))?;
    f.write_all(&vec![7u8; 1 << 20])
        .map_err(|e| BenchError::failed("write", e))?;
    let fd = f.as_raw_fd();
    let mut buf = vec![0u8; 1 << 20];
    let mut outs = Vec::new();
    for (name, len) in [("4KiB", PAGE), ("1MiB", 1 << 20)] {
        let mut o = ctx.batched_fallible(b, &mut |n| {
            for _ in 0..n {
                // SAFETY: buf holds at least len bytes.
                if unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), len, 0) } != len as isize {
                    return Err(BenchError::failed("pread", errno()));
                }
            }
            Ok(())
        })?;
        o.id = format!("{}/{name}", b.id);
        o.params.insert("bytes".into(), json!(len));
        outs.push(o);
    }
    Ok(outs)
}

/// `n` eventfds, the last one readable; closed on drop.
struct Fds(Vec<i32>);

impl Fds {
    fn new(n: usize) -> Result<Fds, BenchError> {
        ensure_fds(n as u64 + 64)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            match eventfd() {
                Ok(fd) => v.push(fd),
                Err(e) => {
                    v.into_iter().for_each(close);
                    return Err(e);
                }
            }
        }
        let one: u64 = 1;
        let last = *v.last().expect("n > 0");
        // SAFETY: 8 bytes from a local.
        unsafe { libc::write(last, (&one as *const u64).cast(), 8) };
        Ok(Fds(v))
    }
}

impl Drop for Fds {
    fn drop(&mut self) {
        self.0.iter().copied().for_each(close);
    }
}

const COUNTS: [usize; 2] = [10, 1000];

fn per_count(
    ctx: &Ctx,
    b: &Benchmark,
    mut one: impl FnMut(&Ctx, &Benchmark, &Fds) -> Result<Outcome, BenchError>,
) -> R {
    let mut outs = Vec::new();
    for n in COUNTS {
        let id = format!("{}/{n}", b.id);
        match Fds::new(n).and_then(|fds| one(ctx, b, &fds)) {
            Ok(mut o) => {
                o.id = id;
                o.params.insert("fds".into(), json!(n));
                outs.push(o);
            }
            // One count failing (a descriptor limit) leaves the other measured.
            Err(e) => outs.push(Outcome::failed(id, b, e)),
        }
    }
    Ok(outs)
}

fn select(ctx: &Ctx, b: &Benchmark) -> R {
    per_count(ctx, b, |ctx, b, fds| {
        let max = *fds.0.iter().max().expect("fds");
        if max >= libc::FD_SETSIZE as i32 {
            return Err(BenchError::Skipped(format!(
                "descriptor {max} is beyond select's FD_SETSIZE ({})",
                libc::FD_SETSIZE
            )));
        }
        // SAFETY: zeroed fd_set is empty; every fd is below FD_SETSIZE.
        let mut all: libc::fd_set = unsafe { std::mem::zeroed() };
        for &fd in &fds.0 {
            unsafe { libc::FD_SET(fd, &mut all) };
        }
        ctx.batched_fallible(b, &mut |k| {
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
    })
}

fn poll(ctx: &Ctx, b: &Benchmark) -> R {
    per_count(ctx, b, |ctx, b, fds| {
        let mut pfds: Vec<libc::pollfd> = fds
            .0
            .iter()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        ctx.batched_fallible(b, &mut |k| {
            for _ in 0..k {
                // SAFETY: valid array of pollfds.
                let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
                if r != 1 {
                    return Err(BenchError::failed("poll", errno()));
                }
            }
            Ok(())
        })
    })
}

fn epoll(ctx: &Ctx, b: &Benchmark) -> R {
    per_count(ctx, b, |ctx, b, fds| {
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
        ctx.batched_fallible(b, &mut |k| {
            for _ in 0..k {
                // SAFETY: events has room for every descriptor.
                let r =
                    unsafe { libc::epoll_wait(ep.0, events.as_mut_ptr(), events.len() as i32, 0) };
                if r != 1 {
                    return Err(BenchError::failed("epoll_wait", errno()));
                }
            }
            Ok(())
        })
    })
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

    #[test]
    fn a_region_is_writable_and_advisable() {
        let r = Region::new(HUGE).unwrap();
        r.advise(libc::MADV_NOHUGEPAGE).unwrap();
        unsafe { r.ptr.write_volatile(3) };
        assert_eq!(unsafe { r.ptr.read_volatile() }, 3);
    }
}
