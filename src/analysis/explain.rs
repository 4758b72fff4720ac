//! A ping-pong's round trip split into stages, from a traced pass's events
//! (`tracing::trace::TraceEvent`): pure, and tested on recorded streams with exact answers.
//!
//! The master (the thread that measures) sends, the peer answers. One round trip runs from the
//! master being switched in (i) to its next switch-in (i'); in between, in time order: b the
//! master wakes the peer (sched_waking); w the peer is queued on its CPU (sched_wakeup, which
//! across CPUs fires on the peer's CPU once the IPI is taken); c the peer's CPU leaves idle
//! (if it was idle); d the peer is switched in; g the peer wakes the master; w' and h the
//! same for the master. With system call events (`--syscalls`) each turn splits further: j the master's
//! blocked call returns, a it enters its sending call; e the peer's call returns, f it enters
//! its answering call. The stages are the intervals between consecutive milestones, so each
//! round trip's stages sum exactly to it, and the medians of the stages to about its median.
//!
//! A party that was not asleep is not woken: on one CPU a waking often preempts the waker, who
//! then runs again without ever sleeping. A missing waking makes its wait stages 0 and the turn
//! before it run until the switch (said in the stage's definition, counted in `unwoken`).
//! Where a CPU records no switch-in (some guests record nothing from an idle vCPU) the switch
//! is taken at the thread's first own event, counted in `switches_unseen`.

use serde::{Deserialize, Serialize};

use crate::tracing::trace::{EventKind, TraceEvent};

const MASTER_TURN: (&str, &str) = (
    "master's turn until it wakes the peer",
    "from the master's switch-in: its blocked call returning, its own code, its sending call until it wakes the peer (when the peer was not asleep: until the peer is switched in)",
);
const PEER_QUEUED: (&str, &str) = (
    "peer queued",
    "from the waking until the peer is on its CPU's run queue (sched_wakeup): the choice of CPU and the enqueue; across CPUs also the IPI and the halted vCPU coming back to take it",
);
const PEER_IDLE: (&str, &str) = (
    "peer's CPU leaves idle",
    "from the enqueue until the peer's CPU's idle loop exits (0 when it was not idle, or left idle before the enqueue)",
);
const PEER_IN: (&str, &str) = (
    "peer switched in",
    "until the scheduler switches the peer in (on one CPU: the master finishing its call and blocking, or being preempted)",
);
const PEER_TURN: (&str, &str) = (
    "peer's turn until it wakes the master",
    "from the peer's switch-in: its blocked call returning, its own code, its answering call until it wakes the master (when the master was not asleep: until the master is switched in)",
);
const MASTER_QUEUED: (&str, &str) = (
    "master queued",
    "from the waking until the master is on its CPU's run queue (across CPUs: the IPI and the vCPU taking it)",
);
const MASTER_IDLE: (&str, &str) = (
    "master's CPU leaves idle",
    "from the enqueue until the master's CPU's idle loop exits (0 when it was not idle)",
);
const MASTER_IN: (&str, &str) = (
    "master switched in",
    "until the scheduler switches the master in (on one CPU: the peer finishing its call and blocking, or being preempted)",
);

/// The stages of a trace of the scheduler's events alone (the default: the fewest events a
/// round trip, so the least perturbation).
pub const COARSE: &[(&str, &str)] = &[
    MASTER_TURN,
    PEER_QUEUED,
    PEER_IDLE,
    PEER_IN,
    PEER_TURN,
    MASTER_QUEUED,
    MASTER_IDLE,
    MASTER_IN,
];

/// The stages of a trace with system call events (`--syscalls`): each turn in three.
pub const FINE: &[(&str, &str)] = &[
    (
        "master back in user space",
        "from the master's switch-in until its blocked system call returns",
    ),
    (
        "master in user space",
        "the master's own code (its loop, a clock read) until its sending call",
    ),
    (
        "send: syscall entry to waking",
        "the master's sending call, from its entry until it wakes the peer",
    ),
    PEER_QUEUED,
    PEER_IDLE,
    PEER_IN,
    (
        "peer back in user space",
        "from the peer's switch-in until its blocked system call returns",
    ),
    (
        "peer in user space",
        "the peer's own code between its two system calls",
    ),
    (
        "answer: syscall entry to waking",
        "the peer's answering call, from its entry until it wakes the master",
    ),
    MASTER_QUEUED,
    MASTER_IDLE,
    MASTER_IN,
];

/// One stage's statistics over the round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageStats {
    /// The stage's name ("peer wakes").
    pub name: String,
    /// Its median over the round trips, ns.
    pub median_ns: f64,
    /// Its 90th percentile, ns.
    pub p90_ns: f64,
    /// Which two events bound it, in words.
    pub definition: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// A traced pass split into round trips and their stages.
pub struct Split {
    /// The peer thread the master's round trips went to.
    pub peer_tid: u32,
    /// Round trips split.
    pub round_trips: usize,
    /// Their median, ns.
    pub round_trip_ns: f64,
    /// Each stage's statistics, in round-trip order.
    pub stages: Vec<StageStats>,
    /// Round trips whose milestones could not all be found (cut by the pass's ends, lost
    /// records, or with system calls a party that was not woken).
    pub incomplete: usize,
    /// Switch-ins not recorded (a CPU that traced nothing while idle): that side's "leaves
    /// idle" is 0 and its "switched in" stage ends at the thread's first own event.
    pub switches_unseen: usize,
    /// Round trips in which the peer, or the master, was not asleep when the other sent, so
    /// was not woken (preempted on one CPU, or still running on its own).
    #[serde(default)]
    pub unwoken: [usize; 2],
}

/// The thread the master woke, or switched to, most often: its peer.
pub fn peer_of(events: &[TraceEvent], master: u32) -> Option<u32> {
    let m = i64::from(master);
    let mut counts = std::collections::BTreeMap::<i64, usize>::new();
    for e in events {
        let other = match e.kind {
            EventKind::Waking { pid } if e.tid == master => pid,
            EventKind::Switch { prev, next } if prev == m => next,
            _ => continue,
        };
        if other != m && other != 0 {
            *counts.entry(other).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .and_then(|(p, _)| u32::try_from(p).ok())
}

/// First index at or after `from` where `pred` holds.
fn next(events: &[TraceEvent], from: usize, pred: impl Fn(&TraceEvent) -> bool) -> Option<usize> {
    (from..events.len()).find(|&i| pred(&events[i]))
}

/// Last index in `from..to` where `pred` holds.
fn last(
    events: &[TraceEvent],
    from: usize,
    to: usize,
    pred: impl Fn(&TraceEvent) -> bool,
) -> Option<usize> {
    (from..to).rev().find(|&i| pred(&events[i]))
}

/// Where `tid` was switched in after `from`: the switch event, or, where the CPU recorded no
/// switch (some guests record nothing from an idle vCPU), the thread's own first event; the
/// flag says which.
fn switched_in(ev: &[TraceEvent], from: usize, tid: u32) -> Option<(usize, bool)> {
    let own = next(ev, from, |e| e.tid == tid);
    let t = i64::from(tid);
    let switch = next(
        ev,
        from,
        |e| matches!(e.kind, EventKind::Switch { next, .. } if next == t),
    );
    match (switch, own) {
        (Some(s), Some(o)) if s < o => Some((s, true)),
        (_, Some(o)) => Some((o, false)),
        (Some(s), None) => Some((s, true)),
        (None, None) => None,
    }
}

fn wakes(by: u32, whom: u32) -> impl Fn(&TraceEvent) -> bool {
    move |e| e.tid == by && matches!(e.kind, EventKind::Waking { pid } if pid == i64::from(whom))
}

fn sys(tid: u32, enter: bool) -> impl Fn(&TraceEvent) -> bool {
    move |e| {
        e.tid == tid
            && if enter {
                matches!(e.kind, EventKind::SysEnter { .. })
            } else {
                matches!(e.kind, EventKind::SysExit { .. })
            }
    }
}

/// When the wake-up of `whom` by the waking at `by` (if any) was queued and its CPU left idle,
/// before `until`: (queued, idle exit), each the previous milestone's time when not seen, and
/// an idle exit before the enqueue taken as at the enqueue.
fn wake_milestones(
    ev: &[TraceEvent],
    by: Option<usize>,
    until: usize,
    whom: u32,
) -> (Option<usize>, Option<usize>) {
    let Some(b) = by else {
        return (None, None);
    };
    let w = (b + 1..until)
        .find(|&k| matches!(ev[k].kind, EventKind::Wakeup { pid } if pid == i64::from(whom)));
    let from = w.unwrap_or(b);
    let c = (from + 1..until)
        .find(|&k| ev[k].cpu == ev[until].cpu && ev[k].kind == EventKind::IdleExit);
    (w, c)
}

/// The milestones' times of the round trip between the master's switch-in at `i`, the
/// peer's at `d` and the master's next at `ni`: coarse i b w c d g w' h i', fine i j a b w c
/// d e f g w' h i'; and whether each party was woken. None when a milestone is missing.
fn round_trip(
    ev: &[TraceEvent],
    (i, d, ni): (usize, usize, usize),
    (m, p): (u32, u32),
    fine: bool,
) -> Option<(Vec<u64>, [bool; 2])> {
    let b = next(ev, i, wakes(m, p)).filter(|&b| b < d);
    let (w, c) = wake_milestones(ev, b, d, p);
    let g = next(ev, d, wakes(p, m)).filter(|&g| g < ni);
    let (w2, h) = wake_milestones(ev, g, ni, m);
    let t = |k: usize| ev[k].time;
    // An absent waking: the turn before it runs until the switch, the waits are 0.
    let (tb, tg) = (b.map_or(t(d), t), g.map_or(t(ni), t));
    let (tw, tw2) = (w.map_or(tb, t), w2.map_or(tg, t));
    let (tc, th) = (c.map_or(tw, t), h.map_or(tw2, t));
    let times = if fine {
        let (b, g) = (b?, g?);
        let j = next(ev, i, sys(m, false)).filter(|&j| j < b)?;
        let a = last(ev, j + 1, b, sys(m, true))?;
        let e_ = next(ev, d, sys(p, false)).filter(|&e| e < g)?;
        let f = last(ev, e_ + 1, g, sys(p, true))?;
        vec![
            t(i),
            t(j),
            t(a),
            tb,
            tw,
            tc,
            t(d),
            t(e_),
            t(f),
            tg,
            tw2,
            th,
            t(ni),
        ]
    } else {
        vec![t(i), tb, tw, tc, t(d), tg, tw2, th, t(ni)]
    };
    Some((times, [b.is_some(), g.is_some()]))
}

fn quantile(v: &[f64], q: f64) -> f64 {
    crate::base::stats::quantile_sorted(&crate::base::stats::sorted_copy(v), q)
}

/// Split every round trip of `master` with its peer. Err when no round trip was found.
pub fn split(events: &[TraceEvent], master: u32) -> Result<Split, String> {
    let peer = peer_of(events, master).ok_or(
        "the traced pass holds no waking of, or switch to, another thread by the measuring thread",
    )?;
    let fine = events
        .iter()
        .any(|e| e.tid == master && matches!(e.kind, EventKind::SysEnter { .. }));
    let table = if fine { FINE } else { COARSE };
    let mut per_stage: Vec<Vec<f64>> = vec![Vec::new(); table.len()];
    let mut totals = Vec::new();
    let (mut incomplete, mut unseen, mut unwoken) = (0, 0, [0, 0]);
    // The first round trip starts at the master's first switch-in.
    let mut at = switched_in(events, 0, master).map(|(i, _)| i);
    while let Some(i) = at {
        let Some((d, seen_d)) = switched_in(events, i + 1, peer) else {
            break;
        };
        let Some((ni, seen_i)) = switched_in(events, d + 1, master) else {
            incomplete += 1;
            break;
        };
        // Whole or not, the next round trip starts at the master's next turn.
        at = Some(ni);
        let Some((times, woken)) = round_trip(events, (i, d, ni), (master, peer), fine) else {
            incomplete += 1;
            continue;
        };
        unseen += usize::from(!seen_d) + usize::from(!seen_i);
        for (k, w) in woken.iter().enumerate() {
            unwoken[k] += usize::from(!w);
        }
        for (s, pair) in times.windows(2).enumerate() {
            per_stage[s].push(pair[1].saturating_sub(pair[0]) as f64);
        }
        totals.push(times[times.len() - 1].saturating_sub(times[0]) as f64);
    }
    if totals.is_empty() {
        return Err(format!(
            "no whole round trip between the measuring thread and thread {peer} in the trace"
        ));
    }
    let stages = table
        .iter()
        .zip(&per_stage)
        .map(|((name, def), v)| StageStats {
            name: name.to_string(),
            median_ns: quantile(v, 0.5),
            p90_ns: quantile(v, 0.9),
            definition: def.to_string(),
        })
        .collect();
    Ok(Split {
        peer_tid: peer,
        round_trips: totals.len(),
        round_trip_ns: quantile(&totals, 0.5),
        stages,
        incomplete,
        switches_unseen: unseen,
        unwoken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(time: u64, cpu: u32, tid: u32, kind: EventKind) -> TraceEvent {
        TraceEvent {
            time,
            cpu,
            tid,
            kind,
        }
    }

    /// Round trips across CPUs 0 (master 10) and 1 (peer 20), each CPU idle while its thread
    /// sleeps, each wake-up queued on the sleeper's CPU before its idle loop exits; with system
    /// call events when `syscalls`.
    fn cross(syscalls: bool) -> Vec<TraceEvent> {
        let mut v = vec![ev(5, 0, 0, EventKind::Switch { prev: 0, next: 10 })];
        for k in 0..3u64 {
            let o = k * 1000;
            v.extend([
                ev(o + 20, 0, 10, EventKind::SysExit { nr: 0 }),
                ev(o + 100, 0, 10, EventKind::SysEnter { nr: 1 }),
                ev(o + 110, 0, 10, EventKind::Waking { pid: 20 }),
                ev(o + 120, 0, 10, EventKind::SysExit { nr: 1 }),
                ev(o + 130, 0, 10, EventKind::SysEnter { nr: 0 }),
                ev(o + 140, 0, 10, EventKind::Switch { prev: 10, next: 0 }),
                ev(o + 145, 1, 0, EventKind::Wakeup { pid: 20 }),
                ev(o + 150, 1, 0, EventKind::IdleExit),
                ev(o + 170, 1, 0, EventKind::Switch { prev: 0, next: 20 }),
                ev(o + 180, 1, 20, EventKind::SysExit { nr: 0 }),
                ev(o + 200, 1, 20, EventKind::SysEnter { nr: 1 }),
                ev(o + 215, 1, 20, EventKind::Waking { pid: 10 }),
                ev(o + 230, 1, 20, EventKind::Switch { prev: 20, next: 0 }),
                ev(o + 235, 0, 0, EventKind::Wakeup { pid: 10 }),
                ev(o + 240, 0, 0, EventKind::IdleExit),
                ev(o + 1005, 0, 0, EventKind::Switch { prev: 0, next: 10 }),
            ]);
        }
        v.retain(|e| {
            syscalls
                || !matches!(
                    e.kind,
                    EventKind::SysEnter { .. } | EventKind::SysExit { .. }
                )
        });
        v
    }

    fn medians(s: &Split) -> Vec<f64> {
        s.stages.iter().map(|x| x.median_ns).collect()
    }

    #[test]
    fn a_cross_cpu_round_trip_of_scheduler_events_splits_into_stages_that_sum_to_it() {
        let s = split(&cross(false), 10).unwrap();
        assert_eq!(s.peer_tid, 20);
        assert_eq!((s.round_trips, s.incomplete), (3, 0));
        assert_eq!(s.round_trip_ns, 1000.0);
        // i5 b110 w145 c150 d170 g215 w'235 h240 i'1005
        assert_eq!(
            medians(&s),
            [105.0, 35.0, 5.0, 20.0, 45.0, 20.0, 5.0, 765.0]
        );
        assert_eq!(medians(&s).iter().sum::<f64>(), s.round_trip_ns);
        assert_eq!((s.switches_unseen, s.unwoken), (0, [0, 0]));
        assert_eq!(s.stages[0].name, COARSE[0].0);
    }

    #[test]
    fn with_system_calls_each_turn_splits_in_three() {
        let s = split(&cross(true), 10).unwrap();
        assert_eq!(s.round_trips, 3);
        // i5 j20 a100 b110 w145 c150 d170 e180 f200 g215 w'235 h240 i'1005
        assert_eq!(
            medians(&s),
            [
                15.0, 80.0, 10.0, 35.0, 5.0, 20.0, 10.0, 20.0, 15.0, 20.0, 5.0, 765.0
            ]
        );
        assert_eq!(s.round_trip_ns, 1000.0);
        assert_eq!(s.stages[2].name, "send: syscall entry to waking");
    }

    #[test]
    fn an_idle_exit_before_the_enqueue_counts_from_the_enqueue() {
        // A polling idle loop leaves idle before the wake-up is queued: that stage is 0.
        let v: Vec<TraceEvent> = cross(false)
            .into_iter()
            .map(|mut e| {
                if e.cpu == 1 && e.kind == EventKind::IdleExit {
                    e.time -= 10; // 140, before the enqueue at 145
                }
                e
            })
            .collect();
        let mut v = v;
        v.sort_by_key(|e| e.time);
        let s = split(&v, 10).unwrap();
        assert_eq!(medians(&s)[1..4], [35.0, 0.0, 25.0]);
    }

    #[test]
    fn a_cpu_that_records_nothing_while_idle_folds_its_idle_exit_into_the_switch_in() {
        // The peer's CPU 1 records neither its idle exit nor the switch to the peer (the
        // enqueue, in the IPI's handler, it does).
        let v: Vec<TraceEvent> = cross(false)
            .into_iter()
            .filter(|e| !(e.cpu == 1 && e.tid == 0 && e.kind != EventKind::Wakeup { pid: 20 }))
            .collect();
        let s = split(&v, 10).unwrap();
        assert_eq!(s.round_trips, 3);
        assert_eq!(s.switches_unseen, 3);
        // w145 .. the peer's first own event, its waking of the master at 215: "leaves idle"
        // 0, "switched in" 70, the peer's turn 0.
        assert_eq!(medians(&s), [105.0, 35.0, 0.0, 70.0, 0.0, 20.0, 5.0, 765.0]);
        assert_eq!(s.round_trip_ns, 1000.0);
    }

    /// One CPU, three round trips: in the second the peer's waking preempts the master, which
    /// never sleeps, so the peer does not wake it.
    fn same() -> Vec<TraceEvent> {
        let mut v = Vec::new();
        for (k, preempted) in [(0u64, false), (1, true), (2, false), (3, false)] {
            let o = k * 100;
            v.push(ev(o, 0, 20, EventKind::Switch { prev: 20, next: 10 }));
            v.push(ev(o + 10, 0, 10, EventKind::Waking { pid: 20 }));
            v.push(ev(o + 15, 0, 10, EventKind::Wakeup { pid: 20 }));
            v.push(ev(o + 40, 0, 10, EventKind::Switch { prev: 10, next: 20 }));
            if !preempted {
                v.push(ev(o + 70, 0, 20, EventKind::Waking { pid: 10 }));
                v.push(ev(o + 72, 0, 20, EventKind::Wakeup { pid: 10 }));
            }
        }
        v
    }

    #[test]
    fn on_one_cpu_a_party_not_woken_runs_its_turn_until_the_switch() {
        let s = split(&same(), 10).unwrap();
        assert_eq!(s.round_trips, 3);
        assert_eq!(s.unwoken, [0, 1]);
        assert_eq!(s.round_trip_ns, 100.0);
        // Per round trip: [10, 5, 0, 25, 30, 2, 0, 28] twice, [10, 5, 0, 25, 60, 0, 0, 0] once.
        assert_eq!(medians(&s), [10.0, 5.0, 0.0, 25.0, 30.0, 2.0, 0.0, 28.0]);
        // p90 of 30, 30, 60, interpolated.
        assert_eq!(s.stages[4].p90_ns, 54.0);
    }

    #[test]
    fn a_round_trip_cut_by_the_end_of_the_pass_is_counted_not_split() {
        let mut v = cross(false);
        v.pop(); // the last switch-in of the master: the third round trip has no end
        let s = split(&v, 10).unwrap();
        assert_eq!((s.round_trips, s.incomplete), (2, 1));
    }

    #[test]
    fn nothing_to_split_is_an_error() {
        assert!(split(&[], 10).is_err());
        let only_master = vec![ev(1, 0, 10, EventKind::IdleExit)];
        assert!(split(&only_master, 10).is_err());
    }
}
