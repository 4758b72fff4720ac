//! What a worker may leave behind in the kernel's IPC namespaces, and its removal. Benchmarks
//! remove their objects themselves; this is for a worker that was killed (timeout, interrupt,
//! crash) between creating an object and removing it. The coordinator snapshots the SysV
//! object ids before a worker starts and afterwards removes every new object that is
//! IPC_PRIVATE (key 0), created by this user, since the worker started. It also unlinks the
//! run's POSIX queue name. `/proc/sysvipc` gives no creator pid for queues and semaphores, so
//! a private object another program of the same user created in that same window would be
//! removed too; oscost accepts that rare risk over leaking objects that live until reboot.
//!
//! When the coordinator itself is killed (`kill -9`) there is no one left to snapshot, so the
//! worker removes its own objects. It asks for SIGTERM when its parent dies
//! (`on_parent_death`); the handler sets `DYING`, and the sampler unwinds out of the benchmark
//! at the next batch boundary, so each object's owner removes it in `Drop`. A signal delivered
//! right after `shmget` returns (signals are delivered at system call exit) would otherwise
//! leak the segment it created. If unwinding has not ended the worker within a second,
//! SIGALRM removes what `HELD` lists (every SysV object a benchmark holds is entered there)
//! and exits. Only async-signal-safe work happens in the handlers.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Kinds of SysV object, as `HELD` encodes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Msg = 1,
    Shm = 2,
    Sem = 3,
}

/// Objects the worker holds now: `kind << 32 | id`, 0 for a free slot.
static HELD: [AtomicI64; 8] = [const { AtomicI64::new(0) }; 8];

/// A slot of `HELD`, freed on drop (after the owner removed the object).
#[derive(Debug)]
pub struct Held(Option<usize>);

/// Enter an object in `HELD` (a benchmark holds few at once; with every slot taken the
/// object is still removed by its owner, only not by the handler).
pub fn hold(kind: Kind, id: i32) -> Held {
    let v = ((kind as i64) << 32) | i64::from(id as u32);
    Held(HELD.iter().position(|s| {
        s.compare_exchange(0, v, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }))
}

impl Drop for Held {
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

/// SysV object ids present at some moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub msg: HashSet<i64>,
    pub shm: HashSet<i64>,
    pub sem: HashSet<i64>,
}

/// One row of /proc/sysvipc/{msg,shm,sem}.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Object {
    pub key: i64,
    pub id: i64,
    pub cuid: u32,
    pub ctime: i64,
}

/// Columns of key, id, cuid and ctime in each table.
fn columns(kind: &str) -> (usize, usize, usize, usize) {
    match kind {
        "msg" => (0, 1, 9, 13),
        "shm" => (0, 1, 9, 13),
        _ => (0, 1, 6, 9), // sem
    }
}

pub fn parse(kind: &str, text: &str) -> Vec<Object> {
    let (k, i, u, c) = columns(kind);
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(Object {
                key: f.get(k)?.parse().ok()?,
                id: f.get(i)?.parse().ok()?,
                cuid: f.get(u)?.parse().ok()?,
                ctime: f.get(c)?.parse().ok()?,
            })
        })
        .collect()
}

fn read(kind: &str) -> Vec<Object> {
    std::fs::read_to_string(format!("/proc/sysvipc/{kind}"))
        .map(|t| parse(kind, &t))
        .unwrap_or_default()
}

pub fn snapshot() -> Snapshot {
    let ids = |k| read(k).into_iter().map(|o| o.id).collect();
    Snapshot {
        msg: ids("msg"),
        shm: ids("shm"),
        sem: ids("sem"),
    }
}

/// Objects in `now` that a worker started at `since` (seconds) could have made.
pub fn leftovers(before: &HashSet<i64>, now: &[Object], uid: u32, since: i64) -> Vec<i64> {
    now.iter()
        .filter(|o| !before.contains(&o.id) && o.key == 0 && o.cuid == uid && o.ctime >= since - 1)
        .map(|o| o.id)
        .collect()
}

/// Remove what the worker left; returns a description of each removed object.
pub fn clean(before: &Snapshot, since: i64, mq_name: &str) -> Vec<String> {
    // SAFETY: plain syscalls on ids read from /proc, and a name we own.
    let uid = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for id in leftovers(&before.msg, &read("msg"), uid, since) {
        // SAFETY: an integer id and a null buffer, as IPC_RMID takes.
        if unsafe { libc::msgctl(id as i32, libc::IPC_RMID, std::ptr::null_mut()) } == 0 {
            removed.push(format!("message queue {id}"));
        }
    }
    for id in leftovers(&before.shm, &read("shm"), uid, since) {
        // SAFETY: as above.
        if unsafe { libc::shmctl(id as i32, libc::IPC_RMID, std::ptr::null_mut()) } == 0 {
            removed.push(format!("shared memory segment {id}"));
        }
    }
    for id in leftovers(&before.sem, &read("sem"), uid, since) {
        // SAFETY: an integer id, as IPC_RMID takes.
        if unsafe { libc::semctl(id as i32, 0, libc::IPC_RMID) } == 0 {
            removed.push(format!("semaphore set {id}"));
        }
    }
    if let Ok(name) = std::ffi::CString::new(mq_name)
        // SAFETY: a NUL-terminated name that lives through the call.
        && unsafe { libc::mq_unlink(name.as_ptr()) } == 0
    {
        removed.push(format!("POSIX queue {mq_name}"));
    }
    removed
}

/// Seconds since the epoch, as /proc/sysvipc reports times.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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
        let held = hold(Kind::Msg, id);
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

    const MSG: &str = "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n\
             0          3   600           0          0     0     0     0     0     0     0          0          0 1700000100\n\
             0          4   600           0          0     0     0  1000  1000  1000  1000          0          0 1700000100\n\
         12345          5   600           0          0     0     0     0     0     0     0          0          0 1700000100\n\
             0          1   600           0          0     0     0     0     0     0     0          0          0 1600000000\n";

    #[test]
    fn only_new_private_own_recent_objects_are_leftovers() {
        let objs = parse("msg", MSG);
        assert_eq!(objs.len(), 4);
        assert_eq!(
            objs[0],
            Object {
                key: 0,
                id: 3,
                cuid: 0,
                ctime: 1_700_000_100
            }
        );
        let before: HashSet<i64> = [1].into_iter().collect();
        // id 3: ours, private, new. id 4: another user. id 5: has a key. id 1: was there.
        assert_eq!(leftovers(&before, &objs, 0, 1_700_000_000), vec![3]);
        // Created before the worker started: not its doing.
        assert!(leftovers(&HashSet::new(), &objs, 0, 1_700_000_200).is_empty());
    }

    #[test]
    fn sem_columns_differ() {
        let t = "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n\
                 0          7   600          1     0     0     0     0          0 1700000100\n";
        assert_eq!(
            parse("sem", t),
            vec![Object {
                key: 0,
                id: 7,
                cuid: 0,
                ctime: 1_700_000_100
            }]
        );
    }
}
