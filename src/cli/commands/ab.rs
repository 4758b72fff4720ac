//! `oscost ab --a CMD --b CMD`: the benchmarks run on A and B alternately, both sides saved,
//! then compared; --json/--csv/--markdown write the comparison, --report its page.

use clap::Args;

use super::compare::{finish, options};
use super::run::MeasureArgs;
use super::{Command, Given};

use super::args::{CompareArgs, SideFlagNames, SideFlags};
use super::session::{self, Live, MeasuringCommand};
use crate::analysis::compare;
use crate::base::stop::Stop;
use crate::effects::gate::Effects;
use crate::processes::conditions::{KernelSettings, Side};
use crate::processes::scheduler;

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
    /// The CPU side A is measured on [default: the measuring CPU, --cpu]: with --b-cpu, two
    /// CPUs of this machine compared in alternation (an isolated CPU and a housekeeping one,
    /// SMT siblings, a big core and a little one).
    #[arg(long = "a-cpu", value_name = "N")]
    pub a_cpu: Option<usize>,
    /// The CPU side B is measured on [default: the measuring CPU, --cpu].
    #[arg(long = "b-cpu", value_name = "N")]
    pub b_cpu: Option<usize>,
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

impl AbArgs {
    /// Sides A and B as their flags name them (the program-during's readiness is shared).
    fn side_flags(&self) -> [SideFlags; 2] {
        let side =
            |names, wrapper: &Option<String>, during: &Option<String>, cpu, set: &[String]| {
                SideFlags {
                    names,
                    wrapper: wrapper.clone(),
                    during: during.clone(),
                    ready: self.ready.clone(),
                    ready_timeout_s: self.ready_timeout,
                    cpu,
                    settings: set.to_vec(),
                }
            };
        [
            side(
                SideFlagNames::A,
                &self.a,
                &self.a_during,
                self.a_cpu,
                &self.a_set,
            ),
            side(
                SideFlagNames::B,
                &self.b,
                &self.b_during,
                self.b_cpu,
                &self.b_set,
            ),
        ]
    }
}

impl Command for AbArgs {
    /// The comparison's files and page, and the store both sides are saved into.
    fn effects(&self) -> Effects {
        let [a, b] = self.side_flags();
        self.measure.effects().sets(&[&a.settings, &b.settings])
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
    /// A and B, as their flags name them (their kernel settings are the session's).
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
        if (args.ready.is_some() || args.ready_timeout.is_some())
            && args.a_during.is_none()
            && args.b_during.is_none()
        {
            return Err(super::args::usage(
                "--ready and --ready-timeout say when a --a-during or --b-during program is ready: give one",
            ));
        }
        self.sides = self
            .args
            .side_flags()
            .iter()
            .map(SideFlags::side)
            .collect::<anyhow::Result<_>>()?;
        let request = super::plan::Request {
            rounds: Some(super::plan::ComparisonRounds {
                min: args.rounds as usize,
                decide: Some(options(&args.compare).threshold),
                in_blocks: self.sides.iter().any(|s| s.during.is_some()),
            }),
            ..args.measure.request()
        };
        self.plan = Some(super::plan::build(&request)?);
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
        settings: Option<KernelSettings<'_>>,
        stop: &Stop,
    ) -> anyhow::Result<()> {
        let plan = self
            .plan
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("internal: measured before the plan was built"))?;
        self.runs = scheduler::measure(plan, &self.sides, stop, settings)?;
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
        super::session::after_save(stop, saved.map(str::to_string))?;
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
