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
//! write its runs to disk before it tries to save them (`commands::session::save_or_keep`). A second
//! failure, with the reserve gone, aborts as before: the reserve buys one margin, not a
//! guarantee. Large buffers whose failure is expected (a PNG's bitmap) use `try_reserve` and
//! fail with a message instead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// How much address space the reserve holds back.
pub const RESERVE_BYTES: usize = 2 << 20;

/// One reserve: its mapping and whether it was ever mapped or given back. The process has one
/// (`HELD`, what the allocator and the commands use); a test makes its own, so that spending
/// one in a test leaves the process's as it was for every other test.
struct Held {
    at: AtomicPtr<libc::c_void>,
    len: AtomicUsize,
    spent: AtomicBool,
    armed: AtomicBool,
}

impl Held {
    const fn new() -> Held {
        Held {
            at: AtomicPtr::new(std::ptr::null_mut()),
            len: AtomicUsize::new(0),
            spent: AtomicBool::new(false),
            armed: AtomicBool::new(false),
        }
    }

    fn arm(&self, bytes: usize) {
        // SAFETY: an anonymous, inaccessible, unreserved mapping the kernel places; nothing
        // reads or writes it, and `release` is its only unmapper.
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
            && self
                .at
                .compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.len.store(bytes, Ordering::SeqCst);
            self.armed.store(true, Ordering::SeqCst);
        } else if p != libc::MAP_FAILED {
            // SAFETY: the mapping just made, which nothing else knows of.
            unsafe { libc::munmap(p, bytes) };
        }
    }

    fn release(&self) -> bool {
        let p = self.at.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if p.is_null() {
            return false;
        }
        // SAFETY: the mapping `arm` made, taken out of `at` above so no one unmaps it twice.
        unsafe { libc::munmap(p, self.len.load(Ordering::SeqCst)) };
        self.spent.store(true, Ordering::SeqCst);
        true
    }
}

/// The process's reserve.
static HELD: Held = Held::new();

/// Map the reserve (once; a process that cannot map it runs without one).
pub fn arm(bytes: usize) {
    HELD.arm(bytes);
}

/// Give the reserve back to the system; false when there was none left.
fn release() -> bool {
    HELD.release()
}

/// Whether memory is known to be short: an allocation failed and the reserve was used, or
/// `main` could not even map it.
pub fn short() -> bool {
    spent() || !HELD.armed.load(Ordering::SeqCst)
}

/// Whether an allocation failed and the reserve was used.
pub fn spent() -> bool {
    HELD.spent.load(Ordering::SeqCst)
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
    use super::Held;

    #[test]
    fn an_armed_reserve_is_held_until_spent() {
        // A reserve of the test's own: the process's (which other tests' code consults) stays
        // as it was.
        let held = Held::new();
        held.arm(1 << 20);
        held.arm(1 << 20);
        assert!(!held.spent.load(std::sync::atomic::Ordering::SeqCst));
        assert!(held.armed.load(std::sync::atomic::Ordering::SeqCst));
        assert!(held.release());
        assert!(held.spent.load(std::sync::atomic::Ordering::SeqCst));
        assert!(!held.release(), "given back once");
        assert!(!super::spent(), "the process's reserve is not the test's");
    }
}
