//! What a watch may spend: its duty over every ten minutes, counted from the process's start
//! (`cpu_used` since `process_age`), the bursts a window can take within it, and the refusal
//! of an interval the duty cannot keep (`oscost watch`, docs/watch.md).

use std::time::Duration;

use super::BURSTS;
use crate::cli::commands::args::usage;

/// The span over which the duty holds: every ten minutes of the watch, its first included.
pub(super) const DUTY_SPAN: Duration = Duration::from_secs(600);

/// A window may come this much later than the interval before the interval counts as not kept.
pub(super) const INTERVAL_SLACK: Duration = Duration::from_secs(2);

/// The share of one interval's duty the windows are fitted to: the rest is headroom for a
/// window that costs more than the last (a slower moment of the host), so that the interval
/// is kept rather than stretched.
pub(super) const FIT_SHARE: f64 = 0.85;

/// Bursts of each benchmark a window can take within `FIT_SHARE` of one interval's duty, from
/// a window of `bursts` bursts that cost `cpu`: its cost taken as all per burst (the fixed
/// part counted with each, so the estimate errs high), at least one and at most `BURSTS`;
/// `None` where even one does not fit in the whole of an interval's duty.
pub(super) fn bursts_that_fit(
    cpu: Duration,
    bursts: usize,
    interval: Duration,
    duty: f64,
) -> Option<usize> {
    let per_burst = cpu.as_secs_f64() / bursts.max(1) as f64;
    let budget = interval.as_secs_f64() * duty;
    if per_burst > budget {
        return None;
    }
    let budget = budget * FIT_SHARE;
    if per_burst <= 0.0 {
        return Some(BURSTS);
    }
    Some(((budget / per_burst).floor() as usize).clamp(1, BURSTS))
}

/// Why the interval asked cannot be kept: the first window (`bursts` bursts of each
/// benchmark, the start-up included) cost `cpu`, more than the duty allows in one interval;
/// the shortest interval that keeps the duty, and the duty that keeps the interval.
pub(super) fn refusal(
    cpu: Duration,
    bursts: usize,
    interval: Duration,
    duty: f64,
) -> anyhow::Error {
    let per = cpu.as_secs_f64() / bursts.max(1) as f64;
    usage(format!(
        "--interval {:.0}: one burst of each benchmark takes {:.0} ms of CPU here (oscost's \
         start and its workers included), more than {:.1}% of {:.0} s allows; at {:.1}% the \
         shortest interval is {} s (--interval {}), or keep {:.0} s with --duty {:.1}",
        interval.as_secs_f64(),
        per * 1e3,
        duty * 100.0,
        interval.as_secs_f64(),
        duty * 100.0,
        (per / duty).ceil(),
        (per / duty).ceil(),
        interval.as_secs_f64(),
        (100.0 * per / interval.as_secs_f64() * 10.0).ceil() / 10.0
    ))
}

/// How long ago this process started (`/proc/self/stat`'s start time against the boot clock),
/// so the duty counts the watch's start-up; zero where either cannot be read.
pub(super) fn process_age() -> Duration {
    let started =
        crate::measuring::os::start_time(std::process::id()).map(crate::measuring::os::ticks_ns);
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .ok()
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
    match (started, now) {
        (Some(s), Some(n)) => Duration::from_nanos(n.saturating_sub(s)),
        _ => Duration::ZERO,
    }
}

/// CPU time this process and its reaped children have used.
pub(super) fn cpu_used() -> Duration {
    let t = |who| {
        nix::sys::resource::getrusage(who).map_or(Duration::ZERO, |u| {
            let (a, b) = (u.user_time(), u.system_time());
            let d = |tv: nix::sys::time::TimeVal| {
                Duration::from_micros((tv.tv_sec() * 1_000_000 + tv.tv_usec()).max(0) as u64)
            };
            d(a) + d(b)
        })
    };
    t(nix::sys::resource::UsageWho::RUSAGE_SELF) + t(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
}
