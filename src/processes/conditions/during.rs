//! The program-during condition (`run --during`, `ab --a-during/--b-during`, `predict
//! --during`): before a block of a side's repetitions the other side's program is stopped
//! (and the system must return to what it was before that program started), then this side's
//! is started and waited for until ready; after each repetition the program must still be
//! running. Starting and stopping a program is dear, so sides alternate in blocks. What each
//! program did is kept per side (`DuringRecord`) and marks its run; a side without a program
//! beside one with is marked where its level before the other's program first ran and after
//! differ (something left behind, or the host moved).

use super::{CaseLevels, Condition, Launch, Marking, Side, Stopped};
use crate::base::model::{Note, NoteKind, Run};
use crate::base::stop::Stop;
use crate::processes::during::{Agent, CpuTime, DuringFailed, DuringRecord, DuringSpec};
use crate::tracing::observers::Inventory;

/// Every side's program (`None`: none runs during it), what each did, and the one running.
pub struct DuringProgram {
    specs: Vec<Option<DuringSpec>>,
    records: Vec<DuringRecord>,
    stop: Stop,
    /// When each program was up, ms since `started` (the run's start): from ready to the
    /// stop asked, in order.
    spans: Vec<[f64; 2]>,
    started: std::time::Instant,
    running: Option<Running>,
}

/// The program running now, for its side.
struct Running {
    side: usize,
    agent: Agent,
    /// The system's inventory before it started: what must be back once it stops.
    before: Inventory,
    ready_at: std::time::Instant,
    cpu_at_ready: CpuTime,
}

impl DuringProgram {
    /// The programs of `sides`; `started` is the run's start.
    pub fn new(sides: &[Side], stop: Stop, started: std::time::Instant) -> DuringProgram {
        DuringProgram {
            specs: sides.iter().map(|s| s.during.clone()).collect(),
            records: vec![DuringRecord::default(); sides.len()],
            stop,
            spans: vec![],
            started,
            running: None,
        }
    }

    fn now_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1e3
    }

    fn spec(&self, side: usize) -> Option<&DuringSpec> {
        self.specs.get(side).and_then(Option::as_ref)
    }

    /// Make `side`'s program the one running (none, if it has none).
    fn switch_to(&mut self, side: usize) -> Result<(), Stopped> {
        if self.running.as_ref().is_some_and(|r| r.side == side) {
            return Ok(());
        }
        self.end_running()?;
        let Some(spec) = self.spec(side).cloned() else {
            return Ok(());
        };
        let before = Inventory::read();
        let mut agent = Agent::start(&spec)?;
        let (secs, how) = agent.wait_ready(&self.stop)?;
        let rec = &mut self.records[side];
        rec.blocks += 1;
        rec.ready_s.push(secs);
        rec.ready_by = how;
        if rec.attached.is_empty() {
            rec.attached = Inventory::read().differences(&before);
        }
        let cpu_at_ready = agent.cpu_time().unwrap_or_default();
        let now = self.now_ms();
        self.spans.push([now, f64::INFINITY]);
        self.running = Some(Running {
            side,
            agent,
            before,
            ready_at: std::time::Instant::now(),
            cpu_at_ready,
        });
        Ok(())
    }

    /// Stop the running program, its CPU use while measured kept, and wait for the system to
    /// return to what it was before it started.
    fn end_running(&mut self) -> Result<(), Stopped> {
        let Some(mut r) = self.running.take() else {
            return Ok(());
        };
        let measured = r.ready_at.elapsed().as_secs_f64();
        let now = self.now_ms();
        if let Some(span) = self.spans.last_mut() {
            span[1] = now;
        }
        let cpu = r.agent.cpu_time();
        let text = self
            .spec(r.side)
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let (signal, _) = r.agent.stop()?;
        let rec = &mut self.records[r.side];
        rec.measured_s += measured;
        if let Some(c) = &cpu {
            rec.cpu_s += c.total_ns.saturating_sub(r.cpu_at_ready.total_ns) as f64 / 1e9;
            rec.add_by_cpu(&c.by_cpu_s_since(&r.cpu_at_ready));
        }
        rec.stopped_by.push(signal);
        let until = std::time::Instant::now() + crate::processes::during::RETURN_WAIT;
        loop {
            let left = Inventory::read().differences(&r.before);
            if left.is_empty() {
                return Ok(());
            }
            if std::time::Instant::now() > until {
                return Err(DuringFailed(format!(
                    "after `{text}` stopped, the system did not return to what it was before it started ({}): the other side would be measured with it still attached, so the comparison is void",
                    left.join("; ")
                ))
                .into());
            }
            self.stop.check()?;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Condition for DuringProgram {
    fn words(&self, side: usize) -> Option<String> {
        self.spec(side).map(|d| format!("during `{}`", d.text))
    }

    fn blocks(&self) -> bool {
        true
    }

    fn enter(&mut self, side: usize, _launch: &mut Launch) -> Result<(), Stopped> {
        self.switch_to(side)
    }

    fn held(&mut self, _side: usize) -> Result<(), Stopped> {
        match self.running.as_mut().and_then(|r| r.agent.exited()) {
            Some(f) => Err(f.into()),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> Result<(), Stopped> {
        self.end_running()
    }

    fn mark(&self, side: usize, run: &mut Run, marking: &Marking) {
        match (self.spec(side), self.records.get(side)) {
            (Some(spec), Some(rec)) => {
                run.during = Some(spec.text.clone());
                run.notes.push(during_note(&spec.text, rec));
            }
            _ => {
                if let Some(&[from, to]) = self.spans.first() {
                    let moved = before_and_after(marking.levels, from, to);
                    run.notes.extend(before_after_note(&moved));
                }
            }
        }
    }
}

/// The note of a side measured with a program during it (`text`): its blocks, how long it
/// took to be ready, and the CPU it took, as data and in words.
fn during_note(text: &str, rec: &DuringRecord) -> Note {
    Note::new(
        NoteKind::During {
            blocks: rec.blocks,
            ready_max_s: rec.ready_s.iter().cloned().fold(0.0, f64::max),
            cpu_s: rec.cpu_s,
            measured_s: rec.measured_s,
            cpu_s_by_cpu: rec.cpu_s_by_cpu.clone(),
        },
        rec.words(text),
    )
}

/// The note of a side measured without a program beside one with, where its level before the
/// other side's program first ran and after differ (`before_and_after`'s words and ratios):
/// the worst ratio, and every difference in words.
fn before_after_note(moved: &[(String, f64)]) -> Option<Note> {
    if moved.is_empty() {
        return None;
    }
    let worst =
        moved.iter().map(|m| m.1).fold(
            1.0,
            |w: f64, r| {
                if r.ln().abs() > w.ln().abs() { r } else { w }
            },
        );
    Some(Note::new(
        NoteKind::BeforeAfter { ratio: worst },
        format!(
            "this side measured before the other side's program first ran and after it differ: {} (it left something behind, or the machine moved)",
            moved
                .iter()
                .map(|m| m.0.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
    ))
}

/// Each case of `levels` whose repetitions before `from` and after `to` (ms since the run's
/// start) differ: at least 3 on each side, medians more than 3% apart, and the two groups not
/// overlapping at all. Its words ("syscall/getppid 330 ns -> 352 ns") and ratio.
pub(super) fn before_and_after(levels: &CaseLevels, from: f64, to: f64) -> Vec<(String, f64)> {
    use crate::base::stats::median;
    let mut out = Vec::new();
    for (id, reps) in levels {
        let of = |keep: &dyn Fn(f64) -> bool| -> Vec<f64> {
            reps.iter().filter(|r| keep(r.0)).map(|r| r.1).collect()
        };
        let (before, after) = (of(&|t| t < from), of(&|t| t > to));
        if before.len() < 3 || after.len() < 3 {
            continue;
        }
        let (mb, ma) = (median(&before), median(&after));
        let max = |v: &[f64]| v.iter().cloned().fold(f64::MIN, f64::max);
        let min = |v: &[f64]| v.iter().cloned().fold(f64::MAX, f64::min);
        let apart = max(&before) < min(&after) || min(&before) > max(&after);
        let ratio = ma / mb;
        if apart && (ratio - 1.0).abs() > 0.03 {
            out.push((
                format!(
                    "{id} {} -> {} (x{ratio:.3})",
                    crate::base::stats::units::format_ns(mb),
                    crate::base::stats::units::format_ns(ma)
                ),
                ratio,
            ));
        }
    }
    out
}
