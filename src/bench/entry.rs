//! A catalogue entry (`Benchmark`: id, definition, the cases it expands to and the function
//! that measures one case), the variants it declares (`Cases`, `Variant`) and those the command
//! line adds (`VariantOptions`), with what one operation must cost in events (`Expectation`).
//!
//! The catalogue owns variants, as criterion's benchmark groups own ids and parameters: a family
//! declares its cases (one; fixed sizes or counts; the requested placements; the ring's points;
//! the fork sizes) and the runner (`runner.rs`) expands them. What the function is given and
//! returns is the measuring layer's contract, `measuring::case`.

use serde::{Deserialize, Serialize};

use crate::base::model::Curve;
use crate::measuring::case::CaseFn;
use crate::measuring::placement::Place;

/// A parameter value of a fixed variant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param {
    /// A number (a size, a count).
    Int(i64),
    /// A yes or no (touched or not).
    Flag(bool),
}

/// One fixed variant of a benchmark: the id suffix and the parameters it sets.
#[derive(Debug)]
pub struct Variant {
    /// Appended to the benchmark id ("/4KiB-touched").
    pub suffix: &'static str,
    /// The parameters it sets, by name.
    pub params: &'static [(&'static str, Param)],
}

/// The cases a benchmark expands to.
#[derive(Debug)]
pub enum Cases {
    /// One case; the result id is the benchmark's.
    One,
    /// Fixed variants (sizes, counts, touched or not).
    Fixed(&'static [Variant]),
    /// Each requested placement of a two-party ping-pong: `ID@same`, `ID@cross`, `ID@free`.
    /// A sample is a round trip; analysis adds the per-switch cost (half of it).
    Placements,
    /// lmbench's ring: each working set, then each process count: `ID/n{procs}-s{kb}k`.
    Ring,
    /// The parent's resident sizes: `ID/{mib}MiB`. Analysis fits the cost's slope over them.
    ForkSizes,
    /// N copies at once, as processes and as threads: `ID/process-N`, `ID/thread-N` for each N
    /// of `--copies` (`measuring::scaling`). Analysis adds each result's efficiency against one
    /// copy and the thread mode's cost against the process mode's.
    Copies,
}

/// Variants that come from the command line rather than the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantOptions {
    /// Placements of two-party benchmarks.
    pub placements: Vec<Place>,
    /// lat_ctx's process counts and working sets, and rings run at once (-P).
    pub ring: RingOptions,
    /// Resident sizes of the parent for spawn/fork-rss, MiB.
    pub fork_sizes_mib: Vec<u64>,
    /// Copies run at once by the scale/ family (`--copies`), resolved against the allowed CPUs
    /// when the plan is built.
    #[serde(default = "default_copies")]
    pub copies: Vec<usize>,
    /// Result ids, or prefixes of them, that narrow their benchmarks to some cases
    /// (`bench::Selection::cases`): a benchmark any of them names measures only the cases
    /// whose full id begins with one of them. Empty: every case.
    #[serde(default)]
    pub only: Vec<String>,
}

impl VariantOptions {
    /// Whether the case with `suffix` of benchmark `id` is measured (`only`).
    pub fn measures(&self, id: &str, suffix: &str) -> bool {
        let mine: Vec<&String> = self
            .only
            .iter()
            .filter(|p| {
                p.strip_prefix(id)
                    .is_some_and(|rest| rest.starts_with(['/', '@']))
            })
            .collect();
        let full = format!("{id}{suffix}");
        mine.is_empty() || mine.iter().any(|p| full.starts_with(p.as_str()))
    }
}

/// The copies of scale/ when nothing resolved them: one, and two where the run may use two
/// CPUs (the plan replaces it with one and every allowed CPU).
pub fn default_copies() -> Vec<usize> {
    vec![1, 2]
}

impl Default for VariantOptions {
    fn default() -> Self {
        VariantOptions {
            placements: Place::defaults(),
            ring: RingOptions::default(),
            fork_sizes_mib: default_fork_sizes(),
            copies: default_copies(),
            only: vec![],
        }
    }
}

/// The parent sizes of spawn/fork-rss by default, MiB (cut to the memory available).
pub fn default_fork_sizes() -> Vec<u64> {
    vec![0, 64, 256, 1024]
}

/// lat_ctx's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingOptions {
    /// Processes in a ring (lat_ctx's N).
    pub procs: Vec<usize>,
    /// Working set each process touches per hop, KiB (lat_ctx -s).
    pub sizes_kb: Vec<usize>,
    /// Rings run at once (lat_ctx -P).
    pub parallel: usize,
}

impl Default for RingOptions {
    fn default() -> Self {
        RingOptions {
            procs: vec![2, 4, 8, 16, 32, 64],
            sizes_kb: vec![0, 16],
            parallel: 1,
        }
    }
}

/// A catalogue entry.
#[derive(Debug)]
pub struct Benchmark {
    /// `family/name`.
    pub id: &'static str,
    /// What one sample is the cost of, in a sentence.
    pub definition: &'static str,
    /// In the suite that runs when no id is given.
    pub default: bool,
    /// The cases it expands to: one, fixed variants, placements, a ring or a fork curve.
    pub cases: Cases,
    /// The operation hands the CPU over (a forked child preempting its parent, a blocked
    /// ping-pong party), so involuntary switches are not a disturbance.
    pub preempts: bool,
    /// The results form a curve over a parameter (drawn as one in reports).
    pub curve: Option<Curve>,
    /// What one operation must cost in events for a result to mean what the definition says,
    /// checked on every result that counted the event (`analysis::check_definition`).
    pub events: &'static [Expectation],
    /// The result that stands for this benchmark on the report's cost ladder, if any.
    pub ladder: Option<&'static str>,
    /// Its worker enters an IPC namespace of its own (the ipc/ family's SysV objects and POSIX
    /// queues die with it, and no other program's can be touched).
    pub ipc_namespace: bool,
    /// It starts processes in a cgroup: the run makes one for it (`effects::cgroup`, removed
    /// on every exit path by the guard) and hands it over in `Meter::cgroup`.
    pub cgroup: bool,
    /// Its cost is one that memory activity (ballooning, compaction, reclaim) moves: its
    /// workers read `/proc/vmstat` around it (`measuring::memory`).
    pub memory_watch: bool,
    /// The tool of lmbench, LEBench or `perf bench` that times the same operation by the same
    /// definition ("lmbench lat_syscall stat"), said by `oscost list` so a user of that tool
    /// finds its number here.
    pub peer: Option<&'static str>,
    /// Measures one case.
    pub run: CaseFn,
}

/// What one operation must cost in one event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// `value` within `tol`.
    About {
        /// The events per operation.
        value: f64,
        /// How far from it a count may be.
        tol: f64,
    },
    /// At least this many.
    AtLeast(f64),
    /// At most this many: a definition that bounds how often the operation can block, where
    /// buffering lets a short counting window see none at all.
    AtMost(f64),
    /// From `lo` to `hi`: a count the kernel's scheduling choices move within known bounds.
    Between {
        /// The fewest events per operation the definition allows.
        lo: f64,
        /// The most.
        hi: f64,
    },
}

impl Expect {
    /// None at all: a system call that never leaves the CPU, a mapping never touched.
    pub const NONE: Expect = Expect::About {
        value: 0.0,
        tol: 0.02,
    };
    /// One: a ring hop's switch, a first touch's fault.
    pub const ONE: Expect = Expect::About {
        value: 1.0,
        tol: 0.05,
    };
    /// Two: a ping-pong round trip on one CPU switches there and back.
    pub const ROUND_TRIP: Expect = Expect::About {
        value: 2.0,
        tol: 0.1,
    };

    /// A round trip over a unix stream socket on one CPU: between two and six. Each byte sent
    /// is charged to the sender's socket, and the reader's freeing it calls the sender's
    /// `unix_write_space`, which wakes that socket's one wait queue, where the sender sleeps
    /// waiting to *read* its answer (88% of the wake-ups in a sched_wakeup profile come from
    /// `sock_wfree`). So each of a trip's two reads wakes its peer early. Whether the early
    /// riser runs before its answer is written, finds nothing and blocks again (two switches
    /// more) is the scheduler's wake-up preemption call, and differs between machines: 2.9-3.2
    /// per trip on an AMD EPYC guest, 3.9 on CI's. Two is the floor (each party blocks once),
    /// six the ceiling (both early wake-ups run); pipes, eventfds and a datagram socketpair
    /// count 2.00 (docs/design-notes.md, "Definitions").
    pub const UNIX_STREAM_ROUND_TRIP: Expect = Expect::Between { lo: 1.9, hi: 6.1 };

    /// Whether `x` events per operation meet it.
    pub fn holds(self, x: f64) -> bool {
        match self {
            Expect::About { value, tol } => (x - value).abs() <= tol,
            Expect::AtLeast(v) => x >= v,
            Expect::AtMost(v) => x <= v,
            Expect::Between { lo, hi } => (lo..=hi).contains(&x),
        }
    }

    /// The expectation in words, "2 context-switches per op (±0.1)".
    pub fn describe(self, event: &str) -> String {
        match self {
            Expect::About { value, tol } => format!("{value} {event} per op (±{tol})"),
            Expect::AtLeast(v) => format!("at least {v} {event} per op"),
            Expect::AtMost(v) => format!("at most {v} {event} per op"),
            Expect::Between { lo, hi } => format!("{lo} to {hi} {event} per op"),
        }
    }
}

/// Which of a benchmark's results an expectation is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Among {
    /// Every result of the benchmark.
    All,
    /// Its `@same` placement (both parties on the measuring CPU).
    SameCpu,
    /// The variant with this id suffix (`/4KiB-touched`).
    Suffix(&'static str),
}

/// One event a benchmark's results must cost per operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expectation {
    /// Which results it applies to.
    pub among: Among,
    /// perf's name of the event.
    pub event: &'static str,
    /// What one operation must cost in it.
    pub expect: Expect,
}

/// A ping-pong's round trip on one CPU: two context switches (each party blocks once). The
/// default of every two-party benchmark (`Benchmark::expectations`).
pub const TWO_PARTY_EVENTS: &[Expectation] = &[Expectation {
    among: Among::SameCpu,
    event: "context-switches",
    expect: Expect::ROUND_TRIP,
}];

impl Expectation {
    /// Whether result `id` of benchmark `bench` is held to it.
    pub fn applies(&self, bench: &str, id: &str) -> bool {
        let Some(rest) = id.strip_prefix(bench) else {
            return false;
        };
        match self.among {
            Among::All => true,
            Among::SameCpu => rest == "@same",
            Among::Suffix(suffix) => rest == suffix,
        }
    }
}

/// `events: &[...]` of a catalogue entry: (which results, event, expectation).
#[macro_export]
macro_rules! expect_events {
    ($( ($among:expr, $event:literal, $x:expr) ),* $(,)?) => {
        &[$( $crate::bench::entry::Expectation { among: $among, event: $event, expect: $x } ),*]
    };
}

impl Benchmark {
    /// An entry with one case, in the default suite; the catalogue overrides fields.
    pub const fn new(id: &'static str, definition: &'static str, run: CaseFn) -> Benchmark {
        Benchmark {
            id,
            definition,
            default: true,
            cases: Cases::One,
            preempts: false,
            curve: None,
            events: &[],
            ladder: None,
            ipc_namespace: false,
            cgroup: false,
            memory_watch: false,
            peer: None,
            run,
        }
    }

    /// What one operation must cost in events: the entry's own expectations, or for a
    /// two-party benchmark that declares none, a round trip's two switches on one CPU
    /// (`TWO_PARTY_EVENTS`).
    pub fn expectations(&self) -> &'static [Expectation] {
        if self.events.is_empty() && matches!(self.cases, Cases::Placements) {
            TWO_PARTY_EVENTS
        } else {
            self.events
        }
    }

    /// The family: the id before the first slash.
    pub fn family(&self) -> &'static str {
        self.id.split('/').next().unwrap_or(self.id)
    }
}

/// A family's catalogue, one entry per line pair: `"family/name" => function { field: value,
/// ... }: "definition";` (the braces only when a field differs from `Benchmark::new`'s), after
/// an optional `family { field: value, ... };` that every entry of the family starts from.
#[macro_export]
macro_rules! catalogue {
    // A family's facts first (`family { ipc_namespace: true };`), then its entries.
    (family { $($fkey:ident : $fval:expr),* $(,)? } ; $( $id:literal => $run:path $({ $($key:ident : $val:expr),* $(,)? })? : $def:literal ;)*) => {
        /// The family's facts over an entry's defaults.
        const fn family(b: $crate::bench::entry::Benchmark) -> $crate::bench::entry::Benchmark {
            $crate::bench::entry::Benchmark { $($fkey: $fval,)* ..b }
        }
        /// The family's catalogue entries, in the order listed.
        pub static BENCHMARKS: &[$crate::bench::entry::Benchmark] = &[$(
            $crate::bench::entry::Benchmark {
                $($($key: $val,)*)?
                ..family($crate::bench::entry::Benchmark::new($id, $def, $run))
            },
        )*];
    };
    ($( $id:literal => $run:path $({ $($key:ident : $val:expr),* $(,)? })? : $def:literal ;)*) => {
        /// The family's catalogue entries, in the order listed.
        pub static BENCHMARKS: &[$crate::bench::entry::Benchmark] = &[$(
            $crate::bench::entry::Benchmark {
                $($($key: $val,)*)?
                ..$crate::bench::entry::Benchmark::new($id, $def, $run)
            },
        )*];
    };
}
