//! A traced pass: the scheduler's, the system calls' and the idle CPUs' tracepoints sampled
//! on every allowed CPU into perf ring buffers (perf-event2's `Sampler`, records parsed by
//! perf-event-data), then read once the pass is over and turned into one time-ordered stream
//! of `TraceEvent`s for `analysis::explain` to split into stages.
//!
//! Each tracepoint's raw record is read at the offsets its `format` file gives on this kernel
//! (`Formats`, from `oscost __tracefs`), never at offsets written into the code. Every sample
//! carries CLOCK_MONOTONIC time (`use_clockid`), so events from two CPUs order on one clock.
//! The buffers are read only after the pass: a reader running beside it would be a third
//! party on the CPUs being explained. Lost records (a buffer that filled) are counted and said.
//! Nothing outlives the `Tracer`: its events are file descriptors, closed on drop.

use perf_event::events::Tracepoint;
use perf_event::{Builder, Clock, SampleFlag, Sampler};

pub use super::tracefs::EVENTS;
use super::tracefs::{CountError, Formats};

/// What happened, in the terms stage splitting needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    SysEnter {
        nr: i64,
    },
    SysExit {
        nr: i64,
    },
    /// `tid` asked the scheduler to wake `pid`.
    Waking {
        pid: i64,
    },
    Switch {
        prev: i64,
        next: i64,
    },
    IdleEnter,
    IdleExit,
    /// An inter-processor interrupt sent to `cpu`.
    Ipi {
        cpu: i64,
    },
}

/// One event: when (ns, CLOCK_MONOTONIC), on which CPU, in which thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    pub time: u64,
    pub cpu: u32,
    pub tid: u32,
    pub kind: Kind,
}

/// Ring buffer pages (a power of two) per event and CPU.
const PAGES: usize = 512;

/// Open tracepoint samplers on every CPU in `cpus`, disabled until `enable`.
pub struct Tracer {
    samplers: Vec<(String, Sampler)>,
    formats: Formats,
    /// Events this kernel does not have (optional ones), said with the result.
    pub missing: Vec<String>,
}

impl Tracer {
    pub fn open(cpus: &[usize], formats: Formats) -> Result<Tracer, CountError> {
        let mut samplers = Vec::new();
        let mut missing = Vec::new();
        for ev in EVENTS {
            let Some(&id) = formats.ids.get(*ev) else {
                missing.push(ev.to_string());
                continue;
            };
            for &cpu in cpus {
                let mut b = Builder::new(Tracepoint::with_id(id));
                b.one_cpu(cpu)
                    .any_pid()
                    .sample_period(1)
                    .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::RAW)
                    .clockid(Clock::MONOTONIC)
                    .exclude_kernel(false)
                    .exclude_hv(false)
                    .enabled(false);
                let counter = b.build().map_err(|e| {
                    CountError::NoRights(format!("perf_event_open of {ev} on CPU {cpu}: {e}"))
                })?;
                if let Some(f) = filter_of(ev) {
                    // Best effort: without it the trace is only bigger.
                    let _ = super::syscount::set_filter(&counter, f);
                }
                let sampler = counter
                    .sampled((PAGES + 1) * page_size())
                    .map_err(|e| CountError::Io(format!("mapping {ev}'s ring buffer: {e}")))?;
                samplers.push((ev.to_string(), sampler));
            }
        }
        if !formats.ids.contains_key("sched/sched_switch") {
            return Err(CountError::NoTracepoints("no sched:sched_switch".into()));
        }
        Ok(Tracer {
            samplers,
            formats,
            missing,
        })
    }

    pub fn enable(&mut self) {
        for (_, s) in &mut self.samplers {
            let _ = s.as_counter_mut().enable();
        }
    }

    pub fn disable(&mut self) {
        for (_, s) in &mut self.samplers {
            let _ = s.as_counter_mut().disable();
        }
    }

    /// Every record, parsed and time-ordered, and how many were lost.
    pub fn read(&mut self) -> (Vec<TraceEvent>, u64) {
        let mut out = Vec::new();
        let mut lost = 0;
        for (ev, s) in &mut self.samplers {
            while let Some(rec) = s.next_record() {
                match rec.parse_record() {
                    Ok(perf_event::data::Record::Sample(sample)) => {
                        let (Some(time), Some(cpu), Some(tid), Some(raw)) =
                            (sample.time(), sample.cpu(), sample.tid(), sample.raw())
                        else {
                            continue;
                        };
                        if let Some(kind) = kind_of(&self.formats, ev, raw) {
                            out.push(TraceEvent {
                                time,
                                cpu,
                                tid,
                                kind,
                            });
                        }
                    }
                    Ok(perf_event::data::Record::Lost(l)) => lost += l.lost,
                    _ => {}
                }
            }
        }
        out.sort_by_key(|e| e.time);
        (out, lost)
    }
}

/// Each sample costs the traced thread about half a microsecond on these guests, so the
/// system call events leave out what no stage needs: the idle task's, and the sampler's own
/// calls between batches (getrusage for its preemption probe, a clock read that fell back to
/// a system call).
fn filter_of(ev: &str) -> Option<&'static str> {
    ev.starts_with("raw_syscalls/")
        .then_some("common_pid != 0 && id != 98 && id != 228")
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// A raw record as the event it is.
fn kind_of(f: &Formats, ev: &str, raw: &[u8]) -> Option<Kind> {
    Some(match ev {
        "raw_syscalls/sys_enter" => Kind::SysEnter {
            nr: f.get(ev, "id", raw)?,
        },
        "raw_syscalls/sys_exit" => Kind::SysExit {
            nr: f.get(ev, "id", raw)?,
        },
        "sched/sched_waking" => Kind::Waking {
            pid: f.get(ev, "pid", raw)?,
        },
        "sched/sched_switch" => Kind::Switch {
            prev: f.get(ev, "prev_pid", raw)?,
            next: f.get(ev, "next_pid", raw)?,
        },
        "power/cpu_idle" => {
            // state is u32; -1 (4294967295) marks leaving idle.
            if f.get(ev, "state", raw)? as u32 == u32::MAX {
                Kind::IdleExit
            } else {
                Kind::IdleEnter
            }
        }
        "ipi/ipi_send_cpu" => Kind::Ipi {
            cpu: f.get(ev, "cpu", raw)?,
        },
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
            Some(Kind::Switch { prev: 77, next: 88 })
        );
        let mut idle = vec![0u8; 16];
        idle[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(kind_of(&f, "power/cpu_idle", &idle), Some(Kind::IdleExit));
        idle[8..12].copy_from_slice(&1u32.to_ne_bytes());
        assert_eq!(kind_of(&f, "power/cpu_idle", &idle), Some(Kind::IdleEnter));
    }
}
