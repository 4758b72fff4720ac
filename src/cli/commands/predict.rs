//! `oscost predict --under WRAPPER -- CMD ARGS...`: what a wrapper costs a real program,
//! predicted from the program's own system calls and measured, side by side.
//!
//! 1. Count: CMD runs once plainly under the kernel's tracepoint counters
//!    (`tracing::syscount`): system calls by name, processes, threads, execs.
//! 2. Price: the catalogue's benchmarks for the kinds that appeared are measured plain and
//!    under the wrapper, interleaved as `ab` does (`scheduler::measure` with two sides); their additions
//!    and CIs are the prices (`analysis::predict`).
//! 3. Measure: CMD plain and under the wrapper in alternating rounds (`program::alternate`);
//!    the added time is the median of the rounds' paired differences, its CI from order
//!    statistics.
//! 4. Show and keep: predicted against measured with the breakdown (table, `--json`,
//!    `--report`), and both sides saved as runs that carry the priced benchmarks and the
//!    program's wall time as `program/NAME-HASH`, so `history` and `matrix` show it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::args::{StoreArgs, usage};
use super::check_program;
use super::session::{self, Live, MeasuringCommand};
use super::{Command, Given};
use crate::analysis::predict::{self as model, Price};
use crate::base::model::Run;
use crate::base::stats;
use crate::base::stop::Stop;
use crate::effects::gate::Effects;
use crate::processes::conditions::{KernelSettings, Side};
use crate::processes::during::DuringSpec;
use crate::processes::program::{self, ProcessTimer, RoundsEnd, Timings};
use crate::processes::scheduler;
use crate::report::predict::PredictionReport;
use crate::tracing::syscount::{self, ProgramCounts};

mod between;

#[derive(Debug, Args, Clone)]
/// `oscost predict`'s arguments.
pub struct PredictArgs {
    /// The wrapper, e.g. 'strace -f -o /dev/null' or 'scripts/ref/seccomp-layers 8 --'.
    #[arg(long, value_name = "CMD", required_unless_present_any = ["during", "from"])]
    pub under: Option<String>,
    /// Predict, without running CMD there, what moving it from the system a stored run
    /// measured to the one another measured costs it (two kernels, a setting, a sandbox):
    /// CMD runs once here, counted, and its operations are priced by what each benchmark
    /// moved between the runs (with --to).
    #[arg(long, value_name = "RUN", requires = "to", conflicts_with_all = ["under", "during"],
          value_parser = super::args::RunRefParser)]
    pub from: Option<String>,
    /// The run whose system CMD is moved to (with --from).
    #[arg(long, value_name = "RUN", requires = "from", value_parser = super::args::RunRefParser)]
    pub to: Option<String>,
    /// A program attached to the whole system whose cost to CMD is predicted and measured,
    /// e.g. 'perf stat -a -e raw_syscalls:sys_enter -o /dev/null': it runs during the wrapped
    /// side's blocks (started, waited for until ready, stopped after, as `run --during`).
    #[arg(long, value_name = "CMD")]
    pub during: Option<String>,
    /// With --during: ready once a line of its output matches this regular expression
    /// [default: once what is attached to the system has not changed for 1 s].
    #[arg(long, value_name = "REGEX", requires = "during")]
    pub ready: Option<String>,
    /// With --during: the longest wait for it to be ready, seconds [default: 60].
    #[arg(long, value_name = "SECS", value_parser = super::args::parse_seconds, requires = "during")]
    pub ready_timeout: Option<f64>,
    /// Rounds of the program plain and wrapped [default: 5 to 30, until the added time's CI is
    /// within ±5% or a minute has passed].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(3..=1000))]
    pub rounds: Option<u64>,
    /// Price with shorter, less precise repetitions (as `run --quick`).
    #[arg(long)]
    pub quick: bool,
    /// Pin the pricing benchmarks to this CPU [default: an idle one].
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Write the prediction and the measurement as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a page drawing the breakdown and the two intervals into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Do not save the two runs in the store.
    #[arg(long)]
    pub no_save: bool,
    #[command(flatten)]
    /// The store both sides of the pricing are saved into.
    pub store: StoreArgs,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// The paired differences' median and its 95% CI (order statistics).
fn added(plain: &[f64], wrapped: &[f64]) -> (f64, [f64; 2]) {
    let d: Vec<f64> = wrapped.iter().zip(plain).map(|(w, p)| w - p).collect();
    match stats::summarize(&d) {
        Some(s) => (s.median, s.ci95),
        None => (f64::NAN, [f64::NAN, f64::NAN]),
    }
}

fn wall(ts: &[program::Timing]) -> Vec<f64> {
    ts.iter().map(|t| t.wall_ns).collect()
}

/// A command line as a person would type it: a word is quoted only when the shell would
/// split or expand it.
pub fn shell_words(argv: &[String]) -> String {
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    };
    argv.iter()
        .map(|w| {
            if plain(w) {
                w.clone()
            } else {
                shlex::try_quote(w).map_or_else(|_| format!("{w:?}"), |q| q.to_string())
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `program/dd-1a2b3c`: the program's name and a short hash of the whole command line, so two
/// programs of one name stay apart in the history.
pub fn program_id(argv: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let name = std::path::Path::new(&argv[0])
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "cmd".into());
    let name: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
        .take(40)
        .collect();
    let h = Sha256::digest(argv.join("\u{1f}").as_bytes());
    let hex: String = h.iter().take(3).map(|b| format!("{b:02x}")).collect();
    format!("program/{name}-{hex}")
}

/// What the steps of one prediction share.
struct Ctx<'a> {
    args: &'a PredictArgs,
    /// The wrapped side: its wrapper and the program during it.
    side: &'a Side,
    cmd_text: String,
    cpu: usize,
    stop: &'a crate::base::stop::Stop,
}

const TRUE: &str = "true";

impl Ctx<'_> {
    /// The wrapper's command line, split (empty: none).
    fn wrapper(&self) -> &[String] {
        self.side
            .wrapper
            .as_ref()
            .map_or(&[], |w| w.argv.as_slice())
    }

    /// The program during the wrapped side.
    fn during(&self) -> Option<&DuringSpec> {
        self.side.during.as_ref()
    }

    /// The wrapped side in words ("under `W`", "during `D`").
    fn side_words(&self) -> String {
        crate::report::predict::side_words(
            self.args.under.as_deref().unwrap_or_default(),
            self.args.during.as_deref(),
        )
    }

    fn stop(&self) -> anyhow::Result<()> {
        Ok(self.stop.check()?)
    }

    fn timer(&self) -> ProcessTimer<'_> {
        ProcessTimer {
            cpu: Some(self.cpu),
            stop: self.stop,
        }
    }

    /// Step 1, count the program, and `true` (what one program start asks of the kernel).
    fn count(&self) -> anyhow::Result<(ProgramCounts, Vec<model::Operation>)> {
        let ids = syscount::tracepoint_ids().map_err(|e| usage(e.to_string()))?;
        let count = |argv: &[String]| {
            syscount::count(argv, Some(self.cpu), &ids, self.stop).map_err(|e| match e {
                syscount::CountError::NoRights(_) => usage(e.to_string()),
                syscount::CountError::Interrupted(i) => i.into(),
                e => anyhow::anyhow!(e),
            })
        };
        let counts = count(&self.args.command)?;
        self.stop()?;
        if counts.exit_code != Some(0) {
            anyhow::bail!(
                "`{}` failed when run plainly ({}): predict times a program that succeeds",
                self.cmd_text,
                counts
                    .exit_code
                    .map_or("killed by a signal".into(), |c| format!("exit status {c}"))
            );
        }
        let start = count(&[TRUE.to_string()])
            .ok()
            .filter(|c| c.exit_code == Some(0));
        let mut kinds = model::kinds(&counts, start.as_ref());
        if self.wrapper().is_empty() {
            // No wrapper (only --during): the first start is a program start like the others.
            for k in kinds
                .iter_mut()
                .filter(|k| k.priced_by == model::WRAPPER_START)
            {
                k.kind = "first program start (exec, loader)".into();
                k.priced_by = model::PROGRAM_START.into();
            }
        }
        crate::say!(
            "oscost: `{}` made {} system calls of {} kinds, {} processes, {} threads, {} execs; \
             everything below runs on CPU {}",
            self.cmd_text,
            counts.total_syscalls(),
            counts.syscalls.len(),
            counts.processes,
            counts.threads,
            counts.execs,
            self.cpu
        );
        Ok((counts, kinds))
    }

    /// Step 2, price: the benchmarks under the wrapper (the wrapper, too, on the measuring
    /// CPU), and the wrapper's own start. Returns both sides' runs and the prices.
    fn price(
        &self,
        kinds: &[model::Operation],
    ) -> anyhow::Result<(Run, Run, BTreeMap<String, Price>)> {
        let during = self.during().is_some();
        let req = super::plan::Request {
            cpu: Some(self.cpu),
            quick: self.args.quick,
            rounds: Some(super::plan::ComparisonRounds {
                min: if during { PRICE_ROUNDS_DURING } else { 3 },
                decide: None,
                in_blocks: during,
            }),
            pin_wrapper: true,
            block_s: if during {
                scheduler::PRICE_BLOCK_S
            } else {
                scheduler::BLOCK_S
            },
            ..super::plan::Request::new(model::prices_needed(kinds))
        };
        let plan = super::plan::build(&req)?;
        let sides = [Side::default(), self.side.clone()];
        let mut runs = scheduler::measure(&plan, &sides, self.stop, None)?;
        let (rb, ra) = (runs.pop(), runs.pop());
        let (Some(ra), Some(rb)) = (ra, rb) else {
            anyhow::bail!("internal: a comparison measured fewer than two sides");
        };
        self.stop()?;
        let cmp =
            crate::analysis::compare::compare(&ra, &rb, "plain", "wrapped", &Default::default());
        let mut prices = model::prices_of(&cmp);
        if !self.wrapper().is_empty() && kinds.iter().any(|k| k.priced_by == model::WRAPPER_START) {
            let true_cmd = vec![TRUE.to_string()];
            let mut wrapped_true = self.wrapper().to_vec();
            wrapped_true.extend(true_cmd.iter().cloned());
            let (r, end) =
                program::alternate(&mut self.timer(), &true_cmd, &wrapped_true, 30, 30, &|_| {
                    true
                })
                .map_err(program_err)?;
            if end == RoundsEnd::Done {
                let (m, ci) = added(&wall(&r.plain), &wall(&r.wrapped));
                let p = Price {
                    addition_ns: m,
                    ci95: ci,
                };
                prices.insert(model::WRAPPER_START.into(), p);
            }
        }
        Ok((ra, rb, prices))
    }

    /// Step 3, measure the program plain and wrapped in alternating rounds; with --during, in
    /// alternating blocks of rounds (`measure_during`).
    fn measure(&self) -> anyhow::Result<Timings> {
        if let Some(spec) = self.during() {
            return self.measure_during(spec);
        }
        let mut wrapped_cmd = self.wrapper().to_vec();
        wrapped_cmd.extend(self.args.command.iter().cloned());
        let (min, max) = match self.args.rounds {
            Some(n) => (n as usize, n as usize),
            None => (5, 300),
        };
        let started = Instant::now();
        let enough = |r: &Timings| {
            let (m, ci) = added(&wall(&r.plain), &wall(&r.wrapped));
            (ci[1] - ci[0]) / 2.0 <= 0.05 * m.abs() || started.elapsed().as_secs_f64() > 60.0
        };
        let (text, under) = (&self.cmd_text, self.side_words());
        crate::say!("oscost: timing `{text}` plain and {under}");
        let (rounds, end) = program::alternate(
            &mut self.timer(),
            &self.args.command,
            &wrapped_cmd,
            min,
            max,
            &enough,
        )
        .map_err(program_err)?;
        match end {
            RoundsEnd::Done => Ok(rounds),
            RoundsEnd::PlainFailed(how) => {
                anyhow::bail!("`{text}` {how} when run plainly during the rounds")
            }
            RoundsEnd::WrappedFailed(how) => anyhow::bail!(
                "`{text}` {how} {under} but not without it: the wrapper changes what it \
                 does, so its cost cannot be predicted"
            ),
        }
    }

    /// Step 3 with a program during the wrapped side: blocks of rounds, the program plain
    /// `per_block` times, then (the agent started and ready) wrapped as many times, the agent
    /// stopped; the sides' order alternates from block to block (A B, B A: the agent stays up
    /// across B B), and round i of a block is paired with round i of the other side's. Stops
    /// once the added time's CI is within ±5% (after `min` rounds and `MIN_BLOCKS` blocks),
    /// at `max`, or after a minute.
    fn measure_during(&self, spec: &DuringSpec) -> anyhow::Result<Timings> {
        use crate::processes::during::Agent;
        let mut wrapped_cmd = self.wrapper().to_vec();
        wrapped_cmd.extend(self.args.command.iter().cloned());
        let (min, max) = match self.args.rounds {
            Some(n) => (n as usize, n as usize),
            None => (5, 300),
        };
        let (text, under) = (&self.cmd_text, self.side_words());
        crate::say!("oscost: timing `{text}` plain and {under}, in blocks");
        let mut timer = self.timer();
        let once = |timer: &mut ProcessTimer, argv: &[String]| {
            program::Timer::time(timer, argv).map_err(program_err)
        };
        // One plain run says how long a round is: a block is about a second of rounds.
        let first = once(&mut timer, &self.args.command)?;
        if !first.succeeded() {
            anyhow::bail!("`{text}` {} when run plainly", first.ending());
        }
        let per_block = ((1e9 / first.wall_ns.max(1.0)).ceil() as usize)
            .clamp(2, 25)
            .min(max);
        let started = Instant::now();
        let mut r = Timings::default();
        let mut agent: Option<Agent> = None;
        let mut block = 0usize;
        while r.plain.len() < max {
            let n = per_block.min(max - r.plain.len());
            let order = if block.is_multiple_of(2) {
                [false, true]
            } else {
                [true, false]
            };
            for with in order {
                if with && agent.is_none() {
                    let mut a = Agent::start(spec)?;
                    a.wait_ready(self.stop).map_err(|e| match e {
                        crate::processes::during::NotReady::Signal(i) => anyhow::Error::from(i),
                        crate::processes::during::NotReady::Failed(f) => f.into(),
                    })?;
                    agent = Some(a);
                }
                if !with && let Some(a) = agent.take() {
                    a.stop()?;
                }
                self.time_side(&mut timer, &wrapped_cmd, with, n, &mut r)?;
                if with && let Some(f) = agent.as_mut().and_then(|a| a.exited()) {
                    return Err(f.into());
                }
            }
            block += 1;
            let (m, ci) = added(&wall(&r.plain), &wall(&r.wrapped));
            if r.plain.len() >= min
                && block >= MIN_BLOCKS
                && ((ci[1] - ci[0]) / 2.0 <= 0.05 * m.abs() || started.elapsed().as_secs() > 60)
            {
                break;
            }
        }
        if let Some(a) = agent.take() {
            a.stop()?;
        }
        Ok(r)
    }

    /// One side of a block of `measure_during`: the program `n` times, wrapped (`with`) or
    /// plain, into `r`. A run that fails on the wrapped side only is the program changing what
    /// it does there, which no prediction can price.
    fn time_side(
        &self,
        timer: &mut ProcessTimer,
        wrapped_cmd: &[String],
        with: bool,
        n: usize,
        r: &mut Timings,
    ) -> anyhow::Result<()> {
        let (text, under) = (&self.cmd_text, self.side_words());
        let argv = if with {
            wrapped_cmd
        } else {
            &self.args.command[..]
        };
        for _ in 0..n {
            let t = program::Timer::time(timer, argv).map_err(program_err)?;
            if !t.succeeded() {
                let how = t.ending();
                if with {
                    anyhow::bail!(
                        "`{text}` {how} {under} but not without it: the program changes what it \
                         does, so its cost cannot be predicted"
                    );
                }
                anyhow::bail!("`{text}` {how} when run plainly during the rounds");
            }
            if with {
                r.wrapped.push(t);
            } else {
                r.plain.push(t);
            }
        }
        Ok(())
    }

    /// Step 4, the program's wall times added to both sides' runs, which are named for it.
    fn attach(&self, ra: &mut Run, rb: &mut Run, rounds: &Timings) {
        let (text, args) = (&self.cmd_text, self.args);
        let id = program_id(&args.command);
        let def = format!("wall time of `{text}`, one run a sample");
        ra.results
            .push(model::program_result(&id, &def, text, &wall(&rounds.plain)));
        rb.results.push(model::program_result(
            &id,
            &def,
            text,
            &wall(&rounds.wrapped),
        ));
        ra.label = Some(format!("predict plain: {text}"));
        rb.label = Some(format!("predict {}: {text}", self.side_words()));
        rb.during = args.during.clone();
    }
}

/// Pairs of blocks measured with a program during the wrapped side before the added time may
/// be called: A B, B A, A B, B A... One pair (a program of 15 ms filled a block in under a
/// second) let the host's drift between the two blocks into the added time while the
/// round-to-round CI stayed at ±5%: five runs of `find` under perf's counter measured +1.56 to
/// +2.04 ms, each with such a CI. Four pairs of 50 rounds still measured +1.66 to +1.98 ms over
/// six runs, the added time of one block pair ranging from 0.9 to 2.7 ms; eight or more pairs
/// of 25 (about a second each) measured +1.59 to +1.78 ms over nine: the host's moments fall on
/// both sides alike when there are many of them.
const MIN_BLOCKS: usize = 8;

/// Rounds of each price benchmark with a program during the wrapped side, in blocks of
/// `scheduler::PRICE_BLOCK_S` (for find's 15 price benchmarks two rounds a block, so six
/// blocks a side, A B B A...), so that no price rests on the host's state in one or two
/// blocks.
const PRICE_ROUNDS_DURING: usize = 12;

/// The output from the counts, the prediction and the rounds.
fn output(
    ctx: &Ctx,
    counts: &ProgramCounts,
    pred: &model::Prediction,
    prices: BTreeMap<String, Price>,
    rounds: &Timings,
) -> PredictionReport {
    let (m, mci) = added(&wall(&rounds.plain), &wall(&rounds.wrapped));
    let cpu = |ts: &[program::Timing]| ts.iter().map(|t| t.cpu_ns).collect::<Vec<f64>>();
    let (mcpu, _) = added(&cpu(&rounds.plain), &cpu(&rounds.wrapped));
    PredictionReport {
        command: ctx.cmd_text.clone(),
        wrapper: ctx.args.under.clone().unwrap_or_default(),
        during: ctx.args.during.clone(),
        syscalls: counts.syscalls.clone(),
        processes: counts.processes,
        threads: counts.threads,
        execs: counts.execs,
        uncounted: counts.uncounted.clone(),
        predicted_added_ns: pred.predicted_added_ns,
        predicted_ci95: pred.predicted_ci95,
        measured_added_ns: m,
        measured_ci95: mci,
        measured_cpu_added_ns: mcpu,
        plain_wall_ns: stats::median(&wall(&rounds.plain)),
        wrapped_wall_ns: stats::median(&wall(&rounds.wrapped)),
        rounds: rounds.plain.len(),
        error: (pred.predicted_added_ns - m) / m,
        breakdown: pred.breakdown.clone(),
        prices,
        assumptions: pred.assumptions.clone(),
        miss: model::miss_note(pred, m, mci),
    }
}

impl Command for PredictArgs {
    /// The prediction's JSON and page, and the store both sides are saved into.
    fn effects(&self) -> Effects {
        let e = Effects::new()
            .writes("--json", self.json.as_ref())
            .writes_report("--report", self.report.as_ref());
        match (&self.from, &self.to) {
            (Some(a), Some(b)) => e
                .store(self.store.db.as_ref())
                .reads("--from", a)
                .reads("--to", b),
            _ => e.saves_unless(self.no_save, self.store.db.as_ref()),
        }
    }

    /// Count, price, predict, measure, and write the prediction, in the session's order
    /// (`session::run`; predict sets no kernel settings).
    fn run(self, given: Given) -> anyhow::Result<i32> {
        if let (Some(a), Some(b)) = (&self.from, &self.to) {
            return between::run(&self, a, b);
        }
        let mut live = Live::new(given.passed, !self.no_save, 0.0);
        session::run(
            &mut live,
            &mut Prediction {
                args: &self,
                side: Side::default(),
                cpu: None,
                runs: vec![],
                out: None,
            },
        )
    }
}

/// `oscost predict`: a wrapper's cost to a program, predicted and measured.
struct Prediction<'a> {
    args: &'a PredictArgs,
    /// The wrapped side (`--under`, `--during`), checked.
    side: Side,
    /// The measuring CPU of the whole prediction: the pricing benchmarks', the program's.
    cpu: Option<usize>,
    /// Both sides' runs: the priced benchmarks and the program, plain and wrapped.
    runs: Vec<Run>,
    out: Option<PredictionReport>,
}

impl MeasuringCommand for Prediction<'_> {
    fn prepare(&mut self, _stop: &Stop) -> anyhow::Result<()> {
        let args = self.args;
        self.side = super::args::SideFlags {
            wrapper: args.under.clone(),
            during: args.during.clone(),
            ready: args.ready.clone(),
            ready_timeout_s: args.ready_timeout,
            ..Default::default()
        }
        .side()?;
        check_program("the command", &args.command)?;
        super::plan::asked_cpu(args.cpu)?;
        Ok(())
    }

    fn settle(&mut self, _i: usize) -> anyhow::Result<()> {
        self.cpu = Some(super::plan::measuring_cpu(self.args.cpu)?);
        Ok(())
    }

    fn measure(
        &mut self,
        _i: usize,
        _settings: Option<KernelSettings<'_>>,
        stop: &Stop,
    ) -> anyhow::Result<()> {
        let ctx = Ctx {
            args: self.args,
            side: &self.side,
            cmd_text: shell_words(&self.args.command),
            cpu: self
                .cpu
                .ok_or_else(|| anyhow::anyhow!("internal: measured before the CPU was chosen"))?,
            stop,
        };
        let (counts, kinds) = ctx.count()?;
        let (mut ra, mut rb, prices) = ctx.price(&kinds)?;
        let Some(pred) = model::predict(&kinds, &prices, "under this wrapper") else {
            anyhow::bail!(
                "{} could not be measured {}, so nothing can be priced",
                model::NULL_CALL,
                ctx.side_words()
            );
        };
        let rounds = ctx.measure()?;
        self.out = Some(output(&ctx, &counts, &pred, prices, &rounds));
        ctx.attach(&mut ra, &mut rb, &rounds);
        self.runs = vec![ra, rb];
        Ok(())
    }

    fn runs(&self, _i: usize) -> Vec<&Run> {
        self.runs.iter().collect()
    }

    fn saved(&mut self, _i: usize, ids: &[i64], store: &str) {
        crate::say!(
            "oscost: saved plain as run {} and wrapped as run {} in {store} ({})",
            ids[0],
            ids[1],
            program_id(&self.args.command)
        );
    }

    /// Saved first, shown after: a terminal that cannot be written loses no run.
    fn deliver(
        &mut self,
        _saved: Option<&str>,
        stop: &Stop,
        late: &mut Vec<String>,
    ) -> anyhow::Result<i32> {
        let Some(out) = &self.out else {
            return Ok(0);
        };
        if let Err(e) = super::print_stdout(&crate::report::predict::render_text(out)) {
            late.push(e.to_string());
        }
        if let Some(j) = &self.args.json {
            let bytes = serde_json::to_vec_pretty(out)?;
            if let Err(e) = crate::effects::output::write_file(j, &bytes) {
                late.push(e.to_string());
            }
        }
        if let Some(d) = &self.args.report {
            match crate::report::predict::render_page(out) {
                Ok(page) => match crate::effects::output::write_page(d, &page, stop) {
                    Ok(_) => crate::say!("oscost: report in {}", d.join("index.html").display()),
                    Err(e) if e.is::<crate::base::stop::Interrupted>() => {}
                    Err(e) => late.push(e.to_string()),
                },
                Err(e) => late.push(format!("cannot draw the prediction: {e}")),
            }
        }
        Ok(0)
    }

    fn all_runs(&self) -> Vec<&Run> {
        self.runs.iter().collect()
    }
}

/// An interrupt stays an `Interrupted` (exit 128+N, "nothing was saved"); the rest are errors.
fn program_err(e: program::ProgramError) -> anyhow::Error {
    match e {
        program::ProgramError::Interrupted(i) => i.into(),
        e => e.into(),
    }
}
