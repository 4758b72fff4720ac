//! The benchmark catalogue: what each benchmark is (id, definition, cases) and the function
//! that measures one case. Families declare entries with `catalogue!`; the harness
//! (`harness::runner`) expands cases, places parties and forms ids, so a benchmark function
//! measures one case and knows nothing of output. A new benchmark is one function in its family
//! file plus one catalogue line.

/// A variant of `bytes` of memory with its pages left alone or each written once (params
/// `bytes` and `touched`), for mem/mmap and ipc/shm-attach.
macro_rules! touched_variant {
    ($suffix:literal, $bytes:expr, $touched:literal) => {
        $crate::harness::case::Variant {
            suffix: $suffix,
            params: &[
                ("bytes", $crate::harness::case::Param::Int($bytes)),
                ("touched", $crate::harness::case::Param::Flag($touched)),
            ],
        }
    };
}

pub mod call;
pub mod ipc;
pub mod mem;
pub mod spawn;
pub mod switch;
pub mod syscall;
pub mod timer;

use crate::harness::case::{BenchError, Benchmark, Measured, Meter, Param, Variant};
use crate::harness::os::{read_byte, write_byte};
use crate::model::Curve;

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
        .collect()
}

pub fn find(id: &str) -> Option<&'static Benchmark> {
    registry().into_iter().find(|b| b.id == id)
}

/// Resolve user patterns (exact ids, `family/` or `family` or any id prefix) to benchmarks, in
/// registry order, without duplicates. An empty pattern list means the default suite. A pattern
/// that matches nothing is an error naming the closest id.
pub fn select(patterns: &[String]) -> Result<Vec<&'static Benchmark>, String> {
    let all = registry();
    if patterns.is_empty() {
        return Ok(all.into_iter().filter(|b| b.default).collect());
    }
    let mut chosen = vec![false; all.len()];
    for p in patterns {
        if p.trim().is_empty() {
            return Err("an empty benchmark id; give an id or prefix (`oscost list`)".into());
        }
        // An exact id selects that benchmark alone (`syscall/getpid` is not also
        // `syscall/getpid-raw`); anything else is a family or a prefix.
        let exact = all.iter().position(|b| b.id == p);
        let mut any = false;
        for (i, b) in all.iter().enumerate() {
            let family_match = p.trim_end_matches('/') == b.family();
            let hit = match exact {
                Some(e) => e == i,
                None => family_match || b.id.starts_with(p.as_str()),
            };
            if hit {
                chosen[i] = true;
                any = true;
            }
        }
        if !any {
            return Err(unknown_id_message(p, &all));
        }
    }
    Ok(all
        .into_iter()
        .zip(chosen)
        .filter_map(|(b, c)| c.then_some(b))
        .collect())
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

/// The report's cost ladder: one representative result per rung, from a function call to
/// fork+exec of a dynamic binary (the figure orders them by what they cost on the machine).
/// The null system call every rung is a multiple of comes first.
pub const LADDER: &[&str] = &[
    "syscall/getppid",
    "call/f0",
    "timer/rdtsc",
    "timer/monotonic",
    "syscall/read-devzero",
    "timer/clock-gettime-syscall",
    "syscall/sched-yield",
    "ipc/pipe-1b",
    "mem/fault-write",
    "ipc/msg-create",
    "switch/futex-thread@same",
    "switch/pipe-proc@same",
    "mem/mmap/4KiB-touched",
    "spawn/thread",
    "spawn/vfork",
    "spawn/fork",
    "spawn/fork-exec",
    "spawn/fork-exec-dynamic",
];

/// What one operation must cost in one event for the benchmark to mean what its definition
/// says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// `value` within `tol`.
    About { value: f64, tol: f64 },
    /// At least this many.
    AtLeast(f64),
}

impl Expect {
    pub fn holds(self, x: f64) -> bool {
        match self {
            Expect::About { value, tol } => (x - value).abs() <= tol,
            Expect::AtLeast(v) => x >= v,
        }
    }

    pub fn describe(self, event: &str) -> String {
        match self {
            Expect::About { value, tol } => format!("{value} {event} per op (±{tol})"),
            Expect::AtLeast(v) => format!("at least {v} {event} per op"),
        }
    }
}

const NONE: Expect = Expect::About {
    value: 0.0,
    tol: 0.02,
};
const ROUND_TRIP: Expect = Expect::About {
    value: 2.0,
    tol: 0.1,
};
const ONE: Expect = Expect::About {
    value: 1.0,
    tol: 0.05,
};

/// Each benchmark's definition in events (result id, or an id prefix ending in `/`; event;
/// expectation), checked on every result that counted the event: a system call that never
/// leaves the CPU, a ping-pong on one CPU that is two switches a round trip, a ring hop that
/// is one, a first touch that is one fault per page, a fork that switches and faults.
pub const EXPECTED_EVENTS: &[(&str, &str, Expect)] = &[
    ("syscall/getpid", "context-switches", NONE),
    ("syscall/getpid", "minor-faults", NONE),
    ("syscall/getppid", "context-switches", NONE),
    ("syscall/getppid", "minor-faults", NONE),
    ("switch/pipe-proc@same", "context-switches", ROUND_TRIP),
    ("switch/pipe-thread@same", "context-switches", ROUND_TRIP),
    ("switch/futex-thread@same", "context-switches", ROUND_TRIP),
    ("switch/futex-proc@same", "context-switches", ROUND_TRIP),
    ("switch/sem-thread@same", "context-switches", ROUND_TRIP),
    ("switch/eventfd-proc@same", "context-switches", ROUND_TRIP),
    ("switch/unix-proc@same", "context-switches", ROUND_TRIP),
    ("switch/yield-pair@same", "context-switches", ROUND_TRIP),
    ("switch/ring/", "context-switches", ONE),
    ("mem/fault-read", "minor-faults", ONE),
    ("mem/fault-write", "minor-faults", ONE),
    ("mem/mmap/4KiB-touched", "minor-faults", ONE),
    ("mem/mmap/4KiB-untouched", "minor-faults", NONE),
    ("spawn/fork", "context-switches", Expect::AtLeast(0.95)),
    ("spawn/fork", "minor-faults", Expect::AtLeast(1.0)),
];

/// The expectations that apply to result `id`.
pub fn expected_events(id: &str) -> Vec<(&'static str, Expect)> {
    EXPECTED_EVENTS
        .iter()
        .filter(|(key, _, _)| {
            id == *key || (key.ends_with('/') && id.starts_with(key)) || {
                id.strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('/'))
            }
        })
        .map(|&(_, e, x)| (e, x))
        .collect()
}

/// Every curve the catalogue declares, with the id prefix of its results.
pub fn curves() -> Vec<(String, Curve)> {
    registry()
        .into_iter()
        .filter_map(|b| b.curve.map(|c| (format!("{}/", b.id), c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_match_exact_ids_and_prefixes_only() {
        assert_eq!(expected_events("spawn/fork").len(), 2);
        assert!(expected_events("spawn/fork-exec").is_empty());
        assert_eq!(expected_events("switch/ring/n16-s0k").len(), 1);
        assert!(expected_events("switch/pipe-proc@cross").is_empty());
        assert!(ROUND_TRIP.holds(2.05) && !ROUND_TRIP.holds(0.3));
    }

    #[test]
    fn the_ladder_names_results_of_the_default_suite_across_families() {
        let ids: Vec<&str> = registry().iter().map(|b| b.id).collect();
        let families: std::collections::BTreeSet<&str> = LADDER
            .iter()
            .map(|l| l.split('/').next().unwrap())
            .collect();
        assert!(LADDER.len() >= 12 && families.len() >= 6);
        for rung in LADDER {
            let bench = rung.split('@').next().unwrap();
            assert!(
                ids.iter().any(|id| bench.starts_with(id)),
                "{rung} is no benchmark"
            );
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
    fn select_by_prefix_family_and_exact_and_suggests_nearest() {
        let s = select(&["syscall/".into()]).unwrap();
        assert!(s.iter().all(|b| b.family() == "syscall") && s.len() > 5);
        assert_eq!(select(&["syscall".into()]).unwrap().len(), s.len());
        let g = select(&["syscall/getpid".into()]).unwrap();
        assert_eq!(g.len(), 1, "an exact id is not a prefix");
        let g = select(&["syscall/getp".into()]).unwrap();
        assert!(g.len() >= 4, "a prefix selects every match");
        let e = select(&["syscall/getpdi".into()]).unwrap_err();
        assert!(e.contains("did you mean 'syscall/getpid'"), "{e}");
        let e = select(&["zzzzzzzzzzzzz".into()]).unwrap_err();
        assert!(e.contains("oscost list"));
        // Order follows the registry and there are no duplicates.
        let two = select(&["call/f0".into(), "call/".into()]).unwrap();
        assert_eq!(two.len(), call::BENCHMARKS.len());
    }
}
