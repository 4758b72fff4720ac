//! `oscost watch`: a long-running, low-duty watch of what a few primitives cost on one machine
//! in production, saying when a cost changed and what about the machine changed with it.
//!
//! - Every `--interval` it measures a window: each watched benchmark once, in one fresh worker
//!   (a repetition of a run), pinned to the next allowed CPU in turn. The window's sampling
//!   time is what the duty allows: at most `--duty` of one CPU over wall time, all of
//!   oscost's CPU time counted from the process's start (its own and its workers',
//!   `getrusage`), measured every window and said; a window that went over shortens the next.
//! - The interval asked is kept, or refused: the first window takes one burst of each
//!   benchmark (the least a window can be) and is the probe of what a burst costs here; where
//!   even that is more than the duty allows in one interval, the watch exits 2 naming the
//!   shortest interval (and the duty) that can be kept. Later windows take as many bursts, up
//!   to `BURSTS`, as the last window's cost per burst says fit (`bursts_that_fit`).
//! - The machine's description is reread with every window (`scheduler` collects it), so
//!   a change names what differs: kernel, settings, confinement, BPF programs, audit rules.
//! - A lasting change is found online (`analysis::changes::recent_change`: the last two
//!   windows beyond the level before them, by the noise `history --changes` measures and by
//!   the noise band) and said once, with its size, its CI and when it began.
//! - The windows are appended to a journal (`$XDG_DATA_HOME/oscost/watch/`, a line a window)
//!   as they come,
//!   and saved in the store as one run an hour, or when a change is called, or when the watch
//!   ends: a compact series, never a run a window. A store that cannot be reached keeps the
//!   journal until it can; a watch killed outright (SIGKILL) leaves it, and the next start
//!   saves it and goes on from it. `--openmetrics` is rewritten whole after every window.
//! - SIGTERM and SIGINT end it: the worker stopped, the last window saved, the file whole, a
//!   line naming what was saved, and exit 0 (a watch is meant to end so; 1 when windows are
//!   left in the journal), not the 128+N of other commands.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use super::args::{StoreArgs, parse_percent, parse_seconds, usage};
use super::{Command, Given};
use crate::base::model::Run;
use crate::base::stop::Stop;
use crate::effects::gate::Effects;
use crate::effects::store::Store;
use crate::processes::scheduler;

mod duty;
mod joined;
mod journal;

use duty::{DUTY_SPAN, FIT_SHARE, INTERVAL_SLACK, bursts_that_fit, cpu_used, process_age, refusal};
use joined::{join, split_windows};

/// What `watch` measures when no ids are given: the null call, a pipe round trip on one CPU,
/// fork and a page fault.
pub const DEFAULT_IDS: [&str; 4] = [
    "syscall/getppid",
    "switch/pipe-proc@same",
    "spawn/fork",
    "mem/fault-write",
];

/// A window is saved as part of a run at least this often.
const RUN_SPAN: Duration = Duration::from_secs(3600);

/// The shortest sampling time of one benchmark in a window.
const MIN_SAMPLING: Duration = Duration::from_millis(2);

/// The longest, however much the duty allows.
const MAX_SAMPLING: Duration = Duration::from_millis(200);

#[derive(Debug, Args, Clone)]
/// `oscost watch`'s arguments.
pub struct WatchArgs {
    /// Benchmarks watched, ids or prefixes [default: syscall/getppid, switch/pipe-proc@same,
    /// spawn/fork, mem/fault-write].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub ids: Vec<String>,
    /// Seconds from one window to the next.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_seconds)]
    pub interval: f64,
    /// The most of one CPU's time the watch takes, percent, its workers included.
    #[arg(long, value_name = "PCT", default_value = "1", value_parser = parse_percent)]
    pub duty: f64,
    /// Rewrite this OpenMetrics file after every window (node_exporter's textfile collector).
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
    /// End after this many windows [default: run until a signal].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub windows: Option<u64>,
    /// A label stored with the watch's runs [default: watch HOST].
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    #[command(flatten)]
    /// The store the windows are saved into.
    pub store: StoreArgs,
}

impl Command for WatchArgs {
    fn effects(&self) -> Effects {
        Effects::new()
            .writes("--openmetrics", self.openmetrics.as_ref())
            .saves_unless(false, self.store.db.as_ref())
    }

    fn run(self, given: Given) -> anyhow::Result<i32> {
        let mut passed = given.passed;
        let stop = crate::effects::signals::guard_processes()?;
        if !(1.0..=86_400.0).contains(&self.interval) {
            return Err(usage("--interval: give 1 to 86400 seconds"));
        }
        if !(self.duty > 0.0 && self.duty <= 50.0) {
            return Err(usage("--duty: give a share above 0 and at most 50 percent"));
        }
        let ids: Vec<String> = if self.ids.is_empty() {
            DEFAULT_IDS.iter().map(|s| s.to_string()).collect()
        } else {
            self.ids.clone()
        };
        let mut plan = window_plan(&ids, self.interval, self.duty)?;
        let mut store = super::saving_store(&mut passed)?;
        let label = self.label.clone().unwrap_or_else(|| {
            let host = nix::sys::utsname::uname()
                .map(|u| u.nodename().to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("watch {host}")
        });
        let mut w = Watch::start(&self, &ids, label, &store)?;
        w.say_start(&plan, &store);
        if w.pending.is_empty() {
            w.resume_from_store(&mut store);
        } else {
            w.save(&mut store, "resumed from the journal");
        }
        let outcome = w.watch(&mut plan, &mut store, &stop);
        // Whatever ended it: the windows not yet saved go into the store now (or stay in the
        // journal for the next start); the file was last replaced whole after a window.
        w.save(&mut store, "the watch ended");
        w.say_duty();
        match outcome {
            Err(e) if !e.is::<crate::base::stop::Interrupted>() => Err(e),
            // A signal is how a watch is meant to end (systemd's stop, Ctrl-C): said with what
            // was saved, exit 0 like any normal end, not 128+N.
            _ => {
                if let Some(sig) = stop.signal() {
                    crate::say!(
                        "oscost: the watch ended on signal {sig}{}",
                        w.saved_text(&store)
                            .map_or_else(String::new, |s| format!(" after saving {s}"))
                    );
                }
                // Windows the store would not take are in the journal, said above: exit 1.
                Ok(i32::from(!w.pending.is_empty()))
            }
        }
    }
}

/// Bursts a window takes of each benchmark, each in a fresh worker, spread over up to
/// `BURSTS` seconds. The window's level is its lowest burst: this host's slow moments (every
/// kernel-heavy operation 20-45% slower for 100-500 ms, on a fifth to two fifths of the time)
/// put a lone short burst at +40% one window in three, and two such windows in a row would
/// read as a change; all five bursts of a window land in slow moments about once in 400
/// windows, while a change of the kernel (an audit rule, a mitigation) moves every burst.
const BURSTS: usize = 5;

/// The plan of one window: each benchmark `BURSTS` times (a repetition each, in a fresh
/// worker, the rounds `round_gap` apart), its sampling time the duty's share of the
/// interval, split between them.
fn window_plan(ids: &[String], interval: f64, duty: f64) -> anyhow::Result<scheduler::Plan> {
    let mut req = super::plan::Request::new(ids.to_vec());
    req.quick = true;
    req.events = Some(vec!["none".into()]);
    let mut plan = super::plan::build(&req)?;
    let per = Duration::from_secs_f64(
        interval * duty / 100.0 / (2 * BURSTS * plan.benchmarks.len()) as f64,
    );
    plan.reps.min = 1;
    plan.reps.max = 1;
    plan.round_gap = Duration::from_secs_f64((interval / (4 * BURSTS) as f64).min(1.0));
    plan.reps.undecided_max = 0;
    plan.reps.fixed_total = None;
    plan.reps.rep_ns = per.clamp(MIN_SAMPLING, MAX_SAMPLING).as_nanos() as u64;
    plan.cpu_asked = true;
    plan.quiet = true;
    Ok(plan)
}

/// Bursts a window took (its first result's repetitions).
fn run_bursts(run: &Run) -> usize {
    run.results.first().map_or(0, |r| r.repetitions.len())
}

/// One benchmark's levels, window by window, and where its current level began.
#[derive(Default)]
struct Levels {
    /// (when, median ns) of each window, in order.
    points: Vec<(String, f64)>,
    /// Index of the first window of the current level (after the last change called).
    since: usize,
}

/// The watch's state: the windows not yet saved, the levels, the duty.
struct Watch {
    ids: Vec<String>,
    label: String,
    interval: Duration,
    duty: f64,
    openmetrics: Option<PathBuf>,
    limit: Option<u64>,
    journals: journal::Journals,
    /// Windows measured and not yet saved in the store (also in the journals).
    pending: Vec<Run>,
    /// When the run being gathered began.
    gathering_since: Instant,
    levels: std::collections::BTreeMap<String, Levels>,
    /// When the watch started, and its CPU time then: the duty is measured from here.
    started: Instant,
    cpu_at_start: Duration,
    saved: Vec<i64>,
    windows: u64,
    /// Changes called, for the metrics: benchmark -> new over old.
    changes: std::collections::BTreeMap<String, f64>,
    /// The interval was stretched to keep the duty (said once).
    stretched: bool,
    /// Bursts the next window takes of each benchmark (1 for the first, the probe).
    bursts: usize,
    /// Each window's end and CPU time (the first's from the process's start), over the last
    /// `DUTY_SPAN`: the duty is kept over every such span.
    costs: std::collections::VecDeque<(Instant, Duration)>,
    /// The last `TAIL + 1` windows: a change's "before" and "after" machines.
    recent: std::collections::VecDeque<Run>,
}

impl Watch {
    /// The watch, resumed from its journal where a watch of the same benchmarks into the
    /// same store left windows unsaved (killed, or the store unreachable).
    fn start(
        args: &WatchArgs,
        ids: &[String],
        label: String,
        store: &Store,
    ) -> anyhow::Result<Watch> {
        use sha2::{Digest, Sha256};
        let key =
            Sha256::digest(format!("{}\n{}\n{label}", store.shown(), ids.join(",")).as_bytes());
        let hex: String = key.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let journals = journal::Journals::open(
            &crate::effects::store::data_dir()
                .map_err(|e| anyhow::anyhow!("no place for the watch's journal: {e}"))?
                .join("watch"),
            &hex,
        );
        let mut w = Watch {
            ids: ids.to_vec(),
            label,
            interval: Duration::from_secs_f64(args.interval),
            duty: args.duty / 100.0,
            openmetrics: args.openmetrics.clone(),
            limit: args.windows,
            journals,
            pending: Vec::new(),
            gathering_since: Instant::now(),
            levels: Default::default(),
            // From the process's start: its start-up (the store proven, the journal read) is
            // the first window's cost too.
            started: Instant::now() - process_age(),
            cpu_at_start: Duration::ZERO,
            saved: Vec::new(),
            windows: 0,
            changes: Default::default(),
            stretched: false,
            bursts: 1,
            costs: Default::default(),
            recent: Default::default(),
        };
        let (runs, cut) = w.journals.adopted_windows();
        if !runs.is_empty() || cut > 0 {
            crate::say!(
                "oscost: resuming: {} window(s) watches that ended left unsaved ({}){}",
                runs.len(),
                w.journals.adopted_shown(),
                if cut > 0 {
                    format!("; {cut} line(s) cut short were skipped")
                } else {
                    String::new()
                }
            );
            for r in &runs {
                w.add_levels(r);
            }
            w.recent = runs.iter().rev().take(TAIL + 1).rev().cloned().collect();
            w.pending = runs;
        }
        Ok(w)
    }

    /// What the whole watch took: its CPU time (workers included) over its wall time.
    fn say_duty(&self) {
        let wall = self.started.elapsed().as_secs_f64();
        let spent = cpu_used().saturating_sub(self.cpu_at_start).as_secs_f64();
        crate::say!(
            "oscost: the watch took {:.2}% of one CPU over {wall:.0} s ({:.2} s of CPU, its workers included; at most {:.1}% asked)",
            100.0 * spent / wall.max(1e-3),
            spent,
            self.duty * 100.0
        );
    }

    /// The levels of this watch's last stored run (its windows), so that a restart judges
    /// the next windows against what was before it rather than waiting for a new baseline.
    fn resume_from_store(&mut self, store: &mut Store) {
        let Ok(runs) = store.list() else {
            return;
        };
        let Some(last) = runs
            .iter()
            .filter(|r| r.label.as_deref() == Some(self.label.as_str()))
            .max_by_key(|r| r.id)
        else {
            return;
        };
        let Ok(run) = store.load(last.id) else {
            return;
        };
        let mut n = 0;
        for r in &run.results {
            let lv = self.levels.entry(r.id.clone()).or_default();
            for window in split_windows(&r.repetitions, self.interval) {
                if let Some(level) = window_level(window) {
                    lv.points.push((run.started_at.clone(), level));
                    n += 1;
                }
            }
        }
        if n > 0 {
            crate::say!(
                "oscost: resuming the series of run {} ({} window levels as the baseline)",
                last.id,
                n
            );
        }
    }

    fn say_start(&self, plan: &scheduler::Plan, store: &Store) {
        crate::say!(
            "oscost: watching {} every {:.0} s, each window up to {} bursts of {:.0} ms a benchmark {:.1} s apart (as many as the duty allows; the first one each, to learn what one costs), on the next of CPUs {:?}; at most {:.1}% of one CPU from oscost's start (measured every window); saved hourly in {} as \"{}\"",
            self.ids.join(", "),
            self.interval.as_secs_f64(),
            BURSTS,
            plan.reps.rep_ns as f64 / 1e6,
            plan.round_gap.as_secs_f64(),
            plan.opts.allowed,
            self.duty * 100.0,
            store.shown(),
            self.label
        );
    }

    /// Window after window until a signal, or `--windows`.
    fn watch(
        &mut self,
        plan: &mut scheduler::Plan,
        store: &mut Store,
        stop: &Stop,
    ) -> anyhow::Result<()> {
        let cpus = plan.opts.allowed.clone();
        loop {
            let began = Instant::now();
            plan.opts.cpu = cpus[(self.windows as usize) % cpus.len()];
            plan.reps.min = self.bursts;
            plan.reps.max = self.bursts;
            let cpu_before = cpu_used();
            let mut run = scheduler::execute(plan, stop)?;
            run.label = Some(self.label.clone());
            let cpu = cpu_used() - cpu_before;
            // The first window's cost, start-up included, decides whether the interval asked
            // can be kept at all; if not, nothing of it is kept.
            let cost = if self.windows == 0 { cpu_used() } else { cpu };
            let fit = bursts_that_fit(cost, self.bursts, self.interval, self.duty);
            if self.windows == 0 && fit.is_none() {
                return Err(refusal(cost, self.bursts, self.interval, self.duty));
            }
            self.bursts = fit.unwrap_or(1);
            if self.windows == 0 && self.bursts < BURSTS {
                let per = cost.as_secs_f64() / run_bursts(&run).max(1) as f64;
                crate::say!(
                    "oscost: a burst of each benchmark takes {:.0} ms of CPU here: windows take {} each to keep {:.1}% of one CPU at one every {:.0} s ({BURSTS} from --interval {:.0})",
                    per * 1e3,
                    self.bursts,
                    self.duty * 100.0,
                    self.interval.as_secs_f64(),
                    (BURSTS as f64 * per / self.duty / FIT_SHARE).ceil()
                );
            }
            self.windows += 1;
            self.window(run, cpu, plan, began);
            let changed = self.detect();
            self.write_metrics();
            if changed || self.gathering_since.elapsed() >= RUN_SPAN {
                self.save(store, if changed { "a change" } else { "an hour" });
            }
            // The next window comes an interval after this one began, unless that would take
            // the watch past its duty over the last `DUTY_SPAN` (this window's cost taken as
            // the next one's): then it waits until it would not, said once. With the bursts
            // fitted to the duty (`bursts_that_fit`) that happens only where the machine got
            // slower since the first window.
            self.costs.push_back((Instant::now(), cost));
            let next = self.next_start(began, cpu);
            if next > began + self.interval + INTERVAL_SLACK && !self.stretched {
                crate::say!(
                    "oscost: a window took {:.0} ms of CPU, more than {:.1}% of one CPU over {:.0} s allows at one every {:.0} s: windows come every {:.1} s instead, to keep the duty",
                    cpu.as_secs_f64() * 1e3,
                    self.duty * 100.0,
                    DUTY_SPAN.as_secs_f64(),
                    self.interval.as_secs_f64(),
                    next.duration_since(began).as_secs_f64()
                );
                self.stretched = true;
            }
            let spent = cpu_used().saturating_sub(self.cpu_at_start);
            let paid = |next: Duration| {
                self.started + Duration::from_secs_f64((spent + next).as_secs_f64() / self.duty)
            };
            // A bounded watch (`--windows`) ends once its duty is kept, not at once.
            let last = self.limit.is_some_and(|n| self.windows >= n);
            let until = if last { paid(Duration::ZERO) } else { next };
            while Instant::now() < until {
                stop.check()?;
                std::thread::sleep(
                    Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())),
                );
            }
            if last {
                return Ok(());
            }
        }
    }

    /// When the window after one that began at `began` may start: an interval later, or later
    /// still where the windows of the last `DUTY_SPAN` and one more costing `next` would
    /// take more than the duty of it. Windows older than the span are forgotten.
    fn next_start(&mut self, began: Instant, next: Duration) -> Instant {
        let allowed = DUTY_SPAN.as_secs_f64() * self.duty;
        let mut at = began + self.interval;
        while let Some(&(oldest, _)) = self.costs.front() {
            if oldest + DUTY_SPAN <= at.min(Instant::now()) {
                self.costs.pop_front();
            } else {
                break;
            }
        }
        for &(when, _) in self.costs.iter() {
            let within: f64 = self
                .costs
                .iter()
                .filter(|(t, _)| *t + DUTY_SPAN > at)
                .map(|(_, c)| c.as_secs_f64())
                .sum();
            if within + next.as_secs_f64() <= allowed {
                break;
            }
            // Wait until this window's cost leaves the span.
            at = at.max(when + DUTY_SPAN);
        }
        at
    }

    /// A window measured: kept in the journal, its levels added, the duty kept.
    fn window(&mut self, run: Run, cpu: Duration, plan: &mut scheduler::Plan, began: Instant) {
        self.add_levels(&run);
        self.recent.push_back(run.clone());
        if self.recent.len() > TAIL + 1 {
            self.recent.pop_front();
        }
        self.pending.push(run);
        self.write_journal();
        // The duty over the watch so far, up to the end of this window's interval (no window
        // starts before it): a window over budget shortens the next ones.
        let wall = self
            .started
            .elapsed()
            .max((began + self.interval).saturating_duration_since(self.started));
        let used =
            (cpu_used().saturating_sub(self.cpu_at_start)).as_secs_f64() / wall.as_secs_f64();
        let budget = self.interval.as_secs_f64() * self.duty;
        if cpu.as_secs_f64() > budget || used > self.duty {
            let scale = (budget / cpu.as_secs_f64().max(1e-6)).min(0.9);
            let next = (plan.reps.rep_ns as f64 * scale) as u64;
            plan.reps.rep_ns = next.clamp(
                MIN_SAMPLING.as_nanos() as u64,
                MAX_SAMPLING.as_nanos() as u64,
            );
        }
        crate::say!(
            "oscost: window {} at {}: {}; this window {:.0} ms of CPU, the watch so far {:.2}% of one CPU (to this interval's end)",
            self.windows,
            self.pending.last().map_or("", |r| r.started_at.as_str()),
            self.pending
                .last()
                .map(|r| r
                    .results
                    .iter()
                    .filter_map(|x| Some(format!(
                        "{} {} (lowest of {} bursts; median {})",
                        x.id,
                        crate::report::format_ns(window_level(&x.repetitions)?),
                        x.repetitions.len(),
                        crate::report::format_ns(x.stats.as_ref()?.median)
                    )))
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
            cpu.as_secs_f64() * 1e3,
            used * 100.0
        );
    }

    fn add_levels(&mut self, run: &Run) {
        for r in &run.results {
            if let Some(level) = window_level(&r.repetitions) {
                self.levels
                    .entry(r.id.clone())
                    .or_default()
                    .points
                    .push((run.started_at.clone(), level));
            }
        }
    }

    /// Look for a lasting change in each benchmark's levels; say each once. Whether any was
    /// called.
    fn detect(&mut self) -> bool {
        let mut any = false;
        let last = self.pending.last().cloned();
        for (id, lv) in self.levels.iter_mut() {
            let series: Vec<f64> = lv.points[lv.since..].iter().map(|p| p.1).collect();
            let Some(c) = lasting_change(&series) else {
                continue;
            };
            let first = lv.since + c.index;
            let when = lv.points[first].0.clone();
            // What differs: the window before the change against the last one (kept in
            // `recent`, since an hourly save may have emptied `pending` in between).
            let before = self.recent.iter().rev().find(|r| r.started_at < when);
            let differs = match (before, &last) {
                (Some(b), Some(l)) => crate::analysis::changes::machine_differences(b, l),
                _ => vec![],
            };
            let what = if differs.is_empty() {
                "nothing recorded about the machine differs (kernel, settings, confinement, BPF programs, audit rules)".to_string()
            } else {
                format!("the machine differs in: {}", differs.join(", "))
            };
            crate::say!(
                "oscost: {id} {:+.0}% since {} (CI {:+.0}% to {:+.0}%; {} -> {}); {what}",
                (c.ratio - 1.0) * 100.0,
                when,
                (c.ratio_ci[0] - 1.0) * 100.0,
                (c.ratio_ci[1] - 1.0) * 100.0,
                crate::report::format_ns(c.before),
                crate::report::format_ns(c.after),
            );
            lv.since = first;
            self.changes.insert(id.clone(), c.ratio);
            any = true;
        }
        any
    }

    /// The last window appended to the journal (one line a window).
    fn write_journal(&self) {
        let Some(run) = self.pending.last() else {
            return;
        };
        if let Err(e) = self.journals.append(run) {
            crate::say!(
                "oscost: cannot keep the journal {}: {e}",
                self.journals.own().display()
            );
        }
    }

    /// `--openmetrics`: the last window's levels and the watch's own gauges, replaced whole.
    fn write_metrics(&self) {
        let (Some(path), Some(run)) = (&self.openmetrics, self.pending.last()) else {
            return;
        };
        let wall = self.started.elapsed().as_secs_f64().max(1e-3);
        let duty = cpu_used().saturating_sub(self.cpu_at_start).as_secs_f64() / wall;
        let bytes = crate::report::openmetrics::watch(run, &self.changes, duty, self.windows);
        if let Err(e) = crate::effects::output::write_file(path, &bytes) {
            crate::say!("oscost: {e}");
        }
    }

    /// The pending windows saved as one run (`why`: what ended the span); on success the
    /// journal is emptied, on failure it stays for the next try (or the next start).
    fn save(&mut self, store: &mut Store, why: &str) {
        let Some(run) = join(&self.pending, self.interval, why) else {
            return;
        };
        // A signal now must not lose the windows: the save runs to its end (the journal
        // holds them if it fails or the watchdog ends it). Not `save_or_keep`: the journal
        // already keeps them, and a second copy as a run file would be saved twice.
        match store.save_all(&[&run], &Stop::never()) {
            Ok(ids) => {
                crate::say!(
                    "oscost: {} window(s) saved as run {} in {} ({why})",
                    self.pending.len(),
                    ids[0],
                    store.shown()
                );
                self.saved.extend(ids);
                self.pending.clear();
                self.journals.saved();
                self.gathering_since = Instant::now();
            }
            Err(e) => {
                crate::say!(
                    "oscost: {} window(s) not saved in {} ({e}); they stay in {} and are saved when the store takes them",
                    self.pending.len(),
                    store.shown(),
                    self.journals.own().display()
                );
            }
        }
    }

    /// What the watch saved, as a signal's message names it (`session::saved_text`).
    fn saved_text(&self, store: &Store) -> Option<String> {
        if self.saved.is_empty() {
            return None;
        }
        super::session::saved_text(&[(self.saved.clone(), store.shown())])
    }
}

/// A window's level: its lowest burst's median (`BURSTS`); `None` when none measured.
fn window_level(bursts: &[crate::base::model::Repetition]) -> Option<f64> {
    bursts
        .iter()
        .map(|r| r.median_ns)
        .filter(|m| m.is_finite())
        .min_by(f64::total_cmp)
}

/// A lasting change in the levels since the last one called: seen at once when the last two
/// windows are both far beyond the old level (`changes::recent_change`), else found by the
/// change points `history --changes` finds, once the new level has `MIN_SEGMENT` windows: a
/// short or unsettled baseline (one stray window among five) widens the noise the first test
/// measures, and a new level that is itself uneven (a tracer costs more on one CPU than on
/// the other) then shows only as a segment.
fn lasting_change(series: &[f64]) -> Option<crate::analysis::changes::LevelShift> {
    crate::analysis::changes::recent_change(series, TAIL, BAND).or_else(|| {
        crate::analysis::changes::find_changes(series)
            .into_iter()
            .last()
            .filter(|c| (c.ratio - 1.0).abs() > BAND)
    })
}

/// Windows a change must show in before it is called.
const TAIL: usize = 2;

/// The noise band a change must also exceed (a fraction).
const BAND: f64 = 0.02;

#[cfg(test)]
mod tests;
