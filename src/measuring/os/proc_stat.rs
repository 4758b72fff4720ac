//! A process's or thread's `/proc` stat file: the few fields oscost reads, and its unit.

/// The fields of a `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) oscost reads.
#[derive(Debug, Clone, Copy)]
pub struct ProcStat {
    /// R, S, D, Z...
    pub state: char,
    /// The parent's process id.
    pub ppid: i32,
    /// CPU time in user mode, clock ticks.
    pub utime: u64,
    /// CPU time in kernel mode, clock ticks.
    pub stime: u64,
    /// Reaped children's user time, clock ticks.
    pub cutime: u64,
    /// Reaped children's kernel time, clock ticks.
    pub cstime: u64,
}

/// A process's or thread's stat file, read after the command name (which may hold spaces and
/// parentheses): state is field 3, ppid 4, utime to cstime 14 to 17.
pub fn proc_stat(path: &str) -> Option<ProcStat> {
    let s = std::fs::read_to_string(path).ok()?;
    let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
    let n = |i: usize| f.get(i - 3).and_then(|x| x.parse::<u64>().ok());
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        utime: n(14)?,
        stime: n(15)?,
        cutime: n(16)?,
        cstime: n(17)?,
    })
}

/// Clock ticks (`/proc` stat's unit) as ns.
pub fn ticks_ns(ticks: u64) -> u64 {
    // SAFETY: sysconf with a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1_000_000_000 / hz
}
