//! The emergency memory reserve: what lets a measured run reach the store when memory runs
//! short (an `ulimit -v`, a cgroup's limit, a full machine).
//!
//! At start `main` maps a few MiB of address space with no access (`arm`), which counts
//! against `RLIMIT_AS` like any mapping but costs no memory. The global allocator (`Reserve`)
//! is the system's; when an allocation fails, it unmaps the reserve once and tries again, so
//! the allocation that would have aborted the process (Rust's default on failure) succeeds, and
//! what follows it (merging the repetitions, encoding the run, the save) has that much room.
//! `spent` says afterwards that it happened, so the command can say memory ran short, and
//! `short` (spent, or never mapped because memory was short from the start) makes a command
//! write its runs to disk before it tries to save them (`commands::save_or_keep`). A second
//! failure, with the reserve gone, aborts as before: the reserve buys one margin, not a
//! guarantee. Large buffers whose failure is expected (a PNG's bitmap) use `try_reserve` and
//! fail with a message instead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// How much address space the reserve holds back.
pub const RESERVE_BYTES: usize = 2 << 20;

static RESERVE: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
static RESERVE_LEN: AtomicUsize = AtomicUsize::new(0);
static SPENT: AtomicBool = AtomicBool::new(false);
static ARMED: AtomicBool = AtomicBool::new(false);

/// Map the reserve (once; a process that cannot map it runs without one).
pub fn arm(bytes: usize) {
    // SAFETY: an anonymous, inaccessible, unreserved mapping the kernel places; nothing reads
    // or writes it, and `release` is its only unmapper.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p != libc::MAP_FAILED
        && RESERVE
            .compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    {
        RESERVE_LEN.store(bytes, Ordering::SeqCst);
        ARMED.store(true, Ordering::SeqCst);
    } else if p != libc::MAP_FAILED {
        // SAFETY: the mapping just made, which nothing else knows of.
        unsafe { libc::munmap(p, bytes) };
    }
}

/// Give the reserve back to the system; false when there was none left.
fn release() -> bool {
    let p = RESERVE.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if p.is_null() {
        return false;
    }
    // SAFETY: the mapping `arm` made, taken out of RESERVE above so no one unmaps it twice.
    unsafe { libc::munmap(p, RESERVE_LEN.load(Ordering::SeqCst)) };
    SPENT.store(true, Ordering::SeqCst);
    true
}

/// Whether memory is known to be short: an allocation failed and the reserve was used, or
/// `main` could not even map it.
pub fn short() -> bool {
    spent() || !ARMED.load(Ordering::SeqCst)
}

/// Whether an allocation failed and the reserve was used.
pub fn spent() -> bool {
    SPENT.load(Ordering::SeqCst)
}

/// Whether `bytes` could be allocated now, asked of the system directly (a failed probe does
/// not spend the reserve): a check before work whose allocations cannot fail gracefully.
pub fn room_for(bytes: usize) -> bool {
    let Ok(layout) = Layout::from_size_align(bytes.max(1), 16) else {
        return false;
    };
    // SAFETY: a plain allocation of a valid layout, freed at once with the same layout.
    unsafe {
        let p = System.alloc(layout);
        if p.is_null() {
            return false;
        }
        System.dealloc(p, layout);
    }
    true
}

/// The system allocator, with the reserve given back on the first failure.
pub struct Reserve;

// SAFETY: every call is forwarded to `System` with the same arguments; a failed call is
// retried once after unmapping memory no allocation ever used.
unsafe impl GlobalAlloc for Reserve {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() && release() {
            // SAFETY: as above.
            return unsafe { System.alloc(layout) };
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() && release() {
            // SAFETY: as above.
            return unsafe { System.alloc_zeroed(layout) };
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received; a failed realloc leaves `ptr` valid to retry with.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() && release() {
            // SAFETY: as above.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_armed_reserve_is_held_until_spent() {
        // The tests' process is not armed by main; arming twice keeps the first mapping.
        super::arm(1 << 20);
        super::arm(1 << 20);
        assert!(
            !super::spent()
                || super::RESERVE
                    .load(std::sync::atomic::Ordering::SeqCst)
                    .is_null()
        );
        assert!(super::release() || super::spent());
        assert!(super::spent());
        assert!(!super::release(), "given back once");
    }
}
