//! A file mapped: lmbench's lat_mmap (`fs/mmap`, map and unmap a cached file of each size) and
//! lat_pagefault (`fs/pagefault`, the first read of each page of a cached file).

use super::*;

/// lat_mmap's sizes, from lmbench's smallest that fits its stride (320 KiB) up.
pub(super) static MAP_SIZES: &[Variant] = &[
    Variant {
        suffix: "/512KiB",
        params: &[("bytes", Param::Int(512 << 10))],
    },
    Variant {
        suffix: "/1MiB",
        params: &[("bytes", Param::Int(1 << 20))],
    },
    Variant {
        suffix: "/4MiB",
        params: &[("bytes", Param::Int(4 << 20))],
    },
    Variant {
        suffix: "/16MiB",
        params: &[("bytes", Param::Int(16 << 20))],
    },
];

/// lat_mmap's stride: a byte written every 16 KiB of the first tenth.
const MAP_STRIDE: usize = 16 << 10;

/// A file of `len` bytes in the tree, written so that every page is in the page cache.
fn cached_file(t: &Tree, name: &CStr, len: usize) -> Result<OwnedFd, BenchError> {
    let f = open_at(t.fd(), name, libc::O_CREAT | libc::O_RDWR | libc::O_TRUNC)?;
    crate::bench::fill_file(f.as_raw_fd(), len)?;
    Ok(f)
}

pub(super) fn mmap_file(m: &Meter, c: &Case) -> Measured {
    let t = Tree::new(m)?;
    let len = c.int("bytes")? as usize;
    let f = cached_file(&t, c"mapped", len)?;
    let fd = f.as_raw_fd();
    let clock = Monotonic;
    let o = m.individual(&mut || {
        let t0 = clock.now_ns();
        let p = crate::bench::map_shared(fd, len, libc::PROT_READ | libc::PROT_WRITE)?;
        for off in (0..len / 10).step_by(MAP_STRIDE) {
            // SAFETY: inside the mapping, which is writable.
            unsafe { std::ptr::write_volatile(p.add(off), len as u8) };
        }
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p.cast(), len) };
        Ok(clock.now_ns().saturating_sub(t0) as f64)
    })?;
    Ok(t.with_fs(o.param("bytes", len)))
}

/// The file lat_pagefault faults on: lmbench's own is 8 MiB at least in its default run.
const FAULTED_FILE: usize = 8 << 20;
const PAGE: usize = 4096;

/// The pages of `n` in a random order (a fixed seed: every run walks the same order).
fn permutation(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

pub(super) fn pagefault(m: &Meter, _: &Case) -> Measured {
    let t = Tree::new(m)?;
    let f = cached_file(&t, c"faulted", FAULTED_FILE)?;
    let fd = f.as_raw_fd();
    let pages = FAULTED_FILE / PAGE;
    let order = permutation(pages);
    let clock = Monotonic;
    // A sample is a first read of every page: events per page.
    crate::measuring::counters::set_unit(pages as f64);
    let o = m.individual(&mut || {
        let p = crate::bench::map_shared(fd, FAULTED_FILE, libc::PROT_READ)?;
        let mut sum = 0u8;
        let t0 = clock.now_ns();
        for &i in &order {
            // SAFETY: a page inside the read-only mapping.
            sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(p.add(i * PAGE)) });
        }
        let t1 = clock.now_ns();
        std::hint::black_box(sum);
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p.cast(), FAULTED_FILE) };
        Ok(m.per_unit(t1.saturating_sub(t0), pages))
    })?;
    Ok(t.with_fs(o.param("pages_per_sample", pages)))
}
