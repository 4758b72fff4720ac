//! The audit netlink socket, as auditctl speaks it: questions (`AUDIT_GET`, `AUDIT_LIST_RULES`,
//! for `observers`) and the one rule oscost adds itself, for the `hook/audit-rule` rung: an
//! exit rule on getppid for a user id no process has, so it is checked on every getppid and
//! matches nothing (`-a always,exit -F arch=b64 -S getppid -F uid=N -k oscost-...`), added and
//! deleted over the socket, never by running auditctl.
//!
//! The rule is held by a helper process, `oscost __audit-rule KEY` (`helper_main`), started by
//! the worker in a process group of its own: it adds the rule, says `ready`, and deletes it when
//! its input closes (the worker's end, however the worker ends; a worker is stopped by
//! signalling its group, which does not reach the helper). Its rule carries the key it is named
//! by, marked in `/run/oscost/audit/` (`tracing::marker`) while it lives, so a rule whose helper
//! was killed too is deleted by the next run as it starts (`reclaim`); a rule without a live
//! or stale marker of oscost's is never touched.
//!
//! Audit must already be enabled: a rule costs nothing while audit is off, and turning audit
//! on makes every process started afterwards take audit's system-call path until the machine
//! reboots (`audit_ever_enabled`), which oscost will not do to a machine; the rung is skipped
//! with that said.

use crate::base::helpers::AUDIT_RULE as HELPER_ARG;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};

/// The markers' kind (`/run/oscost/audit/`) and the keys' prefix.
const MARKERS: &str = "audit";
const KEY_PREFIX: &str = "oscost-";

// include/uapi/linux/audit.h
const AUDIT_GET: u16 = 1000;
const AUDIT_ADD_RULE: u16 = 1011;
const AUDIT_DEL_RULE: u16 = 1012;
const AUDIT_LIST_RULES: u16 = 1013;
const AUDIT_FILTER_EXIT: u32 = 0x04;
const AUDIT_ALWAYS: u32 = 2;
const AUDIT_UID: u32 = 1;
const AUDIT_ARCH: u32 = 11;
const AUDIT_FILTERKEY: u32 = 210;
const AUDIT_EQUAL: u32 = 0x4000_0000;
const AUDIT_MAX_FIELDS: usize = 64;
const AUDIT_BITMASK_SIZE: usize = 64;
/// struct audit_rule_data up to its string buffer: flags, action, field_count, mask, fields,
/// values, fieldflags, buflen.
const RULE_HEAD: usize = 12 + 4 * AUDIT_BITMASK_SIZE + 3 * 4 * AUDIT_MAX_FIELDS + 4;
/// A user id no process has (the largest valid uid less one; -1 is "unset").
const NOBODYS_UID: u32 = 0xffff_fffd;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH_NATIVE: u32 = 0;

/// Send audit request `request` with `payload` over a netlink socket and hand each message of
/// the answer (its type, its payload; an acknowledgement as `NLMSG_ERROR` with an empty
/// payload) to `answer` until it returns `Some`. Err: why the socket, the request or an
/// answer failed (no CAP_AUDIT_CONTROL, no audit in the kernel, the kernel's refusal, or a
/// second without an answer).
pub fn exchange<T>(
    request: u16,
    payload: &[u8],
    ack: bool,
    mut answer: impl FnMut(i32, &[u8]) -> Option<T>,
) -> Result<T, String> {
    let fd = audit_socket()?;
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    send_request(raw, request, payload, ack)?;
    let hlen = std::mem::size_of::<libc::nlmsghdr>();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::recv(raw, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if n <= 0 {
            return Err(format!(
                "no answer from audit: {}",
                std::io::Error::last_os_error()
            ));
        }
        let n = n as usize;
        let mut at = 0usize;
        while at + hlen <= n {
            // SAFETY: at + hlen <= n bytes were received; read unaligned.
            let h: libc::nlmsghdr =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr() as *const libc::nlmsghdr) };
            let len = h.nlmsg_len as usize;
            if len < hlen || at + len > n {
                return Err("a malformed answer from audit".into());
            }
            let body = &buf[at + hlen..at + len];
            let got = if h.nlmsg_type as i32 == libc::NLMSG_ERROR {
                // An acknowledgement is error 0; a negative errno refuses.
                let code = body
                    .get(..4)
                    .map_or(-libc::EIO, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                if code != 0 {
                    return Err(format!(
                        "audit refused: {}",
                        std::io::Error::from_raw_os_error(-code)
                    ));
                }
                answer(libc::NLMSG_ERROR, &[])
            } else {
                answer(h.nlmsg_type as i32, body)
            };
            if let Some(t) = got {
                return Ok(t);
            }
            at += (len + 3) & !3;
        }
    }
}

/// A netlink audit socket whose reads give up after a second (an answer that never comes must
/// not hang a command).
fn audit_socket() -> Result<std::os::fd::OwnedFd, String> {
    // SAFETY: a plain socket call; the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(format!(
            "no audit socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let tv = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval of the size passed.
    unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    Ok(fd)
}

/// Send audit request `request` with `payload` (asking for an acknowledgement with `ack`) on
/// the socket `raw`.
fn send_request(raw: i32, request: u16, payload: &[u8], ack: bool) -> Result<(), String> {
    let hlen = std::mem::size_of::<libc::nlmsghdr>();
    let flags = libc::NLM_F_REQUEST | if ack { libc::NLM_F_ACK } else { 0 };
    let header = libc::nlmsghdr {
        nlmsg_len: (hlen + payload.len()) as u32,
        nlmsg_type: request,
        nlmsg_flags: flags as u16,
        nlmsg_seq: 1,
        nlmsg_pid: 0,
    };
    let mut message = Vec::with_capacity(hlen + payload.len());
    // SAFETY: the header's bytes, read as what they are.
    message.extend_from_slice(unsafe {
        std::slice::from_raw_parts(&header as *const libc::nlmsghdr as *const u8, hlen)
    });
    message.extend_from_slice(payload);
    // SAFETY: kernel address zeroed (pid 0, groups 0) as netlink expects.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: a buffer of the length passed, to a valid netlink address.
    let sent = unsafe {
        libc::sendto(
            raw,
            message.as_ptr() as *const libc::c_void,
            message.len(),
            0,
            &kernel as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(format!(
            "the audit socket refused the request: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Audit's enabled flag (0 off, 1 on, 2 locked).
pub fn enabled() -> Result<u32, String> {
    exchange(AUDIT_GET, &[], false, |kind, payload| {
        // struct audit_status: mask, then enabled.
        (kind == i32::from(AUDIT_GET))
            .then(|| payload.get(4..8))
            .flatten()
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    })
}

/// The rules in force, each as the kernel lists it (a struct audit_rule_data, which
/// `AUDIT_DEL_RULE` takes back as it is).
pub fn rules() -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    exchange(AUDIT_LIST_RULES, &[], true, |kind, payload| {
        match kind {
            libc::NLMSG_DONE => return Some(()),
            t if t == i32::from(AUDIT_LIST_RULES) => out.push(payload.to_vec()),
            _ => {}
        }
        None
    })?;
    Ok(out)
}

fn put(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn get(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Offsets of the arrays in struct audit_rule_data.
const MASK_AT: usize = 12;
const FIELDS_AT: usize = MASK_AT + 4 * AUDIT_BITMASK_SIZE;
const VALUES_AT: usize = FIELDS_AT + 4 * AUDIT_MAX_FIELDS;
const FLAGS_AT: usize = VALUES_AT + 4 * AUDIT_MAX_FIELDS;
const BUFLEN_AT: usize = FLAGS_AT + 4 * AUDIT_MAX_FIELDS;

/// The rule `-a always,exit -F arch=<native> -S <syscall> -F uid=<nobody's> -k <key>`, as
/// struct audit_rule_data.
fn rule(syscall: u32, key: &str) -> Vec<u8> {
    let mut b = vec![0u8; RULE_HEAD + key.len()];
    put(&mut b, 0, AUDIT_FILTER_EXIT);
    put(&mut b, 4, AUDIT_ALWAYS);
    put(&mut b, 8, 3);
    let word = MASK_AT + 4 * (syscall as usize / 32);
    put(&mut b, word, 1 << (syscall % 32));
    for (i, (field, value)) in [
        (AUDIT_ARCH, AUDIT_ARCH_NATIVE),
        (AUDIT_UID, NOBODYS_UID),
        (AUDIT_FILTERKEY, key.len() as u32),
    ]
    .into_iter()
    .enumerate()
    {
        put(&mut b, FIELDS_AT + 4 * i, field);
        put(&mut b, VALUES_AT + 4 * i, value);
        put(&mut b, FLAGS_AT + 4 * i, AUDIT_EQUAL);
    }
    put(&mut b, BUFLEN_AT, key.len() as u32);
    b[RULE_HEAD..].copy_from_slice(key.as_bytes());
    b
}

/// The key of a listed rule (its first string field that is a key), if it has one.
fn key_of(rule: &[u8]) -> Option<String> {
    let count = (get(rule, 8)? as usize).min(AUDIT_MAX_FIELDS);
    let mut at = RULE_HEAD;
    for i in 0..count {
        let field = get(rule, FIELDS_AT + 4 * i)?;
        let value = get(rule, VALUES_AT + 4 * i)? as usize;
        // String fields lie in the buffer one after another, each `value` bytes long.
        // (include/uapi/linux/audit.h: the subject's and object's security labels, a watched
        // path, a directory, an executable, a key.)
        let string = matches!(field, 13..=17 | 19..=23 | 105 | 107 | 112 | AUDIT_FILTERKEY);
        if !string {
            continue;
        }
        let s = rule.get(at..at + value)?;
        if field == AUDIT_FILTERKEY {
            return Some(String::from_utf8_lossy(s).into_owned());
        }
        at += value;
    }
    None
}

/// Why the rung cannot add its rule here, or `Ok` where audit is on and may be changed.
pub fn may_add() -> Result<(), String> {
    if AUDIT_ARCH_NATIVE == 0 {
        return Err("oscost does not know this architecture's audit id".into());
    }
    match enabled() {
        Err(e) => Err(format!(
            "cannot ask audit ({e}; it needs CAP_AUDIT_CONTROL and a kernel built with audit)"
        )),
        Ok(0) => Err(
            "audit is off: a rule costs nothing until it is enabled, and enabling it puts every \
             process started afterwards on audit's system-call path until reboot, which oscost \
             will not do to this machine (enable it yourself, auditctl -e 1, to measure this)"
                .into(),
        ),
        Ok(2) => Err("audit's configuration is locked (enabled 2): no rule can be added".into()),
        Ok(_) => Ok(()),
    }
}

/// Entry point of `oscost __audit-rule KEY`: mark the key, add the rule, say `ready` (or
/// `error: ...`), and delete the rule when standard input closes. Signals that stop a
/// process group are ignored, so the rule is always deleted by this process.
pub fn helper_main(args: &[String]) -> i32 {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let Some(key) = args.first().filter(|k| k.starts_with(KEY_PREFIX)) else {
        crate::tell!("error: usage: oscost {HELPER_ARG} {KEY_PREFIX}...");
        return 1;
    };
    let marker = super::marker::Marker::make(MARKERS, key);
    let data = rule(libc::SYS_getppid as u32, key);
    if let Err(e) = exchange(AUDIT_ADD_RULE, &data, true, |kind, _| {
        (kind == libc::NLMSG_ERROR).then_some(())
    }) {
        crate::tell!("error: cannot add the audit rule: {e}");
        return 1;
    }
    crate::tell!("ready");
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
        line.clear();
    }
    let deleted = exchange(AUDIT_DEL_RULE, &data, true, |kind, _| {
        (kind == libc::NLMSG_ERROR).then_some(())
    });
    drop(marker);
    i32::from(deleted.is_err())
}

/// Delete the rules of helpers that were killed (their markers' locks free); the keys
/// deleted. Called as a run starts; reads no rule where no marker is stale.
pub fn reclaim() -> Vec<String> {
    let stale = super::marker::stale(MARKERS, KEY_PREFIX);
    if stale.is_empty() {
        return Vec::new();
    }
    let listed = rules().unwrap_or_default();
    let mut deleted = Vec::new();
    for s in stale {
        for r in listed
            .iter()
            .filter(|r| key_of(r).as_deref() == Some(&s.name))
        {
            let gone = exchange(AUDIT_DEL_RULE, r, true, |kind, _| {
                (kind == libc::NLMSG_ERROR).then_some(())
            });
            if gone.is_ok() {
                deleted.push(s.name.clone());
            }
        }
        s.forget();
    }
    deleted
}

/// The worker's end of a helper holding the rule: dropped, its pipe closes and the helper
/// deletes the rule; the drop waits until it has.
pub struct RuleHeld {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl RuleHeld {
    /// Start the helper and wait until the rule is in force. Err: why not (audit off or
    /// locked, no rights, the kernel's refusal).
    pub fn add() -> Result<RuleHeld, String> {
        may_add()?;
        let key = format!(
            "{KEY_PREFIX}{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        );
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut command = std::process::Command::new(exe);
        // A process group of its own: a worker is stopped by signalling its group, and the
        // helper must outlive it by the moment it takes to delete the rule.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .args([HELPER_ARG, &key])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start oscost {HELPER_ARG}: {e}"))?;
        let stdin = child.stdin.take();
        let mut first = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut first);
        }
        let held = RuleHeld { child, stdin };
        match first.trim() {
            "ready" => Ok(held),
            other => Err(other
                .strip_prefix("error: ")
                .unwrap_or("the audit helper ended without a word")
                .to_string()),
        }
    }
}

impl Drop for RuleHeld {
    fn drop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_laid_out_as_struct_audit_rule_data() {
        let r = rule(110, "oscost-1-a");
        assert_eq!(RULE_HEAD, 1040);
        assert_eq!(r.len(), 1040 + 10);
        assert_eq!(get(&r, 0), Some(AUDIT_FILTER_EXIT));
        assert_eq!(get(&r, 4), Some(AUDIT_ALWAYS));
        assert_eq!(get(&r, 8), Some(3));
        // Syscall 110 is bit 14 of the mask's fourth word.
        assert_eq!(get(&r, MASK_AT + 12), Some(1 << 14));
        assert_eq!(get(&r, FIELDS_AT + 8), Some(AUDIT_FILTERKEY));
        assert_eq!(get(&r, VALUES_AT + 8), Some(10));
        assert_eq!(get(&r, FLAGS_AT + 4), Some(AUDIT_EQUAL));
        assert_eq!(get(&r, BUFLEN_AT), Some(10));
        assert_eq!(key_of(&r).as_deref(), Some("oscost-1-a"));
    }

    #[test]
    fn a_rule_without_a_key_has_none() {
        let mut r = rule(110, "");
        put(&mut r, 8, 2);
        assert_eq!(key_of(&r), None);
    }
}
