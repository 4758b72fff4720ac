//! A traced pass: the scheduler's and the idle CPUs' tracepoints (and, when asked, the system
//! calls') recorded on every allowed CPU in an ftrace instance of oscost's own
//! (`tracing::ftrace`), read once the pass is over and turned into one time-ordered stream of
//! `TraceEvent`s for `analysis::explain` to split into stages.
//!
//! Each record is read at the offsets its event's `format` file gives on this kernel
//! (`Formats`), never at offsets written into the code. The instance's clock is `mono`
//! (CLOCK_MONOTONIC), so events from two CPUs order on one clock. The buffers are read only
//! after the pass: a reader running beside it would be a third party on the CPUs being
//! explained. Dropped records (a buffer that filled) are counted and said. Nothing outlives the
//! `Tracer`: dropping it closes the helper's pipe, and the helper removes the instance.

use std::collections::BTreeMap;

use super::ftrace::{Drained, TraceHelper};
use super::ringbuf;
use super::tracefs::{CountError, Formats, SCHED_EVENTS, SYSCALL_EVENTS};

/// What happened, in the terms stage splitting needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A thread entered a system call.
    SysEnter {
        /// Its number.
        nr: i64,
    },
    /// A thread left a system call.
    SysExit {
        /// Its number.
        nr: i64,
    },
    /// `tid` asked the scheduler to wake `pid`.
    Waking {
        /// The woken thread.
        pid: i64,
    },
    /// `pid` was put on its CPU's run queue (on a remote CPU, once that CPU took the wake-up).
    Wakeup {
        /// The woken thread.
        pid: i64,
    },
    /// The CPU switched from one thread to another.
    Switch {
        /// The thread that left.
        prev: i64,
        /// The thread that came.
        next: i64,
    },
    /// The CPU went idle.
    IdleEnter,
    /// The CPU left idle.
    IdleExit,
}

/// One event: when (ns, CLOCK_MONOTONIC), on which CPU, in which thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    /// When, ns of CLOCK_MONOTONIC.
    pub time: u64,
    /// The CPU it happened on.
    pub cpu: u32,
    /// The thread that was running.
    pub tid: u32,
    /// What happened.
    pub kind: EventKind,
}

/// A tracing session on every CPU in `cpus`, off until `enable`.
pub struct Tracer {
    session: TraceHelper,
    formats: Formats,
    /// Event name by id (`common_type`).
    names: BTreeMap<i64, String>,
    drained: Option<Drained>,
    /// Events this kernel does not have (optional ones), said with the result.
    pub missing: Vec<String>,
    /// Whether ftrace's command-name recorder runs with the events (see `tracing::ftrace`).
    pub recorder: bool,
}

impl Tracer {
    /// Set up tracing on `cpus` (system calls too with `syscalls`), not yet on.
    pub fn open(cpus: &[usize], syscalls: bool) -> Result<Tracer, CountError> {
        let mut events: Vec<&str> = SCHED_EVENTS.to_vec();
        if syscalls {
            events.extend(SYSCALL_EVENTS);
        }
        let session = TraceHelper::open(cpus, &events)?;
        let formats = Formats::parse(&session.text);
        let missing: Vec<String> = session
            .text
            .lines()
            .filter_map(|l| l.strip_prefix("missing "))
            .map(str::to_string)
            .collect();
        for needed in ["sched/sched_switch", "sched/sched_waking"]
            .into_iter()
            .chain(
                syscalls
                    .then_some(SYSCALL_EVENTS)
                    .into_iter()
                    .flatten()
                    .copied(),
            )
        {
            if missing.iter().any(|m| m == needed) || !formats.ids.contains_key(needed) {
                return Err(CountError::NoTracepoints(format!("no {needed} in tracefs")));
            }
        }
        let names = formats
            .ids
            .iter()
            .map(|(n, &id)| (id as i64, n.clone()))
            .collect();
        let recorder = !session.text.lines().any(|l| l == "recorder off");
        Ok(Tracer {
            recorder,
            session,
            formats,
            names,
            drained: None,
            missing,
        })
    }

    /// Start recording.
    pub fn enable(&mut self) -> Result<(), CountError> {
        self.session.on()
    }

    /// Stop recording.
    pub fn disable(&mut self) -> Result<(), CountError> {
        self.drained = Some(self.session.off()?);
        Ok(())
    }

    /// The thread id, as the tracepoints record it, of the thread that was named `comm` while
    /// recording (seen switched in or out); call before `read`. Inside a PID namespace the
    /// tracepoints record the initial namespace's ids, which `gettid` does not give, and
    /// `/proc` may not either (a namespace with its own /proc mount): a name the thread gives
    /// itself for the pass is what finds it on every machine.
    pub fn tid_named(&self, comm: &str) -> Option<u32> {
        let d = self.drained.as_ref()?;
        let f = &self.formats;
        let ev = "sched/sched_switch";
        let switch_id = *f.ids.get(ev)? as i64;
        for (_, size, pages) in &d.cpus {
            for r in ringbuf::records(pages, *size, d.layout) {
                if f.get(ev, "common_type", r.data) != Some(switch_id) {
                    continue;
                }
                for (name, pid) in [("next_comm", "next_pid"), ("prev_comm", "prev_pid")] {
                    if f.text(ev, name, r.data) == Some(comm.as_bytes()) {
                        return f.get(ev, pid, r.data).map(|p| p as u32);
                    }
                }
            }
        }
        None
    }

    /// Every record, parsed and time-ordered, and how many the kernel dropped.
    pub fn read(&mut self) -> (Vec<TraceEvent>, u64) {
        let Some(d) = self.drained.take() else {
            return (Vec::new(), 0);
        };
        let mut out = Vec::new();
        for (cpu, size, pages) in &d.cpus {
            for r in ringbuf::records(pages, *size, d.layout) {
                if let Some(e) = self.event_of(*cpu as u32, r.time, r.data) {
                    out.push(e);
                }
            }
        }
        out.sort_by_key(|e| e.time);
        (out, d.lost)
    }

    fn event_of(&self, cpu: u32, time: u64, data: &[u8]) -> Option<TraceEvent> {
        let f = &self.formats;
        // Every event's common fields lie alike; sched_switch's format gives them.
        let common = "sched/sched_switch";
        let name = self.names.get(&f.get(common, "common_type", data)?)?;
        let tid = f.get(common, "common_pid", data)? as u32;
        Some(TraceEvent {
            time,
            cpu,
            tid,
            kind: kind_of(f, name, data)?,
        })
    }
}

/// Inter-processor interrupts received so far by `cpus` (rescheduling and function-call
/// interrupts, the two a remote wake-up sends, from /proc/interrupts): counted, not traced,
/// since an IPI event on the waker's path cost a cross-CPU round trip about 0.7 us here.
pub fn ipis_received(cpus: &[usize]) -> Option<u64> {
    crate::measuring::os::read_ipis(Some(cpus)).map(|i| i.resched + i.call)
}

#[cfg(test)]
fn ipi_count(text: &str, cpus: &[usize]) -> u64 {
    let i = crate::measuring::os::parse_ipis(text, Some(cpus));
    i.resched + i.call
}

/// A raw record as the event it is.
fn kind_of(f: &Formats, ev: &str, raw: &[u8]) -> Option<EventKind> {
    Some(match ev {
        "raw_syscalls/sys_enter" => EventKind::SysEnter {
            nr: f.get(ev, "id", raw)?,
        },
        "raw_syscalls/sys_exit" => EventKind::SysExit {
            nr: f.get(ev, "id", raw)?,
        },
        "sched/sched_waking" => EventKind::Waking {
            pid: f.get(ev, "pid", raw)?,
        },
        "sched/sched_wakeup" => EventKind::Wakeup {
            pid: f.get(ev, "pid", raw)?,
        },
        "sched/sched_switch" => EventKind::Switch {
            prev: f.get(ev, "prev_pid", raw)?,
            next: f.get(ev, "next_pid", raw)?,
        },
        "power/cpu_idle" => {
            // state is u32; -1 (4294967295) marks leaving idle.
            if f.get(ev, "state", raw)? as u32 == u32::MAX {
                EventKind::IdleExit
            } else {
                EventKind::IdleEnter
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_records_are_read_at_the_formats_offsets() {
        let f = Formats::parse(
            "event sched/sched_switch 372\nfield sched/sched_switch prev_pid 24 4\n\
             field sched/sched_switch next_pid 56 4\nfield power/cpu_idle state 8 4\n",
        );
        assert_eq!(f.ids["sched/sched_switch"], 372);
        let mut raw = vec![0u8; 64];
        raw[24..28].copy_from_slice(&77i32.to_ne_bytes());
        raw[56..60].copy_from_slice(&88i32.to_ne_bytes());
        assert_eq!(
            kind_of(&f, "sched/sched_switch", &raw),
            Some(EventKind::Switch { prev: 77, next: 88 })
        );
        let mut idle = vec![0u8; 16];
        idle[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(
            kind_of(&f, "power/cpu_idle", &idle),
            Some(EventKind::IdleExit)
        );
        idle[8..12].copy_from_slice(&1u32.to_ne_bytes());
        assert_eq!(
            kind_of(&f, "power/cpu_idle", &idle),
            Some(EventKind::IdleEnter)
        );
    }

    #[test]
    fn ipis_are_the_rescheduling_and_function_call_rows_of_the_cpus_asked() {
        let text = "           CPU0       CPU1       CPU2\n  0:   10  20  30  IO-APIC timer\n\
                    RES:          5          7         11   Rescheduling interrupts\n\
                    CAL:        100        200        300   Function call interrupts\n\
                    TLB:          1          1          1   TLB shootdowns\n";
        assert_eq!(ipi_count(text, &[1]), 207);
        assert_eq!(ipi_count(text, &[0, 2]), 5 + 11 + 100 + 300);
        assert_eq!(ipi_count(text, &[]), 0);
    }
}
