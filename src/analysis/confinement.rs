//! What the measuring process's confinement means for its numbers (`model::Confinement`, read
//! by `measuring::confinement`): the lines said at the top of a run where it moves what was
//! measured (seccomp filters, a CPU quota, a lowered priority, a container's namespaces, an
//! LSM label), the part of it that makes a run an environment of its own (`signature`, in
//! `store::rows::env_key`), and its aspects as named in "what differs" between two runs.

use crate::base::model::Confinement;

/// The lines a run says at its top: what confined its workers and how that enters the numbers.
/// Nothing for a process that nothing confines.
pub fn said(c: &Confinement) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = filters(c) {
        out.push(format!(
            "measured under {n} seccomp filter{}: every system call includes {} cost; compare \
             with a run outside the sandbox",
            plural(n),
            if n == 1 { "its" } else { "their" }
        ));
    }
    if let Some(q) = cpu_quota(c) {
        out.push(format!(
            "the worker's cgroup has a CPU quota of {q}: a worker that uses it up is stopped \
             until the next period (results it stopped are flagged)"
        ));
    }
    match (c.sched_policy.as_deref(), c.nice) {
        (Some(p @ ("SCHED_IDLE" | "SCHED_BATCH")), _) => out.push(format!(
            "measured under {p}: other work on the CPU runs first and a wake-up is not \
             preferred"
        )),
        (Some(p @ ("SCHED_FIFO" | "SCHED_RR" | "SCHED_DEADLINE")), _) => out.push(format!(
            "measured under {p}: a real-time task, which ordinary work on its CPU cannot preempt"
        )),
        (_, Some(n)) if n > 0 => out.push(format!(
            "measured at nice {n}: other work on the CPU takes it first"
        )),
        _ => {}
    }
    if !c.namespaces.is_empty() {
        out.push(format!(
            "measured in namespaces of its own ({}): a container",
            c.namespaces.join(", ")
        ));
    }
    if let Some(l) = label(c) {
        out.push(format!(
            "measured under the LSM label {l}: the security module's hooks run on the calls it \
             checks"
        ));
    }
    out
}

/// What sets a run under this confinement apart for the run-to-run spread: the seccomp
/// filters, a CPU quota, the policy and a nice value other than 0, the namespaces, the LSM
/// label. `None` when nothing confines the process, so a plain run's environment key stays
/// what it was before confinement was recorded. The cgroup's path, the rlimits and the
/// capabilities are left out: they differ between shells and containers of one machine
/// without moving a primitive's cost.
pub fn signature(c: &Confinement) -> Option<String> {
    let parts: Vec<String> = aspects(c)
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// The confinement's aspects as named in differences, each (name, value; empty when it does
/// not confine): "seccomp filters", "CPU quota", "scheduling", "namespaces", "LSM label".
pub fn aspects(c: &Confinement) -> Vec<(&'static str, String)> {
    let scheduling = match (c.sched_policy.as_deref(), c.nice) {
        (Some("SCHED_OTHER") | None, Some(0) | None) => String::new(),
        (Some("SCHED_OTHER") | None, Some(n)) => format!("nice {n}"),
        (Some(p), Some(n)) if n != 0 => format!("{p} nice {n}"),
        (Some(p), _) => p.to_string(),
    };
    vec![
        (
            "seccomp filters",
            filters(c).map(|n| n.to_string()).unwrap_or_default(),
        ),
        ("CPU quota", cpu_quota(c).unwrap_or_default()),
        ("scheduling", scheduling),
        ("namespaces", c.namespaces.join(", ")),
        ("LSM label", label(c).unwrap_or_default()),
    ]
}

/// The measuring process's confinement as (name, value) lines, as `oscost env` and the pages
/// print them (`analysis::facts`).
pub fn facts(c: &Confinement) -> Vec<(&'static str, String)> {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unknown)".into());
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
        ("LSM", o(&c.lsm)),
        ("LSM label", o(&c.lsm_label)),
        ("rlimits (soft/hard)", map(&c.rlimits)),
    ]
}

/// What differs between two confinements, as "seccomp filters 0 -> 1".
pub fn differences(a: &Confinement, b: &Confinement) -> Vec<String> {
    let word = |v: &str| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.to_string()
        }
    };
    aspects(a)
        .into_iter()
        .zip(aspects(b))
        .filter(|((_, x), (_, y))| x != y)
        .map(|((name, x), (_, y))| {
            if name == "seccomp filters" {
                // A count reads better as a number both sides.
                let n = |v: &str| {
                    if v.is_empty() {
                        "0".into()
                    } else {
                        v.to_string()
                    }
                };
                format!("{name} {} -> {}", n(&x), n(&y))
            } else {
                format!("{name} {} -> {}", word(&x), word(&y))
            }
        })
        .collect()
}

/// The number of seccomp filters, when the process runs under any.
fn filters(c: &Confinement) -> Option<u32> {
    match (c.seccomp_mode, c.seccomp_filters) {
        (_, Some(n)) if n > 0 => Some(n),
        // A kernel without the count: one at least.
        (Some(2), None) => Some(1),
        _ => None,
    }
}

/// The CPU quota in words ("50000 of every 100000 us, 0.5 CPUs"), when there is one.
fn cpu_quota(c: &Confinement) -> Option<String> {
    let l = &c.cgroup_limits;
    let (quota, period) = match l.get("cpu.max") {
        Some(v) => {
            let mut it = v.split_whitespace();
            (
                it.next()?.to_string(),
                it.next().unwrap_or("100000").to_string(),
            )
        }
        None => (
            l.get("cpu.cfs_quota_us")?.clone(),
            l.get("cpu.cfs_period_us")
                .cloned()
                .unwrap_or_else(|| "100000".into()),
        ),
    };
    let (q, p): (f64, f64) = (quota.parse().ok()?, period.parse().ok()?);
    (q > 0.0 && p > 0.0).then(|| format!("{quota} of every {period} us, {:.2} CPUs", q / p))
}

/// The LSM label, unless it confines nothing ("unconfined").
fn label(c: &Confinement) -> Option<String> {
    let l = c.lsm_label.as_deref()?;
    let confines =
        !(l == "unconfined" || l.starts_with("unconfined ") || l.contains(":unconfined_t:"));
    confines.then(|| l.to_string())
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Confinement {
        Confinement {
            seccomp_mode: Some(0),
            seccomp_filters: Some(0),
            sched_policy: Some("SCHED_OTHER".into()),
            nice: Some(0),
            lsm_label: Some("unconfined".into()),
            cgroup_limits: [("cpu.max".to_string(), "max 100000".to_string())].into(),
            ..Confinement::default()
        }
    }

    #[test]
    fn nothing_confining_says_nothing_and_keeps_the_environment_key() {
        assert!(said(&plain()).is_empty());
        assert_eq!(signature(&plain()), None);
        // v1 without a quota reads -1.
        let mut v1 = plain();
        v1.cgroup_limits = [("cpu.cfs_quota_us".to_string(), "-1".to_string())].into();
        assert_eq!(signature(&v1), None);
        assert!(differences(&plain(), &v1).is_empty());
    }

    #[test]
    fn a_seccomp_filter_is_said_at_the_top_set_apart_and_named_as_a_difference() {
        let mut s = plain();
        s.seccomp_mode = Some(2);
        s.seccomp_filters = Some(1);
        let lines = said(&s);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("measured under 1 seccomp filter:"),
            "{lines:?}"
        );
        assert!(lines[0].contains("compare with a run outside the sandbox"));
        assert_eq!(signature(&s).as_deref(), Some("seccomp filters=1"));
        assert_eq!(differences(&plain(), &s), vec!["seccomp filters 0 -> 1"]);
    }

    #[test]
    fn a_quota_a_nice_value_namespaces_and_a_label_are_each_said_and_named() {
        let mut c = plain();
        c.cgroup_limits = [("cpu.max".to_string(), "20000 100000".to_string())].into();
        c.nice = Some(19);
        c.namespaces = vec!["user".into(), "pid".into()];
        c.lsm_label = Some("docker-default (enforce)".into());
        let lines = said(&c);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("20000 of every 100000 us, 0.20 CPUs"));
        assert!(lines[1].contains("nice 19"));
        assert!(lines[2].contains("(user, pid)"));
        assert!(lines[3].contains("docker-default (enforce)"));
        let d = differences(&plain(), &c);
        assert_eq!(
            d,
            vec![
                "CPU quota none -> 20000 of every 100000 us, 0.20 CPUs",
                "scheduling none -> nice 19",
                "namespaces none -> user, pid",
                "LSM label none -> docker-default (enforce)",
            ]
        );
        let v1 = Confinement {
            cgroup_limits: [
                ("cpu.cfs_quota_us".to_string(), "50000".to_string()),
                ("cpu.cfs_period_us".to_string(), "100000".to_string()),
            ]
            .into(),
            ..plain()
        };
        assert_eq!(aspects(&v1)[1].1, "50000 of every 100000 us, 0.50 CPUs");
    }
}
