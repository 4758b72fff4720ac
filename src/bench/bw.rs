//! bw/: bandwidths, by lmbench's definitions: bytes through a pipe, a unix stream socket and a
//! loopback TCP connection from a writing peer process in 64 KiB writes (bw_pipe, bw_unix,
//! bw_tcp), a cached file reread by read(2) and through a mapping (bw_file_rd, bw_mmap_rd), and
//! memory read, written and copied (bw_mem rd, wr, bcopy).
//!
//! A bandwidth is stored as what every other result is, a time per operation, with the
//! operation one mebibyte moved (`BYTES_PER_OP`, recorded as the result's `bytes_per_op`):
//! lower is better like every other time, so compare, ab, the matrix, history and the
//! regression gates call a drop in bandwidth slower with no rule of their own, and the views
//! that show a rate derive it from the median and its CI (`BenchResult::rate`).

use std::os::fd::AsRawFd;

use crate::bench::entry::{Among, Cases, Expect};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter, Outcome};
use crate::measuring::os::{Mapping, PeerProc, close, errno, pipe, socketpair};

/// What one operation of a bandwidth moves: a mebibyte.
pub const BYTES_PER_OP: usize = 1 << 20;
/// lmbench's XFERSIZE: the size of each read and write of the peers.
const CHUNK: usize = 64 << 10;

catalogue! {
    family { default: false };
    // A pipe holds 64 KiB: each mebibyte fills and drains it 16 times, each a switch to the
    // writer and back on one CPU.
    "bw/pipe" => bw_pipe {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench bw_pipe"),
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::AtLeast(2.0))],
    }:
        "a mebibyte read from a pipe that a peer process writes in 64 KiB writes (per MiB; the rate is shown beside)";
    "bw/unix" => bw_unix {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench bw_unix"),
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::AtLeast(1.0))],
    }:
        "a mebibyte read from a unix stream socket that a peer process writes in 64 KiB writes (per MiB)";
    "bw/tcp" => bw_tcp {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench bw_tcp"),
        // At most, not at least: a loopback connection's buffers autotune to tens of mebibytes
        // (tcp_rmem's maximum, 32 MiB on a 2026 guest), more than the ~2 ms counting window
        // moves, so a window can be read from what was buffered before it with no switch at all
        // (CI counted 0 per MiB). The upper bound is the definition's: on one CPU each of a
        // mebibyte's 16 reads and 16 writes of 64 KiB blocks at most once, plus a preemption.
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::AtMost(34.0))],
    }:
        "a mebibyte read from a loopback TCP connection that a peer process writes in 64 KiB writes (per MiB)";
    "bw/file-reread" => file_reread { peer: Some("lmbench bw_file_rd io_only") }:
        "a mebibyte of an 8 MiB file in the page cache read by 64 KiB reads, each chunk summed an 8-byte word at a time as bw_file_rd does (per MiB)";
    "bw/mmap-reread" => mmap_reread { peer: Some("lmbench bw_mmap_rd mmap_only") }:
        "a mebibyte of an 8 MiB file in the page cache, mapped once, summed an 8-byte word at a time (per MiB)";
    "bw/mem-read" => mem_read { peer: Some("lmbench bw_mem rd") }:
        "a mebibyte of a 64 MiB buffer read, a 4-byte load every 16 bytes, every byte counted (lmbench's rd) (per MiB)";
    "bw/mem-write" => mem_write { peer: Some("lmbench bw_mem wr") }:
        "a mebibyte of a 64 MiB buffer written, a 4-byte store every 16 bytes, every byte counted (lmbench's wr) (per MiB)";
    "bw/mem-copy" => mem_copy { peer: Some("lmbench bw_mem bcopy") }:
        "a mebibyte of a 64 MiB buffer copied to another by the C library's memcpy (lmbench's bcopy) (per MiB)";
}

/// What bw/mem-* does with each mebibyte.
#[derive(Clone, Copy, PartialEq)]
enum MemOp {
    Read,
    Write,
    Copy,
}

fn mem_read(m: &Meter, _: &Case) -> Measured {
    mem(m, MemOp::Read)
}

fn mem_write(m: &Meter, _: &Case) -> Measured {
    mem(m, MemOp::Write)
}

fn mem_copy(m: &Meter, _: &Case) -> Measured {
    mem(m, MemOp::Copy)
}

/// The outcome of a bandwidth: its samples, with what one operation moved.
fn moved(o: Outcome) -> Outcome {
    o.param("bytes_per_op", BYTES_PER_OP)
}

/// Read exactly `len` bytes from `fd` into `buf` (CHUNK at a time); false at end of file or
/// on an error.
fn read_all(fd: i32, buf: &mut [u8], len: usize) -> bool {
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len());
        // SAFETY: a live buffer of at least `want` bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), want) };
        if n <= 0 {
            return false;
        }
        left -= n as usize;
    }
    true
}

/// The writing peer: 64 KiB writes until the reader goes.
fn write_forever(fd: i32, buf: &[u8]) {
    // SAFETY: a live buffer of its length.
    while unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) } > 0 {}
}

/// Mebibytes read from `r` while a peer process on `peer_cpu` writes into `w` (the peer's end,
/// closed here once the peer has it).
fn stream(m: &Meter, c: &Case, r: i32, w: i32, what: &str) -> Measured {
    let out = vec![0x5au8; CHUNK];
    let peer = PeerProc::spawn(
        c.peer_cpu(),
        &m.allowed,
        || {
            close(r);
            write_forever(w, &out);
        },
        || {},
    )?;
    close(w);
    let mut buf = vec![0u8; CHUNK];
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            if !read_all(r, &mut buf, BYTES_PER_OP) {
                return Err(BenchError::Failed(format!(
                    "the peer process stopped writing into the {what}"
                )));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    close(r);
    Ok(moved(o?))
}

fn bw_pipe(m: &Meter, c: &Case) -> Measured {
    let [r, w] = pipe()?;
    stream(m, c, r, w, "pipe")
}

fn bw_unix(m: &Meter, c: &Case) -> Measured {
    let [r, w] = socketpair()?;
    stream(m, c, r, w, "unix socket")
}

fn bw_tcp(m: &Meter, c: &Case) -> Measured {
    use std::os::fd::IntoRawFd;
    let (r, w) = super::net::tcp_connection()?;
    stream(m, c, r.into_raw_fd(), w.into_raw_fd(), "TCP connection")
}

/// The reread file's size, lmbench's usual 8 MiB (larger than the mebibyte of one operation, so
/// an operation never rereads what the last left in a cache nearer than the page cache's).
const FILE_BYTES: usize = 8 << 20;

fn file_reread(m: &Meter, _: &Case) -> Measured {
    let f = super::cached_file(m, FILE_BYTES)?;
    let fd = f.as_raw_fd();
    // u64s, so the chunk is 8-byte aligned for the sum.
    let mut words = vec![0u64; CHUNK / 8];
    // SAFETY: the u64 buffer seen as its CHUNK bytes.
    let buf = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), CHUNK) };
    let mut at = 0usize;
    let o = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            let mut done = 0;
            while done < BYTES_PER_OP {
                // SAFETY: a live buffer of CHUNK bytes.
                let got = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), CHUNK, at as i64) };
                if got <= 0 {
                    return Err(BenchError::failed("read the cached file", errno()));
                }
                // SAFETY: the bytes just read into the buffer (its start is 8-aligned).
                std::hint::black_box(unsafe { sum_words(buf.as_ptr(), got as usize) });
                done += got as usize;
                at = (at + got as usize) % FILE_BYTES;
            }
        }
        Ok(())
    })?;
    Ok(moved(o))
}

/// Sum `len` bytes at `p` an 8-byte word at a time: lmbench's `bread`, which bw_file_rd runs
/// over each chunk it reads and bw_mmap_rd over the mapping.
///
/// # Safety
/// `p..p+len` must be readable and 8-byte aligned.
unsafe fn sum_words(p: *const u8, len: usize) -> u64 {
    // SAFETY: the caller's.
    let words = unsafe { std::slice::from_raw_parts(p.cast::<u64>(), len / 8) };
    words.iter().fold(0u64, |a, &w| a.wrapping_add(w))
}

fn mmap_reread(m: &Meter, _: &Case) -> Measured {
    let f = super::cached_file(m, FILE_BYTES)?;
    let base = super::map_shared(f.as_raw_fd(), FILE_BYTES, libc::PROT_READ)?.cast_const();
    let mut at = 0usize;
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: a mebibyte inside the mapping (the file is a whole number of them).
            std::hint::black_box(unsafe { sum_words(base.add(at), BYTES_PER_OP) });
            at = (at + BYTES_PER_OP) % FILE_BYTES;
        }
    });
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(base.cast_mut().cast(), FILE_BYTES) };
    Ok(moved(o))
}

/// bw_mem's buffer: 64 MiB, past the last-level caches of the machines oscost runs on.
const MEM_BYTES: usize = 64 << 20;
/// bw_mem rd and wr touch one 4-byte word every 16 bytes (`p[0], p[4], ...` of an int array;
/// its comment says 32) and count every byte.
const STRIDE_WORDS: usize = 4;

fn mem(m: &Meter, op: MemOp) -> Measured {
    let src = Mapping::anonymous(MEM_BYTES, false, 0)?;
    src.touch_pages();
    let dst = if op == MemOp::Copy {
        let d = Mapping::anonymous(MEM_BYTES, false, 0)?;
        d.touch_pages();
        Some(d)
    } else {
        None
    };
    let words = BYTES_PER_OP / 4;
    let mut at = 0usize;
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: a mebibyte inside each 64 MiB mapping (a whole number of them), aligned.
            unsafe {
                let s = src.ptr().add(at).cast::<u32>();
                match (op, &dst) {
                    (MemOp::Copy, Some(d)) => {
                        std::ptr::copy_nonoverlapping(s.cast::<u8>(), d.ptr().add(at), BYTES_PER_OP)
                    }
                    (MemOp::Write, _) => {
                        for i in (0..words).step_by(STRIDE_WORDS) {
                            s.add(i).write_volatile(i as u32);
                        }
                    }
                    _ => {
                        let mut sum = 0u32;
                        for i in (0..words).step_by(STRIDE_WORDS) {
                            sum = sum.wrapping_add(s.add(i).read_volatile());
                        }
                        std::hint::black_box(sum);
                    }
                }
            }
            at = (at + BYTES_PER_OP) % MEM_BYTES;
        }
    });
    Ok(moved(o).param("buffer_bytes", MEM_BYTES))
}
