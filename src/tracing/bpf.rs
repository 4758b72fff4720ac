//! The hooks `hook/` attaches for the length of one worker: a BPF program written as
//! instructions here, loaded with the bpf system call, attached as a raw tracepoint, a
//! tracepoint, a kprobe or a kretprobe (through perf events), or a system-wide perf counter
//! with no program. Everything is held by file descriptors and nothing is pinned, so a hook is
//! detached when its `Hook` is dropped or the worker exits, however it exits.
//!
//! Why instructions and not the `aya` crate: aya loads programs from ELF objects, which need
//! clang (or a committed object built by it) to exist; the three bodies measured (return 0, a
//! per-CPU counter, a 64-byte ring-buffer event) are a dozen instructions each, and writing
//! them here keeps the build free of any C toolchain for BPF and keeps every instruction in
//! view. A kind the kernel refuses is `Refused` with the kernel's own words (the errno and the
//! verifier's last line), never faked.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What a hook's program does each time it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramBody {
    /// Return 0.
    Empty,
    /// Add one to a per-CPU counter as bpftrace's `count()` does: look up, add, write back
    /// through the map update helper.
    Counter,
    /// Write a 64-byte event to a ring buffer (what an agent's event stream does); a write
    /// that finds the ring full is counted, so a result measured with drops can be refused.
    RingBuffer,
}

impl ProgramBody {
    /// From `hook/`'s case parameter.
    pub fn from_param(n: u64) -> Option<ProgramBody> {
        match n {
            0 => Some(ProgramBody::Empty),
            1 => Some(ProgramBody::Counter),
            2 => Some(ProgramBody::RingBuffer),
            _ => None,
        }
    }
}

/// Where a hook is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachPoint {
    /// A raw tracepoint (`BPF_RAW_TRACEPOINT_OPEN`), e.g. `sys_enter`.
    RawTracepoint(&'static str),
    /// A tracepoint `group/name` through a perf event.
    Tracepoint(&'static str),
    /// A kprobe on a kernel function through the kprobe PMU.
    Kprobe(String),
    /// A kretprobe on a kernel function.
    Kretprobe(String),
    /// fentry on a kernel function (a BPF trampoline; needs the kernel's BTF).
    Fentry(String),
    /// fexit on a kernel function.
    Fexit(String),
    /// A BPF LSM hook (`file_permission`, ...): a trampoline on the kernel's
    /// `bpf_lsm_<hook>`, run only where the BPF LSM is active.
    Lsm(&'static str),
    /// A uprobe on a function of a shared library (`library` as in /proc/self/maps,
    /// e.g. "libc.so"), for every process.
    Uprobe {
        /// A part of the library's file name.
        library: &'static str,
        /// The function's name in its dynamic symbol table.
        function: &'static str,
    },
}

/// Why a hook could not be attached: the kernel's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// An attached hook: its program, maps and link, all closed (detached) on drop.
#[derive(Debug)]
pub struct Hook {
    /// The ring buffer's drop counter, when the body has one.
    drops: Option<OwnedFd>,
    _fds: Vec<OwnedFd>,
}

/// The name every program oscost loads carries, so that what is left of oscost's own can be
/// told from a tracer's or an agent's. At most 15 bytes: the kernel's name field is 16 with
/// its NUL (the assertion keeps it so).
pub const PROGRAM_NAME: &str = "oscost_hook";
const _: () = assert!(PROGRAM_NAME.len() < 16);

// bpf(2) commands and types (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_LOOKUP_ELEM: i64 = 1;
const BPF_PROG_LOAD: i64 = 5;
const BPF_RAW_TRACEPOINT_OPEN: i64 = 17;
const MAP_PERCPU_ARRAY: u32 = 6;
const MAP_RINGBUF: u32 = 27;
const PROG_KPROBE: u32 = 2;
const PROG_TRACEPOINT: u32 = 5;
const PROG_RAW_TRACEPOINT: u32 = 17;
const PROG_TRACING: u32 = 26;
const ATTACH_TRACE_FENTRY: u32 = 24;
const ATTACH_TRACE_FEXIT: u32 = 25;
const PROG_LSM: u32 = 29;
const ATTACH_LSM_MAC: u32 = 27;
/// The BPF LSM's id in `lsm_list_modules` (include/uapi/linux/lsm.h).
const LSM_ID_BPF: u64 = 109;
/// lsm_list_modules(2) on x86_64 and arm64 alike (6.8).
const SYS_LSM_LIST_MODULES: libc::c_long = 461;
// perf_event_open(2).
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_MAP_UPDATE_ELEM: i32 = 2;
const HELPER_RINGBUF_OUTPUT: i32 = 130;
/// The ring's size: a worker's repetition (tens of milliseconds of calls at a few hundred ns,
/// 72 bytes an event with its header) fits in it with room, so no consumer is needed; a
/// longer one fills it, and the drops say so.
const RING_BYTES: u32 = 64 << 20;

/// One instruction: opcode, registers, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | (u64::from(dst & 0xf) << 8)
        | (u64::from(src & 0xf) << 12)
        | (u64::from(off as u16) << 16)
        | (u64::from(imm as u32) << 32)
}

/// `r0 = 0; exit`.
fn ret0() -> [u64; 2] {
    [insn(0xb7, 0, 0, 0, 0), insn(0x95, 0, 0, 0, 0)]
}

/// `r1 = map` (a 64-bit load of the map's descriptor).
fn ld_map(fd: i32) -> [u64; 2] {
    [insn(0x18, 1, 1, 0, fd), 0]
}

/// Add one to element 0 of the per-CPU array `map` in place (the ring body's drop count);
/// ends by falling through.
fn increment(map: i32) -> Vec<u64> {
    let mut v = vec![
        insn(0x62, 10, 0, -4, 0), // *(u32 *)(r10 - 4) = 0
        insn(0xbf, 2, 10, 0, 0),  // r2 = r10
        insn(0x07, 2, 0, 0, -4),  // r2 += -4
    ];
    v.extend(ld_map(map));
    v.extend([
        insn(0x85, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM), // r0 = lookup(r1, r2)
        insn(0x15, 0, 0, 3, 0),                      // if r0 == 0 skip 3
        insn(0x79, 1, 0, 0, 0),                      // r1 = *(u64 *)(r0)
        insn(0x07, 1, 0, 0, 1),                      // r1 += 1
        insn(0x7b, 0, 1, 0, 0),                      // *(u64 *)(r0) = r1
    ]);
    v
}

/// Count as bpftrace's `count()` does (its program, read back from the kernel with
/// `BPF_OBJ_GET_INFO_BY_FD`): look element 0 of the per-CPU array `map` up, add one to its
/// value (0 if none) on the stack, and write it back with the update helper; ends by falling
/// through. A hand-written program would add in place (`increment`), one helper call fewer.
fn count_like_bpftrace(map: i32) -> Vec<u64> {
    let mut v = vec![
        insn(0x62, 10, 0, -4, 0), // *(u32 *)(r10 - 4) = 0: the key
        insn(0xbf, 2, 10, 0, 0),  // r2 = r10
        insn(0x07, 2, 0, 0, -4),  // r2 += -4
    ];
    v.extend(ld_map(map));
    v.extend([
        insn(0x85, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM), // r0 = lookup(r1, r2)
        insn(0xb7, 1, 0, 0, 0),                      // r1 = 0
        insn(0x15, 0, 0, 1, 0),                      // if r0 == 0 skip 1
        insn(0x79, 1, 0, 0, 0),                      // r1 = *(u64 *)(r0)
        insn(0x07, 1, 0, 0, 1),                      // r1 += 1
        insn(0x7b, 10, 1, -16, 0),                   // *(u64 *)(r10 - 16) = r1: the value
    ]);
    v.extend(ld_map(map));
    v.extend([
        insn(0xbf, 2, 10, 0, 0),                     // r2 = r10
        insn(0x07, 2, 0, 0, -4),                     // r2 += -4
        insn(0xbf, 3, 10, 0, 0),                     // r3 = r10
        insn(0x07, 3, 0, 0, -16),                    // r3 += -16
        insn(0xb7, 4, 0, 0, 0),                      // r4 = 0 (BPF_ANY)
        insn(0x85, 0, 0, 0, HELPER_MAP_UPDATE_ELEM), // update(r1, r2, r3, r4)
    ]);
    v
}

fn bpf(cmd: i64, attr: &mut [u8]) -> i64 {
    // SAFETY: `attr` is a live, zero-initialised buffer of the size passed, holding pointers
    // only to memory that outlives the call.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len() as u32) }
}

fn put32(a: &mut [u8], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(a: &mut [u8], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

fn owned(fd: i64, what: &str) -> Result<OwnedFd, Refused> {
    if fd < 0 {
        return Err(Refused(format!(
            "{what}: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn map_create(kind: u32, key: u32, value: u32, entries: u32) -> Result<OwnedFd, Refused> {
    let mut a = [0u8; 72];
    put32(&mut a, 0, kind);
    put32(&mut a, 4, key);
    put32(&mut a, 8, value);
    put32(&mut a, 12, entries);
    owned(bpf(BPF_MAP_CREATE, &mut a), "the kernel refused a BPF map")
}

/// How a program is loaded: its type, and for a trampoline its attach type and BTF id.
#[derive(Debug, Clone, Copy)]
struct ProgKind {
    prog_type: u32,
    attach_type: u32,
    btf_id: u32,
}

fn prog_load(kind: ProgKind, insns: &[u64]) -> Result<OwnedFd, Refused> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 16 << 10];
    let mut a = [0u8; 128];
    put32(&mut a, 0, kind.prog_type);
    put32(&mut a, 4, insns.len() as u32);
    put32(&mut a, 68, kind.attach_type);
    put32(&mut a, 108, kind.btf_id);
    put64(&mut a, 8, insns.as_ptr() as u64);
    put64(&mut a, 16, license.as_ptr() as u64);
    put32(&mut a, 24, 1);
    put32(&mut a, 28, log.len() as u32);
    put64(&mut a, 32, log.as_mut_ptr() as u64);
    a[48..48 + PROGRAM_NAME.len()].copy_from_slice(PROGRAM_NAME.as_bytes());
    let fd = bpf(BPF_PROG_LOAD, &mut a);
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let text = String::from_utf8_lossy(&log);
        let last = text
            .trim_end_matches('\0')
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        return Err(Refused(if last.is_empty() {
            format!("the kernel refused the BPF program: {e}")
        } else {
            format!("the kernel refused the BPF program: {e} (verifier: {last})")
        }));
    }
    owned(fd, "BPF program")
}

/// The program of `body`, with the maps it uses (the drop counter for a ring).
fn program(
    kind: ProgKind,
    body: ProgramBody,
) -> Result<(OwnedFd, Vec<OwnedFd>, Option<OwnedFd>), Refused> {
    match body {
        ProgramBody::Empty => Ok((prog_load(kind, &ret0())?, vec![], None)),
        ProgramBody::Counter => {
            let map = map_create(MAP_PERCPU_ARRAY, 4, 8, 1)?;
            let mut p = count_like_bpftrace(map.as_raw_fd());
            p.extend(ret0());
            Ok((prog_load(kind, &p)?, vec![map], None))
        }
        ProgramBody::RingBuffer => {
            let ring = map_create(MAP_RINGBUF, 0, 0, RING_BYTES)?;
            let drops = map_create(MAP_PERCPU_ARRAY, 4, 8, 1)?;
            // 64 zeroed bytes on the stack, written to the ring; a failed write counted.
            let mut p: Vec<u64> = (1..=8).map(|i| insn(0x7a, 10, 0, -8 * i, 0)).collect();
            p.extend(ld_map(ring.as_raw_fd()));
            p.extend([
                insn(0xbf, 2, 10, 0, 0),                    // r2 = r10
                insn(0x07, 2, 0, 0, -64),                   // r2 += -64
                insn(0xb7, 3, 0, 0, 64),                    // r3 = 64
                insn(0xb7, 4, 0, 0, 0),                     // r4 = 0 (flags)
                insn(0x85, 0, 0, 0, HELPER_RINGBUF_OUTPUT), // r0 = ringbuf_output(...)
            ]);
            let count = increment(drops.as_raw_fd());
            p.push(insn(0x15, 0, 0, count.len() as i16, 0)); // if r0 == 0 skip the count
            p.extend(count);
            p.extend(ret0());
            let prog = prog_load(kind, &p)?;
            let drops_reader = drops
                .try_clone()
                .map_err(|e| Refused(format!("cannot hold the drop counter: {e}")))?;
            Ok((prog, vec![ring, drops], Some(drops_reader)))
        }
    }
}

/// A perf event (`perf_event_open`) of `kind` and `config`, on every task of `cpu`: one that
/// samples every event where a program is attached to it (`sampled`), else a plain counter.
fn perf_event(kind: u32, config: [u64; 3], cpu: i32, sampled: bool) -> Result<OwnedFd, Refused> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, kind);
    put32(&mut a, 4, 128);
    put64(&mut a, 8, config[0]);
    if sampled {
        put64(&mut a, 16, 1); // sample_period
        put32(&mut a, 48, 1); // wakeup_events
    }
    put64(&mut a, 56, config[1]);
    put64(&mut a, 64, config[2]);
    // SAFETY: a zero-initialised perf_event_attr of the size it declares; config1 points at a
    // NUL-terminated string the caller keeps alive.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            a.as_mut_ptr(),
            -1,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    owned(fd, "perf_event_open refused")
}

/// Where tracefs is, mounted by the host or else privately by this (single-threaded) worker.
fn tracefs() -> Result<std::path::PathBuf, Refused> {
    match crate::tracing::tracefs::mount_point() {
        Some(r) => Ok(r),
        None => crate::tracing::tracefs::mount_private().map_err(Refused),
    }
}

/// A tracepoint's id, from tracefs.
fn tracepoint_id(event: &str) -> Result<u64, Refused> {
    let root = tracefs()?;
    let p = root.join("events").join(event).join("id");
    std::fs::read_to_string(&p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            Refused(format!(
                "no tracepoint {event} in this kernel ({})",
                p.display()
            ))
        })
}

/// A dynamic PMU's type and, for a kretprobe, its config bit.
fn kprobe_pmu(ret: bool) -> Result<(u32, u64), Refused> {
    let dir = std::path::Path::new("/sys/bus/event_source/devices/kprobe");
    let kind: u32 = std::fs::read_to_string(dir.join("type"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            let config = crate::measuring::os::kernel_config_text(None).unwrap_or_default();
            Refused(if config.contains("# CONFIG_KPROBES is not set") {
                "this kernel was built without kprobes (# CONFIG_KPROBES is not set)".into()
            } else {
                "no kprobe PMU in /sys/bus/event_source/devices (CONFIG_KPROBE_EVENTS off?)".into()
            })
        })?;
    let config = if ret {
        let f = std::fs::read_to_string(dir.join("format/retprobe")).unwrap_or_default();
        let bit: u64 = f
            .trim()
            .strip_prefix("config:")
            .and_then(|b| b.parse().ok())
            .ok_or_else(|| Refused("the kprobe PMU has no retprobe format".into()))?;
        1 << bit
    } else {
        0
    };
    Ok((kind, config))
}

/// The kernel function of the getppid system call on this architecture.
pub fn getppid_function() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "__arm64_sys_getppid"
    } else {
        "__x64_sys_getppid"
    }
}

/// The program type (and attach type and BTF target) a hook at `point` needs.
fn prog_kind(point: &AttachPoint) -> Result<ProgKind, Refused> {
    let plain = |prog_type| ProgKind {
        prog_type,
        attach_type: 0,
        btf_id: 0,
    };
    Ok(match point {
        AttachPoint::RawTracepoint(_) => plain(PROG_RAW_TRACEPOINT),
        AttachPoint::Tracepoint(_) => plain(PROG_TRACEPOINT),
        AttachPoint::Kprobe(_) | AttachPoint::Kretprobe(_) | AttachPoint::Uprobe { .. } => {
            plain(PROG_KPROBE)
        }
        AttachPoint::Fentry(f) | AttachPoint::Fexit(f) => ProgKind {
            prog_type: PROG_TRACING,
            attach_type: if matches!(point, AttachPoint::Fentry(_)) {
                ATTACH_TRACE_FENTRY
            } else {
                ATTACH_TRACE_FEXIT
            },
            btf_id: vmlinux_function_id(f)?,
        },
        AttachPoint::Lsm(hook) => {
            bpf_lsm_active()?;
            ProgKind {
                prog_type: PROG_LSM,
                attach_type: ATTACH_LSM_MAC,
                btf_id: vmlinux_function_id(&format!("bpf_lsm_{hook}"))?,
            }
        }
    })
}

impl Hook {
    /// A program with `body` attached at `point`.
    pub fn attach(point: &AttachPoint, body: ProgramBody) -> Result<Hook, Refused> {
        let kind = prog_kind(point)?;
        let (prog, mut fds, drops) = program(kind, body)?;
        let link = match point {
            AttachPoint::RawTracepoint(name) => {
                let name = std::ffi::CString::new(*name).map_err(|e| Refused(e.to_string()))?;
                let mut a = [0u8; 16];
                put64(&mut a, 0, name.as_ptr() as u64);
                put32(&mut a, 8, prog.as_raw_fd() as u32);
                owned(
                    bpf(BPF_RAW_TRACEPOINT_OPEN, &mut a),
                    "the kernel refused to attach the raw tracepoint",
                )?
            }
            AttachPoint::Tracepoint(event) => {
                let id = tracepoint_id(event)?;
                let ev = perf_event(PERF_TYPE_TRACEPOINT, [id, 0, 0], 0, true)?;
                set_bpf(&ev, &prog)?;
                ev
            }
            AttachPoint::Kprobe(func) | AttachPoint::Kretprobe(func) => {
                let (pmu, config) = kprobe_pmu(matches!(point, AttachPoint::Kretprobe(_)))?;
                let name =
                    std::ffi::CString::new(func.as_str()).map_err(|e| Refused(e.to_string()))?;
                let ev = perf_event(pmu, [config, name.as_ptr() as u64, 0], 0, true)?;
                set_bpf(&ev, &prog)?;
                ev
            }
            AttachPoint::Fentry(_) | AttachPoint::Fexit(_) | AttachPoint::Lsm(_) => {
                // A trampoline program attaches through the raw tracepoint call, no name.
                let mut a = [0u8; 16];
                put32(&mut a, 8, prog.as_raw_fd() as u32);
                owned(
                    bpf(BPF_RAW_TRACEPOINT_OPEN, &mut a),
                    "the kernel refused to attach the trampoline",
                )?
            }
            AttachPoint::Uprobe { library, function } => {
                let (path, offset) = library_function(library, function)?;
                let pmu: u32 = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| {
                        Refused("no uprobe PMU here (CONFIG_UPROBE_EVENTS off?)".into())
                    })?;
                let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                    .map_err(|e| Refused(e.to_string()))?;
                let ev = perf_event(pmu, [0, cpath.as_ptr() as u64, offset], 0, true)?;
                set_bpf(&ev, &prog)?;
                ev
            }
        };
        fds.push(prog);
        fds.push(link);
        Ok(Hook { drops, _fds: fds })
    }

    /// A system-wide perf counter on tracepoint `event` (one per CPU), no program: what
    /// `perf stat -a -e EVENT` holds.
    pub fn counter(event: &str) -> Result<Hook, Refused> {
        let id = tracepoint_id(event)?;
        let mut fds = Vec::new();
        for cpu in online_cpus() {
            fds.push(perf_event(
                PERF_TYPE_TRACEPOINT,
                [id, 0, 0],
                cpu as i32,
                false,
            )?);
        }
        Ok(Hook {
            drops: None,
            _fds: fds,
        })
    }

    /// Events the ring buffer had no room for (0 for a body without one).
    pub fn dropped(&self) -> u64 {
        let Some(map) = &self.drops else { return 0 };
        // A per-CPU value is read for every possible CPU, each 8 bytes.
        let mut values = vec![0u64; 1024];
        let key = 0u32;
        let mut a = [0u8; 32];
        put32(&mut a, 0, map.as_raw_fd() as u32);
        put64(&mut a, 8, &key as *const u32 as u64);
        put64(&mut a, 16, values.as_mut_ptr() as u64);
        if bpf(BPF_MAP_LOOKUP_ELEM, &mut a) != 0 {
            return 0;
        }
        values.iter().sum()
    }
}

/// The BTF type id of kernel function `name`, from /sys/kernel/btf/vmlinux: what a
/// trampoline (fentry, fexit) is attached by. A system call's arch wrapper
/// (`__x64_sys_getppid`) is not in every kernel's BTF; its body (`__do_sys_getppid`) then
/// stands for it, where the kernel can trace it.
fn vmlinux_function_id(name: &str) -> Result<u32, Refused> {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").map_err(|e| {
        Refused(format!(
            "no kernel BTF here (/sys/kernel/btf/vmlinux: {e}; CONFIG_DEBUG_INFO_BTF off?)"
        ))
    })?;
    let body = name
        .split_once("_sys_")
        .map(|(_, call)| format!("__do_sys_{call}"));
    std::iter::once(name.to_string())
        .chain(body)
        .find_map(|n| btf_function_id(&btf, &n))
        .ok_or_else(|| Refused(format!("the kernel's BTF has no function {name}")))
}

/// Whether the BPF LSM is among the active LSMs (`lsm_list_modules`, 6.8): a BPF LSM program
/// loads and attaches where it is built but not active, and then never runs.
fn bpf_lsm_active() -> Result<(), Refused> {
    let mut ids = [0u64; 64];
    let mut size = std::mem::size_of_val(&ids) as u32;
    // SAFETY: a buffer of `size` bytes and its size, as the call takes them.
    let n = unsafe { libc::syscall(SYS_LSM_LIST_MODULES, ids.as_mut_ptr(), &raw mut size, 0u32) };
    if n < 0 {
        return Err(Refused(format!(
            "cannot list the active LSMs (lsm_list_modules: {}; kernels before 6.8 lack it)",
            std::io::Error::last_os_error()
        )));
    }
    let active = &ids[..(n as usize).min(ids.len())];
    if active.contains(&LSM_ID_BPF) {
        Ok(())
    } else {
        Err(Refused(
            "the BPF LSM is not active here (add bpf to the lsm= boot parameter)".into(),
        ))
    }
}

/// The id of the FUNC named `name` in a BTF blob.
fn btf_function_id(btf: &[u8], name: &str) -> Option<u32> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(btf.get(at..at + 4)?.try_into().ok()?))
    };
    if btf.get(0..2)? != [0x9f, 0xeb] {
        return None;
    }
    let hdr = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let str_off = u32_at(16)? as usize;
    let strings = hdr + str_off;
    let name_at = |off: u32| -> Option<&[u8]> {
        let from = strings + off as usize;
        let rest = btf.get(from..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    };
    let (mut at, end) = (hdr + type_off, hdr + type_off + type_len);
    let mut id = 1u32;
    while at + 12 <= end {
        let (name_off, info) = (u32_at(at)?, u32_at(at + 4)?);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == 12 && name_at(name_off)? == name.as_bytes() {
            return Some(id);
        }
        at += 12
            + match kind {
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => vlen * 12,
                6 | 13 => vlen * 8,
                _ => 0,
            };
        id += 1;
    }
    None
}

/// The file of the shared library this process maps whose name holds `library`, and the file
/// offset of its dynamic symbol `function`: where a uprobe on it goes.
fn library_function(library: &str, function: &str) -> Result<(std::path::PathBuf, u64), Refused> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            std::path::Path::new(p)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(library))
        })
        .map(std::path::PathBuf::from)
        .ok_or_else(|| Refused(format!("this process maps no {library}")))?;
    let elf = std::fs::read(&path).map_err(|e| Refused(format!("{}: {e}", path.display())))?;
    let offset = elf_function_offset(&elf, function).ok_or_else(|| {
        Refused(format!(
            "{} exports no {function} in its dynamic symbols",
            path.display()
        ))
    })?;
    Ok((path, offset))
}

/// The file offset of dynamic symbol `name` in a 64-bit little-endian ELF file.
fn elf_function_offset(elf: &[u8], name: &str) -> Option<u64> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    if elf.get(0..4)? != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return None;
    }
    let (shoff, shentsize, shnum) = (
        u64_at(0x28)? as usize,
        u16_at(0x3a)? as usize,
        u16_at(0x3c)?,
    );
    let section = |i: usize| shoff + i * shentsize;
    let dynsym = (0..shnum as usize).find(|&i| u32_at(section(i) + 4) == Some(11))?;
    let (sym_off, sym_size) = (
        u64_at(section(dynsym) + 24)? as usize,
        u64_at(section(dynsym) + 32)? as usize,
    );
    let strtab = u32_at(section(dynsym) + 40)? as usize;
    let str_off = u64_at(section(strtab) + 24)? as usize;
    let vaddr = (0..sym_size / 24).find_map(|k| {
        let at = sym_off + k * 24;
        let from = str_off + u32_at(at)? as usize;
        let rest = elf.get(from..)?;
        let n = &rest[..rest.iter().position(|&b| b == 0)?];
        (n == name.as_bytes() && u64_at(at + 8)? != 0).then(|| u64_at(at + 8))?
    })?;
    let (phoff, phentsize, phnum) = (
        u64_at(0x20)? as usize,
        u16_at(0x36)? as usize,
        u16_at(0x38)?,
    );
    (0..phnum as usize).find_map(|i| {
        let at = phoff + i * phentsize;
        let (p_type, p_offset, p_vaddr, p_filesz) = (
            u32_at(at)?,
            u64_at(at + 8)?,
            u64_at(at + 16)?,
            u64_at(at + 32)?,
        );
        (p_type == 1 && (p_vaddr..p_vaddr + p_filesz).contains(&vaddr))
            .then(|| vaddr - p_vaddr + p_offset)
    })
}

/// The online CPUs, whatever this process may run on: a system-wide counter is one per CPU.
pub(crate) fn online_cpus() -> Vec<usize> {
    crate::measuring::placement::parse_cpu_list(
        &std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default(),
    )
}

fn set_bpf(ev: &OwnedFd, prog: &OwnedFd) -> Result<(), Refused> {
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    // SAFETY: ioctls on a perf event descriptor we own, with an integer argument.
    unsafe {
        if libc::ioctl(
            ev.as_raw_fd(),
            PERF_EVENT_IOC_SET_BPF as _,
            prog.as_raw_fd(),
        ) != 0
        {
            return Err(Refused(format!(
                "the kernel refused to attach the program to the perf event: {}",
                std::io::Error::last_os_error()
            )));
        }
        libc::ioctl(ev.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
