//! What is attached to the whole system and can tax every operation oscost measures, counted
//! where the kernel lets a process count it: the BPF programs loaded (a tracer's or a security
//! agent's, `BPF_PROG_GET_NEXT_ID` walked to its end, each program's type and name asked by
//! descriptor), the audit rules in force and audit's enabled flag (over the audit netlink
//! socket with `AUDIT_LIST_RULES` and `AUDIT_GET`, as auditctl -l and -s ask), the trace events
//! enabled in every tracefs instance and the kprobe and uprobe events defined (where tracefs is
//! mounted: nothing is mounted to look), `kernel.bpf_stats_enabled` and sched_ext's state. The
//! BPF and audit parts need privileges (CAP_SYS_ADMIN, CAP_AUDIT_CONTROL); without them, or on
//! a kernel without BPF or audit, the part is `None`, never a guessed 0. Each count is a few system calls, cheap enough for
//! `watch` to reread every window and name what appeared when a cost moved.

/// How many BPF programs are loaded, or `None` where they cannot be counted here.
pub fn bpf_programs() -> Option<u32> {
    bpf_program_list().map(|m| m.len() as u32)
}

/// How many of the loaded BPF programs are oscost's own (named `bpf::PROGRAM_NAME`), or
/// `None` where they cannot be listed here. A program's release after its last descriptor
/// closes is deferred by the kernel (a link's to a work queue), so a count taken the moment
/// a worker exits can still see it: a caller that checks nothing stayed waits a little.
pub fn own_bpf_programs() -> Option<u32> {
    bpf_program_list().map(|m| m.values().filter(|w| is_own_program(w)).count() as u32)
}

/// Whether a program's "type name" (as `bpf_program_list` words it, the type one or two
/// words) is one oscost loaded: its last word is oscost's name.
fn is_own_program(words: &str) -> bool {
    words
        .rsplit_once(' ')
        .is_some_and(|(_, name)| name == super::bpf::PROGRAM_NAME)
}

/// How many audit rules are in force, or `None` where they cannot be listed here.
pub fn audit_rules() -> Option<u32> {
    super::audit::rules().ok().map(|r| r.len() as u32)
}

/// Audit's enabled flag (0 off, 1 on, 2 locked), or `None` where it cannot be asked here.
/// (What it cannot say: whether audit was ever enabled since boot, which keeps every process
/// forked since on the system call slow path even with the flag back at 0.)
pub fn audit_enabled() -> Option<u32> {
    super::audit::enabled().ok()
}

/// Whether the kernel counts every BPF program's run time (`kernel.bpf_stats_enabled`): on,
/// it adds two clock reads to every run of every program.
pub fn bpf_stats_enabled() -> Option<bool> {
    let v = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").ok()?;
    Some(v.trim() != "0")
}

/// sched_ext's state ("disabled", or "enabled" with the scheduler's name), where the kernel
/// has it: a BPF scheduler changes what every context switch costs.
pub fn sched_ext() -> Option<String> {
    let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").ok()?;
    let state = state.trim().to_string();
    Some(
        match std::fs::read_to_string("/sys/kernel/sched_ext/root/ops") {
            Ok(ops) if !ops.trim().is_empty() => format!("{state} ({})", ops.trim()),
            _ => state,
        },
    )
}

/// What is attached to the whole system, each thing once with a count where there are
/// several alike ("BPF cgroup skb sd_fw_egress (4)", "trace event raw_syscalls:sys_enter"),
/// sorted; `None` where neither BPF programs nor trace events can be read here.
pub fn attached() -> Option<Vec<String>> {
    let inv = Inventory::read();
    if inv.bpf.is_none() && inv.trace.is_none() {
        return None;
    }
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for what in inv.bpf.iter().flat_map(|b| b.values()) {
        *counts.entry(format!("BPF {what}")).or_default() += 1;
    }
    for t in inv.trace.iter().flatten() {
        let name = if t.starts_with("kprobe: ") || t.starts_with("uprobe: ") {
            t.clone()
        } else {
            format!("trace event {t}")
        };
        *counts.entry(name).or_default() += 1;
    }
    Some(
        counts
            .into_iter()
            .map(|(k, n)| if n > 1 { format!("{k} ({n})") } else { k })
            .collect(),
    )
}

/// What is attached to the whole system, as far as this process can see it: the BPF programs
/// loaded (by id, with their type and name), the audit rules in force, and the trace events
/// enabled in every tracefs instance with the kprobe and uprobe events defined. A part that
/// cannot be read here is `None`. `run --during` waits for it to settle (the program is then
/// attached) and for it to return after the program stops.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inventory {
    /// Loaded BPF programs: id, and "type name".
    pub bpf: Option<std::collections::BTreeMap<u32, String>>,
    /// Audit rules in force.
    pub audit_rules: Option<u32>,
    /// Enabled trace events ("instance: group:event" for an instance's), kprobe and uprobe
    /// events ("kprobe: ...").
    pub trace: Option<std::collections::BTreeSet<String>>,
}

impl Inventory {
    /// The system's inventory now. Reads no more than a few files and system calls; mounts
    /// nothing (a tracefs that is not mounted has nothing enabled through it).
    pub fn read() -> Inventory {
        Inventory {
            bpf: bpf_program_list(),
            audit_rules: audit_rules(),
            trace: crate::tracing::tracefs::mount_point().map(|root| trace_events(&root)),
        }
    }

    /// What differs from `before` to `self`, in words ("BPF programs 2 -> 3: + tracepoint
    /// sys_enter"); empty when nothing does.
    pub fn differences(&self, before: &Inventory) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(b), Some(a)) = (&before.bpf, &self.bpf)
            && b != a
        {
            let added: Vec<&str> = a
                .iter()
                .filter(|(id, _)| !b.contains_key(id))
                .map(|(_, what)| what.as_str())
                .collect();
            let gone = b.keys().filter(|id| !a.contains_key(id)).count();
            let mut words = format!("BPF programs {} -> {}", b.len(), a.len());
            if !added.is_empty() {
                words.push_str(&format!(": + {}", added.join(", ")));
            }
            if gone > 0 && !added.is_empty() {
                words.push_str(&format!("; {gone} unloaded"));
            }
            out.push(words);
        }
        if let (Some(b), Some(a)) = (before.audit_rules, self.audit_rules)
            && b != a
        {
            out.push(format!("audit rules {b} -> {a}"));
        }
        if let (Some(b), Some(a)) = (&before.trace, &self.trace)
            && b != a
        {
            let added: Vec<&str> = a.difference(b).map(|s| s.as_str()).collect();
            let gone: Vec<&str> = b.difference(a).map(|s| s.as_str()).collect();
            let mut parts = Vec::new();
            if !added.is_empty() {
                parts.push(format!("+ {}", added.join(", ")));
            }
            if !gone.is_empty() {
                parts.push(format!("- {}", gone.join(", ")));
            }
            out.push(format!("trace events {}", parts.join("; ")));
        }
        out
    }
}

/// A BPF program type's name (`enum bpf_prog_type`), for the kinds tracers and agents load.
fn prog_type_name(t: u32) -> String {
    match t {
        1 => "socket filter".into(),
        2 => "kprobe".into(),
        3 => "sched_cls".into(),
        5 => "tracepoint".into(),
        6 => "xdp".into(),
        7 => "perf event".into(),
        8 => "cgroup skb".into(),
        9 => "cgroup sock".into(),
        15 => "cgroup device".into(),
        17 => "raw tracepoint".into(),
        26 => "tracing".into(),
        28 => "ext".into(),
        29 => "lsm".into(),
        31 => "syscall".into(),
        other => format!("type {other}"),
    }
}

/// The loaded BPF programs, id to "type name", or `None` where they cannot be listed here.
/// A program that goes away between its id and its descriptor is left out.
fn bpf_program_list() -> Option<std::collections::BTreeMap<u32, String>> {
    const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    #[repr(C)]
    #[derive(Default)]
    struct GetId {
        start_id: u32,
        next_id: u32,
        open_flags: u32,
    }
    let bpf = |cmd: libc::c_long, attr: *mut libc::c_void, size: usize| {
        // SAFETY: `attr` points at a live, initialised struct of `size` bytes.
        unsafe { libc::syscall(libc::SYS_bpf, cmd, attr, size as libc::c_uint) }
    };
    let mut out = std::collections::BTreeMap::new();
    let mut attr = GetId::default();
    loop {
        let r = bpf(
            BPF_PROG_GET_NEXT_ID,
            (&raw mut attr).cast(),
            std::mem::size_of::<GetId>(),
        );
        if r != 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return (e == Some(libc::ENOENT)).then_some(out);
        }
        let id = attr.next_id;
        attr.start_id = id;
        let mut by_id = GetId {
            start_id: id,
            ..GetId::default()
        };
        let fd = bpf(
            BPF_PROG_GET_FD_BY_ID,
            (&raw mut by_id).cast(),
            std::mem::size_of::<GetId>(),
        );
        if fd < 0 {
            continue;
        }
        // SAFETY: a descriptor the kernel just gave us, owned here.
        let fd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
        let what = program_words(&fd, |attr, size| bpf(BPF_OBJ_GET_INFO_BY_FD, attr, size));
        out.insert(id, what);
        if out.len() > 100_000 {
            return None;
        }
    }
}

/// A loaded BPF program's type and name, as `bpf_program_list` lists it ("program" where the
/// kernel gives no info), asked with `info_by_fd` (BPF_OBJ_GET_INFO_BY_FD).
fn program_words(
    fd: &std::os::fd::OwnedFd,
    info_by_fd: impl Fn(*mut libc::c_void, usize) -> libc::c_long,
) -> String {
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    // struct bpf_prog_info up to its name: type at 0, name[16] at 64.
    let mut info = [0u8; 80];
    let mut ia = InfoAttr {
        bpf_fd: std::os::fd::AsRawFd::as_raw_fd(fd) as u32,
        info_len: info.len() as u32,
        info: info.as_mut_ptr() as u64,
    };
    if info_by_fd((&raw mut ia).cast(), std::mem::size_of::<InfoAttr>()) == 0 {
        let t = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
        let name: String = info[64..80]
            .iter()
            .take_while(|&&b| b != 0)
            .map(|&b| b as char)
            .collect();
        format!(
            "{} {}",
            prog_type_name(t),
            crate::base::text::printable(&name)
        )
        .trim_end()
        .to_string()
    } else {
        "program".to_string()
    }
}

/// The trace events enabled in `root` and in each of its instances, and the kprobe and
/// uprobe events defined.
fn trace_events(root: &std::path::Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let lines = |p: std::path::PathBuf| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    out.extend(lines(root.join("set_event")));
    for (file, kind) in [("kprobe_events", "kprobe"), ("uprobe_events", "uprobe")] {
        out.extend(
            lines(root.join(file))
                .into_iter()
                .map(|l| format!("{kind}: {l}")),
        );
    }
    if let Ok(dir) = std::fs::read_dir(root.join("instances")) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            out.extend(
                lines(e.path().join("set_event"))
                    .into_iter()
                    .map(|l| format!("{name}: {l}")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_are_numbers_or_none_and_stable_when_nothing_changes() {
        // Whatever the rights, two counts in a row agree (nothing here loads or adds any).
        let (a, b) = (super::bpf_programs(), super::bpf_programs());
        if let (Some(x), Some(y)) = (a, b) {
            assert!(x.abs_diff(y) <= 2, "{x} {y}");
        }
        let (a, b) = (super::audit_rules(), super::audit_rules());
        assert_eq!(a, b);
    }

    #[test]
    fn oscost_s_own_programs_are_told_by_their_whole_name() {
        assert!(super::is_own_program("raw_tracepoint oscost_hook"));
        // Some type names are two words (`prog_type_name`): the name is the last word.
        assert!(super::is_own_program("raw tracepoint oscost_hook"));
        assert!(super::is_own_program("kprobe oscost_hook"));
        assert!(!super::is_own_program("tracing oscost_hook2"));
        assert!(!super::is_own_program("oscost_hook"));
        assert!(!super::is_own_program("cgroup_skb sd_fw_egress"));
        assert!(!super::is_own_program("program"));
    }

    #[test]
    fn an_inventory_says_what_was_added_and_what_went() {
        use super::Inventory;
        let before = Inventory {
            bpf: Some([(1, "tracing a".to_string())].into()),
            audit_rules: Some(0),
            trace: Some(["sched:sched_switch".to_string()].into()),
        };
        assert!(before.differences(&before).is_empty());
        let after = Inventory {
            bpf: Some([(1, "tracing a".into()), (7, "tracepoint sys_enter".into())].into()),
            audit_rules: Some(1),
            trace: Some(["kprobe: p:x do_sys_open".to_string()].into()),
        };
        assert_eq!(
            after.differences(&before),
            [
                "BPF programs 1 -> 2: + tracepoint sys_enter",
                "audit rules 0 -> 1",
                "trace events + kprobe: p:x do_sys_open; - sched:sched_switch"
            ]
        );
        // A part one side cannot read is no difference.
        let blind = Inventory {
            bpf: None,
            ..before.clone()
        };
        assert!(blind.differences(&after).len() == 2);
    }
}
