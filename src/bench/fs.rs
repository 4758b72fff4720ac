//! fs/: what the file-system calls cost, by lmbench's and LEBench's definitions: a path
//! looked up (stat, statx, open+close, openat2), a descriptor's metadata (fstat), a directory
//! listed (getdents64), files created and deleted (lat_fs, timed apart), and a write into the
//! page cache (LEBench); and close_range over 64 descriptors. lmbench's file-backed memory
//! tools too: a file mapped, partly written and unmapped (lat_mmap), the first read of each
//! page of a cached file through a mapping (lat_pagefault), and the fcntl lock ping-pong between
//! two processes (lat_fcntl).
//!
//! Every file lives in a tree this benchmark makes in the run's scratch directory (removed with
//! it), reached from a descriptor of the tree's root, so a path has the same number of
//! components wherever the scratch directory is: lmbench's `lat_syscall stat` walks
//! `/usr/include/linux/types.h`, four components, and `d1/d2/d3/f` is four here. The file
//! system the tree is on is a parameter of each result that touches files (`fs`): tmpfs and
//! ext4 differ for creating and deleting, much less for a lookup the dentry cache answers.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::bench::entry::{Among, Cases, Expect, Param, Variant};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter, Outcome};
use crate::measuring::clock::{Clock, Monotonic};
use crate::measuring::os::errno;

mod locks;
mod mapped;
use locks::fcntl_lock;
use mapped::{MAP_SIZES, mmap_file, pagefault};

catalogue! {
    family { default: false };
    "fs/stat" => stat { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)], peer: Some("lmbench lat_syscall stat") }:
        "stat of a file four path components deep (lmbench's /usr/include/linux/types.h is four), from a directory descriptor";
    "fs/fstat" => fstat { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)], peer: Some("lmbench lat_syscall fstat") }:
        "fstat of an open file";
    "fs/open-close" => open_close { events: crate::expect_events![(Among::All, "context-switches", Expect::NONE), (Among::All, "minor-faults", Expect::NONE)], peer: Some("lmbench lat_syscall open") }:
        "open (read-only) + close of a file four path components deep";
    "fs/statx" => statx:
        "statx (basic fields) of a file four path components deep";
    "fs/openat2" => openat2 { cases: Cases::Fixed(DEPTHS) }:
        "openat2 with RESOLVE_BENEATH (what a sandbox opens with) + close, of a file one and five path components below the directory descriptor";
    "fs/getdents64" => getdents64:
        "one getdents64 returning all 102 entries of a 100-file directory (the lseek back to its start between calls is the baseline, subtracted)";
    "fs/getdents64-few" => getdents64_few:
        "one getdents64 returning all 5 entries of a directory of 3 (the median of /usr/include's; the lseek back to its start between calls is the baseline, subtracted)";
    "fs/create" => create { cases: Cases::Fixed(FILE_SIZES), peer: Some("lmbench lat_fs (create)") }:
        "creat + write of 0, 1, 4 and 10 KiB + close of a new file, 100 to a directory as lat_fs does, per file";
    "fs/delete" => delete { cases: Cases::Fixed(FILE_SIZES), peer: Some("lmbench lat_fs (delete)") }:
        "unlink of a file of 0, 1, 4 and 10 KiB, 100 from a directory as lat_fs does, per file";
    "fs/write" => write { cases: Cases::Fixed(super::PAGE_AND_MIB), peer: Some("LEBench write (small and big)") }:
        "pwrite of 4 KiB and 1 MiB over a file of that size in the page cache";
    "fs/open" => open_only:
        "open (read-only) of a file four path components deep, timed alone (the close after it untimed)";
    "fs/open-missing" => open_missing:
        "open of a path four components deep whose last does not exist, failing with ENOENT (the lookup a failed execve in a PATH search makes)";
    "fs/dup2" => dup2:
        "dup2 onto a descriptor it replaces (closing the old file there)";
    "fs/access" => access:
        "faccessat (read permission) of a file four path components deep";
    "fs/readlink" => readlink:
        "readlink of a symbolic link beside the file four path components deep";
    "fs/getcwd" => getcwd:
        "getcwd of the worker's working directory";
    "fs/close-range" => close_range:
        "close_range over 64 open descriptors (made by dup, untimed), per call";
    "fs/mmap" => mmap_file { cases: Cases::Fixed(MAP_SIZES), peer: Some("lmbench lat_mmap") }:
        "mmap (shared, read-write) of 512 KiB to 16 MiB of a file in the page cache, a byte written every 16 KiB over its first tenth, munmap: per mapping, as lat_mmap does";
    "fs/pagefault" => pagefault {
        peer: Some("lmbench lat_pagefault"),
        // A read fault maps the page and, by fault-around, its cached neighbours, or a whole
        // large folio at once (2 MiB by one PMD where the file system caches it so): at most
        // one fault a page, and as few as one per huge folio.
        events: crate::expect_events![(Among::All, "minor-faults", Expect::Between { lo: 0.0, hi: 1.02 })],
    }:
        "the first read of each page of an 8 MiB file in the page cache, mapped shared and read-only, pages in a random order (lat_pagefault's), per page; the mapping made and removed untimed";
    // Linux does not hand a released POSIX lock to its waiter: it wakes it to try again. On one
    // CPU the holder, not preempted, takes the lock back before the waiter runs, so a half
    // cycle costs from none to a round trip's two switches (docs/design-notes.md).
    "fs/fcntl-lock" => fcntl_lock {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench lat_fcntl"),
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::Between { lo: 0.0, hi: 2.1 })],
    }:
        "one hand-over of an fcntl write lock between two processes in lat_fcntl's ping-pong over two files (half of its cycle: a blocking F_SETLKW and an F_SETLK unlock)";
}

/// Four components: lmbench's `lat_syscall` path is four (`/usr/include/linux/types.h`).
const FOUR_DEEP: &CStr = c"d1/d2/d3/f";
/// Files a create or delete sample makes or removes: lat_fs puts at most 100 in a directory.
const PER_DIRECTORY: usize = 100;

static DEPTHS: &[Variant] = &[
    Variant {
        suffix: "/1-component",
        params: &[("components", Param::Int(1))],
    },
    Variant {
        suffix: "/5-components",
        params: &[("components", Param::Int(5))],
    },
];

/// lat_fs's sizes.
static FILE_SIZES: &[Variant] = &[
    Variant {
        suffix: "/0KiB",
        params: &[("bytes", Param::Int(0))],
    },
    Variant {
        suffix: "/1KiB",
        params: &[("bytes", Param::Int(1024))],
    },
    Variant {
        suffix: "/4KiB",
        params: &[("bytes", Param::Int(4096))],
    },
    Variant {
        suffix: "/10KiB",
        params: &[("bytes", Param::Int(10 * 1024))],
    },
];

/// The files the family works on, removed on drop: `f` (one component), `d1/d2/d3/f` (four),
/// `d1/d2/d3/d4/f` (five), `list/` with 100 empty files; create and delete make a fresh
/// directory per sample (`Batch`).
struct Tree {
    /// The tree's root, open: every path is looked up from it.
    root: OwnedFd,
    /// The file system the tree is on ("tmpfs", "ext4", or its magic number).
    fs: String,
    _dir: tempfile::TempDir,
}

impl Tree {
    fn new(m: &Meter) -> Result<Tree, BenchError> {
        let base = m.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("fs-")
            .tempdir_in(&base)
            .map_err(|e| BenchError::failed(&format!("a directory in {}", base.display()), e))?;
        let p = dir.path();
        let made = |r: std::io::Result<()>, what: &str| {
            r.map_err(|e| BenchError::failed(&format!("make {what}"), e))
        };
        made(
            std::fs::create_dir_all(p.join("d1/d2/d3/d4")),
            "d1/d2/d3/d4",
        )?;
        made(std::fs::create_dir(p.join("list")), "list/")?;
        for f in ["f", "d1/d2/d3/f", "d1/d2/d3/d4/f"] {
            made(std::fs::write(p.join(f), b"oscost\n"), f)?;
        }
        made(
            std::os::unix::fs::symlink("f", p.join("d1/d2/d3/link")),
            "d1/d2/d3/link",
        )?;
        for i in 0..PER_DIRECTORY {
            made(std::fs::write(p.join(format!("list/{i}")), b""), "list/N")?;
        }
        let root = open_at(libc::AT_FDCWD, &cstring(p)?, libc::O_DIRECTORY)?;
        Ok(Tree {
            root,
            fs: fs_name(p),
            _dir: dir,
        })
    }

    fn fd(&self) -> i32 {
        self.root.as_raw_fd()
    }

    /// `o` with the file system recorded.
    fn with_fs(&self, o: Outcome) -> Outcome {
        o.param("fs", self.fs.clone())
    }
}

fn cstring(p: &Path) -> Result<CString, BenchError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| BenchError::Failed(format!("{} holds a NUL byte", p.display())))
}

fn open_at(dir: i32, path: &CStr, flags: i32) -> Result<OwnedFd, BenchError> {
    // SAFETY: a NUL-terminated path; the descriptor returned is owned below.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd < 0 {
        return Err(BenchError::failed(
            &format!("open {}", path.to_string_lossy()),
            errno(),
        ));
    }
    // SAFETY: fd was just opened and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The name of the file system `p` is on, from statfs's magic number.
fn fs_name(p: &Path) -> String {
    let Ok(c) = cstring(p) else {
        return "unknown".into();
    };
    // SAFETY: an all-zero statfs is a valid buffer for the call to fill.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live buffer.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return "unknown".into();
    }
    match s.f_type as u64 {
        0x0102_1994 => "tmpfs".into(),
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x6969 => "nfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0xF2F5_2010 => "f2fs".into(),
        m => format!("{m:#x}"),
    }
}

/// A batched loop of `call`, which returns whether it succeeded; `what` names the failure.
fn calls(m: &Meter, what: &str, call: &mut dyn FnMut() -> bool) -> Result<Outcome, BenchError> {
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            if !call() {
                return Err(BenchError::failed(what, errno()));
            }
        }
        Ok(())
    })
}

fn stat(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    // SAFETY: an all-zero stat is a valid buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live buffer.
    let o = calls(m, "stat", &mut || unsafe {
        libc::fstatat(dir, FOUR_DEEP.as_ptr(), &mut st, 0) == 0
    })?;
    Ok(t.with_fs(o))
}

fn fstat(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let f = open_at(t.fd(), FOUR_DEEP, libc::O_RDONLY)?;
    let fd = f.as_raw_fd();
    // SAFETY: an all-zero stat is a valid buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: an open descriptor and a live buffer.
    let o = calls(m, "fstat", &mut || unsafe { libc::fstat(fd, &mut st) == 0 })?;
    Ok(t.with_fs(o))
}

fn open_close(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    let o = calls(m, "open", &mut || {
        // SAFETY: a NUL-terminated path; the descriptor is closed at once.
        let fd = unsafe { libc::openat(dir, FOUR_DEEP.as_ptr(), libc::O_RDONLY) };
        // SAFETY: closing the descriptor just opened.
        fd >= 0 && unsafe { libc::close(fd) } == 0
    })?;
    Ok(t.with_fs(o))
}

fn statx(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    // SAFETY: an all-zero statx is a valid buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live buffer.
    let mut one = || unsafe {
        libc::statx(dir, FOUR_DEEP.as_ptr(), 0, libc::STATX_BASIC_STATS, &mut st) == 0
    };
    if !one() {
        return Err(BenchError::of_call("statx", "4.11"));
    }
    let o = calls(m, "statx", &mut one)?;
    Ok(t.with_fs(o))
}

fn openat2(m: &Meter, c: &Case) -> Measured {
    let t = Tree::new(m)?;
    let path: &CStr = match c.int("components")? {
        1 => c"f",
        _ => c"d1/d2/d3/d4/f",
    };
    let dir = t.fd();
    // SAFETY: an all-zero open_how is valid (flags 0, mode 0, resolve 0).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH;
    let mut one = || {
        // SAFETY: a NUL-terminated path and an open_how of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        // SAFETY: closing the descriptor just opened.
        fd >= 0 && unsafe { libc::close(fd as i32) } == 0
    };
    if !one() {
        return Err(BenchError::of_call("openat2", "5.6"));
    }
    let o = calls(m, "openat2", &mut one)?;
    Ok(t.with_fs(o))
}

fn getdents64(m: &Meter, _: &Case) -> Measured {
    listing(m, c"list", PER_DIRECTORY + 2)
}

/// A listing small enough that what a condition adds to one call stands out of the call's
/// own spread: `predict` prices a program's getdents64 by it (docs/design-notes.md, "What an
/// agent adds depends on the call").
fn getdents64_few(m: &Meter, _: &Case) -> Measured {
    // d1/d2/d3 holds f, link and d4.
    listing(m, c"d1/d2/d3", 3 + 2)
}

/// One getdents64 of the tree's directory `dir`, which must return all `want` entries (with
/// `.` and `..`) in one call; the lseek back to its start is the baseline, subtracted.
fn listing(m: &Meter, dir: &CStr, want: usize) -> Measured {
    let t = Tree::new(m)?;
    let d = open_at(t.fd(), dir, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let fd = d.as_raw_fd();
    let mut buf = vec![0u8; 32 * 1024];
    // The definition holds only if one call returns every entry: check once, untimed.
    let filled = list_from_start(fd, &mut buf);
    let got = entries_in(&buf, filled);
    if got != want {
        return Err(BenchError::Failed(format!(
            "one getdents64 returned {got} entries, not {want} (a file system that returns fewer per call)"
        )));
    }
    let o = m.batched_with_baseline_fallible(
        &mut |n| {
            for _ in 0..n {
                if list_from_start(fd, &mut buf) <= 0 {
                    return Err(BenchError::failed("getdents64", errno()));
                }
            }
            Ok(())
        },
        &mut |n| {
            for _ in 0..n {
                // SAFETY: an open directory.
                std::hint::black_box(unsafe { libc::lseek(fd, 0, libc::SEEK_SET) });
            }
        },
    )?;
    Ok(t.with_fs(o))
}

/// lseek to the directory's start, then one getdents64 into `buf`: the bytes filled.
fn list_from_start(fd: i32, buf: &mut [u8]) -> isize {
    // SAFETY: an open directory.
    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
    // SAFETY: a live buffer of the length passed.
    unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) as isize }
}

/// The entries in the first `len` bytes a getdents64 filled.
fn entries_in(buf: &[u8], len: isize) -> usize {
    let (mut at, mut n) = (0usize, 0usize);
    let len = len.max(0) as usize;
    // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
    while at + 18 <= len {
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        if reclen == 0 {
            break;
        }
        at += reclen;
        n += 1;
    }
    n
}

/// One create or delete sample's directory, fresh as lat_fs's is for each measurement (a name
/// reused after its unlink would find its negative dentry still cached, and be cheaper to
/// create than a new one), and the 100 names in it; removed on drop.
struct Batch {
    /// The tree's root.
    root: i32,
    dir: CString,
    names: Vec<CString>,
}

impl Batch {
    /// Directory `new-k` under the tree's root, and `new-k/0` to `new-k/99`.
    fn new(root: i32, k: u64) -> Result<Batch, BenchError> {
        let dir = CString::new(format!("new-{k}")).expect("no NUL");
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::mkdirat(root, dir.as_ptr(), 0o755) } != 0 {
            return Err(BenchError::failed(
                "make a directory for new files",
                errno(),
            ));
        }
        let names = (0..PER_DIRECTORY)
            .map(|i| CString::new(format!("new-{k}/{i}")).expect("no NUL"))
            .collect();
        Ok(Batch { root, dir, names })
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        for name in &self.names {
            // SAFETY: NUL-terminated paths; a name already unlinked fails harmlessly.
            unsafe { libc::unlinkat(self.root, name.as_ptr(), 0) };
        }
        // SAFETY: as above.
        unsafe { libc::unlinkat(self.root, self.dir.as_ptr(), libc::AT_REMOVEDIR) };
    }
}

/// Create each of `names` with `data` written (creat's flags), true when all were.
fn make_files(dir: i32, names: &[CString], data: &[u8]) -> bool {
    names.iter().all(|name| {
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe {
            libc::openat(
                dir,
                name.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                0o644,
            )
        };
        let written = data.is_empty()
            // SAFETY: a live buffer of the length passed.
            || unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) } == data.len() as isize;
        // SAFETY: closing the descriptor just opened.
        fd >= 0 && written && unsafe { libc::close(fd) } == 0
    })
}

/// Unlink each of `names`, true when all were.
fn remove_files(dir: i32, names: &[CString]) -> bool {
    // SAFETY: NUL-terminated paths.
    names
        .iter()
        .all(|name| unsafe { libc::unlinkat(dir, name.as_ptr(), 0) } == 0)
}

fn create(m: &Meter, c: &Case) -> Measured {
    lat_fs(m, c, false)
}

fn delete(m: &Meter, c: &Case) -> Measured {
    lat_fs(m, c, true)
}

/// lat_fs: per sample, 100 files of the case's size made in a fresh directory and removed;
/// timed is the making or (`deleting`) the removing, per file.
fn lat_fs(m: &Meter, c: &Case, deleting: bool) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    let data = vec![b'x'; c.int("bytes")? as usize];
    let clock = Monotonic;
    let mut k = 0u64;
    // What each sample did, looked at untimed: files found made (of the size asked) and, when
    // deleting, files still there after the unlinks.
    let (mut made_found, mut left, mut samples) = (0usize, 0usize, 0usize);
    // A sample is 100 files: events per file.
    crate::measuring::counters::set_unit(PER_DIRECTORY as f64);
    let o = m.individual(&mut || {
        k += 1;
        let b = Batch::new(dir, k)?;
        let t0 = clock.now_ns();
        let made = make_files(dir, &b.names, &data);
        let t1 = clock.now_ns();
        if !made {
            return Err(BenchError::failed("create a file", errno()));
        }
        samples += 1;
        made_found += present(dir, &b.names, Some(data.len()));
        if !deleting {
            return Ok(m.per_unit(t1.saturating_sub(t0), PER_DIRECTORY));
        }
        let t0 = clock.now_ns();
        let removed = remove_files(dir, &b.names);
        let t1 = clock.now_ns();
        if !removed {
            return Err(BenchError::failed("unlink", errno()));
        }
        left += present(dir, &b.names, None);
        Ok(m.per_unit(t1.saturating_sub(t0), PER_DIRECTORY))
    })?;
    let per_op = |n: usize| n as f64 / (samples * PER_DIRECTORY).max(1) as f64;
    let mut o = o.param("files_made_per_op", per_op(made_found));
    if deleting {
        o = o.param("files_left_per_op", per_op(left));
    }
    Ok(t.with_fs(o))
}

/// How many of `names` exist as regular files (of `size` bytes, when given).
fn present(dir: i32, names: &[CString], size: Option<usize>) -> usize {
    names
        .iter()
        .filter(|name| {
            // SAFETY: an all-zero stat is a valid buffer for the call to fill.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: a NUL-terminated path and a live buffer.
            let found =
                unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) }
                    == 0;
            found
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
                && size.is_none_or(|n| st.st_size as usize == n)
        })
        .count()
}

fn write(m: &Meter, c: &Case) -> Measured {
    let t = Tree::new(m)?;
    let len = c.int("bytes")? as usize;
    let f = open_at(
        t.fd(),
        c"written",
        libc::O_CREAT | libc::O_RDWR | libc::O_TRUNC,
    )?;
    let fd = f.as_raw_fd();
    let buf = vec![b'x'; len];
    // The file is its full size before timing, so each write overwrites cached pages.
    // SAFETY: a live buffer of the length passed.
    if unsafe { libc::pwrite(fd, buf.as_ptr().cast(), len, 0) } != len as isize {
        return Err(BenchError::failed("write the file", errno()));
    }
    // SAFETY: a live buffer of the length passed.
    let o = calls(m, "pwrite", &mut || unsafe {
        libc::pwrite(fd, buf.as_ptr().cast(), len, 0) == len as isize
    })?;
    Ok(t.with_fs(o))
}

fn close_range(m: &Meter, _: &Case) -> Measured {
    const FDS: i32 = 64;
    crate::measuring::os::ensure_fds(1024 + FDS as u64)?;
    // Descriptors 900 to 963: above what a worker holds, so the range is exactly the dups.
    let (first, last) = (900, 900 + FDS - 1);
    let null = open_at(libc::AT_FDCWD, c"/dev/null", libc::O_RDONLY)?;
    let clock = Monotonic;
    m.individual(&mut || {
        for fd in first..=last {
            // SAFETY: duplicating an open descriptor onto a number nothing else uses.
            if unsafe { libc::dup2(null.as_raw_fd(), fd) } != fd {
                return Err(BenchError::failed("dup2", errno()));
            }
        }
        let t0 = clock.now_ns();
        // SAFETY: closing only the descriptors just made.
        let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
        let t1 = clock.now_ns();
        if rc != 0 {
            return Err(BenchError::of_call("close_range", "5.9"));
        }
        Ok(t1.saturating_sub(t0) as f64)
    })
}

fn open_only(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    let clock = Monotonic;
    let o = m.individual(&mut || {
        let t0 = clock.now_ns();
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe { libc::openat(dir, FOUR_DEEP.as_ptr(), libc::O_RDONLY) };
        let t1 = clock.now_ns();
        if fd < 0 {
            return Err(BenchError::failed("open", errno()));
        }
        crate::measuring::os::close(fd);
        Ok(t1.saturating_sub(t0) as f64)
    })?;
    Ok(t.with_fs(o))
}

fn open_missing(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    let o = calls(m, "open of a missing file", &mut || {
        // SAFETY: a NUL-terminated path; the open fails.
        let fd = unsafe { libc::openat(dir, c"d1/d2/d3/missing".as_ptr(), libc::O_RDONLY) };
        fd < 0 && errno().raw_os_error() == Some(libc::ENOENT)
    })?;
    Ok(t.with_fs(o))
}

fn dup2(m: &Meter, _: &Case) -> Measured {
    let null = open_at(libc::AT_FDCWD, c"/dev/null", libc::O_RDONLY)?;
    let target = open_at(libc::AT_FDCWD, c"/dev/null", libc::O_RDONLY)?;
    let (a, b) = (null.as_raw_fd(), target.as_raw_fd());
    // SAFETY: both descriptors are open and owned here; b stays open (replaced by a copy).
    calls(m, "dup2", &mut || unsafe { libc::dup2(a, b) } == b)
}

fn access(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    // SAFETY: a NUL-terminated path.
    let o = calls(m, "faccessat", &mut || unsafe {
        libc::faccessat(dir, FOUR_DEEP.as_ptr(), libc::R_OK, 0) == 0
    })?;
    Ok(t.with_fs(o))
}

fn readlink(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let dir = t.fd();
    let mut buf = [0u8; 256];
    // SAFETY: a NUL-terminated path and a live buffer of the length passed.
    let o = calls(m, "readlinkat", &mut || unsafe {
        libc::readlinkat(
            dir,
            c"d1/d2/d3/link".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        ) == 1
    })?;
    Ok(t.with_fs(o))
}

fn getcwd(m: &Meter, _: &Case) -> Measured {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a live buffer of the length passed.
    calls(m, "getcwd", &mut || unsafe {
        !libc::getcwd(buf.as_mut_ptr().cast(), buf.len()).is_null()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_counted_by_record_length() {
        let mut buf = vec![0u8; 64];
        // Two records of 24 and 32 bytes.
        buf[16] = 24;
        buf[24 + 16] = 32;
        assert_eq!(entries_in(&buf, 56), 2);
        assert_eq!(entries_in(&buf, 24), 1);
        assert_eq!(entries_in(&buf, -1), 0);
    }
}
