//! A program that runs during a side (`run --during`, `ab --a-during/--b-during`): a tracer, a
//! security agent, an audit tool, anything that attaches to the whole system rather than
//! wrapping the measured program. It is started, waited for until it is ready, kept running
//! while its side is measured, and stopped as a user would stop it (SIGINT, then SIGTERM, then
//! SIGKILL after a grace) before the other side runs, so that an agent that cleans up on a
//! signal (detaches its programs, deletes its rules) gets to.
//!
//! The program is never oscost's own child. oscost starts a keeper, `oscost __during`,
//! reparented away from oscost in a session of its own (as the settings guard is: worker
//! reaping kills every child of the coordinator, and a SIGKILL of oscost's process group must
//! not reach it). The keeper is a child subreaper and starts the program in a process group of
//! its own, so every descendant, also a daemon that called setsid and left the group, is the
//! keeper's to find (`/proc` walked by parent) and to stop. The keeper talks to oscost over
//! two pipes, one line a message: oscost writes `cpu` (answered with the program tree's CPU
//! time) and `stop`; the keeper writes `started PID`, `out LINE` for each line the program
//! prints (stdout and stderr), `exited HOW` if the program's leader exits by itself, `cpu NS`
//! and `stopped SIGNAL NS`. When its input closes without `stop` (oscost killed, SIGKILL
//! included, or a panic), or it is sent SIGTERM, the keeper stops the program the same
//! graceful way and exits: the program never outlives oscost.
//!
//! Ready: when a line of the program's output matches `--ready REGEX`, or else when what is
//! attached to the system (`observers::Inventory`: BPF programs, audit rules, trace events,
//! kprobes) has not changed for `SETTLE` since the program started.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::base::helpers::KEEPER as DURING_KEEPER_ARG;
use crate::base::stop::Stop;
use crate::tracing::observers::Inventory;

/// Ready by the system's inventory once it has not changed for this long (and at least this
/// long after the start): BPF tracers and perf attach within tens of milliseconds of the last
/// program they load; a second leaves room for one that attaches in steps.
pub const SETTLE: Duration = Duration::from_secs(1);
/// Longest wait for a program to get ready, unless `--ready-timeout` says otherwise.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long each of SIGINT and SIGTERM is given before the next signal.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long the system may take to return to its inventory before the program started, after
/// the program stopped (a BPF program is freed once its last file descriptor closes, which
/// the kernel may do a moment after the process is reaped).
pub const RETURN_WAIT: Duration = Duration::from_secs(5);
/// Lines of the program's output kept to show when it fails.
const LAST_LINES: usize = 8;
/// The longest line passed on; the rest of a longer one is cut.
const LINE_BYTES: usize = 4096;

/// A program to run during a side, as given.
#[derive(Debug, Clone)]
pub struct DuringSpec {
    /// Its command line, split like a shell (no shell).
    pub argv: Vec<String>,
    /// As the user gave it.
    pub text: String,
    /// Ready when a line of its output matches this; `None`: by the inventory.
    pub ready: Option<regex::Regex>,
    /// Longest wait for it to be ready (`--ready-timeout`, `READY_TIMEOUT` by default).
    pub ready_timeout: Duration,
}

/// What happened to the program over a side's blocks, for the side's note.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DuringRecord {
    /// Blocks of repetitions it ran during.
    pub blocks: usize,
    /// Seconds each took to be ready.
    pub ready_s: Vec<f64>,
    /// How it was ready: "its output matched" or "the system's inventory settled".
    pub ready_by: &'static str,
    /// CPU time its whole process tree used while the side was measured, seconds.
    pub cpu_s: f64,
    /// The same on each CPU (CPU, seconds), where the keeper could count it (task-clock
    /// counters; empty where perf_event_open is refused).
    pub cpu_s_by_cpu: Vec<(usize, f64)>,
    /// Wall time the side was measured while it ran, seconds.
    pub measured_s: f64,
    /// The signal that ended it each time ("SIGINT", or "none" when it had exited).
    pub stopped_by: Vec<String>,
    /// What it attached, as the inventory said once it was ready (first block).
    pub attached: Vec<String>,
}

impl DuringRecord {
    /// Its CPU use as a share of one CPU while the side was measured, percent.
    pub fn cpu_pct(&self) -> f64 {
        if self.measured_s > 0.0 {
            100.0 * self.cpu_s / self.measured_s
        } else {
            0.0
        }
    }

    /// Its CPU use on each CPU as a share of that CPU while the side was measured, percent.
    pub fn cpu_pct_by_cpu(&self) -> Vec<(usize, f64)> {
        self.cpu_s_by_cpu
            .iter()
            .map(|&(c, s)| {
                let pct = if self.measured_s > 0.0 {
                    100.0 * s / self.measured_s
                } else {
                    0.0
                };
                (c, pct)
            })
            .collect()
    }

    /// Add `by_cpu` (CPU, seconds) to what was counted on each CPU.
    pub fn add_by_cpu(&mut self, by_cpu: &[(usize, f64)]) {
        for &(c, s) in by_cpu {
            match self.cpu_s_by_cpu.iter_mut().find(|(k, _)| *k == c) {
                Some((_, t)) => *t += s,
                None => self.cpu_s_by_cpu.push((c, s)),
            }
        }
        self.cpu_s_by_cpu.sort_by_key(|&(c, _)| c);
    }

    /// The record in words, for the side's note.
    pub fn words(&self, text: &str) -> String {
        let ready = if self.ready_s.is_empty() {
            "never ready".to_string()
        } else {
            let max = self.ready_s.iter().cloned().fold(0.0, f64::max);
            let mean = self.ready_s.iter().sum::<f64>() / self.ready_s.len() as f64;
            format!(
                "ready after {mean:.2} s on average ({max:.2} s at most; {})",
                self.ready_by
            )
        };
        let mut stops: Vec<String> = self.stopped_by.clone();
        stops.sort();
        stops.dedup();
        let by_cpu = self
            .cpu_pct_by_cpu()
            .iter()
            .map(|(c, p)| format!("CPU {c} {p:.1}%"))
            .collect::<Vec<_>>()
            .join(", ");
        let by_cpu = if by_cpu.is_empty() {
            String::new()
        } else {
            format!("; {by_cpu}")
        };
        format!(
            "measured during `{text}`: {} block(s), {ready}; its processes used {:.2} s of CPU over {:.1} s measured ({:.1}% of one CPU{by_cpu}); stopped by {}{}",
            self.blocks,
            self.cpu_s,
            self.measured_s,
            self.cpu_pct(),
            stops.join(", "),
            if self.attached.is_empty() {
                String::new()
            } else {
                format!("; attached: {}", self.attached.join(", "))
            }
        )
    }
}

/// A message from the keeper.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Started,
    Out(String),
    Exited(String),
    Cpu(CpuTime),
    Stopped {
        signal: String,
        cpu_ns: u64,
    },
    /// Its output closed: the keeper is gone.
    Gone,
}

fn parse_event(line: &str) -> Option<Event> {
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    Some(match word {
        "started" => Event::Started,
        "out" => Event::Out(rest.to_string()),
        "exited" => Event::Exited(rest.to_string()),
        "cpu" => Event::Cpu(CpuTime::parse(rest)?),
        "stopped" => {
            let (signal, ns) = rest.split_once(' ')?;
            Event::Stopped {
                signal: signal.to_string(),
                cpu_ns: ns.trim().parse().ok()?,
            }
        }
        _ => return None,
    })
}

/// The CPU time of the program's tree, ns: in all, and on each CPU where it was counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuTime {
    /// In all.
    pub total_ns: u64,
    /// (CPU, ns), every online CPU; empty where the keeper could not count by CPU.
    pub by_cpu_ns: Vec<(usize, u64)>,
}

impl CpuTime {
    /// The keeper's words: `TOTAL [CPU:NS,CPU:NS...]`.
    fn parse(words: &str) -> Option<CpuTime> {
        let mut w = words.split_whitespace();
        let total_ns = w.next()?.parse().ok()?;
        let by_cpu_ns = w
            .next()
            .map(|list| {
                list.split(',')
                    .filter_map(|p| {
                        let (c, ns) = p.split_once(':')?;
                        Some((c.parse().ok()?, ns.parse().ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(CpuTime {
            total_ns,
            by_cpu_ns,
        })
    }

    fn words(&self) -> String {
        let by: Vec<String> = self
            .by_cpu_ns
            .iter()
            .map(|(c, ns)| format!("{c}:{ns}"))
            .collect();
        format!("{} {}", self.total_ns, by.join(","))
            .trim_end()
            .to_string()
    }

    /// What was used from `earlier` to this, by CPU, seconds.
    pub fn by_cpu_s_since(&self, earlier: &CpuTime) -> Vec<(usize, f64)> {
        self.by_cpu_ns
            .iter()
            .map(|&(c, ns)| {
                let before = earlier
                    .by_cpu_ns
                    .iter()
                    .find(|(k, _)| *k == c)
                    .map_or(0, |&(_, v)| v);
                (c, ns.saturating_sub(before) as f64 / 1e9)
            })
            .collect()
    }
}

/// A program running during a side, through its keeper. Dropped without `stop`, it is stopped
/// (the keeper sees its input close).
pub struct Agent {
    text: String,
    control: Option<ChildStdin>,
    events: mpsc::Receiver<Event>,
    last: VecDeque<String>,
    exited: Option<String>,
    ready: Option<regex::Regex>,
    ready_timeout: Duration,
    matched: bool,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("text", &self.text).finish()
    }
}

/// Why a program during a side failed: the side cannot be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DuringFailed(pub String);

/// Why a program was not ready: a signal came, or it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// SIGINT, SIGTERM or SIGHUP came while waiting.
    #[error(transparent)]
    Signal(#[from] crate::base::stop::Interrupted),
    /// It exited, or never got ready.
    #[error(transparent)]
    Failed(#[from] DuringFailed),
}

impl Agent {
    /// Start `spec`'s program through a keeper; returns once it has been started.
    pub fn start(spec: &DuringSpec) -> Result<Agent, DuringFailed> {
        let failed = |why: String| DuringFailed(format!("cannot start `{}`: {why}", spec.text));
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("oscost")
            .arg(DURING_KEEPER_ARG)
            .arg("--")
            .args(&spec.argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut keeper = crate::measuring::os::spawn_reparented(&mut cmd, || {})
            .map_err(|e| failed(e.to_string()))?;
        let pipes = (keeper.stdin.take(), keeper.stdout.take());
        let (Some(control), Some(out)) = pipes else {
            return Err(failed("no pipe to its keeper".into()));
        };
        let (tx, events) = mpsc::channel();
        std::thread::Builder::new()
            .name("oscost-during".into())
            .spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if let Some(e) = parse_event(&line)
                        && tx.send(e).is_err()
                    {
                        return;
                    }
                }
                let _ = tx.send(Event::Gone);
            })
            .map_err(|e| failed(e.to_string()))?;
        let mut agent = Agent {
            text: spec.text.clone(),
            control: Some(control),
            events,
            last: VecDeque::new(),
            exited: None,
            ready: spec.ready.clone(),
            ready_timeout: spec.ready_timeout,
            matched: false,
        };
        match agent.next(Duration::from_secs(10)) {
            Some(Event::Started) => Ok(agent),
            Some(Event::Exited(how)) => Err(agent.failure(&format!("could not be started: {how}"))),
            _ => Err(agent.failure("its keeper did not answer")),
        }
    }

    /// The next message within `wait`, output lines kept (and matched against --ready).
    fn next(&mut self, wait: Duration) -> Option<Event> {
        let e = self.events.recv_timeout(wait).ok()?;
        match &e {
            Event::Out(line) => {
                if self.ready.as_ref().is_some_and(|r| r.is_match(line)) {
                    self.matched = true;
                }
                if self.last.len() == LAST_LINES {
                    self.last.pop_front();
                }
                self.last.push_back(line.clone());
            }
            Event::Exited(how) => self.exited = Some(how.clone()),
            Event::Gone => {
                self.exited.get_or_insert_with(|| "its keeper ended".into());
            }
            _ => {}
        }
        Some(e)
    }

    /// Wait, after its input was told or closed, for the keeper to say the program stopped:
    /// the signal that ended it and its tree's CPU time, ns; `None` when the keeper ended or
    /// went silent without saying so. The wait covers the three signals' graces and a margin.
    fn await_stopped(&mut self) -> Option<(String, u64)> {
        let until = Instant::now() + GRACE * 3 + Duration::from_secs(5);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.next(left)? {
                Event::Stopped { signal, cpu_ns } => return Some((signal, cpu_ns)),
                Event::Gone => return None,
                _ => {}
            }
        }
        None
    }

    /// Every message already there.
    fn drain(&mut self) {
        while self.next(Duration::ZERO).is_some() {}
    }

    /// A failure of the program, with its last lines.
    fn failure(&mut self, what: &str) -> DuringFailed {
        self.drain();
        let lines = if self.last.is_empty() {
            " (it printed nothing)".to_string()
        } else {
            format!(
                "; its last lines:\n  {}",
                self.last.iter().cloned().collect::<Vec<_>>().join("\n  ")
            )
        };
        DuringFailed(format!("`{}` {what}{lines}", self.text))
    }

    /// Whether the program's leader has exited by itself.
    pub fn exited(&mut self) -> Option<DuringFailed> {
        self.drain();
        let how = self.exited.clone()?;
        Some(self.failure(&format!(
            "exited ({how}) while its side was measured, so the side is void"
        )))
    }

    /// Wait until it is ready (its output matched --ready, or the system's inventory settled);
    /// returns the seconds it took and how.
    pub fn wait_ready(&mut self, stop: &Stop) -> Result<(f64, &'static str), NotReady> {
        let t0 = Instant::now();
        let mut seen = Inventory::read();
        let mut since = Instant::now();
        loop {
            self.drain();
            if let Some(how) = self.exited.clone() {
                return Err(self
                    .failure(&format!("exited ({how}) before it was ready"))
                    .into());
            }
            stop.check()?;
            if self.ready.is_some() {
                if self.matched {
                    return Ok((t0.elapsed().as_secs_f64(), "its output matched --ready"));
                }
            } else {
                let now = Inventory::read();
                if now != seen {
                    seen = now;
                    since = Instant::now();
                }
                if since.elapsed() >= SETTLE && t0.elapsed() >= SETTLE {
                    return Ok((
                        t0.elapsed().as_secs_f64(),
                        "what is attached to the system settled",
                    ));
                }
            }
            if t0.elapsed() > self.ready_timeout {
                let why = match &self.ready {
                    Some(r) => format!("printed no line matching --ready '{r}'"),
                    None => "kept changing what is attached to the system".into(),
                };
                return Err(self
                    .failure(&format!(
                        "{why} in {} s (--ready-timeout)",
                        self.ready_timeout.as_secs_f64()
                    ))
                    .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// CPU time its whole process tree has used so far, ns (`None` if the keeper is gone).
    pub fn cpu_time(&mut self) -> Option<CpuTime> {
        let c = self.control.as_mut()?;
        c.write_all(b"cpu\n").ok()?;
        let until = Instant::now() + Duration::from_secs(5);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.next(left)? {
                Event::Cpu(t) => return Some(t),
                Event::Gone => return None,
                _ => {}
            }
        }
        None
    }

    /// Stop it (SIGINT, SIGTERM, SIGKILL, a grace apart, to its group and every descendant);
    /// returns the signal that ended it and its tree's CPU time, ns.
    pub fn stop(mut self) -> Result<(String, u64), DuringFailed> {
        let Some(mut c) = self.control.take() else {
            return Err(self.failure("was already stopped"));
        };
        let _ = c.write_all(b"stop\n");
        drop(c);
        if let Some(stopped) = self.await_stopped() {
            return Ok(stopped);
        }
        Err(self.failure("did not report stopping"))
    }
}

impl Drop for Agent {
    /// Not stopped by `stop` (an error, a signal, a panic): closing the keeper's input makes it
    /// stop the program; waiting for its answer keeps the next side from starting beside it.
    fn drop(&mut self) {
        if let Some(c) = self.control.take() {
            drop(c);
            self.await_stopped();
        }
    }
}

mod keeper;
pub use keeper::keeper_main;
#[cfg(test)]
use keeper::out_line;

#[cfg(test)]
mod tests;
