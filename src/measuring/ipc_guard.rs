//! What a worker makes in the kernel's IPC namespaces, and how none of it outlives the worker
//! without oscost ever removing an object that is not its own. Workers of the ipc/ family run
//! in an IPC namespace of their own (`private_namespace`), so the kernel destroys their SysV
//! objects and POSIX queues when they exit, even after SIGKILL; the coordinator removes no
//! SysV object at all (it once removed every new private object of its user created while a
//! worker ran, which took other programs' objects too).
//!
//! Where no namespace can be had, each benchmark removes its objects itself, and so does a
//! worker that is told to go: it asks for SIGTERM when its parent dies (`on_parent_death`) and
//! the coordinator stops a worker with SIGTERM before SIGKILL; the handler sets `DYING`, and
//! the sampler unwinds out of the benchmark at the next batch boundary, so each object's owner
//! removes it in `Drop`. A signal delivered right after `shmget` returns (signals are delivered
//! at system call exit) would otherwise leak the segment it created. If unwinding has not
//! ended the worker within a second, SIGALRM removes what `HELD` lists (every SysV object a
//! benchmark holds is entered there) and exits. Only async-signal-safe work happens in the
//! handlers.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Kinds of SysV object, as `HELD` encodes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A message queue.
    Msg = 1,
    /// A shared memory segment.
    Shm = 2,
    /// A semaphore set.
    Sem = 3,
}

/// Objects the worker holds now: `kind << 32 | id`, 0 for a free slot.
static HELD: [AtomicI64; 8] = [const { AtomicI64::new(0) }; 8];

/// A slot of `HELD`, freed on drop (after the owner removed the object).
#[derive(Debug)]
pub struct HeldSlot(Option<usize>);

/// Enter an object in `HELD` (a benchmark holds few at once; with every slot taken the
/// object is still removed by its owner, only not by the handler).
pub fn hold(kind: ObjectKind, id: i32) -> HeldSlot {
    let v = ((kind as i64) << 32) | i64::from(id as u32);
    HeldSlot(HELD.iter().position(|s| {
        s.compare_exchange(0, v, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }))
}

impl Drop for HeldSlot {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            HELD[i].store(0, Ordering::SeqCst);
        }
    }
}

/// Remove every held object. Async-signal-safe.
fn remove_held() {
    for slot in &HELD {
        let v = slot.swap(0, Ordering::SeqCst);
        let id = (v & 0xffff_ffff) as i32;
        // SAFETY: IPC_RMID on ids this process created; a null buffer is what IPC_RMID takes.
        unsafe {
            match v >> 32 {
                1 => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                2 => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                3 => libc::semctl(id, 0, libc::IPC_RMID),
                _ => 0,
            };
        }
    }
}

/// Set once the worker has been told to go (its parent died): the sampler unwinds at the next
/// batch boundary, so every object is removed by its owner's `Drop`, even one whose creating
/// system call had just returned when the signal came (which `HELD` cannot know yet).
static DYING: AtomicBool = AtomicBool::new(false);

/// What the unwinding carries (no panic message: `resume_unwind` skips the panic hook).
pub struct ParentGone;

/// Unwind out of the benchmark if the worker has been told to go. Called between batches.
pub fn unwind_if_dying() {
    if DYING.load(Ordering::Relaxed) {
        std::panic::resume_unwind(Box::new(ParentGone));
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    if DYING.swap(true, Ordering::SeqCst) {
        // A second signal: no more waiting.
        remove_held();
        // SAFETY: _exit is async-signal-safe and ends the process at once.
        unsafe { libc::_exit(128 + sig) };
    }
    // Give the unwinding a second; a benchmark blocked for good is ended by SIGALRM.
    // SAFETY: alarm is async-signal-safe.
    unsafe { libc::alarm(1) };
}

extern "C" fn on_alarm(_: libc::c_int) {
    remove_held();
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(128 + libc::SIGTERM) };
}

/// In the worker: SIGTERM when the parent (the coordinator, or the wrapper it started) dies.
/// SIGTERM, SIGINT and SIGHUP make the benchmark unwind at its next batch (its objects removed
/// by their owners); if that takes over a second, SIGALRM removes the held objects and exits.
pub fn on_parent_death() {
    for (sig, handler) in [
        (libc::SIGTERM, on_signal as extern "C" fn(libc::c_int)),
        (libc::SIGINT, on_signal),
        (libc::SIGHUP, on_signal),
        (libc::SIGALRM, on_alarm),
    ] {
        // SAFETY: a zeroed sigaction with a handler that only does async-signal-safe work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) };
}

/// In the worker, before any benchmark of the ipc/ family makes an object: an IPC namespace of
/// its own (`unshare(CLONE_NEWIPC)`; without the privilege, inside a user namespace of its own
/// that maps this user to itself). Every SysV object and POSIX queue the worker and its
/// children make then lives in that namespace, which nothing else can see, and the kernel
/// destroys them all when the last of those processes exits, however it exits (SIGKILL too).
/// So the coordinator never has to guess which objects are oscost's: it removes none.
///
/// Returns why no namespace could be had (user namespaces disabled, a seccomp wrapper that
/// refuses `unshare`); the worker then makes its objects in the namespace it was started in
/// and removes them itself (each owner's `Drop`, and `HELD` from the signal handlers).
pub fn private_namespace() -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    match unshare(CloneFlags::CLONE_NEWIPC) {
        Ok(()) => return Ok(()),
        Err(nix::errno::Errno::EPERM) => {}
        Err(e) => return Err(format!("unshare(CLONE_NEWIPC): {e}")),
    }
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWIPC)
        .map_err(|e| format!("unshare(CLONE_NEWUSER | CLONE_NEWIPC): {e}"))?;
    // This user is itself inside (else it would be the overflow user, 65534): files made in
    // the scratch directory keep their owner, and perf counters still see their own process.
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("/proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1"))?;
    write("gid_map", format!("{gid} {gid} 1"))
}

/// Unlink the run's POSIX queue name in the coordinator's namespace, in case a worker that
/// could not have a namespace of its own was killed holding it. The name is oscost's own
/// (`default_mq_name`: the coordinator's pid in it), so nothing else's is touched.
pub fn unlink_queue(mq_name: &str) -> Option<String> {
    let name = std::ffi::CString::new(mq_name).ok()?;
    // SAFETY: a NUL-terminated name that lives through the call.
    (unsafe { libc::mq_unlink(name.as_ptr()) } == 0).then(|| format!("POSIX queue {mq_name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_objects_are_removed_by_the_handler_and_slots_freed() {
        // SAFETY: creating a private queue of our own.
        let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
        if id < 0 {
            return; // no SysV IPC here
        }
        let held = hold(ObjectKind::Msg, id);
        assert!(held.0.is_some());
        remove_held();
        // SAFETY: an all-zero msqid_ds is a valid buffer.
        let mut ds: libc::msqid_ds = unsafe { std::mem::zeroed() };
        // SAFETY: IPC_STAT into that buffer; the queue must be gone.
        let stat = unsafe { libc::msgctl(id, libc::IPC_STAT, &mut ds) };
        assert!(stat < 0);
        drop(held);
        assert!(HELD.iter().all(|s| s.load(Ordering::SeqCst) == 0));
    }
}
