//! The machine description recorded with every run and printed by `oscost env`: everything that
//! changes what a primitive costs (kernel, CPU, SMT, clocksource, mitigations, THP, the
//! hypervisor, cgroup limits, libc) so two runs can be told apart and compared fairly. Every
//! field is read best-effort: what the machine does not expose is `None`, never a guess.

use std::collections::BTreeMap;
use std::fs;

use crate::base::model::{ClockCost, ClockInfo, Env};
use crate::measuring::placement;

/// What reading each clock costs here: the vDSO clocks, gettimeofday, and clock_gettime as a
/// real system call (what the vDSO saves). A few milliseconds in all.
pub fn clock_costs() -> BTreeMap<String, ClockCost> {
    use crate::measuring::clock::{
        Monotonic, measure_reader, read_clock, read_gettimeofday, read_monotonic_syscall,
    };
    let mut out = BTreeMap::new();
    let mut add = |name: &str, read: &dyn Fn() -> u64| {
        let (cost_ns, step_ns) = measure_reader(&Monotonic, read);
        out.insert(name.to_string(), ClockCost { cost_ns, step_ns });
    };
    for (name, id) in [
        ("CLOCK_MONOTONIC", libc::CLOCK_MONOTONIC),
        ("CLOCK_MONOTONIC_RAW", libc::CLOCK_MONOTONIC_RAW),
        ("CLOCK_REALTIME", libc::CLOCK_REALTIME),
        ("CLOCK_MONOTONIC_COARSE", libc::CLOCK_MONOTONIC_COARSE),
        ("CLOCK_BOOTTIME", libc::CLOCK_BOOTTIME),
    ] {
        add(name, &|| read_clock(id));
    }
    add("gettimeofday", &read_gettimeofday);
    add("clock_gettime syscall (no vDSO)", &read_monotonic_syscall);
    out
}

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn cpuinfo_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

fn libc_version() -> Option<String> {
    // SAFETY: returns a pointer to a static NUL-terminated string in glibc.
    #[cfg(target_env = "gnu")]
    unsafe {
        let p = libc::gnu_get_libc_version();
        if p.is_null() {
            return None;
        }
        Some(format!(
            "glibc {}",
            std::ffi::CStr::from_ptr(p).to_string_lossy()
        ))
    }
    #[cfg(not(target_env = "gnu"))]
    None
}

/// Kernel options that move what a primitive costs, by prefix: preemption and the tick,
/// mitigations, page-table isolation, seccomp and audit, the debugging options that slow every
/// path, huge pages, accounting, context tracking, rseq.
pub const KERNEL_CONFIG_PREFIXES: [&str; 22] = [
    "CONFIG_PREEMPT",
    "CONFIG_HZ",
    "CONFIG_NO_HZ",
    "CONFIG_MITIGATION_",
    "CONFIG_RETPOLINE",
    "CONFIG_PAGE_TABLE_ISOLATION",
    "CONFIG_CPU_MITIGATIONS",
    "CONFIG_SPECULATION_MITIGATIONS",
    "CONFIG_SECCOMP",
    "CONFIG_AUDIT",
    "CONFIG_KASAN",
    "CONFIG_KCSAN",
    "CONFIG_LOCKDEP",
    "CONFIG_PROVE_LOCKING",
    "CONFIG_DEBUG_PAGEALLOC",
    "CONFIG_SLUB_DEBUG_ON",
    "CONFIG_TRANSPARENT_HUGEPAGE",
    "CONFIG_VIRT_CPU_ACCOUNTING",
    "CONFIG_IRQ_TIME_ACCOUNTING",
    "CONFIG_CONTEXT_TRACKING",
    "CONFIG_RSEQ",
    "CONFIG_SCHED_CORE",
];

/// The running kernel's configuration, from /proc/config.gz or /boot/config-RELEASE.
fn kernel_config(release: Option<&str>) -> Option<crate::base::model::KernelConfig> {
    Some(parse_kernel_config(
        &crate::measuring::os::kernel_config_text(release)?,
    ))
}

/// A configuration's digest and the options of `KERNEL_CONFIG_PREFIXES`.
pub fn parse_kernel_config(text: &str) -> crate::base::model::KernelConfig {
    use sha2::Digest;
    let mut set: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("CONFIG_"))
        .collect();
    set.sort_unstable();
    let mut h = sha2::Sha256::new();
    for l in &set {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    let digest = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let options = set
        .iter()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| KERNEL_CONFIG_PREFIXES.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect();
    crate::base::model::KernelConfig { digest, options }
}

fn cgroup_cpu_max() -> Option<String> {
    let cg = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    read_trim(&format!(
        "/sys/fs/cgroup{}/cpu.max",
        path.trim_end_matches('/')
    ))
    .or_else(|| read_trim("/sys/fs/cgroup/cpu.max"))
}

fn smt_siblings(cpus: &[usize]) -> Vec<String> {
    let mut groups: Vec<String> = cpus
        .iter()
        .filter_map(|c| {
            read_trim(&format!(
                "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
            ))
        })
        .collect();
    groups.sort();
    groups.dedup();
    groups
}

/// The memory machinery that can move fork and fault costs between runs, as this kernel
/// shows it (absent entries: not there, or not readable).
fn memory_state() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            m.insert(k.to_string(), v);
        }
    };
    put(
        "free page reporting",
        read_trim("/sys/module/page_reporting/parameters/page_reporting_order")
            .map(|o| format!("on, order {o} (free blocks of 2^{o} pages handed back to the host)")),
    );
    for driver in ["virtio_balloon", "virtio_mem"] {
        let bound: Vec<String> = fs::read_dir(format!("/sys/bus/virtio/drivers/{driver}"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("virtio"))
            .collect();
        put(
            &driver.replace('_', "-"),
            fs::metadata(format!("/sys/bus/virtio/drivers/{driver}"))
                .is_ok()
                .then(|| {
                    if bound.is_empty() {
                        "driver loaded, no device".to_string()
                    } else {
                        format!("device {}", bound.join(", "))
                    }
                }),
        );
    }
    put(
        "ksm",
        read_trim("/sys/kernel/mm/ksm/run").map(|r| {
            let sharing = read_trim("/sys/kernel/mm/ksm/pages_sharing").unwrap_or("?".into());
            match r.as_str() {
                "0" => "off".to_string(),
                "1" => format!("merging ({sharing} pages shared)"),
                _ => format!("run={r} ({sharing} pages shared)"),
            }
        }),
    );
    reclaim_state(&mut put);
    m
}

/// The reclaim side of `memory_state`: DAMON, zswap, swap and khugepaged.
fn reclaim_state(put: &mut impl FnMut(&str, Option<String>)) {
    let kdamonds = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with("kdamond"))
        })
        .count();
    put(
        "damon",
        fs::metadata("/sys/kernel/mm/damon")
            .is_ok()
            .then(|| format!("{kdamonds} kdamond thread(s) running")),
    );
    put(
        "zswap",
        read_trim("/sys/module/zswap/parameters/enabled")
            .map(|e| if e == "Y" { "on".into() } else { "off".into() }),
    );
    put(
        "swap",
        fs::read_to_string("/proc/swaps").ok().map(|t| {
            let kib: u64 = t
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
                .sum();
            if kib == 0 {
                "none".to_string()
            } else {
                format!("{} MiB", kib / 1024)
            }
        }),
    );
    put(
        "khugepaged",
        read_trim("/sys/kernel/mm/transparent_hugepage/khugepaged/pages_collapsed").map(|c| {
            let scans = read_trim("/sys/kernel/mm/transparent_hugepage/khugepaged/full_scans")
                .unwrap_or("?".into());
            format!("{c} pages collapsed in {scans} full scans since boot")
        }),
    );
}

/// Describe this machine. `clock` is the run's calibrated clock, when there is one.
pub fn collect(clock: Option<ClockInfo>) -> Env {
    let uts = nix::sys::utsname::uname().ok();
    let s = |o: &std::ffi::OsStr| o.to_string_lossy().into_owned();
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut vulnerabilities = BTreeMap::new();
    if let Ok(dir) = fs::read_dir("/sys/devices/system/cpu/vulnerabilities") {
        for e in dir.flatten() {
            if let Some(v) = read_trim(&e.path().to_string_lossy()) {
                vulnerabilities.insert(e.file_name().to_string_lossy().into_owned(), v);
            }
        }
    }
    let allowed = placement::allowed_cpus();
    Env {
        hostname: uts.as_ref().map(|u| s(u.nodename())),
        os: std::env::consts::OS.to_string(),
        kernel_release: uts.as_ref().map(|u| s(u.release())),
        kernel_version: uts.as_ref().map(|u| s(u.version())),
        boot_cmdline: read_trim("/proc/cmdline"),
        cpu_model: cpuinfo_field(&cpuinfo, "model name"),
        cpu_mhz: cpuinfo_field(&cpuinfo, "cpu MHz").and_then(|v| v.parse().ok()),
        online_cpus: read_trim("/sys/devices/system/cpu/online"),
        smt_siblings: smt_siblings(&allowed),
        allowed_cpus: allowed,
        clocksource: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        available_clocksources: read_trim(
            "/sys/devices/system/clocksource/clocksource0/available_clocksource",
        ),
        clock_costs: if clock.is_some() {
            clock_costs()
        } else {
            BTreeMap::new()
        },
        clock,
        vulnerabilities,
        thp_enabled: read_trim("/sys/kernel/mm/transparent_hugepage/enabled"),
        thp_defrag: read_trim("/sys/kernel/mm/transparent_hugepage/defrag"),
        hypervisor_flag: cpuinfo_field(&cpuinfo, "flags")
            .is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor")),
        dmi_vendor: read_trim("/sys/class/dmi/id/sys_vendor"),
        dmi_product: read_trim("/sys/class/dmi/id/product_name"),
        cgroup_cpu_max: cgroup_cpu_max(),
        libc_version: libc_version(),
        scaling_governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        perf_event_paranoid: read_trim("/proc/sys/kernel/perf_event_paranoid")
            .and_then(|v| v.parse().ok()),
        hardware_counters: Some(match crate::measuring::counters::hardware_status() {
            Ok(()) => "available".into(),
            Err(why) => why,
        }),
        memory: memory_state(),
        settings: crate::machine::settings::snapshot(&crate::measuring::placement::allowed_cpus()),
        microcode: cpuinfo_field(&cpuinfo, "microcode"),
        idle_driver: read_trim("/sys/devices/system/cpu/cpuidle/current_driver"),
        idle_governor: read_trim("/sys/devices/system/cpu/cpuidle/current_governor")
            .or_else(|| read_trim("/sys/devices/system/cpu/cpuidle/current_governor_ro")),
        kernel_config: kernel_config(uts.as_ref().map(|u| s(u.release())).as_deref()),
        // This process's own; a run replaces it with what its workers read of themselves.
        confinement: Some(crate::measuring::confinement::read()),
        bpf_programs: crate::tracing::observers::bpf_programs(),
        audit_rules: crate::tracing::observers::audit_rules(),
        attached: crate::tracing::observers::attached(),
        audit_enabled: crate::tracing::observers::audit_enabled(),
        bpf_stats_enabled: crate::tracing::observers::bpf_stats_enabled(),
        sched_ext: crate::tracing::observers::sched_ext(),
        oscost_version: env!("CARGO_PKG_VERSION").to_string(),
        build_profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_config_keeps_its_digest_and_the_options_that_move_costs() {
        let a = parse_kernel_config(
            "# comment\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_HZ=250\nCONFIG_EXT4_FS=y\n\
             # CONFIG_KASAN is not set\nCONFIG_SECCOMP=y\n",
        );
        assert_eq!(a.options.len(), 3, "{:?}", a.options);
        assert_eq!(a.options["CONFIG_HZ"], "250");
        assert!(!a.options.contains_key("CONFIG_EXT4_FS"));
        // The order of lines does not change the digest; an option's value does.
        let same = parse_kernel_config(
            "CONFIG_SECCOMP=y\nCONFIG_HZ=250\nCONFIG_EXT4_FS=y\nCONFIG_PREEMPT_VOLUNTARY=y\n",
        );
        assert_eq!(a.digest, same.digest);
        let other = parse_kernel_config(
            "CONFIG_SECCOMP=y\nCONFIG_HZ=250\nCONFIG_EXT4_FS=m\nCONFIG_PREEMPT_VOLUNTARY=y\n",
        );
        assert_ne!(a.digest, other.digest);
    }

    #[test]
    fn collects_what_linux_exposes() {
        let e = collect(None);
        assert_eq!(e.os, "linux");
        assert!(
            e.clock_costs.is_empty(),
            "measured only with a calibrated clock"
        );
        let costs = clock_costs();
        assert!(costs["CLOCK_MONOTONIC"].cost_ns > 0.0);
        assert!(costs.contains_key("clock_gettime syscall (no vDSO)"));
        assert!(e.kernel_release.is_some());
        assert!(!e.allowed_cpus.is_empty());
        assert!(e.memory.contains_key("swap"), "{:?}", e.memory);
    }

    #[test]
    fn cpuinfo_field_reads_the_first_match() {
        let t = "processor\t: 0\nmodel name\t: Some CPU @ 2.4GHz\nflags\t\t: fpu tsc hypervisor\n";
        assert_eq!(
            cpuinfo_field(t, "model name").as_deref(),
            Some("Some CPU @ 2.4GHz")
        );
        assert!(cpuinfo_field(t, "flags").unwrap().contains("hypervisor"));
    }
}
