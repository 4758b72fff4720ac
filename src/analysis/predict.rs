//! A wrapper's cost to a whole program, predicted from what the program asks of the kernel
//! (`tracing::syscount::ProgramCounts`) and what the wrapper adds to each kind of operation
//! (`ab`'s additions), then set against the measured added time.
//!
//! The model: added time = sum over kinds of count x addition per operation. The kinds:
//! - the wrapper's own start and the program's first start, once: measured directly, as
//!   `WRAPPER true` against `true` in alternating rounds (`WRAPPER_START`);
//! - a process creation (priced by `spawn/fork`: fork, the child's exit and the parent's wait,
//!   so one clone, one exit_group and one wait4 per process are not priced again);
//! - a thread creation (`spawn/thread`: one clone and one exit each);
//! - every further exec, as the start of a dynamic program (`spawn/fork-exec-dynamic` less
//!   `spawn/fork`: the execve, the loader's and libc's calls, run cold in a new process); the
//!   calls `true` makes when it starts (`start_profile`, counted the same way) are taken off
//!   the program's counts once per exec, so they are not priced again. In a new process a
//!   system call under a filter or a tracer costs more than in a loop (caches, TLB): a shell
//!   loop of 200 `true`s under 8 seccomp filters added 2.96 ms where its calls priced as null
//!   calls came to 1.65 ms;
//! - a system call the catalogue times by name (read, write, getpid, close, stat, fstat,
//!   getdents64, sigaction...); an open is paired with one of the program's closes and the pair
//!   priced by `fs/open-close`, as lmbench's lat_syscall open times them;
//! - every other system call, priced as the null call (`syscall/getppid`): an assumption,
//!   listed with the prediction, and the part of the prediction resting on it is said.
//!
//! The interval: each price's 95% CI read as a normal interval (half-width / 1.96 a standard
//! error), counts exact; kinds sharing a price move together (their counts are summed before
//! the errors are combined), different prices independently.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::model::{Batch, BenchResult, Run, Status};
use crate::tracing::syscount::ProgramCounts;

/// The benchmark that prices every system call the catalogue does not time by name.
pub const NULL_CALL: &str = "syscall/getppid";
/// The benchmark that prices a process's creation.
pub const FORK: &str = "spawn/fork";
/// The benchmark that prices a thread's creation.
pub const THREAD: &str = "spawn/thread";
/// The benchmark that prices an exec.
pub const EXEC: &str = "spawn/exec";
/// The benchmark that prices starting a dynamic program in a new process.
pub const FORK_EXEC_DYNAMIC: &str = "spawn/fork-exec-dynamic";
/// The price of starting a dynamic program in a new process: `FORK_EXEC_DYNAMIC` less `FORK`.
pub const PROGRAM_START: &str = "spawn/fork-exec-dynamic less spawn/fork";
/// The price measured directly: `WRAPPER true` against `true`.
pub const WRAPPER_START: &str = "measured: WRAPPER true against true";

/// System calls timed by name in the catalogue, and the benchmark that times each.
const BY_NAME: &[(&str, &str)] = &[
    ("read", "syscall/read-devzero"),
    ("write", "syscall/write-devnull"),
    ("getpid", "syscall/getpid"),
    ("getppid", "syscall/getppid"),
    ("getuid", "syscall/getuid"),
    ("gettid", "syscall/gettid"),
    ("getsid", "syscall/getsid"),
    ("getpgid", "syscall/getpgid-self"),
    ("close", "syscall/close-badfd"),
    ("sched_yield", "syscall/sched-yield"),
    ("clock_gettime", "timer/clock-gettime-syscall"),
    ("newfstatat", "fs/stat"),
    ("stat", "fs/stat"),
    ("lstat", "fs/stat"),
    ("fstat", "fs/fstat"),
    ("statx", "fs/statx"),
    ("getdents64", "fs/getdents64-few"),
    ("rt_sigaction", "sig/install"),
    ("rt_sigprocmask", "sig/sigprocmask"),
    ("fcntl", "syscall/fcntl-getfd"),
    ("lseek", "syscall/lseek"),
    ("ioctl", "syscall/ioctl-notty"),
    ("access", "fs/access"),
    ("faccessat", "fs/access"),
    ("faccessat2", "fs/access"),
    ("readlink", "fs/readlink"),
    ("readlinkat", "fs/readlink"),
    ("getcwd", "fs/getcwd"),
    ("mmap", "mem/mmap-only"),
    ("munmap", "mem/munmap-only"),
    ("mprotect", "mem/mprotect"),
    ("brk", "mem/brk"),
    ("dup2", "fs/dup2"),
    ("dup3", "fs/dup2"),
    // Opens left once each open is paired with a close (descriptors kept, or closed at exit).
    ("openat", "fs/open"),
    ("open", "fs/open"),
    // The execve calls left once every exec is priced are failed ones, a PATH search's: a
    // lookup that ends in ENOENT.
    ("execve", "fs/open-missing"),
    ("execveat", "fs/open-missing"),
    ("memfd_create", "mem/memfd-create"),
    ("pidfd_open", "spawn/pidfd-open"),
    // Reading another field of the caller's credentials is getuid's work.
    ("getgid", "syscall/getuid"),
    ("geteuid", "syscall/getuid"),
    ("getegid", "syscall/getuid"),
];

/// System calls timed together with the close that follows them: each is paired with one of
/// the program's closes, and the pair priced by the benchmark, so that close is not priced
/// again.
const WITH_CLOSE: &[(&str, &str)] = &[("openat", "fs/open-close"), ("open", "fs/open-close")];

/// One kind of operation the program did: how many, and what prices it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// The operation ("read", "fork").
    pub kind: String,
    /// How many times the program did it.
    pub count: u64,
    /// The benchmark whose addition prices it.
    pub priced_by: String,
    /// Priced by the null-call model, not by a benchmark of this very operation.
    pub assumed: bool,
}

/// What the wrapper adds to one operation of a benchmark (from `ab`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// The addition per operation, ns.
    pub addition_ns: f64,
    /// Its 95% CI, ns.
    pub ci95: [f64; 2],
}

/// One line of the breakdown: a kind, its count, its addition per operation, the total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// The operation.
    pub kind: String,
    /// How many times the program did it.
    pub count: u64,
    /// The benchmark whose addition prices it.
    pub priced_by: String,
    /// Priced by the null-call model.
    pub assumed: bool,
    /// The addition per operation, ns.
    pub addition_ns: f64,
    /// Count times addition, ns.
    pub added_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// What a wrapper is predicted to add to a program: the sum over its operations, with a CI.
pub struct Prediction {
    /// The predicted added time, ns.
    pub predicted_added_ns: f64,
    /// Its 95% CI, ns.
    pub predicted_ci95: [f64; 2],
    /// Largest added time first.
    pub breakdown: Vec<Line>,
    /// Of the predicted added time, the part priced by the null-call model.
    pub assumed_added_ns: f64,
    /// Calls priced by the null-call model.
    pub assumed_count: u64,
    /// What the prediction assumed, in words.
    pub assumptions: Vec<String>,
}

/// Subtract up to `n` from the first names' counts in order; what could not be taken stays.
fn take(calls: &mut BTreeMap<String, u64>, names: &[&str], mut n: u64) {
    for name in names {
        if n == 0 {
            return;
        }
        if let Some(c) = calls.get_mut(*name) {
            let t = (*c).min(n);
            *c -= t;
            n -= t;
        }
    }
}

/// The kinds a program's counts fall into (see the module's doc), largest count first within
/// the system calls. `start` is what `true` asks of the kernel when it starts (the calls one
/// priced program start covers); without it each exec is priced as `spawn/exec` alone.
pub fn kinds(counts: &ProgramCounts, start: Option<&ProgramCounts>) -> Vec<Operation> {
    let mut calls = counts.syscalls.clone();
    let mut out = Vec::new();
    let mut push = |kind: String, count: u64, by: &str, assumed: bool| {
        if count > 0 {
            out.push(Operation {
                kind,
                count,
                priced_by: by.to_string(),
                assumed,
            });
        }
    };
    let clones = ["clone", "clone3", "fork", "vfork"];
    take(&mut calls, &clones, counts.threads);
    take(&mut calls, &["exit"], counts.threads);
    push("thread creation".into(), counts.threads, THREAD, false);
    take(&mut calls, &clones, counts.processes);
    take(&mut calls, &["exit_group", "exit"], counts.processes);
    take(&mut calls, &["wait4", "waitid"], counts.processes);
    push("process creation".into(), counts.processes, FORK, false);
    let execs = counts.execs;
    match start {
        Some(p) if execs > 0 => {
            // Each exec's own calls, as `true`'s start makes them (its exit is the process's).
            for (name, n) in p
                .syscalls
                .iter()
                .filter(|(n, _)| n.as_str() != "exit_group")
            {
                take(&mut calls, &[name.as_str()], n * execs);
            }
            push(
                "wrapper start + first program start".into(),
                1,
                WRAPPER_START,
                false,
            );
            push(
                "program start (exec, loader)".into(),
                execs - 1,
                PROGRAM_START,
                false,
            );
        }
        _ => {
            take(&mut calls, &["execve", "execveat"], execs);
            push("exec".into(), execs, EXEC, false);
        }
    }
    for (name, by) in WITH_CLOSE {
        let opens = calls.get(*name).copied().unwrap_or(0);
        let pairs = opens.min(calls.get("close").copied().unwrap_or(0));
        take(&mut calls, &[name], pairs);
        take(&mut calls, &["close"], pairs);
        push(format!("{name} + close"), pairs, by, false);
    }
    let mut rest: Vec<(String, u64)> = calls.into_iter().filter(|(_, c)| *c > 0).collect();
    rest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, count) in rest {
        match BY_NAME.iter().find(|(n, _)| *n == name) {
            Some((_, by)) => push(name, count, by, false),
            None => push(name, count, NULL_CALL, true),
        }
    }
    out
}

/// Whether both stored runs price the null call, which every prediction needs; else what to
/// measure, in words.
pub fn has_null_call(a: &Run, b: &Run, name_a: &str, name_b: &str) -> Result<(), String> {
    for (run, name) in [(a, name_a), (b, name_b)] {
        let measured = run
            .results
            .iter()
            .any(|r| r.id == NULL_CALL && r.stats.is_some());
        if !measured {
            return Err(format!(
                "{name} has no {NULL_CALL}, which prices every system call the catalogue does not time by name: give two runs of the default suite (`oscost run`), or of at least syscall/ spawn/ fs/"
            ));
        }
    }
    Ok(())
}

/// A comparison's rows as prices (each addition and its CI), and a program start's derived
/// from them (`PROGRAM_START`).
pub fn prices_of(cmp: &crate::analysis::compare::Comparison) -> BTreeMap<String, Price> {
    let mut prices: BTreeMap<String, Price> = cmp
        .rows
        .iter()
        .filter(|r| r.addition_ns.is_finite())
        .map(|r| {
            let p = Price {
                addition_ns: r.addition_ns,
                ci95: r.addition_ci95,
            };
            (r.id.clone(), p)
        })
        .collect();
    if let (Some(d), Some(f)) = (prices.get(FORK_EXEC_DYNAMIC), prices.get(FORK)) {
        prices.insert(PROGRAM_START.into(), less(*d, *f));
    }
    prices
}

/// A derived price: `a` less `b`, their errors combined as independent.
pub fn less(a: Price, b: Price) -> Price {
    let half = |p: &Price| (p.ci95[1] - p.ci95[0]).abs() / 2.0;
    let h = (half(&a).powi(2) + half(&b).powi(2)).sqrt();
    let v = a.addition_ns - b.addition_ns;
    Price {
        addition_ns: v,
        ci95: [v - h, v + h],
    }
}

/// The benchmarks whose additions a prediction for these kinds needs (the null call always).
pub fn prices_needed(kinds: &[Operation]) -> Vec<String> {
    let mut ids: Vec<String> = kinds
        .iter()
        .flat_map(|k| match k.priced_by.as_str() {
            PROGRAM_START => vec![FORK_EXEC_DYNAMIC.to_string(), FORK.to_string()],
            WRAPPER_START => vec![],
            by => vec![by.to_string()],
        })
        .collect();
    ids.push(NULL_CALL.to_string());
    ids.sort();
    ids.dedup();
    ids
}

/// Price the kinds. A kind whose benchmark has no price (it failed under the wrapper, or a
/// stored run lacks it) is priced by the null call, and that is said: `lacking` ends the
/// sentence ("under this wrapper").
pub fn predict(
    kinds: &[Operation],
    prices: &BTreeMap<String, Price>,
    lacking: &str,
) -> Option<Prediction> {
    let null = prices.get(NULL_CALL)?;
    let mut assumptions = Vec::new();
    let mut lines = Vec::new();
    // Count per price, for the interval.
    let mut per_price: BTreeMap<String, (u64, Price)> = BTreeMap::new();
    for k in kinds {
        let (by, price, assumed) = match prices.get(&k.priced_by) {
            Some(p) => (k.priced_by.clone(), *p, k.assumed),
            None => {
                assumptions.push(format!(
                    "{} ({}x) priced as the null call: {} has no price {lacking}",
                    k.kind, k.count, k.priced_by
                ));
                (NULL_CALL.to_string(), *null, true)
            }
        };
        let e = per_price.entry(by.clone()).or_insert((0, price));
        e.0 += k.count;
        lines.push(Line {
            kind: k.kind.clone(),
            count: k.count,
            priced_by: by,
            assumed,
            addition_ns: price.addition_ns,
            added_ns: k.count as f64 * price.addition_ns,
        });
    }
    let total: f64 = lines.iter().map(|l| l.added_ns).sum();
    let var: f64 = per_price
        .values()
        .map(|(n, p)| {
            let se = (p.ci95[1] - p.ci95[0]).abs() / 2.0 / 1.96;
            (*n as f64 * se).powi(2)
        })
        .sum();
    let half = 1.96 * var.sqrt();
    let assumed: Vec<&Line> = lines.iter().filter(|l| l.assumed).collect();
    let assumed_count: u64 = assumed.iter().map(|l| l.count).sum();
    let assumed_added: f64 = assumed.iter().map(|l| l.added_ns).sum();
    if assumed_count > 0 {
        assumptions.insert(
            0,
            format!(
                "{assumed_count} calls of {} kinds the catalogue does not time by name are priced \
                 as the null call ({NULL_CALL}, {:+.0} ns each): {:.0}% of the prediction",
                assumed.len(),
                null.addition_ns,
                100.0 * assumed_added / total.abs().max(1e-9)
            ),
        );
    }
    assumptions.push(
        "the prices are additions measured one operation at a time on a pinned CPU; a program's \
         calls take other arguments, paths and cache states"
            .into(),
    );
    lines.sort_by(|a, b| b.added_ns.total_cmp(&a.added_ns));
    Some(Prediction {
        predicted_added_ns: total,
        predicted_ci95: [total - half, total + half],
        breakdown: lines,
        assumed_added_ns: assumed_added,
        assumed_count,
        assumptions,
    })
}

/// Where the prediction and the measurement disagree (the measured interval does not hold the
/// prediction), what the null-call model would have had to price each assumed call at to
/// close the gap: the one number that says whether the unpriced calls could explain it.
pub fn miss_note(p: &Prediction, measured_ns: f64, measured_ci95: [f64; 2]) -> Option<String> {
    let inside =
        measured_ci95[0] <= p.predicted_added_ns && p.predicted_added_ns <= measured_ci95[1];
    let overlap =
        p.predicted_ci95[0] <= measured_ci95[1] && measured_ci95[0] <= p.predicted_ci95[1];
    if inside || overlap {
        return None;
    }
    let gap = measured_ns - p.predicted_added_ns;
    let word = if gap > 0.0 { "under" } else { "over" };
    let mut s = format!(
        "the prediction is {word} the measurement by {} ({:+.0}%)",
        crate::base::stats::units::format_ns(gap.abs()),
        100.0 * gap / measured_ns.abs().max(1e-9)
    );
    if p.assumed_count > 0 {
        let per = (p.assumed_added_ns + gap) / p.assumed_count as f64;
        let now = p.assumed_added_ns / p.assumed_count as f64;
        let mut assumed: Vec<&Line> = p.breakdown.iter().filter(|l| l.assumed).collect();
        assumed.sort_by_key(|l| std::cmp::Reverse(l.count));
        let largest: Vec<String> = assumed
            .iter()
            .take(3)
            .map(|l| format!("{} {}", l.kind, l.count))
            .collect();
        s.push_str(&format!(
            "; the {} calls priced as the null call ({}; largest: {}) would have to add {:.0} ns \
             each instead of {:.0} ns to close it",
            p.assumed_count,
            crate::base::stats::units::format_ns(p.assumed_added_ns),
            largest.join(", "),
            per,
            now
        ));
        if per.abs() > 3.0 * now.abs()
            && let Some(top) = p.breakdown.iter().find(|l| !l.assumed)
        {
            s.push_str(&format!(
                ", over three times the null call, so they are unlikely to be the cause: a \
                 priced kind (largest: {} x{} at {:+.0} ns) may cost more in this program \
                 than in its benchmark",
                top.kind, top.count, top.addition_ns
            ));
        }
    } else {
        s.push_str(
            "; every operation was priced by its own benchmark, so the wrapper costs \
             something the model does not count (start-up, memory, scheduling)",
        );
    }
    Some(s)
}

/// A program's wall times as a result of its own (`program/NAME-HASH`): one run a sample, no
/// batching, no baseline; the CI of its median from order statistics.
pub fn program_result(id: &str, definition: &str, command: &str, wall_ns: &[f64]) -> BenchResult {
    let mut r = BenchResult::not_measured(id, definition, Status::Ok);
    r.params
        .insert("command".into(), serde_json::Value::String(command.into()));
    r.batch = Batch {
        batched: false,
        size: 1,
    };
    r.samples_ns = wall_ns.to_vec();
    r.stats = crate::base::stats::summarize(wall_ns);
    r.outliers = crate::base::stats::tukey_outliers(wall_ns);
    r
}

#[cfg(test)]
mod tests;
