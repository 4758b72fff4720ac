//! ipc/: System V message queues, shared memory and semaphores, POSIX message queues, unix
//! sockets and pipes: creating the objects, and moving a message through them in one process
//! (the kernel's copy and bookkeeping, no switch) or between two (with the switches).
//!
//! No IPC object outlives oscost. Every SysV object is IPC_PRIVATE and removed as soon as the
//! benchmark is done with it; the POSIX queue is unlinked right after it is opened (it lives
//! while open). If a worker is killed in between, the coordinator removes what it created (see
//! `measuring::ipc_guard`). A limit that stops a benchmark (msgmni, shmmax, shmall) fails it with
//! the limit named.

use std::ffi::{CString, c_long, c_void};

use super::{PAGE_AND_MIB, round_trips};
use crate::catalogue;

use crate::bench::entry::{Among, Cases, Expect, Param, Variant};
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::ipc_guard::{HeldSlot, ObjectKind, hold};
use crate::measuring::os::{self, PeerProc, close, errno};

catalogue! {
    family { ipc_namespace: true };
    "ipc/msg-create" => msg_create { ladder: Some("ipc/msg-create") }:
        "msgget(IPC_PRIVATE) + msgctl(IPC_RMID): create and remove a SysV message queue";
    "ipc/msg-roundtrip" => msg_roundtrip { cases: Cases::Fixed(MESSAGE_SIZES) }:
        "msgsnd + msgrcv of one message in one process (8 B and 1 KiB)";
    "ipc/msg-pingpong" => msg_pingpong {
        cases: Cases::Placements, preempts: true,
    }:
        "round trip of an 8 B SysV message between two processes (type 1 out, type 2 back)";
    "ipc/shm-create" => shm_create { cases: Cases::Fixed(PAGE_AND_MIB) }:
        "shmget(IPC_PRIVATE) + shmctl(IPC_RMID) of a segment (4 KiB and 1 MiB)";
    "ipc/shm-attach" => shm_attach { cases: Cases::Fixed(ATTACHES) }:
        "shmat + shmdt of a 64 KiB segment, untouched and with every page touched";
    "ipc/sem" => sem:
        "semop +1 then semop -1 on a SysV semaphore in one process";
    // SysV semaphores finish a sleeper's semop at the wake (the waker's call takes and gives
    // on its behalf), so the side that woke it may find its own turn already given and go on
    // without blocking: from one to two switches a round trip on one CPU (1.6 counted here).
    "ipc/sem-pingpong" => sem_pingpong {
        cases: Cases::Placements, preempts: true, default: false, peer: Some("lmbench lat_sem"),
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::Between { lo: 0.9, hi: 2.1 })],
    }:
        "round trip through two SysV semaphores between two processes, each side one semop that takes its own and gives the other's (lmbench's lat_sem, which reports half a round trip)";
    "ipc/posix-mq" => posix_mq:
        "mq_send + mq_receive of an 8 B message in one process";
    "ipc/unix-1b" => unix_1b:
        "send + recv of 1 byte through a unix socketpair in one process";
    "ipc/unix-64k" => unix_64k:
        "send + recv of 64 KiB through a unix socketpair in one process";
    "ipc/pipe-1b" => pipe_1b { ladder: Some("ipc/pipe-1b") }:
        "write + read of 1 byte through a pipe in one process";
}

static MESSAGE_SIZES: &[Variant] = &[
    Variant {
        suffix: "/8B",
        params: &[("bytes", Param::Int(8))],
    },
    Variant {
        suffix: "/1KiB",
        params: &[("bytes", Param::Int(1024))],
    },
];

/// shm-attach's segment size.
const ATTACH_BYTES: i64 = 64 * 1024;

static ATTACHES: &[Variant] = &[
    touched_variant!("/untouched", ATTACH_BYTES, false),
    touched_variant!("/touched", ATTACH_BYTES, true),
];

/// A failed get, with the limit that most likely stopped it.
fn limit_error(what: &str, limit: &str) -> BenchError {
    let e = errno();
    let hint = match e.raw_os_error() {
        Some(libc::ENOSPC) => format!(" (the system limit {limit} is reached)"),
        Some(libc::EINVAL) => format!(" (the size is outside {limit})"),
        Some(libc::ENOMEM) => " (out of memory for the object)".to_string(),
        Some(libc::ENOSYS) => " (this kernel has no System V IPC)".to_string(),
        _ => String::new(),
    };
    BenchError::Failed(format!("{what}: {e}{hint}"))
}

/// A private SysV message queue, removed on drop (and by the worker's handler if it dies).
struct MsgQueue(i32, #[allow(dead_code)] HeldSlot);

impl MsgQueue {
    fn new() -> Result<MsgQueue, BenchError> {
        // SAFETY: plain syscall.
        let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
        if id < 0 {
            return Err(limit_error("msgget", "kernel.msgmni"));
        }
        Ok(MsgQueue(id, hold(ObjectKind::Msg, id)))
    }
}

impl Drop for MsgQueue {
    fn drop(&mut self) {
        // SAFETY: removing our own queue.
        unsafe { libc::msgctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

fn msg_create(m: &Meter, _: &Case) -> Measured {
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            drop(MsgQueue::new()?);
        }
        Ok(())
    })
}

/// A message buffer: mtype then the text.
fn msgbuf(text: usize) -> Vec<u8> {
    let mut v = vec![0u8; std::mem::size_of::<c_long>() + text];
    v[..std::mem::size_of::<c_long>()].copy_from_slice(&1i64.to_ne_bytes());
    v
}

fn msg_roundtrip(m: &Meter, c: &Case) -> Measured {
    let q = MsgQueue::new()?;
    let size = c.int("bytes")? as usize;
    let mut buf = msgbuf(size);
    let p = buf.as_mut_ptr();
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: buf holds an mtype and `size` bytes.
            let ok = unsafe {
                libc::msgsnd(q.0, p.cast(), size, 0) == 0
                    && libc::msgrcv(q.0, p.cast(), size, 0, 0) == size as isize
            };
            if !ok {
                return Err(BenchError::failed("msgsnd/msgrcv", errno()));
            }
        }
        Ok(())
    })
}

/// The peer of msg-pingpong: answer each type-1 message with a type-2 one until the queue goes.
fn msg_echo(qid: i32) {
    let mut buf = [0u8; 16];
    loop {
        // SAFETY: buf holds an mtype and 8 bytes.
        if unsafe { libc::msgrcv(qid, buf.as_mut_ptr().cast(), 8, 1, 0) } != 8 {
            return;
        }
        buf[..8].copy_from_slice(&2i64.to_ne_bytes());
        // SAFETY: as above.
        if unsafe { libc::msgsnd(qid, buf.as_ptr().cast(), 8, 0) } != 0 {
            return;
        }
    }
}

fn msg_pingpong(m: &Meter, c: &Case) -> Measured {
    let q = MsgQueue::new()?;
    let qid = q.0;
    let out = msgbuf(8);
    // The nudge wakes the master if the peer dies: a reply it will see is not from the peer.
    let nudge = move || {
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(&2i64.to_ne_bytes());
        // SAFETY: buf holds an mtype and 8 bytes.
        unsafe { libc::msgsnd(qid, buf.as_ptr().cast(), 8, libc::IPC_NOWAIT) };
    };
    let peer = PeerProc::spawn(c.peer_cpu(), &m.allowed, || msg_echo(qid), nudge)?;
    let mut back = msgbuf(8);
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: both buffers hold an mtype and 8 bytes.
            let ok = unsafe {
                libc::msgsnd(qid, out.as_ptr().cast(), 8, 0) == 0
                    && libc::msgrcv(qid, back.as_mut_ptr().cast(), 8, 2, 0) == 8
            };
            if !ok {
                return Err(BenchError::failed("msgsnd/msgrcv", errno()));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    drop(q);
    r
}

/// A private SysV shared memory segment, removed on drop (and by the worker's handler).
struct Shm(i32, #[allow(dead_code)] HeldSlot);

impl Shm {
    fn new(size: usize) -> Result<Shm, BenchError> {
        // SAFETY: plain syscall.
        let id = unsafe { libc::shmget(libc::IPC_PRIVATE, size, libc::IPC_CREAT | 0o600) };
        if id < 0 {
            return Err(limit_error(
                &format!("shmget of {size} bytes"),
                "kernel.shmmax / shmall / shmmni",
            ));
        }
        Ok(Shm(id, hold(ObjectKind::Shm, id)))
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: removing our own segment.
        unsafe { libc::shmctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

fn shm_create(m: &Meter, c: &Case) -> Measured {
    let size = c.int("bytes")? as usize;
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            drop(Shm::new(size)?);
        }
        Ok(())
    })
}

fn shm_attach(m: &Meter, c: &Case) -> Measured {
    let (size, touch) = (c.int("bytes")? as usize, c.flag("touched"));
    let shm = Shm::new(size)?;
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: attaches our own segment wherever the kernel chooses; checked.
            let p = unsafe { libc::shmat(shm.0, std::ptr::null(), 0) };
            if p as isize == -1 {
                return Err(BenchError::failed("shmat", errno()));
            }
            if touch {
                for off in (0..size).step_by(4096) {
                    // SAFETY: inside the attached segment, which is writable.
                    unsafe { (p as *mut u8).add(off).write_volatile(1) };
                }
            }
            // SAFETY: detaching what was attached above.
            unsafe { libc::shmdt(p) };
        }
        Ok(())
    })
}

fn sem(m: &Meter, _: &Case) -> Measured {
    // SAFETY: plain syscall.
    let id = unsafe { libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        return Err(limit_error("semget", "kernel.sem"));
    }
    struct Rm(i32, #[allow(dead_code)] HeldSlot);
    impl Drop for Rm {
        fn drop(&mut self) {
            // SAFETY: removing our own set.
            unsafe { libc::semctl(self.0, 0, libc::IPC_RMID) };
        }
    }
    let _rm = Rm(id, hold(ObjectKind::Sem, id));
    let mut up = libc::sembuf {
        sem_num: 0,
        sem_op: 1,
        sem_flg: 0,
    };
    let mut down = libc::sembuf {
        sem_num: 0,
        sem_op: -1,
        sem_flg: 0,
    };
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: one valid sembuf each.
            if unsafe { libc::semop(id, &mut up, 1) != 0 || libc::semop(id, &mut down, 1) != 0 } {
                return Err(BenchError::failed("semop", errno()));
            }
        }
        Ok(())
    })
}

/// A private set of `n` SysV semaphores, removed on drop (and by the worker's handler).
struct SemSet(i32, #[allow(dead_code)] HeldSlot);

impl SemSet {
    fn new(n: i32) -> Result<SemSet, BenchError> {
        // SAFETY: plain syscall.
        let id = unsafe { libc::semget(libc::IPC_PRIVATE, n, libc::IPC_CREAT | 0o600) };
        if id < 0 {
            return Err(limit_error("semget", "kernel.sem"));
        }
        Ok(SemSet(id, hold(ObjectKind::Sem, id)))
    }

    /// semop of `op` on semaphore `num`; false when it failed (the set removed).
    fn op(id: i32, num: u16, op: i16, flags: i16) -> bool {
        let mut b = libc::sembuf {
            sem_num: num,
            sem_op: op,
            sem_flg: flags,
        };
        // SAFETY: one valid sembuf.
        unsafe { libc::semop(id, &mut b, 1) == 0 }
    }
}

impl Drop for SemSet {
    fn drop(&mut self) {
        // SAFETY: removing our own set.
        unsafe { libc::semctl(self.0, 0, libc::IPC_RMID) };
    }
}

/// lat_sem's semop: take one of semaphore `take` and give one to `give`, atomically (the give
/// happens only once the take could).
fn take_give(id: i32, take: u16, give: u16) -> bool {
    let mut ops = [
        libc::sembuf {
            sem_num: take,
            sem_op: -1,
            sem_flg: 0,
        },
        libc::sembuf {
            sem_num: give,
            sem_op: 1,
            sem_flg: 0,
        },
    ];
    // SAFETY: two live sembufs on our own set.
    unsafe { libc::semop(id, ops.as_mut_ptr(), 2) == 0 }
}

/// The peer of sem-pingpong, lat_sem's writer: give semaphore 1 once, then take 0 and give 1
/// in one semop, until the set goes.
fn sem_echo(id: i32) {
    if SemSet::op(id, 1, 1, 0) {
        while take_give(id, 0, 1) {}
    }
}

fn sem_pingpong(m: &Meter, c: &Case) -> Measured {
    let set = SemSet::new(2)?;
    let id = set.0;
    // The nudge wakes the master if the peer dies: a give it will see is not from the peer.
    let nudge = move || {
        SemSet::op(id, 1, 1, libc::IPC_NOWAIT as i16);
    };
    let peer = PeerProc::spawn(c.peer_cpu(), &m.allowed, move || sem_echo(id), nudge)?;
    // lat_sem's reader: take 1 and give 0 in one semop; one call a side a round trip.
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            if !take_give(id, 1, 0) {
                return Err(BenchError::failed("semop", errno()));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    drop(set);
    r
}

fn posix_mq(m: &Meter, _: &Case) -> Measured {
    let name =
        CString::new(m.mq_name.clone()).map_err(|_| BenchError::Failed("bad queue name".into()))?;
    // SAFETY: an all-zero mq_attr is a valid value; the fields that matter are set below.
    let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
    attr.mq_maxmsg = 8;
    attr.mq_msgsize = 64;
    // SAFETY: valid name and attributes.
    let q = unsafe {
        libc::mq_open(
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
            0o600 as libc::mode_t,
            &attr as *const libc::mq_attr,
        )
    };
    if q < 0 {
        let e = errno();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => {
                BenchError::Skipped("this kernel has no POSIX message queues".into())
            }
            Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOMEM) => BenchError::Failed(
                format!("mq_open: {e} (fs.mqueue.queues_max or RLIMIT_MSGQUEUE reached)"),
            ),
            _ => BenchError::failed("mq_open", e),
        });
    }
    // The name goes at once: the queue lives while it is open, and nothing is left behind.
    // SAFETY: the name we created.
    unsafe { libc::mq_unlink(name.as_ptr()) };
    let msg = [7u8; 8];
    let mut rbuf = [0u8; 64];
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: valid queue and buffers of the stated sizes.
            let ok = unsafe {
                libc::mq_send(q, msg.as_ptr().cast(), 8, 0) == 0
                    && libc::mq_receive(q, rbuf.as_mut_ptr().cast(), 64, std::ptr::null_mut()) == 8
            };
            if !ok {
                return Err(BenchError::failed("mq_send/mq_receive", errno()));
            }
        }
        Ok(())
    });
    // SAFETY: closing our queue.
    unsafe { libc::mq_close(q) };
    r
}

/// One byte written to `w` and read back from `r` by the same process.
fn byte_through(m: &Meter, w: i32, r: i32) -> Measured {
    let res = round_trips(m, w, r, "a byte did not go through");
    close(w);
    close(r);
    res
}

fn unix_1b(m: &Meter, _: &Case) -> Measured {
    let sv = os::socketpair()?;
    byte_through(m, sv[0], sv[1])
}

fn pipe_1b(m: &Meter, _: &Case) -> Measured {
    let p = os::pipe()?;
    byte_through(m, p[1], p[0])
}

fn unix_64k(m: &Meter, _: &Case) -> Measured {
    const SIZE: usize = 64 * 1024;
    let sv = os::socketpair()?;
    let buf = 256 * 1024i32;
    for fd in sv {
        // SAFETY: setting buffer sizes on our sockets so 64 KiB fits without blocking.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&buf as *const i32).cast(),
                4,
            );
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&buf as *const i32).cast(),
                4,
            );
        }
    }
    let out = vec![1u8; SIZE];
    let mut inb = vec![0u8; SIZE];
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            let mut sent = 0;
            while sent < SIZE {
                // SAFETY: within `out`.
                let k = unsafe {
                    libc::send(sv[0], out[sent..].as_ptr() as *const c_void, SIZE - sent, 0)
                };
                if k <= 0 {
                    return Err(BenchError::failed("send", errno()));
                }
                sent += k as usize;
                let mut got = 0;
                while got < sent {
                    // SAFETY: within `inb`.
                    let k = unsafe {
                        libc::recv(sv[1], inb[got..].as_mut_ptr() as *mut c_void, sent - got, 0)
                    };
                    if k <= 0 {
                        return Err(BenchError::failed("recv", errno()));
                    }
                    got += k as usize;
                }
            }
        }
        Ok(())
    });
    close(sv[0]);
    close(sv[1]);
    Ok(r?.param("bytes", SIZE))
}
