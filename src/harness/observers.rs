//! What is attached to the whole system and can tax every operation oscost measures, counted
//! where the kernel lets a process count it: the BPF programs loaded (a tracer's or a security
//! agent's, `BPF_PROG_GET_NEXT_ID` walked to its end) and the audit rules in force (listed over
//! the audit netlink socket with `AUDIT_LIST_RULES`, as auditctl -l asks). Both need privileges
//! (CAP_SYS_ADMIN, CAP_AUDIT_CONTROL); without them, or on a kernel without BPF or audit, the
//! count is `None`, never a guessed 0. Each count is a few system calls, cheap enough for
//! `watch` to reread every window and name what appeared when a cost moved.

/// How many BPF programs are loaded, or `None` where they cannot be counted here.
pub fn bpf_programs() -> Option<u32> {
    // bpf(BPF_PROG_GET_NEXT_ID, {start_id}) gives the next id, ENOENT after the last.
    const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
    #[repr(C)]
    #[derive(Default)]
    struct GetId {
        start_id: u32,
        next_id: u32,
        open_flags: u32,
    }
    let mut attr = GetId::default();
    let mut count = 0u32;
    loop {
        // SAFETY: the attribute is a valid, initialised struct of the size passed; the kernel
        // reads start_id and writes next_id only.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_GET_NEXT_ID,
                &mut attr as *mut GetId,
                std::mem::size_of::<GetId>() as libc::c_uint,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return (e == Some(libc::ENOENT)).then_some(count);
        }
        count += 1;
        attr.start_id = attr.next_id;
        if count > 1_000_000 {
            return None;
        }
    }
}

/// How many audit rules are in force, or `None` where they cannot be listed here.
pub fn audit_rules() -> Option<u32> {
    const AUDIT_LIST_RULES: u16 = 1013;
    // SAFETY: a plain socket call; the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // A reply that never comes must not hang a command: at most a second.
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
    let header = libc::nlmsghdr {
        nlmsg_len: std::mem::size_of::<libc::nlmsghdr>() as u32,
        nlmsg_type: AUDIT_LIST_RULES,
        nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
        nlmsg_seq: 1,
        nlmsg_pid: 0,
    };
    // SAFETY: kernel address zeroed (pid 0, groups 0) as netlink expects.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: the header is sent as its bytes, to a valid netlink address.
    let sent = unsafe {
        libc::sendto(
            raw,
            &header as *const libc::nlmsghdr as *const libc::c_void,
            header.nlmsg_len as usize,
            0,
            &kernel as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return None;
    }
    let mut rules = 0u32;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::recv(raw, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if n <= 0 {
            return None;
        }
        let mut at = 0usize;
        let n = n as usize;
        let hlen = std::mem::size_of::<libc::nlmsghdr>();
        while at + hlen <= n {
            // SAFETY: at + hlen <= n bytes were received; read unaligned.
            let h: libc::nlmsghdr =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr() as *const libc::nlmsghdr) };
            let len = h.nlmsg_len as usize;
            if len < hlen {
                return None;
            }
            match h.nlmsg_type as i32 {
                libc::NLMSG_DONE => return Some(rules),
                libc::NLMSG_ERROR => {
                    // The ack (error 0) comes before the rules; a negative errno refuses.
                    let code = buf
                        .get(at + hlen..at + hlen + 4)
                        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    if code != Some(0) {
                        return None;
                    }
                }
                t if t == i32::from(AUDIT_LIST_RULES) => rules += 1,
                _ => {}
            }
            at += (len + 3) & !3;
        }
    }
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
}
