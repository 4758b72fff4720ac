//! The machine's facts, one table: each fact once, under the one label every view gives it,
//! with the roles it plays. Its `shown` value is what `oscost env` and the pages print; its
//! `compared` value is what two runs' machines are compared by (`analysis::changes`, the
//! matrix's column titles), absent where the fact was not recorded (an older oscost, a file
//! this machine lacks: not known to differ); and `keyed`, where set, is its part of the
//! environment key (`store::rows::env_key`), in table order. Adding a fact is one row of
//! `facts`. The key's parts are kept byte for byte what they were before the table existed,
//! so stored runs' keys and history's pools stay whole.

use crate::base::model::Env;

/// One fact about the machine, and what it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Its label, the same in every view ("kernel release").
    pub label: String,
    /// As `oscost env` and the pages print it; `None`: not printed there.
    pub shown: Option<String>,
    /// As two machines are compared by it; `None`: not compared (not recorded, or not a
    /// difference of machines).
    pub compared: Option<String>,
    /// Its part of the environment key, when it has one (`Some(None)`: in the key, not
    /// recorded).
    pub keyed: Option<Option<String>>,
}

impl Fact {
    /// Shown and compared alike; "(unknown)" where not recorded, and then not compared.
    fn both(label: &str, v: &Option<String>) -> Fact {
        Fact {
            label: label.into(),
            shown: Some(v.clone().unwrap_or_else(|| "(unknown)".into())),
            compared: v.clone(),
            keyed: None,
        }
    }

    /// Printed only: what describes the machine without naming a difference of machines (the
    /// CPUs this process may use, the clocks' cost to read).
    fn shown(label: &str, v: String) -> Fact {
        Fact {
            label: label.into(),
            shown: Some(v),
            compared: None,
            keyed: None,
        }
    }

    /// Compared only: a fact the views list in their own way (boot parameters one by one,
    /// vulnerabilities, kernel config options).
    fn compared(label: String, v: String) -> Fact {
        Fact {
            label,
            shown: None,
            compared: Some(v),
            keyed: None,
        }
    }

    /// Its part of the environment key.
    fn keyed(mut self, v: Option<String>) -> Fact {
        self.keyed = Some(v);
        self
    }
}

/// A fact's value, or "(unknown)".
fn o(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "(unknown)".into())
}

/// The mode of a sysfs choice line ("always [madvise] never" -> "madvise"), or the line.
fn bracketed(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or(line)
        .to_string()
}

/// Every fact of `env`, in the order `oscost env` prints them.
pub fn facts(env: &Env) -> Vec<Fact> {
    let mut f = Vec::new();
    f.extend(hardware(env));
    f.extend(clocks(env));
    f.extend(tuning(env));
    f.extend(platform(env));
    f
}

/// The host, the kernel, its boot command line and the CPUs.
fn hardware(env: &Env) -> Vec<Fact> {
    let mut f = vec![
        Fact::both("host", &env.hostname),
        Fact::shown("os", env.os.clone()),
        Fact::both("kernel release", &env.kernel_release),
        Fact::both("kernel version", &env.kernel_version),
        Fact::both("CPU model", &env.cpu_model).keyed(env.cpu_model.clone()),
    ];
    let vulnerabilities: Vec<String> = env
        .vulnerabilities
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    // One part of the key for them all; each is compared on its own.
    f.push(Fact {
        label: "vulnerabilities".into(),
        shown: None,
        compared: None,
        keyed: Some(Some(vulnerabilities.join("\n"))),
    });
    for (name, v) in &env.vulnerabilities {
        f.push(Fact::compared(format!("vulnerability {name}"), v.clone()));
    }
    f.extend([
        Fact::shown(
            "cpu MHz",
            env.cpu_mhz
                .map_or("(unknown)".into(), |m| format!("{m:.0}")),
        ),
        Fact::shown("online cpus", o(&env.online_cpus)),
        Fact::shown(
            "allowed cpus",
            env.allowed_cpus
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
        Fact::shown("smt sibling groups", env.smt_siblings.join(" ")),
    ]);
    f
}

/// The clocksource and what each clock costs to read.
fn clocks(env: &Env) -> Vec<Fact> {
    let mut f = vec![
        Fact::both("clocksource", &env.clocksource),
        Fact::shown("available clocksources", o(&env.available_clocksources)),
    ];
    if let Some(c) = &env.clock {
        f.push(Fact::shown(
            "clock",
            format!(
                "CLOCK_MONOTONIC (vDSO): read costs {:.1} ns, smallest step {:.0} ns",
                c.cost_ns, c.resolution_ns
            ),
        ));
    }
    for (name, c) in &env.clock_costs {
        f.push(Fact::shown(
            &format!("  {name}"),
            format!(
                "{:.1} ns/read, smallest step {}",
                c.cost_ns,
                c.step_ns
                    .map_or("(never moved)".into(), |s| format!("{s:.0} ns"))
            ),
        ));
    }
    f
}

/// Kernel settings, memory, THP, the boot command line, the hypervisor and the CPU quota.
fn tuning(env: &Env) -> Vec<Fact> {
    let mut f = Vec::new();
    for (k, v) in &env.settings {
        f.push(Fact {
            label: format!("setting {k}"),
            shown: Some(v.clone()),
            compared: Some(v.clone()),
            keyed: None,
        });
    }
    for (k, v) in &env.memory {
        f.push(Fact::shown(&format!("memory {k}"), v.clone()));
    }
    // Shown as the kernel writes the line, compared by the mode chosen in it.
    for (label, v) in [
        ("THP enabled", &env.thp_enabled),
        ("THP defrag", &env.thp_defrag),
    ] {
        f.push(Fact {
            label: label.into(),
            shown: Some(o(v)),
            compared: v.as_deref().map(bracketed),
            keyed: Some(v.clone()),
        });
    }
    // What is attached to the whole system: every operation may pay for it. Compared (a
    // change of cost names it), not keyed (the key's bytes stay what stored runs hashed).
    let count = |n: Option<u32>| n.map(|n| n.to_string());
    f.push(Fact::both("BPF programs", &count(env.bpf_programs)));
    f.push(Fact::both("audit rules", &count(env.audit_rules)));
    f.push(Fact::both(
        "attached to the system",
        &env.attached.as_ref().map(|a| {
            if a.is_empty() {
                "(nothing)".to_string()
            } else {
                a.join("; ")
            }
        }),
    ));
    f.push(Fact::both("audit enabled", &count(env.audit_enabled)));
    f.push(Fact::both(
        "BPF run-time stats",
        &env.bpf_stats_enabled.map(|on| {
            if on {
                "on (every BPF program's run is timed)"
            } else {
                "off"
            }
            .to_string()
        }),
    ));
    f.push(Fact::both("sched_ext", &env.sched_ext));
    // Shown whole and in the key whole; compared one parameter at a time
    // (`changes::boot_parameter_differences` says added and removed ones).
    f.push(Fact::shown("boot command line", o(&env.boot_cmdline)).keyed(env.boot_cmdline.clone()));
    if let Some(line) = &env.boot_cmdline {
        for w in line.split_whitespace() {
            let (k, v) = w.split_once('=').unwrap_or((w, "(set)"));
            f.push(Fact::compared(format!("boot parameter {k}"), v.to_string()));
        }
    }
    f.extend([
        Fact::shown(
            "virtualization",
            format!(
                "hypervisor flag {}; DMI {} / {}",
                if env.hypervisor_flag { "set" } else { "clear" },
                o(&env.dmi_vendor),
                o(&env.dmi_product)
            ),
        ),
        Fact::shown("cgroup cpu.max", o(&env.cgroup_cpu_max)),
        Fact::both("scaling governor", &env.scaling_governor),
    ]);
    f
}

/// The libc, counters, microcode, idle states, the kernel's config, confinement and oscost.
fn platform(env: &Env) -> Vec<Fact> {
    let mut f = vec![
        Fact::both("libc", &env.libc_version),
        Fact::shown(
            "perf_event_paranoid",
            env.perf_event_paranoid
                .map_or("(unknown)".into(), |p| p.to_string()),
        ),
        Fact::shown("hardware counters", o(&env.hardware_counters)),
        Fact::both("microcode", &env.microcode),
        Fact::both("cpuidle driver", &env.idle_driver),
        Fact::both("cpuidle governor", &env.idle_governor),
    ];
    match &env.kernel_config {
        None => f.push(Fact::shown("kernel config", "(not readable)".into())),
        Some(k) => {
            let opts: Vec<String> = k.options.iter().map(|(n, v)| format!("{n}={v}")).collect();
            f.push(Fact {
                label: "kernel config".into(),
                shown: Some(format!("digest {}; {}", k.digest, opts.join(" "))),
                compared: Some(k.digest.clone()),
                keyed: None,
            });
            for (name, v) in &k.options {
                f.push(Fact::compared(name.clone(), v.clone()));
            }
        }
    }
    match &env.confinement {
        None => f.push(Fact::shown("confinement", "(not recorded)".into())),
        Some(c) => {
            let first = f.len();
            for (label, v) in super::confinement::facts(c) {
                f.push(Fact::shown(label, v));
            }
            // The aspects that move costs are compared: on the shown line of the same label
            // (scheduling, namespaces, LSM label), else on a line of their own.
            for (name, v) in super::confinement::aspects(c) {
                let v = match (v.is_empty(), name) {
                    (true, "seccomp filters") => "0".to_string(),
                    (true, _) => "none".to_string(),
                    (false, _) => v,
                };
                match f[first..].iter_mut().find(|x| x.label == name) {
                    Some(x) => x.compared = Some(v),
                    None => f.push(Fact::compared(name.to_string(), v)),
                }
            }
        }
    }
    let oscost = format!("{} ({} build)", env.oscost_version, env.build_profile);
    f.push(Fact {
        label: "oscost".into(),
        shown: Some(oscost.clone()),
        compared: Some(oscost),
        keyed: None,
    });
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_has_one_label_and_a_role() {
        let mut env = crate::base::model::testdata::run().env;
        env.settings = [("halt-poll-ns".to_string(), "0".to_string())].into();
        env.thp_enabled = Some("always [madvise] never".into());
        env.boot_cmdline = Some("ro quiet mitigations=auto".into());
        let f = facts(&env);
        let mut labels: Vec<&str> = f.iter().map(|x| x.label.as_str()).collect();
        let n = labels.len();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), n, "a label twice: {labels:?}");
        assert!(
            f.iter()
                .all(|x| x.shown.is_some() || x.compared.is_some() || x.keyed.is_some())
        );
        let thp = f.iter().find(|x| x.label == "THP enabled").unwrap();
        assert_eq!(thp.shown.as_deref(), Some("always [madvise] never"));
        assert_eq!(thp.compared.as_deref(), Some("madvise"));
        let keyed: Vec<&str> = f
            .iter()
            .filter(|x| x.keyed.is_some())
            .map(|x| x.label.as_str())
            .collect();
        assert_eq!(
            keyed,
            [
                "CPU model",
                "vulnerabilities",
                "THP enabled",
                "THP defrag",
                "boot command line"
            ]
        );
        let boot = f.iter().find(|x| x.label == "boot parameter mitigations");
        assert_eq!(boot.and_then(|x| x.compared.as_deref()), Some("auto"));
    }
}
