//! The measuring process's own confinement, read by the process itself: seccomp filters,
//! no_new_privs, capabilities, the speculation controls, the CPUs it may use, its cgroup and
//! that cgroup's limits (v1 and v2), its scheduling policy and nice value, the namespaces it
//! does not share with the machine's init, the active LSMs and its label, and the rlimits that
//! cap a benchmark. A worker reads it for itself (so a `--under` wrapper's sandbox is seen),
//! `oscost env` for the command. Each also reads the CPU throttling of its cgroups
//! (`cpu.stat`) around a case: a quota that stopped the worker is evidence on that result.
//!
//! Every field is best-effort: what cannot be read is `None` (or absent from a map), never a
//! guess. The parsers are pure functions of the files' text, tested on samples.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::base::model::{Confinement, Throttle};

/// Namespaces whose init instance has a fixed inode (`include/linux/proc_ns.h`): a process
/// whose link shows another inode is in a namespace of its own, whatever /proc/1 is.
const FIXED_INIT_NS: [(&str, u64); 6] = [
    ("user", 0xEFFF_FFFD),
    ("pid", 0xEFFF_FFFC),
    ("ipc", 0xEFFF_FFFF),
    ("uts", 0xEFFF_FFFE),
    ("cgroup", 0xEFFF_FFFB),
    ("time", 0xEFFF_FFFA),
];

/// Namespaces whose init instance is allocated at boot: compared with pid 1's, when readable.
const PID1_NS: [&str; 2] = ["mnt", "net"];

/// The cgroup files read as limits, v2 then v1 names.
const CGROUP_LIMITS: [(&str, &str); 8] = [
    ("cpu", "cpu.max"),
    ("cpu", "cpu.weight"),
    ("cpuset", "cpuset.cpus.effective"),
    ("memory", "memory.max"),
    ("cpu", "cpu.cfs_quota_us"),
    ("cpu", "cpu.cfs_period_us"),
    ("cpu", "cpu.shares"),
    ("memory", "memory.limit_in_bytes"),
];

/// This process's confinement now.
pub fn read() -> Confinement {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mut c = from_status(&status);
    let cgroups = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let paths = parse_cgroup(&cgroups);
    c.cgroup = paths
        .get("")
        .or_else(|| paths.get("cpu"))
        .or_else(|| paths.values().next())
        .cloned();
    c.cgroup_limits = cgroup_limits(&paths);
    // SAFETY: sched_getscheduler(0) and getpriority read this process's own attributes.
    let policy = unsafe { libc::sched_getscheduler(0) };
    c.sched_policy = policy_name(policy).map(str::to_string);
    nix::errno::Errno::clear();
    // SAFETY: as above; -1 is a valid nice value, so errno tells a failure.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if nix::errno::Errno::last_raw() == 0 {
        c.nice = Some(nice);
    }
    c.namespaces = own_namespaces();
    c.lsm = read_trim("/sys/kernel/security/lsm");
    c.lsm_label = read_trim("/proc/self/attr/current")
        .map(|l| l.trim_end_matches('\0').to_string())
        .filter(|l| !l.is_empty());
    c.rlimits = rlimits();
    c
}

/// The status fields: seccomp, no_new_privs, capabilities, speculation controls, CPUs.
pub fn from_status(status: &str) -> Confinement {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == name).then(|| v.trim().to_string())
        })
    };
    Confinement {
        seccomp_mode: field("Seccomp").and_then(|v| v.parse().ok()),
        seccomp_filters: field("Seccomp_filters").and_then(|v| v.parse().ok()),
        no_new_privs: field("NoNewPrivs").map(|v| v == "1"),
        cap_eff: field("CapEff"),
        speculation_store_bypass: field("Speculation_Store_Bypass"),
        speculation_indirect_branch: field("SpeculationIndirectBranch"),
        cpus_allowed: field("Cpus_allowed_list"),
        ..Confinement::default()
    }
}

/// `/proc/self/cgroup` as controller -> path ("" for the v2 hierarchy; a v1 line names its
/// controllers, each mapped to the line's path).
pub fn parse_cgroup(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            out.insert(String::new(), path.to_string());
        }
        for c in ctrls.split(',').filter(|c| !c.is_empty()) {
            out.insert(c.to_string(), path.to_string());
        }
    }
    out
}

/// The directory of `controller`'s cgroup: v1's hierarchy when mounted, else v2's.
fn cgroup_dir(paths: &BTreeMap<String, String>, controller: &str) -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    if let Some(p) = paths.get(controller) {
        let d = root.join(controller).join(p.trim_start_matches('/'));
        if d.is_dir() {
            return Some(d);
        }
    }
    let p = paths.get("")?;
    let d = root.join(p.trim_start_matches('/'));
    d.is_dir().then_some(d)
}

fn cgroup_limits(paths: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (controller, file) in CGROUP_LIMITS {
        if let Some(v) = cgroup_dir(paths, controller).and_then(|d| read_trim(d.join(file))) {
            out.insert(file.to_string(), v);
        }
    }
    out
}

/// The CPU throttling of this process's cgroup and every ancestor: the sum over those that
/// have a `cpu.stat` (a quota on any of them stops the process).
pub fn throttle_now() -> Option<Throttle> {
    let paths = parse_cgroup(&fs::read_to_string("/proc/self/cgroup").ok()?);
    let leaf = cgroup_dir(&paths, "cpu")?;
    let root = Path::new("/sys/fs/cgroup");
    let mut total: Option<Throttle> = None;
    let mut dir = leaf.as_path();
    loop {
        if let Some(t) = fs::read_to_string(dir.join("cpu.stat"))
            .ok()
            .and_then(|s| parse_cpu_stat(&s))
        {
            let sum = total.get_or_insert_with(Throttle::default);
            sum.periods += t.periods;
            sum.throttled += t.throttled;
            sum.throttled_ns += t.throttled_ns;
        }
        match dir.parent() {
            Some(p) if p.starts_with(root) && p != root => dir = p,
            _ => break,
        }
    }
    total
}

/// `cpu.stat`: v2's `nr_periods`, `nr_throttled`, `throttled_usec`, or v1's
/// `throttled_time` (ns). `None` without the throttling lines (no CPU controller there).
pub fn parse_cpu_stat(text: &str) -> Option<Throttle> {
    let get = |k: &str| {
        text.lines().find_map(|l| {
            let (name, v) = l.split_once(' ')?;
            (name == k).then(|| v.trim().parse::<u64>().ok())?
        })
    };
    let throttled = get("nr_throttled")?;
    let throttled_ns = get("throttled_usec")
        .map(|us| us * 1000)
        .or_else(|| get("throttled_time"))?;
    Some(Throttle {
        periods: get("nr_periods").unwrap_or(0),
        throttled,
        throttled_ns,
    })
}

fn policy_name(policy: i32) -> Option<&'static str> {
    Some(match policy {
        libc::SCHED_OTHER => "SCHED_OTHER",
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_BATCH => "SCHED_BATCH",
        libc::SCHED_IDLE => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => return None,
    })
}

/// The namespaces this process does not share with the machine's init: those with a fixed
/// init inode judged exactly, mnt and net against pid 1's where /proc shows it.
fn own_namespaces() -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let ino = |p: String| fs::metadata(p).ok().map(|m| m.ino());
    let mut out = Vec::new();
    for (ns, init) in FIXED_INIT_NS {
        if ino(format!("/proc/self/ns/{ns}")).is_some_and(|i| i != init) {
            out.push(ns.to_string());
        }
    }
    for ns in PID1_NS {
        if let (Some(me), Some(one)) = (
            ino(format!("/proc/self/ns/{ns}")),
            ino(format!("/proc/1/ns/{ns}")),
        ) && me != one
        {
            out.push(ns.to_string());
        }
    }
    out
}

/// The rlimits that cap a benchmark, "soft/hard" ("unlimited" for infinity).
fn rlimits() -> BTreeMap<String, String> {
    let limits = [
        ("nofile", libc::RLIMIT_NOFILE),
        ("nproc", libc::RLIMIT_NPROC),
        ("memlock", libc::RLIMIT_MEMLOCK),
        ("stack", libc::RLIMIT_STACK),
    ];
    let word = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let mut out = BTreeMap::new();
    for (name, res) in limits {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid resource and out pointer.
        if unsafe { libc::getrlimit(res, &mut rl) } == 0 {
            out.insert(
                name.to_string(),
                format!("{}/{}", word(rl.rlim_cur), word(rl.rlim_max)),
            );
        }
    }
    out
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_and_missing_ones_stay_unknown() {
        let s = "Name:\toscost\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t3\n\
                 CapEff:\t0000000000000000\nSpeculation_Store_Bypass:\tthread force mitigated\n\
                 Cpus_allowed_list:\t0-1\n";
        let c = from_status(s);
        assert_eq!((c.seccomp_mode, c.seccomp_filters), (Some(2), Some(3)));
        assert_eq!(c.no_new_privs, Some(true));
        assert_eq!(c.cap_eff.as_deref(), Some("0000000000000000"));
        assert_eq!(
            c.speculation_store_bypass.as_deref(),
            Some("thread force mitigated")
        );
        assert_eq!(c.speculation_indirect_branch, None);
        assert_eq!(c.cpus_allowed.as_deref(), Some("0-1"));
        // An old kernel without Seccomp_filters: the count is unknown, not 0.
        assert_eq!(from_status("Seccomp:\t0\n").seccomp_filters, None);
    }

    #[test]
    fn cgroup_lines_of_v1_and_v2_map_controllers_to_paths() {
        let m = parse_cgroup("4:memory:/a/b\n3:cpu,cpuacct:/c\n0::/user.slice/x.scope\n");
        assert_eq!(m["memory"], "/a/b");
        assert_eq!(m["cpu"], "/c");
        assert_eq!(m["cpuacct"], "/c");
        assert_eq!(m[""], "/user.slice/x.scope");
        assert!(parse_cgroup("garbage").is_empty());
    }

    #[test]
    fn cpu_stat_of_v2_and_v1_gives_the_throttled_time_in_ns() {
        let v2 = "usage_usec 100\nuser_usec 50\nsystem_usec 50\nnr_periods 40\n\
                  nr_throttled 12\nthrottled_usec 3456\n";
        assert_eq!(
            parse_cpu_stat(v2),
            Some(Throttle {
                periods: 40,
                throttled: 12,
                throttled_ns: 3_456_000
            })
        );
        let v1 = "nr_periods 5\nnr_throttled 2\nthrottled_time 777\n";
        assert_eq!(parse_cpu_stat(v1).map(|t| t.throttled_ns), Some(777));
        // A cpu.stat without the CPU controller (v2 root before it is enabled): nothing.
        assert_eq!(parse_cpu_stat("usage_usec 1\nuser_usec 1\n"), None);
    }

    #[test]
    fn this_process_reads_without_failing() {
        let c = read();
        assert!(c.rlimits.contains_key("nofile"));
        assert!(c.nice.is_some());
    }
}
