//! The machine's facts, once (`facts`): `oscost env` prints them as `key: value` lines, and
//! the report page shows the same list.

use crate::base::model::Env;

/// Every fact about the machine, in order, as (name, value): the one list `oscost env`
/// prints and the report page shows (its vulnerabilities are listed after, by each view).
pub fn facts(env: &Env) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for part in [hardware, clocks, tuning, platform] {
        out.extend(part(env));
    }
    out
}

/// A fact's value, or "(unknown)" where it was not recorded.
fn o(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "(unknown)".into())
}

/// The host, the kernel and the CPUs.
fn hardware(env: &Env) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut line = |k: &str, v: String| out.push((k.to_string(), v));
    line("host", o(&env.hostname));
    line("os", env.os.clone());
    line("kernel release", o(&env.kernel_release));
    line("kernel version", o(&env.kernel_version));
    line("boot command line", o(&env.boot_cmdline));
    line("cpu model", o(&env.cpu_model));
    line(
        "cpu MHz",
        env.cpu_mhz
            .map_or("(unknown)".into(), |m| format!("{m:.0}")),
    );
    line("online cpus", o(&env.online_cpus));
    line(
        "allowed cpus",
        env.allowed_cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    line("smt sibling groups", env.smt_siblings.join(" "));
    out
}

/// The clocksource and what each clock costs to read.
fn clocks(env: &Env) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut line = |k: &str, v: String| out.push((k.to_string(), v));
    line("clocksource", o(&env.clocksource));
    line("available clocksources", o(&env.available_clocksources));
    if let Some(c) = &env.clock {
        line(
            "clock",
            format!(
                "CLOCK_MONOTONIC (vDSO): read costs {:.1} ns, smallest step {:.0} ns",
                c.cost_ns, c.resolution_ns
            ),
        );
    }
    for (name, c) in &env.clock_costs {
        line(
            &format!("  {name}"),
            format!(
                "{:.1} ns/read, smallest step {}",
                c.cost_ns,
                c.step_ns
                    .map_or("(never moved)".into(), |s| format!("{s:.0} ns"))
            ),
        );
    }
    out
}

/// Kernel settings, memory, THP and the hypervisor.
fn tuning(env: &Env) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut line = |k: &str, v: String| out.push((k.to_string(), v));
    for (k, v) in &env.settings {
        line(&format!("setting: {k}"), v.clone());
    }
    for (k, v) in &env.memory {
        line(&format!("memory: {k}"), v.clone());
    }
    line("thp enabled", o(&env.thp_enabled));
    line("thp defrag", o(&env.thp_defrag));
    line(
        "virtualization",
        format!(
            "hypervisor flag {}; DMI {} / {}",
            if env.hypervisor_flag { "set" } else { "clear" },
            o(&env.dmi_vendor),
            o(&env.dmi_product)
        ),
    );
    line("cgroup cpu.max", o(&env.cgroup_cpu_max));
    line("scaling governor", o(&env.scaling_governor));
    out
}

/// The libc, counters, microcode, idle states, the kernel's config, confinement and oscost.
fn platform(env: &Env) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut line = |k: &str, v: String| out.push((k.to_string(), v));
    line("libc", o(&env.libc_version));
    line(
        "perf_event_paranoid",
        env.perf_event_paranoid
            .map_or("(unknown)".into(), |p| p.to_string()),
    );
    line("hardware counters", o(&env.hardware_counters));
    line("microcode", o(&env.microcode));
    line(
        "cpuidle",
        format!(
            "driver {}, governor {}",
            o(&env.idle_driver),
            o(&env.idle_governor)
        ),
    );
    line(
        "kernel config",
        env.kernel_config
            .as_ref()
            .map_or("(not readable)".into(), |k| {
                let opts: Vec<String> = k.options.iter().map(|(n, v)| format!("{n}={v}")).collect();
                format!("digest {}; {}", k.digest, opts.join(" "))
            }),
    );
    match &env.confinement {
        None => line("confinement", "(not recorded)".into()),
        Some(c) => {
            for (k, v) in confinement_facts(c) {
                line(k, v);
            }
        }
    }
    line(
        "oscost",
        format!("{} ({} build)", env.oscost_version, env.build_profile),
    );
    out
}

/// The measuring process's confinement as (name, value) lines.
fn confinement_facts(c: &crate::base::model::Confinement) -> Vec<(&'static str, String)> {
    let map = |m: &std::collections::BTreeMap<String, String>| {
        if m.is_empty() {
            "(none readable)".to_string()
        } else {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    vec![
        (
            "seccomp",
            match (c.seccomp_mode, c.seccomp_filters) {
                (Some(0), _) => "none".to_string(),
                (Some(1), _) => "strict mode".to_string(),
                (Some(_), Some(n)) => format!("{n} filter{}", if n == 1 { "" } else { "s" }),
                (Some(_), None) => "filter mode".to_string(),
                (None, _) => "(unknown)".to_string(),
            },
        ),
        (
            "no_new_privs",
            c.no_new_privs.map_or("(unknown)".into(), |b| {
                if b { "set" } else { "clear" }.into()
            }),
        ),
        ("capabilities (eff)", o(&c.cap_eff)),
        (
            "task speculation",
            format!(
                "store bypass: {}; indirect branch: {}",
                o(&c.speculation_store_bypass),
                o(&c.speculation_indirect_branch)
            ),
        ),
        ("process cpus", o(&c.cpus_allowed)),
        ("cgroup", o(&c.cgroup)),
        ("cgroup limits", map(&c.cgroup_limits)),
        (
            "scheduling",
            format!(
                "{}, nice {}",
                o(&c.sched_policy),
                c.nice.map_or("(unknown)".into(), |n| n.to_string())
            ),
        ),
        (
            "namespaces",
            if c.namespaces.is_empty() {
                "the machine's (init's)".into()
            } else {
                format!("its own: {}", c.namespaces.join(", "))
            },
        ),
        ("lsm", o(&c.lsm)),
        ("lsm label", o(&c.lsm_label)),
        ("rlimits (soft/hard)", map(&c.rlimits)),
    ]
}

/// `oscost env` as text lines of `key: value`.
pub fn render(env: &Env) -> String {
    let mut out = String::new();
    for (k, v) in facts(env) {
        out.push_str(&format!("{k:<24} {v}\n"));
    }
    out.push_str("vulnerabilities:\n");
    for (k, v) in &env.vulnerabilities {
        out.push_str(&format!("  {k:<30} {v}\n"));
    }
    for n in env
        .confinement
        .as_ref()
        .map(crate::analysis::confinement::said)
        .unwrap_or_default()
    {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_has_a_line_and_unknowns_say_so() {
        let mut e = Env {
            kernel_release: Some("6.1.0".into()),
            ..Env::default()
        };
        e.vulnerabilities
            .insert("spectre_v2".into(), "Mitigation: Retpolines".into());
        let text = render(&e);
        assert!(text.contains("kernel release") && text.contains("6.1.0"));
        assert!(text.contains("vulnerabilities:"));
        assert!(text.contains("(unknown)"));
        // A run stored before confinement was recorded reads as not recorded, never as
        // unconfined.
        assert!(text.contains("confinement") && text.contains("(not recorded)"));
        let json = serde_json::to_string(&Env::default()).unwrap();
        assert!(
            !json.contains("confinement"),
            "an old run's env has no such key"
        );
        let old: Env = serde_json::from_str(&json).unwrap();
        assert_eq!(old.confinement, None);
    }
}
