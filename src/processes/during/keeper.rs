//! The keeper, `oscost __during -- PROGRAM...`: starts the program of a side in a process group
//! of its own (`start_program`), serves oscost's requests and passes the program's output on
//! until told to stop, its input closes or SIGTERM comes (`serve`), then stops the program's
//! whole tree as a user would (`stop_tree`). The protocol is in the parent module's comment.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{CpuTime, GRACE, LINE_BYTES};
use crate::base::helpers::KEEPER as DURING_KEEPER_ARG;

/// Set by SIGTERM: the keeper stops its program and exits.
static TERMINATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERMINATED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Entry point of `oscost __during -- PROGRAM...`. Returns the exit code.
pub fn keeper_main(args: &[String]) -> i32 {
    let argv = match args {
        [dash, rest @ ..] if dash == "--" && !rest.is_empty() => rest,
        _ => {
            crate::say!("oscost: {DURING_KEEPER_ARG} is started by oscost itself (run --during)");
            return 2;
        }
    };
    // SAFETY: prctl and signal with integer arguments and a handler that only stores a flag.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut out = std::io::stdout();
    let mut say = |line: &str| {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let mut by_cpu = ByCpu::new();
    let (leader, output) = match start_program(argv) {
        Ok(started) => started,
        Err(line) => {
            say(&line);
            return 1;
        }
    };
    say("started");
    serve(leader, output, &mut by_cpu, &mut say);
    let signal = stop_tree(leader);
    say(&format!("stopped {signal} {}", tree_cpu_ns()));
    0
}

/// Start the keeper's program in a process group of its own, its output to a pipe the keeper
/// reads, dying with the keeper. Ok: the group leader's pid and the pipe's read end. Err: the
/// line that tells oscost why it did not start ("exited ...").
fn start_program(argv: &[String]) -> Result<(i32, std::fs::File), String> {
    let Ok((read_out, write_out)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        return Err("exited cannot make a pipe".into());
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).process_group(0);
    match (write_out.try_clone(), write_out.try_clone()) {
        (Ok(a), Ok(b)) => {
            cmd.stdout(Stdio::from(a)).stderr(Stdio::from(b));
        }
        _ => return Err("exited cannot pass its output on".into()),
    }
    let keeper = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls on integers: the signals the
    // keeper ignores are the program's to handle again, and it dies with a killed keeper.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            crate::measuring::os::die_with_parent(keeper, libc::SIGKILL);
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Err(format!("exited {e}")),
    };
    drop(cmd);
    drop(write_out);
    let leader = child.id() as i32;
    drop(child);
    Ok((leader, std::fs::File::from(read_out)))
}

/// The keeper's loop until oscost asks it to stop, closes its input or sends SIGTERM: reaps
/// the program's tree (saying when the leader exited), passes the program's output on as
/// lines, and answers "cpu" with the tree's CPU time.
fn serve(leader: i32, mut output: std::fs::File, by_cpu: &mut ByCpu, say: &mut dyn FnMut(&str)) {
    let mut stdin = std::io::stdin();
    let mut pending: Vec<u8> = Vec::new();
    let mut output_open = true;
    let mut control = Vec::new();
    let mut leader_done = false;
    'serve: loop {
        if TERMINATED.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        by_cpu.look(false);
        for (pid, how) in reap_all() {
            if pid == leader && !leader_done {
                leader_done = true;
                say(&format!("exited {how}"));
            }
        }
        let mut fds = vec![nix::poll::PollFd::new(
            stdin.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if output_open {
            fds.push(nix::poll::PollFd::new(
                output.as_fd(),
                nix::poll::PollFlags::POLLIN,
            ));
        }
        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16)).is_err() {
            continue;
        }
        let ready = |f: &nix::poll::PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let (control_ready, output_ready) = (ready(&fds[0]), fds.get(1).is_some_and(ready));
        drop(fds);
        if output_ready {
            let mut buf = [0u8; 8192];
            match output.read(&mut buf) {
                Ok(0) | Err(_) => output_open = false,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(i) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=i).collect();
                        say(&out_line(&line[..line.len() - 1]));
                    }
                    if pending.len() > LINE_BYTES {
                        say(&out_line(&pending));
                        pending.clear();
                    }
                }
            }
        }
        if control_ready {
            let mut buf = [0u8; 256];
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break 'serve,
                Ok(n) => control.extend_from_slice(&buf[..n]),
            }
            while let Some(i) = control.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = control.drain(..=i).collect();
                match &line[..line.len() - 1] {
                    b"cpu" => {
                        by_cpu.look(true);
                        let t = CpuTime {
                            total_ns: tree_cpu_ns(),
                            by_cpu_ns: by_cpu.counted(),
                        };
                        say(&format!("cpu {}", t.words()));
                    }
                    b"stop" => break 'serve,
                    _ => {}
                }
            }
        }
    }
}

/// One line of the program's output as the keeper passes it on: cut to `LINE_BYTES`, lossy
/// UTF-8, no control characters that would break the line protocol.
pub(super) fn out_line(raw: &[u8]) -> String {
    let cut = &raw[..raw.len().min(LINE_BYTES)];
    let text: String = String::from_utf8_lossy(cut)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    format!("out {text}")
}

/// Reap every child that has ended (the program, and orphans reparented to the keeper);
/// returns each one's pid and how it ended.
fn reap_all() -> Vec<(i32, String)> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let mut ended = Vec::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                ended.push((pid.as_raw(), format!("with status {code}")))
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => {
                ended.push((pid.as_raw(), format!("killed by {}", sig.as_str())))
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return ended,
            Ok(_) => {}
        }
    }
}

/// Every live (not zombie) descendant of this process, found by walking /proc by parent: a
/// daemon that left the program's group or session is still the keeper's (its subreaper).
/// (A walk is about half a millisecond of CPU with 70 processes.)
fn descendants() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some((state, ppid)) = stat_of(pid).map(|s| (s.state, s.ppid))
                && state != 'Z'
            {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

fn stat_of(pid: i32) -> Option<crate::measuring::os::ProcStat> {
    crate::measuring::os::proc_stat(&format!("/proc/{pid}/stat"))
}

/// CPU time of the program's whole tree, ns: what the keeper reaped (its children's rusage,
/// which holds every orphan it reaped too) and what still runs.
fn tree_cpu_ns() -> u64 {
    let reaped = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map(|r| {
            let t = |v: nix::sys::time::TimeVal| {
                v.tv_sec() as u64 * 1_000_000_000 + v.tv_usec() as u64 * 1000
            };
            t(r.user_time()) + t(r.system_time())
        })
        .unwrap_or(0);
    let live: u64 = descendants()
        .into_iter()
        .filter_map(stat_of)
        .map(|s| crate::measuring::os::ticks_ns(s.utime + s.stime + s.cutime + s.cstime))
        .sum();
    reaped + live
}

/// The program tree's CPU time on each CPU, sampled: at most every `BY_CPU_EVERY` (and at
/// each `cpu` question) every thread of every descendant is read (`schedstat`: its time on a
/// CPU; `stat`: the CPU it last ran on), and what it ran since the last look is counted on
/// that CPU. A thread that moved between two looks has that stretch counted on the CPU it was
/// last on; a thread that ended between two looks loses its last stretch (the total, from
/// rusage, keeps it). Not perf counters: an inherited task counter turns on the scheduler's
/// perf hooks for every context switch of the machine (an A/A `ab` with `sleep infinity`
/// called a pipe round trip 1.8% slower with them), which is the kind of cost oscost measures.
struct ByCpu {
    /// Each thread's time on a CPU at the last look, by (pid, tid).
    seen: std::collections::HashMap<(i32, i32), u64>,
    /// Time counted on each CPU, ns.
    counted: std::collections::BTreeMap<usize, u64>,
    last_look: Option<Instant>,
}

/// How often the keeper looks at its program's threads for `ByCpu`.
/// Every quarter second: a walk of /proc each time is about 0.2% of a CPU.
const BY_CPU_EVERY: Duration = Duration::from_millis(250);

impl ByCpu {
    fn new() -> ByCpu {
        let online = crate::measuring::placement::parse_cpu_list(
            &std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default(),
        );
        ByCpu {
            seen: Default::default(),
            counted: online.into_iter().map(|c| (c, 0)).collect(),
            last_look: None,
        }
    }

    /// Look, unless the last look was less than `BY_CPU_EVERY` ago and `now` is false.
    fn look(&mut self, now: bool) {
        if !now && self.last_look.is_some_and(|t| t.elapsed() < BY_CPU_EVERY) {
            return;
        }
        self.last_look = Some(Instant::now());
        for pid in descendants() {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                let dir = t.path();
                let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
                let (Some(run), Some(cpu)) = (
                    read("schedstat")
                        .and_then(|s| crate::measuring::noise::parse_schedstat(&s))
                        .map(|s| s.run_ns),
                    read("stat")
                        .and_then(|s| crate::measuring::noise::parse_task_stat(&s))
                        .map(|s| s.cpu),
                ) else {
                    continue;
                };
                let before = self.seen.insert((pid, tid), run).unwrap_or(0);
                *self.counted.entry(cpu).or_default() += run.saturating_sub(before);
            }
        }
    }

    /// (CPU, ns) counted so far, every online CPU.
    fn counted(&self) -> Vec<(usize, u64)> {
        self.counted.iter().map(|(&c, &ns)| (c, ns)).collect()
    }
}

/// Stop the program's group and every descendant: SIGINT, then SIGTERM, then SIGKILL, each
/// given `GRACE`; returns the signal after which nothing was left ("none": nothing was).
fn stop_tree(leader: i32) -> &'static str {
    reap_all();
    if descendants().is_empty() {
        return "none";
    }
    for (sig, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGKILL, "SIGKILL"),
    ] {
        // SAFETY: kill with integer arguments, to the program's group and our descendants.
        unsafe { libc::kill(-leader, sig) };
        for p in descendants() {
            // SAFETY: as above.
            unsafe { libc::kill(p, sig) };
        }
        let until = Instant::now() + GRACE;
        while Instant::now() < until {
            reap_all();
            if descendants().is_empty() {
                return name;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    reap_all();
    "SIGKILL"
}
