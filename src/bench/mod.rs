//! The benchmark catalogue: what each benchmark is (id, definition, cases) and the function
//! that measures one case. Families declare entries with `catalogue!`; the harness
//! (`bench::runner`) expands cases, places parties and forms ids, so a benchmark function
//! measures one case and knows nothing of output. A new benchmark is one function in its family
//! file plus one catalogue line.

/// A variant of `bytes` of memory with its pages left alone or each written once (params
/// `bytes` and `touched`), for mem/mmap and ipc/shm-attach.
macro_rules! touched_variant {
    ($suffix:literal, $bytes:expr, $touched:literal) => {
        $crate::bench::entry::Variant {
            suffix: $suffix,
            params: &[
                ("bytes", $crate::bench::entry::Param::Int($bytes)),
                ("touched", $crate::bench::entry::Param::Flag($touched)),
            ],
        }
    };
}

pub mod bw;
pub mod call;
pub mod entry;
pub mod fs;
pub mod hook;
pub mod ipc;
pub mod mem;
pub mod net;
pub mod runner;
pub mod scale;
pub mod sig;
pub mod spawn;
pub mod switch;
pub mod syscall;
pub mod timer;
pub mod uring;
pub mod wake;

use crate::base::model::Curve;
use crate::bench::entry::{Benchmark, Expect, Param, Variant};
use crate::measuring::case::{BenchError, Measured, Meter};
use crate::measuring::os::{errno, read_byte, write_byte};
use std::sync::atomic::AtomicU32;

/// Two sizes several families use: a page and a mebibyte (`/4KiB`, `/1MiB`, param `bytes`).
pub static PAGE_AND_MIB: &[Variant] = &[
    Variant {
        suffix: "/4KiB",
        params: &[("bytes", Param::Int(4096))],
    },
    Variant {
        suffix: "/1MiB",
        params: &[("bytes", Param::Int(1 << 20))],
    },
];

/// Batches of one-byte round trips: written to `w`, read back from `r` (through a peer, or the
/// same process). `lost` says what it means when a byte does not come back.
pub(crate) fn round_trips(m: &Meter, w: i32, r: i32, lost: &str) -> Measured {
    m.batched_fallible(&mut |n| {
        for _ in 0..n {
            if !(write_byte(w) && read_byte(r)) {
                return Err(BenchError::Failed(lost.to_string()));
            }
        }
        Ok(())
    })
}

/// Write `len` bytes into `fd` from its start, a mebibyte at a time, so that every page is in
/// the page cache. The size of the writes matters: the page cache keeps a file in folios up to
/// the size of the writes that made it, and a fault maps a whole folio (docs/design-notes.md).
pub(crate) fn fill_file(fd: i32, len: usize) -> Result<(), BenchError> {
    let chunk = vec![0x5au8; len.min(1 << 20)];
    let mut off = 0;
    while off < len {
        let n = chunk.len().min(len - off);
        // SAFETY: a live buffer of at least n bytes.
        if unsafe { libc::pwrite(fd, chunk.as_ptr().cast(), n, off as i64) } != n as isize {
            return Err(BenchError::failed("write a file to read back", errno()));
        }
        off += n;
    }
    Ok(())
}

/// A file of `len` bytes in the run's scratch directory (unlinked at once), in the page cache.
pub(crate) fn cached_file(m: &Meter, len: usize) -> Result<std::fs::File, BenchError> {
    let dir = m.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    let f = tempfile::tempfile_in(&dir)
        .map_err(|e| BenchError::failed(&format!("a file in {}", dir.display()), e))?;
    fill_file(std::os::fd::AsRawFd::as_raw_fd(&f), len)?;
    Ok(f)
}

/// mmap of `len` bytes of `fd`, shared, or the failure.
pub(crate) fn map_shared(fd: i32, len: usize, prot: i32) -> Result<*mut u8, BenchError> {
    // SAFETY: a fresh mapping of a file of at least `len` bytes.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(BenchError::failed("mmap of the file", errno()));
    }
    Ok(p.cast())
}

/// futex(2) wait while `*word == val` (`measuring::os::futex_wait`).
pub(crate) use crate::measuring::os::futex_wait;

/// futex(2): wake one waiter. `private` for threads of one process, shared for a word in
/// shared memory.
pub(crate) fn futex_wake(word: &AtomicU32, private: bool) {
    crate::measuring::os::futex_wake(word, 1, private);
}

/// Every benchmark, in suite order.
pub fn registry() -> Vec<&'static Benchmark> {
    call::BENCHMARKS
        .iter()
        .chain(timer::BENCHMARKS)
        .chain(syscall::BENCHMARKS)
        .chain(spawn::BENCHMARKS)
        .chain(switch::BENCHMARKS)
        .chain(ipc::BENCHMARKS)
        .chain(mem::BENCHMARKS)
        .chain(fs::BENCHMARKS)
        .chain(sig::BENCHMARKS)
        .chain(net::BENCHMARKS)
        .chain(bw::BENCHMARKS)
        .chain(uring::BENCHMARKS)
        .chain(wake::BENCHMARKS)
        .chain(scale::BENCHMARKS)
        .chain(hook::BENCHMARKS)
        .collect()
}

/// The catalogue entry with id `id`.
pub fn find(id: &str) -> Option<&'static Benchmark> {
    registry().into_iter().find(|b| b.id == id)
}

/// Resolve user patterns (exact ids, `family/` or `family` or any id prefix) to benchmarks, in
/// registry order, without duplicates. An empty pattern list means the default suite. A pattern
/// that matches nothing is an error naming the closest id. A result's id (`switch/ring/n2-s0k`,
/// `switch/pipe-proc@cross`) selects its benchmark: see `select` for its cases.
pub fn matching(patterns: &[String]) -> Result<Vec<&'static Benchmark>, String> {
    select(patterns).map(|s| s.benchmarks)
}

/// What a list of ids selects: benchmarks, and the case patterns that narrow some of them.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The benchmarks, in registry order.
    pub benchmarks: Vec<&'static Benchmark>,
    /// Result ids or prefixes of them (`switch/ring/n2-s0k`, `mem/mmap/4KiB`,
    /// `switch/pipe-proc@cross`) each naming some cases of one selected benchmark: only the
    /// cases whose full id starts with one of them are measured (`VariantOptions::only`). None
    /// for a benchmark another pattern selected whole.
    pub cases: Vec<String>,
}

/// The one id grammar, for every command that takes ids: an exact benchmark id selects it
/// (alone: `syscall/getpid` is not also `syscall/getpid-raw`); a family (`syscall`,
/// `syscall/`) or any prefix of ids selects every benchmark it begins; anything else that
/// begins with a benchmark's id followed by `/` or `@` is a result id, or a prefix of some,
/// and selects that benchmark's matching cases only. So every id a table, JSON, history or a
/// page prints can be given back.
pub fn select(patterns: &[String]) -> Result<Selection, String> {
    let all = registry();
    if patterns.is_empty() {
        return Ok(Selection {
            benchmarks: all.into_iter().filter(|b| b.default).collect(),
            cases: vec![],
        });
    }
    let mut chosen = vec![false; all.len()];
    let mut whole = vec![false; all.len()];
    let mut cases: Vec<(usize, String)> = Vec::new();
    for p in patterns {
        if p.trim().is_empty() {
            return Err("an empty benchmark id; give an id or prefix (`oscost list`)".into());
        }
        if let Some(i) = case_owner(&all, p) {
            chosen[i] = true;
            cases.push((i, p.clone()));
            continue;
        }
        // A placement of a family or prefix (`switch/@cross`) selects by what precedes it;
        // the placement itself is the plan's (`--placement`).
        let bare = p.split_once('@').map_or(p.as_str(), |(b, _)| b);
        let exact = all.iter().position(|b| b.id == bare);
        let mut any = false;
        for (i, b) in all.iter().enumerate() {
            let family_match = bare.trim_end_matches('/') == b.family();
            let hit = match exact {
                Some(e) => e == i,
                None => family_match || b.id.starts_with(bare),
            };
            if hit {
                chosen[i] = true;
                whole[i] = true;
                any = true;
            }
        }
        if !any {
            return Err(unknown_id_message(p, &all));
        }
    }
    Ok(Selection {
        benchmarks: all
            .into_iter()
            .zip(&chosen)
            .filter_map(|(b, c)| c.then_some(b))
            .collect(),
        cases: cases
            .into_iter()
            .filter(|(i, _)| !whole[*i])
            .map(|(_, p)| p)
            .collect(),
    })
}

/// The benchmark a result id (or a prefix of some) belongs to: the longest id that `p` begins
/// followed by `/` or `@`, where `p` is not itself a prefix of any benchmark's id.
fn case_owner(all: &[&'static Benchmark], p: &str) -> Option<usize> {
    if all.iter().any(|b| b.id.starts_with(p)) {
        return None;
    }
    all.iter()
        .enumerate()
        .filter(|(_, b)| {
            p.strip_prefix(b.id)
                .is_some_and(|rest| rest.starts_with(['/', '@']))
        })
        .max_by_key(|(_, b)| b.id.len())
        .map(|(i, _)| i)
}

fn unknown_id_message(p: &str, all: &[&'static Benchmark]) -> String {
    let mut names: Vec<&str> = all.iter().map(|b| b.id).collect();
    let families: Vec<String> = all.iter().map(|b| format!("{}/", b.family())).collect();
    names.extend(families.iter().map(String::as_str));
    let best = names
        .iter()
        .map(|n| (strsim::damerau_levenshtein(p, n), *n))
        .min();
    match best {
        Some((d, n)) if d <= p.len().max(3) / 2 + 1 => {
            format!("no benchmark matches '{p}'; did you mean '{n}'? (`oscost list` shows all)")
        }
        _ => format!("no benchmark matches '{p}'; `oscost list` shows every id"),
    }
}

/// The null system call every rung of the cost ladder is a multiple of.
pub const LADDER_REFERENCE: &str = "syscall/getppid";

/// The report's cost ladder: the result each catalogue entry puts on it (`ladder`), the null
/// system call first (the figure orders the rest by what they cost on the machine).
pub fn ladder() -> Vec<&'static str> {
    let mut rungs: Vec<&'static str> = registry().iter().filter_map(|b| b.ladder).collect();
    rungs.sort_by_key(|r| *r != LADDER_REFERENCE);
    rungs
}

/// The benchmark result `id` belongs to: the entry whose id it is, or starts (followed by a
/// variant's `/` or a placement's `@`).
pub fn owner(id: &str) -> Option<&'static Benchmark> {
    registry()
        .into_iter()
        .filter(|b| {
            id.strip_prefix(b.id)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '@']))
        })
        .max_by_key(|b| b.id.len())
}

/// The events one operation of result `id` must cost, from its catalogue entry.
pub fn expected_events(id: &str) -> Vec<(&'static str, Expect)> {
    owner(id).map_or_else(Vec::new, |b| {
        b.expectations()
            .iter()
            .filter(|x| x.applies(b.id, id))
            .map(|x| (x.event, x.expect))
            .collect()
    })
}

/// Every curve the catalogue declares, with the id prefix of its results.
/// A curve drawn `across_family` is listed once, under its family's prefix.
pub fn curves() -> Vec<(String, Curve)> {
    let mut out: Vec<(String, Curve)> = Vec::new();
    for b in registry() {
        let Some(c) = b.curve else { continue };
        let prefix = if c.across_family {
            format!("{}/", crate::base::model::family_of(b.id))
        } else {
            format!("{}/", b.id)
        };
        if !out.iter().any(|(p, _)| *p == prefix) {
            out.push((prefix, c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_come_from_the_entry_of_the_result() {
        assert_eq!(expected_events("spawn/fork").len(), 2);
        assert!(expected_events("spawn/fork-exec").is_empty());
        assert_eq!(
            owner("spawn/fork-exec").map(|b| b.id),
            Some("spawn/fork-exec")
        );
        assert_eq!(expected_events("switch/ring/n16-s0k").len(), 1);
        assert_eq!(expected_events("switch/pipe-proc@same").len(), 1);
        assert!(expected_events("switch/pipe-proc@cross").is_empty());
        assert_eq!(
            expected_events("mem/mmap/4KiB-untouched"),
            [("minor-faults", Expect::NONE)]
        );
        assert!(expected_events("mem/mmap/1MiB-touched").is_empty());
        assert!(Expect::ROUND_TRIP.holds(2.05) && !Expect::ROUND_TRIP.holds(0.3));
        let unix = Expect::UNIX_STREAM_ROUND_TRIP;
        assert!(unix.holds(2.92) && unix.holds(3.88) && !unix.holds(1.0) && !unix.holds(7.0));
    }

    /// Family facts are fields of the entries, not rules on id prefixes.
    #[test]
    fn family_facts_sit_on_the_entries() {
        let f = |id: &str| find(id).unwrap();
        assert!(f("spawn/fork").memory_watch && f("mem/fault-write").memory_watch);
        assert!(!f("syscall/getpid").memory_watch && !f("ipc/msg-create").memory_watch);
        assert!(f("ipc/msg-create").ipc_namespace && f("ipc/msg-pingpong").ipc_namespace);
        assert!(!f("switch/pipe-proc").ipc_namespace && !f("mem/mmap").ipc_namespace);
        // Two-party entries that declare nothing get a round trip's switches.
        assert_eq!(
            f("switch/pipe-proc").expectations(),
            crate::bench::entry::TWO_PARTY_EVENTS
        );
    }

    /// A new two-party mechanism cannot go unchecked: every benchmark whose parties can share
    /// one CPU says what a round trip there costs in switches.
    #[test]
    fn every_two_party_benchmark_declares_its_switches_on_one_cpu() {
        for b in registry() {
            if matches!(b.cases, crate::bench::entry::Cases::Placements) {
                let same = format!("{}@same", b.id);
                assert!(
                    expected_events(&same)
                        .iter()
                        .any(|(e, _)| *e == "context-switches"),
                    "{} declares no context switches for {same}",
                    b.id
                );
            }
        }
    }

    #[test]
    fn the_ladder_names_results_of_the_default_suite_across_families() {
        let ladder = ladder();
        assert_eq!(ladder[0], LADDER_REFERENCE);
        let families: std::collections::BTreeSet<&str> = ladder
            .iter()
            .map(|l| l.split('/').next().unwrap())
            .collect();
        assert!(ladder.len() >= 12 && families.len() >= 6);
        for rung in &ladder {
            let b = owner(rung).unwrap_or_else(|| panic!("{rung} is no benchmark's result"));
            assert!(b.default, "{rung} is not in the default suite");
            assert!(b.ladder == Some(*rung));
        }
    }

    #[test]
    fn ids_are_unique_family_slash_name_and_defined() {
        let all = registry();
        let mut ids: Vec<&str> = all.iter().map(|b| b.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "duplicate id");
        for b in all {
            let (fam, name) = b.id.split_once('/').expect("family/name");
            assert!(!fam.is_empty() && !name.is_empty());
            assert!(b.definition.len() > 10, "{} needs a definition", b.id);
        }
    }

    #[test]
    fn a_result_id_selects_its_benchmark_and_names_its_cases() {
        let s = select(&["switch/ring/n2-s0k".into(), "mem/mmap/".into()]).unwrap();
        let ids: Vec<&str> = s.benchmarks.iter().map(|b| b.id).collect();
        assert_eq!(ids, ["switch/ring", "mem/mmap"], "registry order");
        assert_eq!(s.cases, ["switch/ring/n2-s0k", "mem/mmap/"]);
        // A placement of one benchmark narrows it; the benchmark also named whole is whole.
        let s = select(&["switch/pipe-proc@cross".into()]).unwrap();
        assert_eq!(s.cases, ["switch/pipe-proc@cross"]);
        let s = select(&["switch/pipe-proc@cross".into(), "switch/".into()]).unwrap();
        assert!(s.cases.is_empty());
        // `mem/mmap/4KiB-touched` is mem/mmap's, not mem/mmap-only's.
        let s = select(&["mem/mmap/4KiB-touched".into()]).unwrap();
        assert_eq!(
            s.benchmarks.iter().map(|b| b.id).collect::<Vec<_>>(),
            ["mem/mmap"]
        );
        // Still an error where no id begins it.
        assert!(select(&["switch/rign/n2".into()]).is_err());
    }

    #[test]
    fn select_by_prefix_family_and_exact_and_suggests_nearest() {
        let s = matching(&["syscall/".into()]).unwrap();
        assert!(s.iter().all(|b| b.family() == "syscall") && s.len() > 5);
        assert_eq!(matching(&["syscall".into()]).unwrap().len(), s.len());
        let g = matching(&["syscall/getpid".into()]).unwrap();
        assert_eq!(g.len(), 1, "an exact id is not a prefix");
        let g = matching(&["syscall/getp".into()]).unwrap();
        assert!(g.len() >= 4, "a prefix selects every match");
        let e = matching(&["syscall/getpdi".into()]).unwrap_err();
        assert!(e.contains("did you mean 'syscall/getpid'"), "{e}");
        let e = matching(&["zzzzzzzzzzzzz".into()]).unwrap_err();
        assert!(e.contains("oscost list"));
        // Order follows the registry and there are no duplicates.
        let two = matching(&["call/f0".into(), "call/".into()]).unwrap();
        assert_eq!(two.len(), call::BENCHMARKS.len());
    }
}
