//! The board N copies count on, and each copy's view of it. The board is memory shared
//! across fork (so forked copies count there too): a header line (how many are ready, the
//! state every copy waits on, whether one failed) and then one cache line per copy (its
//! operations, and why it failed), so that no two copies write one line. A copy (`Task`)
//! waits on the state as a futex, runs while its own bit is set, and records its failure.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::Mode;
use crate::measuring::case::BenchError;
use crate::measuring::os::{Mapping, errno};

/// Why a copy could not run: the step that failed and its errno.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskError {
    /// The call or step ("open of its file").
    pub what: &'static str,
    /// errno, 0 when none applies.
    pub errno: i32,
}

impl TaskError {
    /// The step `what` failed with the calling thread's errno.
    pub fn last(what: &'static str) -> TaskError {
        TaskError {
            what,
            errno: errno().raw_os_error().unwrap_or(0),
        }
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.errno == 0 {
            write!(f, "{}", self.what)
        } else {
            write!(
                f,
                "{}: {}",
                self.what,
                std::io::Error::from_raw_os_error(self.errno)
            )
        }
    }
}

const LINE: usize = 128;
// The state every copy reads before each operation is a set of bits: copy 0 runs while
// `FIRST` is set, the others while `OTHERS` is. Each copy tests its own bit, one load and one
// AND whatever the state, so copy 0 alone runs the very loop it runs with every copy (a
// second comparison for the solo state cost a debug build's loop 60% of its speed).
const FIRST: u32 = 0b01;
const OTHERS: u32 = 0b10;
/// Not started yet (the board's zeroed memory).
const WAIT: u32 = 0;
/// Every copy runs.
pub(super) const GO: u32 = FIRST | OTHERS;
/// Copy 0 alone runs; the others wait on the state (a futex) until it moves.
pub(super) const SOLO: u32 = FIRST;
/// Every copy returns.
pub(super) const STOP: u32 = 0b100;

/// The board's header: how many copies are ready, and the state every copy waits on.
#[repr(C)]
pub(super) struct Header {
    pub(super) ready: AtomicU32,
    state: AtomicU32,
    failed: AtomicU32,
}

/// One copy's line on the board: its operations so far, and why it failed.
#[repr(C)]
pub(super) struct Slot {
    pub(super) ops: AtomicU64,
    err_ptr: AtomicUsize,
    err_len: AtomicUsize,
    err_no: AtomicI32,
}

/// Where copies count, in memory shared across fork: a header line, then one line per copy,
/// so that no two copies write one cache line.
pub struct Board {
    map: Mapping,
    pub(super) copies: usize,
}

// SAFETY: the board's memory is read and written only through atomics (`Header`, `Slot`), and
// the mapping lives as long as the board.
unsafe impl Sync for Board {}

impl Board {
    /// A board for `copies` copies.
    pub fn new(copies: usize) -> Result<Board, BenchError> {
        let map = Mapping::anonymous(LINE * (copies + 1), true, 0)?;
        Ok(Board { map, copies })
    }

    pub(super) fn header(&self) -> &Header {
        // SAFETY: the mapping is at least one line, page-aligned, zeroed, and lives as long as
        // the board; Header is atomics only.
        unsafe { &*(self.map.ptr() as *const Header) }
    }

    pub(super) fn slot(&self, i: usize) -> &Slot {
        assert!(i < self.copies);
        // SAFETY: line i+1 lies inside the mapping (copies + 1 lines); Slot is atomics only.
        unsafe { &*(self.map.ptr().add(LINE * (i + 1)) as *const Slot) }
    }

    /// Every copy's operations so far.
    pub fn total(&self) -> u64 {
        (0..self.copies)
            .map(|i| self.slot(i).ops.load(Ordering::Relaxed))
            .sum()
    }

    /// Why the copies failed, once one has said it failed (its own words where it left them).
    pub(super) fn failure(&self) -> Option<String> {
        (self.header().failed.load(Ordering::SeqCst) > 0)
            .then(|| self.first_error().unwrap_or_else(|| "a copy failed".into()))
    }

    fn first_error(&self) -> Option<String> {
        (0..self.copies).find_map(|i| {
            let s = self.slot(i);
            let len = s.err_len.load(Ordering::Acquire);
            if len == 0 {
                return None;
            }
            let ptr = s.err_ptr.load(Ordering::Acquire) as *const u8;
            // SAFETY: a copy stores the pointer and length of a `&'static str` of this binary
            // (a forked copy has the same image at the same addresses), length last.
            let what =
                unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr, len)) };
            let e = TaskError {
                what,
                errno: s.err_no.load(Ordering::Relaxed),
            };
            Some(format!("copy {i} of {}: {e}", self.copies))
        })
    }

    pub(super) fn set_state(&self, state: u32) {
        let h = self.header();
        h.state.store(state, Ordering::SeqCst);
        crate::measuring::os::futex_wake(&h.state, i32::MAX, false);
    }
}

/// What a copy sees: its index and CPU, and the board it counts on.
pub struct Task<'a> {
    /// Which copy, from 0.
    pub index: usize,
    /// The CPU it is pinned to.
    pub cpu: usize,
    /// Process or thread.
    pub mode: Mode,
    board: &'a Board,
    /// The state bit under which this copy runs (`FIRST` or `OTHERS`).
    runs_under: u32,
}

impl<'a> Task<'a> {
    pub(super) fn new(index: usize, cpu: usize, mode: Mode, board: &'a Board) -> Task<'a> {
        let runs_under = if index == 0 { FIRST } else { OTHERS };
        Task {
            index,
            cpu,
            mode,
            board,
            runs_under,
        }
    }

    /// Say this copy is prepared and wait until every copy is: true to go on, false when the
    /// case is being stopped instead.
    pub fn start(&self) -> bool {
        let h = self.board.header();
        h.ready.fetch_add(1, Ordering::SeqCst);
        loop {
            let s = h.state.load(Ordering::SeqCst);
            if s != WAIT {
                return self.may_run(s);
            }
            // Shared: forked copies wait on the same page. Returns at once if it moved.
            crate::measuring::os::futex_wait(&h.state, WAIT, false);
        }
    }

    /// Whether the copies are still to run (a copy other than the first waits here while the
    /// first runs alone).
    #[inline(always)]
    pub fn running(&self) -> bool {
        let s = self.board.header().state.load(Ordering::Relaxed);
        s & self.runs_under != 0 || self.may_run(s)
    }

    /// The slow path of `running`: wait out a solo phase (copies but the first), then say
    /// whether to go on.
    #[cold]
    fn may_run(&self, mut s: u32) -> bool {
        let h = self.board.header();
        loop {
            if s & self.runs_under != 0 {
                return true;
            }
            if s != SOLO {
                return false;
            }
            crate::measuring::os::futex_wait(&h.state, SOLO, false);
            s = h.state.load(Ordering::SeqCst);
        }
    }

    /// Count `k` operations done.
    #[inline(always)]
    pub fn done(&self, k: u64) {
        let ops = &self.board.slot(self.index).ops;
        // One writer per line: a plain store, no locked instruction in the loop.
        ops.store(ops.load(Ordering::Relaxed) + k, Ordering::Relaxed);
    }

    pub(super) fn record(&self, e: TaskError) {
        let s = self.board.slot(self.index);
        s.err_no.store(e.errno, Ordering::Relaxed);
        s.err_ptr.store(e.what.as_ptr() as usize, Ordering::Release);
        s.err_len.store(e.what.len(), Ordering::Release);
        self.board.header().failed.fetch_add(1, Ordering::SeqCst);
    }
}
