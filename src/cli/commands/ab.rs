//! `oscost ab --a CMD --b CMD`: the benchmarks run on A and B alternately, both sides saved,
//! then compared; --json/--csv/--markdown write the comparison, --report its page.

use clap::Args;

use super::compare::{finish, options};
use super::run::MeasureArgs;
use super::{Command, Given};
use crate::base::model::{Note, NoteKind};

use super::args::{CompareArgs, split_command, usage};
use super::{conclude, saving_store};
use crate::analysis::compare;
use crate::effects::gate::Effects;
use crate::processes::scheduler::{self, AbSide};

#[derive(Debug, Args, Clone)]
/// `oscost ab`'s arguments.
pub struct AbArgs {
    /// The command A runs under [default: nothing, the plain system].
    #[arg(long, value_name = "CMD")]
    pub a: Option<String>,
    /// The command B runs under, e.g. 'strace -f -o /dev/null'.
    #[arg(long, value_name = "CMD")]
    pub b: Option<String>,
    /// A kernel setting of side A (repeatable): NAME=VALUE as `oscost settings` lists them, or
    /// a path under /proc/sys or /sys. Switched to before each of A's repetitions.
    #[arg(long = "a-set", value_name = "NAME=VALUE")]
    pub a_set: Vec<String>,
    /// A kernel setting of side B (repeatable), e.g. halt-poll-ns=200000.
    #[arg(long = "b-set", value_name = "NAME=VALUE")]
    pub b_set: Vec<String>,
    /// At least this many rounds per benchmark (a round: one A and one B repetition, each a
    /// fresh worker). The comparison is first asked whether it has decided after 10 rounds,
    /// or K if more (below 10 a round-to-round spread is mostly chance); with --samples, the
    /// rounds are exactly K.
    #[arg(long, value_name = "K", default_value = "10",
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub rounds: u64,
    #[command(flatten)]
    /// How the two sides are judged.
    pub compare: CompareArgs,
    #[command(flatten)]
    /// What is measured and where it is kept, as `run` takes it (ab's wrappers are --a and
    /// --b, its settings --a-set and --b-set; it has no --runs).
    pub measure: MeasureArgs,
}

/// ab's longest time on one benchmark, both sides, when --budget is not given, seconds. Enough
/// here to decide x1.02 on a null system call: its rounds' ratios spread ~4% (fresh processes
/// sit at one of two levels ~8% apart), so a CI of ±1% at the sequential level needs ~150
/// rounds, ~25 s with 60 ms repetitions (docs/design-notes.md, "ab decides").
pub const AB_BUDGET_S: f64 = 40.0;

/// ab's budget with --quick, seconds: x1.05 on a null call decides well within it.
pub const AB_QUICK_BUDGET_S: f64 = 10.0;

/// ab's rounds: at least `rounds` (and `stats::sequential::MIN_ROUNDS`), then until the
/// comparison has decided against `compare`'s noise band, or `budget_s` (both sides' sampling
/// time) ends. With --samples the sides take their fixed samples as `run` does.
fn decide_rounds(
    plan: &mut crate::processes::scheduler::Plan,
    rounds: usize,
    budget_s: Option<f64>,
    quick: bool,
    compare: &CompareArgs,
) {
    use crate::base::stats::sequential::{MAX_ROUNDS, MIN_ROUNDS};
    if plan.reps.fixed_total.is_some() {
        return;
    }
    let rep_s = plan.reps.rep_ns as f64 / 1e9;
    let budget = budget_s.unwrap_or(if quick {
        AB_QUICK_BUDGET_S
    } else {
        AB_BUDGET_S
    });
    plan.reps.min = rounds.max(MIN_ROUNDS);
    plan.reps.max = ((budget / (2.0 * rep_s)) as usize).clamp(plan.reps.min, MAX_ROUNDS);
    plan.reps.decide = Some(options(compare).threshold);
}

/// One side: its wrapper split like a shell, and the text to show.
fn side(flag: &str, cmd: Option<&str>) -> anyhow::Result<AbSide> {
    Ok(match cmd {
        Some(c) => {
            let wrapper = split_command(flag, c).map_err(|e| usage(e.0))?;
            super::check_program(flag, &wrapper)?;
            AbSide {
                wrapper,
                text: Some(c.to_string()),
            }
        }
        None => AbSide {
            wrapper: vec![],
            text: None,
        },
    })
}

impl AbArgs {}

impl Command for AbArgs {
    /// The comparison's files and page, and the store both sides are saved into.
    fn effects(&self) -> Effects {
        self.measure.effects().sets(&[&self.a_set, &self.b_set])
    }

    /// Measure both sides interleaved, save them, compare and write the comparison.
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut passed = given.passed;
        let stop = crate::effects::signals::guard_processes()?;
        let (mut sa, mut sb) = (
            side("--a", self.a.as_deref())?,
            side("--b", self.b.as_deref())?,
        );
        // ab's files are the comparison's (written by `finish`), not a run's.
        let outputs = self.measure.outputs.clone();
        let mut plan = super::plan::build(&self.measure.request())?;
        decide_rounds(
            &mut plan,
            self.rounds as usize,
            self.measure.budget,
            self.measure.quick,
            &self.compare,
        );
        let mut store = if self.measure.no_save {
            None
        } else {
            Some(saving_store(&mut passed)?)
        };
        // Each side's kernel settings: checked, guarded and tried before measuring, switched to
        // before each of its repetitions, put back when the measurement ends (the guard's
        // drop on an error path).
        let settings = super::kernel_settings(&mut passed, self.measure.settle)?;
        let mut before = None;
        let mut guard = settings.map(|(guard, sides, snapshot)| {
            // A side is named by its wrapper and its settings.
            for (side, set) in [(&mut sa, &sides[0]), (&mut sb, &sides[1])] {
                side.text = match (side.text.take(), set.text()) {
                    (Some(w), Some(s)) => Some(format!("{w} + {s}")),
                    (w, s) => w.or(s),
                };
            }
            before = Some((snapshot, sides));
            guard
        });
        super::plan::settle_cpu(&mut plan);
        let rounds = self.rounds as usize;
        let measured = scheduler::execute_ab(&plan, &sa, &sb, rounds, &stop, guard.as_mut());
        let mut late = Vec::new();
        if let Some(g) = guard {
            late.extend(g.restore());
        }
        let (mut ra, mut rb) = measured?;
        // A side's wrapper is its command only; its settings are kept apart (`Run::settings`).
        ra.wrapper = self.a.clone();
        rb.wrapper = self.b.clone();
        if let Some((snapshot, sides)) = &before {
            for (run, side) in [(&mut ra, &sides[0]), (&mut rb, &sides[1])] {
                run.settings = side.given.clone();
                run.env.settings = snapshot.clone();
                run.notes.push(Note::new(NoteKind::Settings, format!(
                    "kernel settings switched before each repetition, read back, {} s settle, put back after: {}",
                    self.measure.settle,
                    side.text().unwrap_or_else(|| "as found".into())
                )));
            }
        }
        stop.check()?;
        let (na, nb, saved) = save_sides(store.as_mut(), &ra, &rb, &stop, &mut late)?;
        let mut cmp = compare::compare(&ra, &rb, &na, &nb, &options(&self.compare));
        cmp.alternated = true;
        if plan.reps.decide.is_some() {
            compare::rounds::judge_rounds(&mut cmp, &ra, &rb);
        }
        // --report: the comparison's page (A against B), as `compare --report` draws it.
        if let Some(d) = &self.measure.report {
            write_comparison_page(&cmp, d, &stop, &mut late);
        }
        super::after_save(&stop, saved.clone())?;
        let verdict = finish(&cmp, &self.compare, &outputs)?;
        super::after_save(&stop, saved)?;
        Ok(verdict.max(conclude(&[&ra, &rb], &late)))
    }
}

/// Save both sides in one transaction (a kill at any moment leaves both or neither), said on
/// stderr: the names the comparison gives them ("A (run 7)") and what was saved, for the
/// message of a signal that comes after.
fn save_sides(
    store: Option<&mut crate::effects::store::Store>,
    ra: &crate::base::model::Run,
    rb: &crate::base::model::Run,
    stop: &crate::base::stop::Stop,
    late: &mut Vec<String>,
) -> anyhow::Result<(String, String, Option<String>)> {
    let Some(s) = store else {
        return Ok(("A".into(), "B".into(), None));
    };
    let Some(ids) = super::save_or_keep(s, &[ra, rb], stop, late)? else {
        return Ok(("A".into(), "B".into(), None));
    };
    crate::say!(
        "oscost: saved A as run {} and B as run {} in {}",
        ids[0],
        ids[1],
        s.shown()
    );
    Ok((
        format!("A (run {})", ids[0]),
        format!("B (run {})", ids[1]),
        Some(format!("runs {} and {} in {}", ids[0], ids[1], s.shown())),
    ))
}

/// `--report`: the comparison's page in `dir`, as `compare --report` draws it; a failure is
/// said in `late`, a signal leaves nothing.
fn write_comparison_page(
    cmp: &compare::Comparison,
    dir: &std::path::Path,
    stop: &crate::base::stop::Stop,
    late: &mut Vec<String>,
) {
    match crate::report::compare_page::render_comparison(cmp, false) {
        Ok(page) => match crate::effects::output::write_page(dir, &page, stop) {
            Ok(_) => crate::say!(
                "oscost: comparison report in {}",
                dir.join("index.html").display()
            ),
            Err(e) if e.is::<crate::base::stop::Interrupted>() => {}
            Err(e) => late.push(e.to_string()),
        },
        Err(e) => late.push(format!("cannot render the comparison: {e}")),
    }
}
