//! hook/: the hook ladder. What one program attached at each kind of hook adds to a system
//! call, measured on this machine: `getppid` with nothing attached (`hook/none`), then with a
//! program at a raw tracepoint on `sys_enter`, the tracepoint `raw_syscalls/sys_enter`, the
//! tracepoint `syscalls/sys_enter_getppid`, a kprobe and a kretprobe on the call's kernel
//! function, fentry and fexit on it (a BPF trampoline), a uprobe on glibc's getppid, each with
//! three bodies (`/empty`: return 0; `/counter`: a per-CPU counter, as
//! bpftrace's `count()`; `/ringbuf`: a 64-byte ring-buffer event, as an agent's event stream),
//! with a system-wide perf counter on `raw_syscalls:sys_enter` and no program (what `perf
//! stat -a -e` holds), with an audit rule checked at getppid's exit that matches nothing (where
//! audit is already on: oscost never turns it on), and with the ftrace event `raw_syscalls/sys_enter` enabled in a tracefs
//! instance of oscost's own, its ring buffer written (what a standing ftrace user holds); and a
//! pipe round trip between two processes on one CPU unhooked (`hook/pipe-none`), with a
//! program on the raw tracepoint `sched_switch` and with the ftrace event `sched_switch`, two
//! switches a round trip; and that round trip with a BPF LSM program on `file_permission`,
//! which every read and write checks (four a round trip), where the BPF LSM is active. A BPF
//! hook is attached by the worker before it measures and detached when it exits
//! (`tracing::bpf`); an ftrace event is enabled by a helper the worker starts, which removes
//! its instance when the worker's pipe to it closes (`tracing::ftrace`). Every result of the
//! family is measured in the same rounds as `hook/none`, so each one's addition
//! (`analysis::hooks`) is a difference of repetitions run side by side. A kind the kernel refuses is skipped with the kernel's reason.

use std::hint::black_box;

use crate::bench::entry::{Cases, Param, Variant};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::tracing::bpf::{AttachPoint, Hook, ProgramBody, getppid_function};
use crate::tracing::ftrace::TraceHelper;

/// The three bodies, as variants (param `body`: 0 empty, 1 counter, 2 ring buffer).
static BODIES: &[Variant] = &[
    Variant {
        suffix: "/empty",
        params: &[("body", Param::Int(0))],
    },
    Variant {
        suffix: "/counter",
        params: &[("body", Param::Int(1))],
    },
    Variant {
        suffix: "/ringbuf",
        params: &[("body", Param::Int(2))],
    },
];

catalogue! {
    family { default: false };
    "hook/none" => none:
        "getppid() with no hook attached: the base of every hook/ addition";
    "hook/raw-tp" => raw_tp { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on the raw tracepoint sys_enter (every system call)";
    "hook/tp-sys-enter" => tp_sys_enter { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on the tracepoint raw_syscalls/sys_enter (every system call)";
    "hook/tp-getppid" => tp_getppid { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on the tracepoint syscalls/sys_enter_getppid";
    "hook/kprobe" => kprobe { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on a kprobe at the call's kernel function";
    "hook/kretprobe" => kretprobe { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on a kretprobe at the call's kernel function";
    "hook/fentry" => fentry { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on fentry of the call's kernel function (a trampoline)";
    "hook/fexit" => fexit { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on fexit of the call's kernel function";
    "hook/uprobe" => uprobe { cases: Cases::Fixed(BODIES) }:
        "getppid() with a BPF program on a uprobe at glibc's getppid (a trap in user space)";
    "hook/perf-counter" => perf_counter:
        "getppid() with a system-wide perf counter on raw_syscalls:sys_enter (perf stat -a -e), no program";
    "hook/audit-rule" => audit_rule:
        "getppid() with an audit rule that is checked at its exit and matches nothing (-a always,exit -S getppid -F uid of no process), audit already on";
    "hook/ftrace-sys-enter" => ftrace_sys_enter:
        "getppid() with the ftrace event raw_syscalls/sys_enter enabled on every CPU in a tracefs instance of oscost's own, written to its ring buffer";
    "hook/pipe-none" => pipe_none { preempts: true }:
        "a 1-byte pipe round trip between two processes on one CPU, no hook: the base of hook/pipe-*";
    "hook/pipe-raw-tp-switch" => pipe_raw_tp_switch { cases: Cases::Fixed(BODIES), preempts: true }:
        "a 1-byte pipe round trip on one CPU with a BPF program on the raw tracepoint sched_switch (2 switches a round trip)";
    "hook/pipe-lsm-file-permission" => pipe_lsm_file_permission { cases: Cases::Fixed(BODIES), preempts: true }:
        "a 1-byte pipe round trip on one CPU with a BPF LSM program on file_permission (4 checks a round trip: each read and write)";
    "hook/pipe-ftrace-switch" => pipe_ftrace_switch { preempts: true }:
        "a 1-byte pipe round trip on one CPU with the ftrace event sched/sched_switch enabled on every CPU in a tracefs instance of oscost's own";
}

/// getppid in batches, with `hook` held for the measurement.
fn getppid_with(m: &Meter, hook: Option<Hook>) -> Measured {
    with_hook(m, hook, &|m| {
        Ok(m.batched(&mut |n| {
            for _ in 0..n {
                // SAFETY: no arguments.
                black_box(unsafe { libc::getppid() });
            }
        }))
    })
}

/// A pipe round trip with its peer on the measuring CPU, with `hook` held.
fn pipe_with(m: &Meter, hook: Option<Hook>) -> Measured {
    with_hook(m, hook, &|m| {
        crate::bench::switch::pipe_round_trips(m, Some(m.cpu))
    })
}

/// `op` measured with `hook` held; a ring buffer that dropped events fails the result.
fn with_hook(m: &Meter, hook: Option<Hook>, op: &dyn Fn(&Meter) -> Measured) -> Measured {
    let out = op(m)?;
    if let Some(h) = &hook {
        let dropped = h.dropped();
        if dropped > 0 {
            return Err(BenchError::Failed(format!(
                "the ring buffer filled and {dropped} events were dropped: a shorter repetition keeps them all"
            )));
        }
    }
    drop(hook);
    Ok(out)
}

/// `op` measured with the ftrace event `event` enabled on every online CPU, as a standing
/// tracer enables it: in a tracefs instance of oscost's own, its buffer overwriting its oldest
/// events (`tracing::ftrace`, hook mode). The instance belongs to the helper process, which
/// removes it when the worker's end of its pipe closes, however the worker ends; a helper
/// killed itself leaves a marker whose lock is free, and the next helper removes it.
fn with_ftrace(m: &Meter, event: &str, op: &dyn Fn(&Meter) -> Measured) -> Measured {
    use crate::tracing::tracefs::CountError;
    let cpus = crate::tracing::bpf::online_cpus();
    let mut t = TraceHelper::open_hook(&cpus, &[event]).map_err(|e| match e {
        CountError::NoRights(_) | CountError::NoTracepoints(_) => {
            BenchError::Skipped(e.to_string())
        }
        other => BenchError::Failed(other.to_string()),
    })?;
    if t.text.lines().any(|l| l == format!("missing {event}")) {
        return Err(BenchError::Skipped(format!(
            "this kernel has no ftrace event {event}"
        )));
    }
    t.on().map_err(|e| BenchError::Failed(e.to_string()))?;
    let out = op(m);
    t.off().map_err(|e| BenchError::Failed(e.to_string()))?;
    out
}

fn attached(point: AttachPoint, c: &Case) -> Result<Hook, BenchError> {
    let body = ProgramBody::from_param(c.int("body")?)
        .ok_or_else(|| BenchError::Failed(format!("case {} has no such body", c.suffix)))?;
    Hook::attach(&point, body).map_err(|e| BenchError::Skipped(e.0))
}

fn none(m: &Meter, _: &Case) -> Measured {
    getppid_with(m, None)
}

fn raw_tp(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(AttachPoint::RawTracepoint("sys_enter"), c)?),
    )
}

fn tp_sys_enter(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(
            AttachPoint::Tracepoint("raw_syscalls/sys_enter"),
            c,
        )?),
    )
}

fn tp_getppid(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(
            AttachPoint::Tracepoint("syscalls/sys_enter_getppid"),
            c,
        )?),
    )
}

fn kprobe(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(AttachPoint::Kprobe(getppid_function().into()), c)?),
    )
}

fn kretprobe(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(
            AttachPoint::Kretprobe(getppid_function().into()),
            c,
        )?),
    )
}

fn perf_counter(m: &Meter, _: &Case) -> Measured {
    let hook = Hook::counter("raw_syscalls/sys_enter").map_err(|e| BenchError::Skipped(e.0))?;
    getppid_with(m, Some(hook))
}

fn fentry(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(AttachPoint::Fentry(getppid_function().into()), c)?),
    )
}

fn fexit(m: &Meter, c: &Case) -> Measured {
    getppid_with(
        m,
        Some(attached(AttachPoint::Fexit(getppid_function().into()), c)?),
    )
}

fn uprobe(m: &Meter, c: &Case) -> Measured {
    let point = AttachPoint::Uprobe {
        library: "libc.so",
        function: "getppid",
    };
    getppid_with(m, Some(attached(point, c)?))
}

fn audit_rule(m: &Meter, _: &Case) -> Measured {
    let rule = crate::tracing::audit::RuleHeld::add().map_err(BenchError::Skipped)?;
    let out = getppid_with(m, None);
    drop(rule);
    out
}

fn ftrace_sys_enter(m: &Meter, _: &Case) -> Measured {
    with_ftrace(m, "raw_syscalls/sys_enter", &|m| getppid_with(m, None))
}

fn pipe_lsm_file_permission(m: &Meter, c: &Case) -> Measured {
    pipe_with(m, Some(attached(AttachPoint::Lsm("file_permission"), c)?))
}

fn pipe_ftrace_switch(m: &Meter, _: &Case) -> Measured {
    with_ftrace(m, "sched/sched_switch", &|m| pipe_with(m, None))
}

fn pipe_none(m: &Meter, _: &Case) -> Measured {
    pipe_with(m, None)
}

fn pipe_raw_tp_switch(m: &Meter, c: &Case) -> Measured {
    pipe_with(
        m,
        Some(attached(AttachPoint::RawTracepoint("sched_switch"), c)?),
    )
}
