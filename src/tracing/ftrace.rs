//! A tracing session in an ftrace instance of oscost's own, run by the helper process
//! `oscost __ftrace` (`helper_main`) and driven from the command through `TraceHelper`.
//!
//! Why ftrace and not perf samples: on these guests a perf tracepoint sample cost the traced
//! thread 0.5-1 us, the ftrace ring buffer about 0.3 us; a same-CPU round trip of 6 us with its
//! four scheduler events went from x1.41 (perf) to x1.22 (ftrace). Why a helper: tracefs is
//! not mounted on every machine and a mount namespace can only be entered by a
//! single-threaded process; the helper unshares one, uses the tracefs mounted there or mounts
//! it (such a mount dies with it), creates `instances/oscost-PID-NONCE` (a buffer of its own:
//! the host's tracing, if any, is never touched), and answers `on` (events enabled, tracing on) and `off` (tracing off, events
//! disabled, every traced CPU's `trace_pipe_raw` pages sent back). Its events are enabled only
//! between the two: an enabled tracepoint costs even while its buffer is off (an enabled
//! system call event sends every call through the slow path), so the untraced pass runs with
//! nothing hooked. When the command's end of the pipe closes (its end, an interrupt, a crash)
//! the helper disables and removes the instance; it ignores SIGINT/SIGTERM/SIGHUP so that a
//! Ctrl-C to the group cannot stop it before that. Each helper marks the instance it made with
//! a file of the same name in `/run/oscost/ftrace/` (root's), locked while it lives; an
//! instance whose marker's lock is free (its helper killed with SIGKILL) is removed by the
//! next helper, and by the next run as it starts (`reclaim`, which starts a helper only where
//! such a marker exists); an instance without a marker is never touched, whatever its name.
//!
//! The same helper serves `hook/ftrace-*` (`TraceHelper::open_hook`): started by a worker in a
//! process group of its own (a worker is stopped by signalling its group), its instance's
//! buffer overwriting as ftrace's default does, with nothing sent back.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use super::ringbuf::PageLayout;
use super::tracefs::{CountError, helper_command, list};

/// The ring buffer per traced CPU, in KiB: a 30 ms pass of 4-12 events every 6 us (about
/// 2 MiB) fits; 64 MiB in all at most, so that a many-CPU machine is not asked for gigabytes.
fn buffer_kb(cpus: usize) -> usize {
    (65536 / cpus.max(1)).clamp(2048, 8192)
}
const PREFIX: &str = "oscost-";
/// The helper's first argument when it serves a hook.
const HOOK_FLAG: &str = "--hook";
/// The helper's only argument when it removes the instances of killed helpers and exits.
const RECLAIM_FLAG: &str = "--reclaim";
/// The helper's only argument when it lists oscost's instances and exits, touching nothing.
const LIST_FLAG: &str = "--list";

/// What the helper's instance is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `explain`'s record: the first events kept, a filter on the system call events, every
    /// page sent back at `off`.
    Record,
    /// A standing tracer's cost (`hook/ftrace-*`): overwrite, no filter, nothing sent back.
    Hook,
}

/// What `off` brought back: every traced CPU's pages, and the events the kernel dropped.
#[derive(Debug, Default)]
pub struct Drained {
    /// Where the page header's fields lie.
    pub layout: PageLayout,
    /// (cpu, page size, the pages read back to back).
    pub cpus: Vec<(usize, usize, Vec<u8>)>,
    /// Events the kernel dropped because a buffer was full.
    pub lost: u64,
}

/// The command's side: the helper, its instance set up and waiting.
pub struct TraceHelper {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    /// What tracefs listed (`event`/`field` lines, as `tracefs::list`) and `missing EV` lines.
    pub text: String,
}

impl TraceHelper {
    /// Start the helper for `events` on `cpus`; Err says what is missing.
    pub fn open(cpus: &[usize], events: &[&str]) -> Result<TraceHelper, CountError> {
        Self::start(cpus, events, Mode::Record)
    }

    /// Start the helper for `events` on `cpus` as a hook (`hook/ftrace-*`): the instance's
    /// buffer overwrites its oldest events, as ftrace's default does, so every event costs
    /// what a standing tracer's does however long the measurement; no filter; `off` brings
    /// nothing back.
    pub fn open_hook(cpus: &[usize], events: &[&str]) -> Result<TraceHelper, CountError> {
        Self::start(cpus, events, Mode::Hook)
    }

    fn start(cpus: &[usize], events: &[&str], mode: Mode) -> Result<TraceHelper, CountError> {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        let mut command = helper_command(crate::base::helpers::FTRACE)?;
        if mode == Mode::Hook {
            // A process group of its own: a hook's helper is started by a worker, which is
            // stopped by signalling its group; the helper must outlive it by the moment it
            // takes to see its pipe close and remove the instance.
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            command.arg(HOOK_FLAG);
        }
        let mut child = command
            .arg(list.join(","))
            .args(events)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| CountError::Io(format!("cannot start oscost __ftrace: {e}")))?;
        let (Some(stdin), Some(out)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(CountError::Io("oscost __ftrace has no pipes".into()));
        };
        let mut s = TraceHelper {
            child,
            stdin: Some(stdin),
            out: BufReader::new(out),
            text: String::new(),
        };
        loop {
            let line = s.line()?;
            if line == "ready" {
                return Ok(s);
            }
            s.text.push_str(&line);
            s.text.push('\n');
        }
    }

    /// The helper's next line; its `error:` lines and its end are errors.
    fn line(&mut self) -> Result<String, CountError> {
        let mut l = String::new();
        let n = self
            .out
            .read_line(&mut l)
            .map_err(|e| CountError::Io(format!("reading oscost __ftrace: {e}")))?;
        let l = l.trim_end().to_string();
        if n == 0 {
            return Err(CountError::Io(
                "oscost __ftrace ended without a word".into(),
            ));
        }
        match l.strip_prefix("error: ") {
            Some(why) if why.contains("mount") || why.contains("ermission") => {
                Err(CountError::NoRights(why.to_string()))
            }
            Some(why) => Err(CountError::Io(why.to_string())),
            None => Ok(l),
        }
    }

    fn say(&mut self, word: &str) -> Result<(), CountError> {
        let w = self
            .stdin
            .as_mut()
            .ok_or(CountError::Io("session closed".into()))?;
        writeln!(w, "{word}")
            .and_then(|()| w.flush())
            .map_err(|e| CountError::Io(format!("oscost __ftrace: {e}")))
    }

    /// Events enabled and tracing on, once this returns.
    pub fn on(&mut self) -> Result<(), CountError> {
        self.say("on")?;
        match self.line()?.as_str() {
            "on" => Ok(()),
            other => Err(CountError::Io(format!("oscost __ftrace said '{other}'"))),
        }
    }

    /// Tracing off, events disabled, and what was recorded.
    pub fn off(&mut self) -> Result<Drained, CountError> {
        self.say("off")?;
        let mut d = Drained::default();
        let mut header = String::new();
        loop {
            let line = self.line()?;
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["end"] => break,
                ["header", ..] => header = w[1..].join(" ").replace('|', "\n"),
                ["lost", n] => d.lost += n.parse::<u64>().unwrap_or(0),
                ["cpu", cpu, size, len] => {
                    let parse = |s: &str| {
                        s.parse::<usize>()
                            .map_err(|e| CountError::Io(e.to_string()))
                    };
                    let mut bytes = vec![0; parse(len)?];
                    self.out
                        .read_exact(&mut bytes)
                        .map_err(|e| CountError::Io(format!("reading the trace: {e}")))?;
                    d.cpus.push((parse(cpu)?, parse(size)?, bytes));
                }
                _ => return Err(CountError::Io(format!("oscost __ftrace said '{line}'"))),
            }
        }
        d.layout = PageLayout::parse(&header);
        Ok(d)
    }
}

impl Drop for TraceHelper {
    /// Closing the pipe tells the helper to remove the instance; wait until it has.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Entry point of `oscost __ftrace CPUS EVENT...` (single-threaded; see the module's doc).
pub fn helper_main(args: &[String]) -> i32 {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let say_error = |e: &str| {
        crate::tell!("error: {}", e.replace('\n', " "));
        1
    };
    if let Some(flag) = args
        .first()
        .filter(|f| *f == RECLAIM_FLAG || *f == LIST_FLAG)
    {
        let root = match super::tracefs::mount_private() {
            Ok(r) => r,
            Err(e) => return say_error(&e),
        };
        if flag == RECLAIM_FLAG {
            for name in remove_stale(&root) {
                crate::tell!("removed {name}");
            }
        } else {
            for name in instances(&root) {
                crate::tell!("instance {name}");
            }
        }
        return 0;
    }
    let (mode, args) = match args.split_first() {
        Some((flag, rest)) if flag == HOOK_FLAG => (Mode::Hook, rest),
        _ => (Mode::Record, args),
    };
    let (Some(cpus), Some(events)) = (args.first(), args.get(1..)) else {
        return say_error("usage: oscost __ftrace [--hook] CPUS EVENT...");
    };
    let cpus: Vec<usize> = cpus.split(',').filter_map(|c| c.parse().ok()).collect();
    let root = match super::tracefs::mount_private() {
        Ok(r) => r,
        Err(e) => return say_error(&e),
    };
    let _ = remove_stale(&root);
    // Unique across PID namespaces (instances are the machine's, whoever mounts tracefs).
    let name = format!(
        "{PREFIX}{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let marker = super::marker::Marker::make(MARKERS, &name);
    let inst = root.join("instances").join(&name);
    let recorder = match create_instance(&root, &inst) {
        Ok(r) => r,
        Err(e) => return say_error(&e),
    };
    crate::tell!("recorder {}", if recorder { "on" } else { "off" });
    let code = match serve(&root, &inst, &cpus, events, mode) {
        Ok(()) => 0,
        Err(e) => say_error(&e),
    };
    remove(&inst);
    drop(marker);
    code
}

/// The markers' kind (`tracing::marker`): `/run/oscost/ftrace/`.
const MARKERS: &str = "ftrace";

/// Create the instance; whether its events will run the command-name recorder.
///
/// An instance takes its `record-cmd` option from the top level when it is made, and cannot
/// change it. With it on, every enabled event also starts ftrace's command-name recorder,
/// which hooks every context switch and wake-up (0.45 us more on a 6 us same-CPU round trip
/// here) and writes the host's shared table of command names. So when nobody else traces
/// (no tracer, no top-level event, no instance but oscost's), the top-level option is turned
/// off for the instant the instance is made and turned back on; when someone does, nothing of
/// theirs is touched and the recorder's cost is said.
fn create_instance(root: &Path, inst: &Path) -> Result<bool, String> {
    let create = || {
        std::fs::create_dir(inst)
            .map_err(|e| format!("cannot create the ftrace instance {}: {e}", inst.display()))
    };
    let option = root.join("options/record-cmd");
    let on = std::fs::read_to_string(&option).is_ok_and(|v| v.trim() == "1");
    if !on || !nobody_tracing(root) {
        create()?;
        return Ok(on);
    }
    write(&option, "0")?;
    let made = create();
    let restored = write(&option, "1");
    made?;
    restored?;
    Ok(false)
}

/// No tracer, no top-level event, and no instance but oscost's helpers'.
fn nobody_tracing(root: &Path) -> bool {
    let read = |f: &str| std::fs::read_to_string(root.join(f)).unwrap_or_default();
    let others = std::fs::read_dir(root.join("instances")).map_or(true, |d| {
        d.flatten()
            .any(|e| !e.file_name().to_string_lossy().starts_with(PREFIX))
    });
    read("current_tracer").trim() == "nop" && read("set_event").trim().is_empty() && !others
}

fn write(path: &Path, what: &str) -> Result<(), String> {
    std::fs::write(path, what).map_err(|e| format!("writing '{what}' to {}: {e}", path.display()))
}

/// Set the instance up, say ready, then answer `on` and `off` until the pipe closes.
fn serve(
    root: &Path,
    inst: &Path,
    cpus: &[usize],
    events: &[String],
    mode: Mode,
) -> Result<(), String> {
    write(&inst.join("tracing_on"), "0")?;
    // The clock CLOCK_MONOTONIC reads, so that the trace lines up with the benchmark's reads.
    write(&inst.join("trace_clock"), "mono")?;
    // A record keeps the first events when a buffer fills, and counts the rest as dropped (a
    // dropped event costs less than a written one); a hook overwrites, so every event is
    // written, as in a standing tracer's buffer.
    let overwrite = if mode == Mode::Hook { "1" } else { "0" };
    write(&inst.join("options/overwrite"), overwrite)?;
    write(&inst.join("tracing_cpumask"), &cpumask(cpus))?;
    for c in cpus {
        let kb = inst.join(format!("per_cpu/cpu{c}/buffer_size_kb"));
        write(&kb, &buffer_kb(cpus.len()).to_string())?;
    }
    let mut present = Vec::new();
    let mut text = list(root);
    for ev in events {
        let dir = inst.join("events").join(ev);
        if !dir.join("enable").is_file() {
            text.push_str(&format!("missing {ev}\n"));
            continue;
        }
        if let Some(f) = super::tracefs::filter_of(ev).filter(|_| mode == Mode::Record) {
            write(&dir.join("filter"), f)?;
        }
        present.push(dir.join("enable"));
    }
    crate::tell_part!("{text}");
    crate::tell!("ready");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    for line in std::io::stdin().lock().lines() {
        match line.map_err(|e| e.to_string())?.trim() {
            "" => continue,
            "on" => {
                for p in &present {
                    write(p, "1")?;
                }
                write(&inst.join("tracing_on"), "1")?;
                crate::tell!("on");
            }
            "off" => {
                write(&inst.join("tracing_on"), "0")?;
                write(&inst.join("events/enable"), "0")?;
                match mode {
                    Mode::Record => drain(root, inst, cpus)?,
                    Mode::Hook => crate::tell!("end"),
                }
            }
            other => return Err(format!("unknown word '{other}'")),
        }
        std::io::stdout().flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Send every traced CPU's pages, the header layout and the dropped events' count.
fn drain(root: &Path, inst: &Path, cpus: &[usize]) -> Result<(), String> {
    let header = std::fs::read_to_string(root.join("events/header_page")).unwrap_or_default();
    crate::tell!("header {}", header.trim().replace('\n', "|"));
    let mut out = std::io::stdout().lock();
    for &c in cpus {
        let dir = inst.join(format!("per_cpu/cpu{c}"));
        let (size, bytes) = read_pages(&dir.join("trace_pipe_raw"))?;
        writeln!(out, "cpu {c} {size} {}", bytes.len()).map_err(|e| e.to_string())?;
        out.write_all(&bytes).map_err(|e| e.to_string())?;
        let stats = std::fs::read_to_string(dir.join("stats")).unwrap_or_default();
        writeln!(out, "lost {}", dropped(&stats)).map_err(|e| e.to_string())?;
    }
    writeln!(out, "end").map_err(|e| e.to_string())
}

/// Every page in a `trace_pipe_raw`, read without waiting; each read hands one page.
fn read_pages(path: &Path) -> Result<(usize, Vec<u8>), String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut size, mut all) = (0, Vec::new());
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                size = size.max(n);
                all.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        }
    }
    Ok((size, all))
}

/// Events a CPU's buffer could not keep: `overrun` and `dropped events` of its `stats`.
fn dropped(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| matches!(k.trim(), "overrun" | "dropped events"))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

/// `tracing_cpumask`'s format: hexadecimal words of 32 CPUs, highest first, comma-separated.
fn cpumask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Turn an instance off and remove it (a directory tracefs removes with its buffers).
fn remove(inst: &Path) {
    let _ = std::fs::write(inst.join("tracing_on"), "0");
    let _ = std::fs::write(inst.join("events/enable"), "0");
    let _ = std::fs::remove_dir(inst);
}

/// Instances of helpers that no longer live (killed with SIGKILL before they could clean
/// up): those whose marker nobody holds locked. Only marked instances are ever removed.
/// Remove every instance whose helper was killed (its marker's lock free) and its marker;
/// the instances removed.
fn remove_stale(root: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    for stale in super::marker::stale(MARKERS, PREFIX) {
        let inst = root.join("instances").join(&stale.name);
        if inst.is_dir() {
            remove(&inst);
            removed.push(stale.name.clone());
        }
        stale.forget();
    }
    removed
}

/// The instances named as oscost names its own, whether or not their helper lives.
fn instances(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("instances"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(PREFIX))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Remove the instances of helpers that were killed (every oscost process killed at once
/// leaves its helper's instance, events enabled, until a helper removes it): called as a run
/// starts, it starts a helper only where a marker is stale. The instances removed.
pub fn reclaim() -> Vec<String> {
    // Checked without mounting anything, so a run that finds no stale marker starts no
    // helper (the locks taken here are let go at once).
    if super::marker::stale(MARKERS, PREFIX).is_empty() {
        return Vec::new();
    }
    let Ok(mut c) = helper_command(crate::base::helpers::FTRACE) else {
        return Vec::new();
    };
    let Ok(out) = c.arg(RECLAIM_FLAG).stderr(Stdio::null()).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("removed ").map(str::to_string))
        .collect()
}

/// oscost's instances on this machine (a helper lists them; nothing is removed), or why they
/// cannot be listed.
pub fn oscost_instances() -> Result<Vec<String>, CountError> {
    let out = helper_command(crate::base::helpers::FTRACE)?
        .arg(LIST_FLAG)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| CountError::Io(format!("cannot start oscost __ftrace: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if let Some(why) = text.lines().find_map(|l| l.strip_prefix("error: ")) {
        return Err(CountError::NoRights(why.to_string()));
    }
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("instance "))
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumasks_are_32_bit_hex_words_highest_first() {
        assert_eq!(cpumask(&[0, 1]), "3");
        assert_eq!(cpumask(&[1]), "2");
        assert_eq!(cpumask(&[0, 33]), "2,1");
        assert_eq!(cpumask(&[]), "0");
    }

    #[test]
    fn buffers_shrink_with_many_cpus_within_bounds() {
        assert_eq!(buffer_kb(2), 8192);
        assert_eq!(buffer_kb(16), 4096);
        assert_eq!(buffer_kb(256), 2048);
        assert_eq!(buffer_kb(0), 8192);
    }

    #[test]
    fn dropped_events_sum_overruns_and_drops() {
        let stats = "entries: 10\noverrun: 2\ncommit overrun: 0\nbytes: 400\ndropped events: 5\n";
        assert_eq!(dropped(stats), 7);
        assert_eq!(dropped(""), 0);
    }
}
