//! A ping-pong's round trip split into stages, from a traced pass's events
//! (`harness::trace::TraceEvent`): pure, and tested on recorded streams with exact answers.
//!
//! The master (the thread that measures) sends, the peer answers. One round trip runs from the
//! master's system call entry before it wakes the peer (a) to the master's return to user
//! space after the peer has woken it (j). In between, in time order, the milestones:
//! b the master wakes the peer (sched_waking); c the peer's CPU leaves idle (if it was idle);
//! d the peer is switched in; e the peer returns to user space; f the peer enters its answering
//! system call; g the peer wakes the master; h the master's CPU leaves idle (if it was); i the
//! master is switched in; j the master returns to user space. The stages are the intervals
//! between consecutive milestones (an absent idle exit makes its stage 0 and the next stage
//! start at the waking), so each round trip's stages sum exactly to it; the medians of the
//! stages sum to about the median round trip.

use serde::{Deserialize, Serialize};

use crate::harness::trace::{Kind, TraceEvent};

/// The stages, in order: name and what it holds.
pub const STAGES: &[(&str, &str)] = &[
    (
        "send: syscall entry to waking",
        "the master's system call, from its entry until it asks the scheduler to wake the peer",
    ),
    (
        "peer's CPU leaves idle",
        "from the waking until the peer's CPU leaves its idle state (0 when it was not idle): the IPI and the halted vCPU coming back",
    ),
    (
        "peer switched in",
        "until the scheduler switches the peer in (on one CPU: the master finishing its call and blocking)",
    ),
    (
        "peer back in user space",
        "from the switch until the peer's blocked system call returns",
    ),
    (
        "peer in user space",
        "the peer's own code between its two system calls",
    ),
    (
        "answer: syscall entry to waking",
        "the peer's answering system call, from its entry until it wakes the master",
    ),
    (
        "master's CPU leaves idle",
        "from the waking until the master's CPU leaves idle (0 when it was not idle)",
    ),
    (
        "master switched in",
        "until the scheduler switches the master in (on one CPU: the peer blocking)",
    ),
    (
        "master back in user space",
        "from the switch until the master's blocked system call returns",
    ),
];

/// One stage's statistics over the round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageStats {
    pub name: String,
    pub median_ns: f64,
    pub p90_ns: f64,
    pub definition: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Split {
    pub peer_tid: u32,
    pub round_trips: usize,
    pub round_trip_ns: f64,
    pub stages: Vec<StageStats>,
    /// Round trips whose milestones could not all be found (cut by the pass's ends, or lost
    /// records).
    pub incomplete: usize,
    /// Inter-processor interrupts sent per round trip.
    pub ipis_per_round_trip: f64,
    /// Switch-ins not recorded (a CPU that traced nothing while idle): that side's "leaves
    /// idle" is 0 and its "switched in" stage ends at the thread's first own event.
    pub switches_unseen: usize,
}

/// The thread the master woke most often: its peer.
pub fn peer_of(events: &[TraceEvent], master: u32) -> Option<u32> {
    let mut counts = std::collections::BTreeMap::<i64, usize>::new();
    for e in events {
        if let Kind::Waking { pid } = e.kind
            && e.tid == master
            && pid != i64::from(master)
        {
            *counts.entry(pid).or_default() += 1;
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
    let own = next(ev, from, |e| e.tid == tid)?;
    let t = i64::from(tid);
    match next(
        ev,
        from,
        |e| matches!(e.kind, Kind::Switch { next, .. } if next == t),
    ) {
        Some(s) if s < own => Some((s, true)),
        _ => Some((own, false)),
    }
}

/// The milestones' times of the round trip whose first waking is at `b`, and how many of its
/// two switches were recorded; or None.
fn round_trip(
    ev: &[TraceEvent],
    floor: usize,
    b: usize,
    m: u32,
    p: u32,
) -> Option<([u64; 10], usize)> {
    let a = last(ev, floor, b, |e| {
        e.tid == m && matches!(e.kind, Kind::SysEnter { .. })
    })?;
    let (d, seen_d) = switched_in(ev, b + 1, p)?;
    let peer_cpu = ev[d].cpu;
    let c = (b + 1..d).find(|&i| ev[i].cpu == peer_cpu && ev[i].kind == Kind::IdleExit);
    let e_ = next(ev, d, |e| {
        e.tid == p && matches!(e.kind, Kind::SysExit { .. })
    })?;
    let g = next(ev, e_ + 1, |e| {
        e.tid == p && matches!(e.kind, Kind::Waking { pid } if pid == i64::from(m))
    })?;
    let f = last(ev, e_ + 1, g, |e| {
        e.tid == p && matches!(e.kind, Kind::SysEnter { .. })
    })?;
    let (i, seen_i) = switched_in(ev, g + 1, m)?;
    let master_cpu = ev[i].cpu;
    let h = (g + 1..i).find(|&k| ev[k].cpu == master_cpu && ev[k].kind == Kind::IdleExit);
    let j = next(ev, i, |e| {
        e.tid == m && matches!(e.kind, Kind::SysExit { .. })
    })?;
    let t = |k: usize| ev[k].time;
    let (tc, th) = (c.map_or(t(b), t), h.map_or(t(g), t));
    Some((
        [t(a), t(b), tc, t(d), t(e_), t(f), t(g), th, t(i), t(j)],
        usize::from(seen_d) + usize::from(seen_i),
    ))
}

fn quantile(v: &[f64], q: f64) -> f64 {
    crate::stats::quantile_sorted(&crate::stats::sorted_copy(v), q)
}

/// Split every round trip of `master` with its peer. Err when no round trip was found.
pub fn split(events: &[TraceEvent], master: u32) -> Result<Split, String> {
    let peer =
        peer_of(events, master).ok_or("the traced pass holds no waking by the measuring thread")?;
    let starts: Vec<usize> = (0..events.len())
        .filter(|&i| {
            events[i].tid == master
                && matches!(events[i].kind, Kind::Waking { pid } if pid == i64::from(peer))
        })
        .collect();
    let mut per_stage: Vec<Vec<f64>> = vec![Vec::new(); STAGES.len()];
    let mut totals = Vec::new();
    let mut incomplete = 0;
    let mut floor = 0;
    let mut unseen = 0;
    for (k, &b) in starts.iter().enumerate() {
        match round_trip(events, floor, b, master, peer) {
            // A round trip ends before the next one's waking, or it is not one.
            Some((ms, seen)) if starts.get(k + 1).is_none_or(|&nb| ms[9] <= events[nb].time) => {
                unseen += 2 - seen;
                for (s, w) in ms.windows(2).enumerate() {
                    per_stage[s].push(w[1].saturating_sub(w[0]) as f64);
                }
                totals.push(ms[9].saturating_sub(ms[0]) as f64);
            }
            _ => incomplete += 1,
        }
        floor = b;
    }
    if totals.is_empty() {
        return Err(format!(
            "no whole round trip between the measuring thread and thread {peer} in the trace"
        ));
    }
    let span = events
        .iter()
        .filter(|e| e.tid == master || e.tid == peer)
        .map(|e| e.time);
    let (lo, hi) = (span.clone().min().unwrap_or(0), span.max().unwrap_or(0));
    let ipis = events
        .iter()
        .filter(|e| matches!(e.kind, Kind::Ipi { .. }) && (e.tid == master || e.tid == peer))
        .filter(|e| e.time >= lo && e.time <= hi)
        .count();
    let stages = STAGES
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
        ipis_per_round_trip: ipis as f64 / (totals.len() + incomplete) as f64,
        switches_unseen: unseen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(time: u64, cpu: u32, tid: u32, kind: Kind) -> TraceEvent {
        TraceEvent {
            time,
            cpu,
            tid,
            kind,
        }
    }

    /// Two round trips across CPUs 0 (master 10) and 1 (peer 20), the peer's CPU idle each time.
    fn cross() -> Vec<TraceEvent> {
        let mut v = Vec::new();
        for k in 0..2u64 {
            let o = k * 1000;
            v.extend([
                ev(o + 100, 0, 10, Kind::SysEnter { nr: 1 }),
                ev(o + 110, 0, 10, Kind::Waking { pid: 20 }),
                ev(o + 112, 0, 10, Kind::Ipi { cpu: 1 }),
                ev(o + 120, 0, 10, Kind::SysExit { nr: 1 }),
                ev(o + 130, 0, 10, Kind::SysEnter { nr: 0 }),
                ev(o + 140, 0, 10, Kind::Switch { prev: 10, next: 0 }),
                ev(o + 150, 1, 0, Kind::IdleExit),
                ev(o + 170, 1, 0, Kind::Switch { prev: 0, next: 20 }),
                ev(o + 180, 1, 20, Kind::SysExit { nr: 0 }),
                ev(o + 200, 1, 20, Kind::SysEnter { nr: 1 }),
                ev(o + 215, 1, 20, Kind::Waking { pid: 10 }),
                ev(o + 230, 0, 0, Kind::IdleExit),
                ev(o + 260, 0, 0, Kind::Switch { prev: 0, next: 10 }),
                ev(o + 275, 0, 10, Kind::SysExit { nr: 0 }),
            ]);
        }
        v
    }

    #[test]
    fn a_cross_cpu_round_trip_splits_into_stages_that_sum_to_it() {
        let s = split(&cross(), 10).unwrap();
        assert_eq!(s.peer_tid, 20);
        assert_eq!(s.round_trips, 2);
        assert_eq!(s.incomplete, 0);
        assert_eq!(s.round_trip_ns, 175.0);
        let medians: Vec<f64> = s.stages.iter().map(|x| x.median_ns).collect();
        // a100 b110 c150 d170 e180 f200 g215 h230 i260 j275
        assert_eq!(
            medians,
            [10.0, 40.0, 20.0, 10.0, 20.0, 15.0, 15.0, 30.0, 15.0]
        );
        assert_eq!(medians.iter().sum::<f64>(), s.round_trip_ns);
        assert_eq!(s.ipis_per_round_trip, 1.0);
        assert_eq!(s.switches_unseen, 0);
    }

    #[test]
    fn a_cpu_that_records_nothing_while_idle_folds_its_idle_exit_into_the_switch_in() {
        // The master's CPU 0 records neither its idle exit nor the switch to the master.
        let v: Vec<TraceEvent> = cross()
            .into_iter()
            .filter(|e| !(e.cpu == 0 && e.tid == 0))
            .collect();
        let s = split(&v, 10).unwrap();
        assert_eq!(s.round_trips, 2);
        assert_eq!(s.switches_unseen, 2);
        let medians: Vec<f64> = s.stages.iter().map(|x| x.median_ns).collect();
        // g215 .. j275: "master's CPU leaves idle" 0, "switched in" until the master's first
        // own event (its system call's return, 275), "back in user space" 0.
        assert_eq!(
            medians,
            [10.0, 40.0, 20.0, 10.0, 20.0, 15.0, 0.0, 60.0, 0.0]
        );
        assert_eq!(s.round_trip_ns, 175.0);
    }

    #[test]
    fn on_one_cpu_the_idle_stages_are_zero() {
        let v = vec![
            ev(100, 0, 10, Kind::SysEnter { nr: 1 }),
            ev(105, 0, 10, Kind::Waking { pid: 20 }),
            ev(120, 0, 10, Kind::SysExit { nr: 1 }),
            ev(125, 0, 10, Kind::SysEnter { nr: 0 }),
            ev(140, 0, 10, Kind::Switch { prev: 10, next: 20 }),
            ev(150, 0, 20, Kind::SysExit { nr: 0 }),
            ev(160, 0, 20, Kind::SysEnter { nr: 1 }),
            ev(165, 0, 20, Kind::Waking { pid: 10 }),
            ev(190, 0, 20, Kind::Switch { prev: 20, next: 10 }),
            ev(200, 0, 10, Kind::SysExit { nr: 0 }),
        ];
        let s = split(&v, 10).unwrap();
        let medians: Vec<f64> = s.stages.iter().map(|x| x.median_ns).collect();
        assert_eq!(medians, [5.0, 0.0, 35.0, 10.0, 10.0, 5.0, 0.0, 25.0, 10.0]);
        assert_eq!(s.round_trip_ns, 100.0);
    }

    #[test]
    fn a_round_trip_cut_by_the_end_of_the_pass_is_counted_incomplete() {
        let mut v = cross();
        v.truncate(14 + 8); // the second round trip loses its answer
        let s = split(&v, 10).unwrap();
        assert_eq!((s.round_trips, s.incomplete), (1, 1));
        assert!(split(&[], 10).is_err());
    }
}
