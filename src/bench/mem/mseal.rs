//! `mem/mseal` and `mem/mseal-mprotect-refused`: sealing one page of a larger reservation
//! (6.10), and the mprotect a sealed page refuses.

use super::*;

const RESERVATION_PAGES: usize = 1 << 18;

fn mseal_page(p: *mut u8) -> i64 {
    // SAFETY: no memory is read or written; the range is a page of ours.
    unsafe { libc::syscall(libc::SYS_mseal, p, PAGE, 0) }
}

/// A PROT_NONE reservation of `pages` pages (never unmapped if any of it is sealed: a sealed
/// page cannot be, which is the point; the worker's exit frees it).
fn reserve(pages: usize) -> Result<*mut u8, BenchError> {
    // SAFETY: a fresh private anonymous reservation.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            pages * PAGE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(BenchError::failed("mmap of a reservation", errno()));
    }
    Ok(p.cast())
}

pub(super) fn mseal(m: &Meter, _: &Case) -> Measured {
    let clock = Monotonic;
    let mut pool = reserve(RESERVATION_PAGES)?;
    if mseal_page(pool) != 0 {
        return Err(BenchError::of_call("mseal", "6.10"));
    }
    let mut next = 1usize;
    m.individual(&mut || {
        if next == RESERVATION_PAGES {
            pool = reserve(RESERVATION_PAGES)?;
            next = 0;
        }
        // SAFETY: a page inside the reservation.
        let p = unsafe { pool.add(next * PAGE) };
        next += 1;
        let t0 = clock.now_ns();
        let r = mseal_page(p);
        let t1 = clock.now_ns();
        if r != 0 {
            return Err(BenchError::failed("mseal", errno()));
        }
        Ok(t1.saturating_sub(t0) as f64)
    })
}

pub(super) fn mseal_mprotect_refused(m: &Meter, _: &Case) -> Measured {
    let p = reserve(1)?;
    if mseal_page(p) != 0 {
        return Err(BenchError::of_call("mseal", "6.10"));
    }
    // SAFETY: a page of ours; the seal refuses the change.
    let call = || unsafe { libc::mprotect(p.cast(), PAGE, libc::PROT_READ) };
    if call() == 0 || errno().raw_os_error() != Some(libc::EPERM) {
        return Err(BenchError::Failed(
            "mprotect of a sealed page was not refused with EPERM".into(),
        ));
    }
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            std::hint::black_box(call());
        }
    }))
}
