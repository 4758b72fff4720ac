//! `oscost ab --a CMD --b CMD`: the benchmarks run on A and B alternately, both sides saved,
//! then compared; --json/--csv/--markdown write the comparison, --report its page.

use clap::Args;

use super::compare::{finish, options};
use super::run::MeasureArgs;
use super::{Command, Given};
use crate::base::model::{Note, NoteKind};

use super::args::{CompareArgs, split_command, usage};
use super::session::{self, Conditions, Live, MeasuringCommand};
use crate::analysis::compare;
use crate::base::stop::Stop;
use crate::effects::gate::Effects;
use crate::effects::settings_guard::Guard;
use crate::processes::scheduler::{self, Side};

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
    /// A program that runs during side A, attached to the whole system (see --b-during).
    #[arg(long = "a-during", value_name = "CMD")]
    pub a_during: Option<String>,
    /// A program that runs during side B, attached to the whole system, e.g. 'perf stat -a -e
    /// raw_syscalls:sys_enter -o /dev/null': started before each block of B's repetitions,
    /// waited for until ready, stopped (SIGINT, SIGTERM, SIGKILL, 2 s apart) before A runs,
    /// also if oscost is killed. The sides then alternate in blocks of about 2 s (A B B A ...),
    /// and each block is one pair of the comparison: its looks and its CI count blocks.
    #[arg(long = "b-during", value_name = "CMD")]
    pub b_during: Option<String>,
    /// With --a-during or --b-during: a program is ready once a line of its output matches
    /// this regular expression [default: once what is attached to the system has not changed
    /// for 1 s].
    #[arg(long, value_name = "REGEX")]
    pub ready: Option<String>,
    /// With --a-during or --b-during: the longest wait for a program to be ready, seconds
    /// [default: 60].
    #[arg(long, value_name = "SECS", value_parser = super::args::parse_seconds)]
    pub ready_timeout: Option<f64>,
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
/// time) ends. With --samples the sides take their fixed samples as `run` does, in at least
/// `rounds` rounds. `in_blocks` (a program runs during a side): the blocks are the pairs the
/// sequential schedule counts, so its cap (`MAX_ROUNDS`) bounds blocks, not rounds.
fn decide_rounds(
    plan: &mut crate::processes::scheduler::Plan,
    rounds: usize,
    budget_s: Option<f64>,
    quick: bool,
    compare: &CompareArgs,
    in_blocks: bool,
) {
    use crate::base::stats::sequential::{MAX_ROUNDS, MIN_ROUNDS};
    if plan.reps.fixed_total.is_some() {
        plan.at_least_rounds(rounds);
        return;
    }
    let rep_s = plan.reps.rep_ns as f64 / 1e9;
    let budget = budget_s.unwrap_or(if quick {
        AB_QUICK_BUDGET_S
    } else {
        AB_BUDGET_S
    });
    plan.reps.min = rounds.max(MIN_ROUNDS);
    let cap = if in_blocks {
        MAX_ROUNDS * crate::processes::scheduler::BLOCK_MAX_ROUNDS
    } else {
        MAX_ROUNDS
    };
    plan.reps.max = ((budget / (2.0 * rep_s)) as usize).clamp(plan.reps.min, cap);
    plan.reps.decide = Some(options(compare).threshold);
}

/// One side: its wrapper split like a shell, and the text to show.
fn side(flag: &str, cmd: Option<&str>) -> anyhow::Result<Side> {
    Ok(match cmd {
        Some(c) => {
            let wrapper = split_command(flag, c).map_err(|e| usage(e.0))?;
            super::check_program(flag, &wrapper)?;
            Side {
                wrapper,
                text: Some(c.to_string()),
                during: None,
            }
        }
        None => Side::default(),
    })
}

impl Command for AbArgs {
    /// The comparison's files and page, and the store both sides are saved into.
    fn effects(&self) -> Effects {
        self.measure.effects().sets(&[&self.a_set, &self.b_set])
    }

    /// Measure both sides interleaved, save them, compare and write the comparison, in the
    /// session's order (`session::run`).
    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut live = Live::new(given.passed, !self.measure.no_save, self.measure.settle);
        session::run(
            &mut live,
            &mut Ab {
                args: &self,
                sides: vec![],
                plan: None,
                runs: vec![],
                names: ("A".into(), "B".into()),
            },
        )
    }
}

/// `oscost ab`: two sides measured in alternation, saved together, compared.
struct Ab<'a> {
    args: &'a AbArgs,
    /// A and B: each a wrapper, named with its settings once they are held.
    sides: Vec<Side>,
    plan: Option<scheduler::Plan>,
    /// A's run and B's, once measured.
    runs: Vec<crate::base::model::Run>,
    /// What the comparison calls them: "A (run 7)" once saved.
    names: (String, String),
}

impl MeasuringCommand for Ab<'_> {
    fn prepare(&mut self, _stop: &Stop) -> anyhow::Result<()> {
        let args = self.args;
        self.sides = vec![
            side("--a", args.a.as_deref())?,
            side("--b", args.b.as_deref())?,
        ];
        if (args.ready.is_some() || args.ready_timeout.is_some())
            && args.a_during.is_none()
            && args.b_during.is_none()
        {
            return Err(super::args::usage(
                "--ready and --ready-timeout say when a --a-during or --b-during program is ready: give one",
            ));
        }
        for (s, (flag, cmd)) in self.sides.iter_mut().zip([
            ("--a-during", args.a_during.as_deref()),
            ("--b-during", args.b_during.as_deref()),
        ]) {
            s.during =
                super::args::during_spec(flag, cmd, args.ready.as_deref(), args.ready_timeout)?;
            if let Some(d) = &s.during {
                let during = format!("during `{}`", d.text);
                s.text = Some(match s.text.take() {
                    Some(w) => format!("{w} + {during}"),
                    None => during,
                });
            }
        }
        let mut plan = super::plan::build(&args.measure.request())?;
        decide_rounds(
            &mut plan,
            args.rounds as usize,
            args.measure.budget,
            args.measure.quick,
            &args.compare,
            self.sides.iter().any(|s| s.during.is_some()),
        );
        self.plan = Some(plan);
        Ok(())
    }

    fn settle(&mut self, _i: usize) -> anyhow::Result<()> {
        if let Some(plan) = self.plan.as_mut() {
            super::plan::settle_cpu(plan);
        }
        Ok(())
    }

    fn measure(
        &mut self,
        _i: usize,
        conditions: Option<&Conditions>,
        switch: Option<&mut Guard>,
        stop: &Stop,
    ) -> anyhow::Result<()> {
        let plan = self
            .plan
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("internal: measured before the plan was built"))?;
        // A side is named by its wrapper and its settings.
        if let Some(c) = conditions {
            for (side, set) in self.sides.iter_mut().zip(&c.sides) {
                side.text = match (side.text.take(), set.text()) {
                    (Some(w), Some(s)) => Some(format!("{w} + {s}")),
                    (w, s) => w.or(s),
                };
            }
        }
        let mut runs = scheduler::measure(plan, &self.sides, stop, switch)?;
        // A side's wrapper is its command only; its settings are kept apart (`Run::settings`).
        for (run, wrapper) in runs.iter_mut().zip([&self.args.a, &self.args.b]) {
            run.wrapper = wrapper.clone();
        }
        if let Some(c) = conditions {
            for (run, side) in runs.iter_mut().zip(&c.sides) {
                run.settings = side.given.clone();
                run.env.settings = c.before.clone();
                run.notes.push(Note::new(NoteKind::Settings, format!(
                    "kernel settings switched before each repetition, read back, {} s settle, put back after: {}",
                    c.settle_s,
                    side.text().unwrap_or_else(|| "as found".into())
                )));
            }
        }
        self.runs = runs;
        Ok(())
    }

    fn runs(&self, _i: usize) -> Vec<&crate::base::model::Run> {
        self.runs.iter().collect()
    }

    fn saved(&mut self, _i: usize, ids: &[i64], store: &str) {
        crate::say!(
            "oscost: saved A as run {} and B as run {} in {store}",
            ids[0],
            ids[1],
        );
        self.names = (format!("A (run {})", ids[0]), format!("B (run {})", ids[1]));
    }

    /// Compared, the page drawn, the comparison's files written (`finish`): its verdict is
    /// the exit status (1 for a regression beyond --fail-above).
    fn deliver(
        &mut self,
        saved: Option<&str>,
        stop: &Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<i32> {
        let ([ra, rb], Some(plan)) = (self.runs.as_slice(), &self.plan) else {
            return Ok(0);
        };
        let (na, nb) = &self.names;
        let mut cmp = compare::compare(ra, rb, na, nb, &options(&self.args.compare));
        cmp.alternated = true;
        if plan.reps.decide.is_some() {
            compare::rounds::judge_rounds(&mut cmp, ra, rb);
        }
        // --report: the comparison's page (A against B), as `compare --report` draws it.
        if let Some(d) = &self.args.measure.report {
            write_comparison_page(&cmp, d, stop, late);
        }
        // A signal by now ends the command before the comparison's files are written.
        super::after_save(stop, saved.map(str::to_string))?;
        finish(&cmp, &self.args.compare, &self.args.measure.outputs)
    }

    fn all_runs(&self) -> Vec<&crate::base::model::Run> {
        self.runs.iter().collect()
    }
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
