//! net/: the loopback network stack by lmbench's definitions: a TCP round trip of 1 byte
//! (lat_tcp), a UDP round trip of 4 bytes (lat_udp), a TCP connection opened and closed
//! against a server that accepts it (lat_connect), the same over a unix stream socket
//! (lat_unix_connect), and select, poll and epoll over N descriptors of one TCP connection,
//! all writable, with no wait (lat_select tcp).
//!
//! Two-party cases run under switch/'s placements (the server or echoing peer is a forked
//! process, on the measuring CPU, another one, or unpinned). Every socket is bound to
//! 127.0.0.1 on a port the kernel chooses, or to a path in the run's scratch directory, and
//! lives no longer than the benchmark; the peer dies with it (SIGKILL, reaped).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bench::entry::{Among, Cases, Expect, Param, Variant};
use crate::catalogue;
use crate::measuring::case::{BenchError, Case, Measured, Meter};
use crate::measuring::clock::{Clock, Monotonic};
use crate::measuring::os::{Mapping, PeerProc, close, ensure_fds, errno, read_byte, write_byte};

catalogue! {
    family { default: false };
    "net/tcp-rr" => tcp_rr {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench lat_tcp"),
    }:
        "round trip of 1 byte over a loopback TCP connection (TCP_NODELAY) between two processes";
    "net/udp-rr" => udp_rr {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench lat_udp"),
    }:
        "round trip of a 4-byte datagram over loopback UDP between two processes";
    // A sample is 64 connections and the wait for the server to have served them (see
    // `connections`). On one CPU the server runs when woken and given the CPU (the connection
    // queued, its end of file, the client's wait at the end of a sample): none to four
    // switches a connection, one or two for most.
    "net/tcp-connect" => tcp_connect {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench lat_connect"),
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::Between { lo: 0.0, hi: 4.1 })],
    }:
        "socket + connect + close of a loopback TCP connection, a server process accepting it and closing its end";
    "net/unix-connect" => unix_connect {
        cases: Cases::Placements, preempts: true, peer: Some("lmbench lat_unix_connect"),
        events: crate::expect_events![(Among::SameCpu, "context-switches", Expect::Between { lo: 0.0, hi: 4.1 })],
    }:
        "socket + connect + close of a unix stream socket to a listening path, a server process accepting it and closing its end";
    "net/select-tcp" => select_tcp {
        cases: Cases::Fixed(SOCKET_COUNTS), peer: Some("lmbench lat_select tcp"),
    }:
        "select for writing over 10 and 100 descriptors of one loopback TCP connection, all ready, no wait";
    "net/poll-tcp" => poll_tcp {
        cases: Cases::Fixed(SOCKET_COUNTS),
    }:
        "poll (POLLOUT) over 10 and 100 descriptors of one loopback TCP connection, all ready, no wait";
    "net/epoll-tcp" => epoll_tcp {
        cases: Cases::Fixed(SOCKET_COUNTS),
    }:
        "epoll_wait (EPOLLOUT, level-triggered) on a set of 10 and 100 descriptors of one loopback TCP connection, all ready, no wait";
}

static SOCKET_COUNTS: &[Variant] = &[
    Variant {
        suffix: "/10",
        params: &[("fds", Param::Int(10))],
    },
    Variant {
        suffix: "/100",
        params: &[("fds", Param::Int(100))],
    },
];

/// A socket the caller owns, or the failure.
fn socket(domain: i32, kind: i32) -> Result<OwnedFd, BenchError> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(BenchError::failed("socket", errno()));
    }
    // SAFETY: just made; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// 127.0.0.1, port `port` (network order taken care of).
fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    }
}

const IN_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// Bind `fd` to 127.0.0.1 on a port the kernel chooses; returns the port.
fn bind_loopback(fd: i32) -> Result<u16, BenchError> {
    let a = loopback(0);
    // SAFETY: a live sockaddr_in of the length given.
    if unsafe { libc::bind(fd, (&raw const a).cast(), IN_LEN) } != 0 {
        return Err(BenchError::failed("bind to 127.0.0.1", errno()));
    }
    let mut got = loopback(0);
    let mut len = IN_LEN;
    // SAFETY: a live sockaddr_in and its length.
    if unsafe { libc::getsockname(fd, (&raw mut got).cast(), &mut len) } != 0 {
        return Err(BenchError::failed("getsockname", errno()));
    }
    Ok(u16::from_be(got.sin_port))
}

/// A TCP listener on 127.0.0.1 and its port.
fn tcp_listener() -> Result<(OwnedFd, u16), BenchError> {
    let l = socket(libc::AF_INET, libc::SOCK_STREAM)?;
    let port = bind_loopback(l.as_raw_fd())?;
    // SAFETY: a plain syscall on a socket we own.
    if unsafe { libc::listen(l.as_raw_fd(), BACKLOG) } != 0 {
        return Err(BenchError::failed("listen", errno()));
    }
    Ok((l, port))
}

/// Connect `fd` to 127.0.0.1:`port`; false on failure.
fn connect_loopback(fd: i32, port: u16) -> bool {
    let a = loopback(port);
    // SAFETY: a live sockaddr_in of the length given.
    unsafe { libc::connect(fd, (&raw const a).cast(), IN_LEN) == 0 }
}

/// TCP_NODELAY on: a 1-byte write leaves at once, as lat_tcp sets it.
fn no_delay(fd: i32) {
    let one: libc::c_int = 1;
    // SAFETY: an int option from a live local.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// accept(2) on `listener`: the connection, or -1.
fn accept(listener: i32) -> i32 {
    // SAFETY: no address asked for.
    unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    }
}

/// A loopback TCP connection: this process's end, and a peer process (placed on `peer_cpu`)
/// that accepted the other and runs `serve` on it until it ends.
fn tcp_pair(
    m: &Meter,
    peer_cpu: Option<usize>,
    serve: fn(i32),
) -> Result<(OwnedFd, PeerProc), BenchError> {
    let (listener, port) = tcp_listener()?;
    let lfd = listener.as_raw_fd();
    let peer = PeerProc::spawn(
        peer_cpu,
        &m.allowed,
        move || {
            let fd = accept(lfd);
            if fd >= 0 {
                no_delay(fd);
                serve(fd);
            }
        },
        || {},
    )?;
    drop(listener);
    let c = socket(libc::AF_INET, libc::SOCK_STREAM)?;
    if !connect_loopback(c.as_raw_fd(), port) {
        return Err(BenchError::failed("connect to 127.0.0.1", errno()));
    }
    no_delay(c.as_raw_fd());
    Ok((c, peer))
}

/// Both ends of a loopback TCP connection in this process: (accepted, connected).
pub(crate) fn tcp_connection() -> Result<(OwnedFd, OwnedFd), BenchError> {
    let (listener, port) = tcp_listener()?;
    let client = socket(libc::AF_INET, libc::SOCK_STREAM)?;
    if !connect_loopback(client.as_raw_fd(), port) {
        return Err(BenchError::failed("connect to 127.0.0.1", errno()));
    }
    let fd = accept(listener.as_raw_fd());
    if fd < 0 {
        return Err(BenchError::failed("accept", errno()));
    }
    // SAFETY: just accepted; nothing else owns it.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, client))
}

/// The echoing peer: a byte back for every byte, until the connection ends.
fn echo_bytes(fd: i32) {
    while read_byte(fd) && write_byte(fd) {}
}

fn tcp_rr(m: &Meter, c: &Case) -> Measured {
    let (conn, peer) = tcp_pair(m, c.peer_cpu(), echo_bytes)?;
    let fd = conn.as_raw_fd();
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            if !(write_byte(fd) && read_byte(fd)) {
                return Err(BenchError::Failed(
                    "the peer process closed the connection".into(),
                ));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(conn);
    drop(peer);
    r
}

/// lat_udp's message: one int.
const DATAGRAM: usize = 4;

fn udp_rr(m: &Meter, c: &Case) -> Measured {
    let (ours, theirs) = (
        socket(libc::AF_INET, libc::SOCK_DGRAM)?,
        socket(libc::AF_INET, libc::SOCK_DGRAM)?,
    );
    let (p1, p2) = (
        bind_loopback(ours.as_raw_fd())?,
        bind_loopback(theirs.as_raw_fd())?,
    );
    if !(connect_loopback(ours.as_raw_fd(), p2) && connect_loopback(theirs.as_raw_fd(), p1)) {
        return Err(BenchError::failed("connect the UDP sockets", errno()));
    }
    let tfd = theirs.as_raw_fd();
    // A peer that died leaves the master waiting for an answer: the watchdog sends one in
    // its place, through the peer's socket, which the master keeps open for that.
    let peer = PeerProc::spawn(
        c.peer_cpu(),
        &m.allowed,
        move || {
            let mut b = [0u8; DATAGRAM];
            loop {
                // SAFETY: a live buffer of DATAGRAM bytes.
                let n = unsafe { libc::recv(tfd, b.as_mut_ptr().cast(), DATAGRAM, 0) };
                if n != DATAGRAM as isize {
                    return;
                }
                // SAFETY: as above.
                if unsafe { libc::send(tfd, b.as_ptr().cast(), DATAGRAM, 0) } != n {
                    return;
                }
            }
        },
        move || {
            let b = [0u8; DATAGRAM];
            // SAFETY: a live buffer of DATAGRAM bytes.
            unsafe { libc::send(tfd, b.as_ptr().cast(), DATAGRAM, 0) };
        },
    )?;
    let fd = ours.as_raw_fd();
    let mut b = [0u8; DATAGRAM];
    let r = m.batched_fallible(&mut |n| {
        for _ in 0..n {
            // SAFETY: a live buffer of DATAGRAM bytes.
            let ok = unsafe {
                libc::send(fd, b.as_ptr().cast(), DATAGRAM, 0) == DATAGRAM as isize
                    && libc::recv(fd, b.as_mut_ptr().cast(), DATAGRAM, 0) == DATAGRAM as isize
            };
            if !ok {
                return Err(BenchError::failed("a UDP round trip", errno()));
            }
            peer.check()?;
        }
        Ok(())
    });
    drop(peer);
    drop(theirs);
    r
}

/// Connections a sample opens before it waits for the server to have served them all. Half
/// the listen backlog, so a TCP accept queue never overflows (an overflow drops the SYN and
/// the client waits a second for its retransmission, which is what makes lat_connect's own
/// figure unstable on one CPU), and enough that the one wait a sample ends with is a small
/// part of it.
const CONNECTIONS_PER_SAMPLE: usize = 64;
const BACKLOG: i32 = 2 * CONNECTIONS_PER_SAMPLE as i32;

/// lat_connect's server: accept, read until the client's close, close; each connection served
/// counted in `served` (shared with the client).
fn serve_connections(listener: i32, served: &AtomicU64) {
    loop {
        let fd = accept(listener);
        if fd < 0 {
            return;
        }
        while read_byte(fd) {}
        close(fd);
        served.fetch_add(1, Ordering::Release);
    }
}

/// Connections opened and closed against a server process on `peer_cpu`: `open_one` makes
/// one connected socket (the caller closes it).
///
/// The client never blocks while the backlog has room, so the server's accept, read and close
/// run whenever it gets the CPU: on one CPU, every twentieth connection or so. A sample of a
/// few connections would then hold either none of that work or a burst of it, and its median
/// would be the client's part alone (8.3 us of a unix connection whose whole cost, the
/// server's part included, is 17 us on one CPU, as lat_unix_connect's total time over
/// connections says). So a sample opens `CONNECTIONS_PER_SAMPLE` connections and ends when the
/// server has served them all: the cost of a connection with its serving, as lmbench's
/// steady state has it, at every placement.
fn connections(
    m: &Meter,
    c: &Case,
    listener: OwnedFd,
    open_one: &dyn Fn() -> Result<OwnedFd, BenchError>,
) -> Measured {
    let lfd = listener.as_raw_fd();
    let shared = Mapping::anonymous(4096, true, 0)?;
    // SAFETY: the shared page is live (and aligned) for as long as both parties run: the
    // peer is stopped before `shared` is dropped, below.
    let served: &AtomicU64 = unsafe { &*shared.ptr().cast::<AtomicU64>() };
    let peer = PeerProc::spawn(
        c.peer_cpu(),
        &m.allowed,
        move || serve_connections(lfd, served),
        || {},
    )?;
    let clock = Monotonic;
    let mut opened = 0u64;
    crate::measuring::counters::set_unit(CONNECTIONS_PER_SAMPLE as f64);
    let r = m.individual(&mut || {
        let t0 = clock.now_ns();
        for _ in 0..CONNECTIONS_PER_SAMPLE {
            drop(open_one()?);
            opened += 1;
        }
        while served.load(Ordering::Acquire) < opened {
            peer.check()?;
            // SAFETY: a plain sched_yield; on one CPU it lets the server run.
            unsafe { libc::sched_yield() };
        }
        let t1 = clock.now_ns();
        Ok(m.per_unit(t1.saturating_sub(t0), CONNECTIONS_PER_SAMPLE))
    });
    drop(peer);
    drop(listener);
    drop(shared);
    r
}

fn tcp_connect(m: &Meter, c: &Case) -> Measured {
    let (listener, port) = tcp_listener()?;
    connections(m, c, listener, &|| {
        let s = socket(libc::AF_INET, libc::SOCK_STREAM)?;
        if !connect_loopback(s.as_raw_fd(), port) {
            return Err(BenchError::failed("connect to 127.0.0.1", errno()));
        }
        Ok(s)
    })
}

/// A unix socket address for `path`.
fn unix_address(path: &std::path::Path) -> Result<libc::sockaddr_un, BenchError> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: an all-zero sockaddr_un is valid; filled below.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= a.sun_path.len() {
        return Err(BenchError::Failed(format!(
            "{} is too long for a unix socket's path (set TMPDIR to a shorter directory)",
            path.display()
        )));
    }
    for (d, s) in a.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(a)
}

const UN_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;

fn unix_connect(m: &Meter, c: &Case) -> Measured {
    let dir = tempfile::Builder::new()
        .prefix("net-")
        .tempdir_in(m.scratch_dir.clone().unwrap_or_else(std::env::temp_dir))
        .map_err(|e| BenchError::failed("a directory for the socket", e))?;
    let addr = unix_address(&dir.path().join("s"))?;
    let listener = socket(libc::AF_UNIX, libc::SOCK_STREAM)?;
    // SAFETY: a live sockaddr_un of the length given; then a plain listen.
    let ok = unsafe {
        libc::bind(listener.as_raw_fd(), (&raw const addr).cast(), UN_LEN) == 0
            && libc::listen(listener.as_raw_fd(), BACKLOG) == 0
    };
    if !ok {
        return Err(BenchError::failed(
            "bind and listen on a unix socket",
            errno(),
        ));
    }
    connections(m, c, listener, &|| {
        let s = socket(libc::AF_UNIX, libc::SOCK_STREAM)?;
        // SAFETY: a live sockaddr_un of the length given.
        if unsafe { libc::connect(s.as_raw_fd(), (&raw const addr).cast(), UN_LEN) } != 0 {
            return Err(BenchError::failed("connect to the unix socket", errno()));
        }
        Ok(s)
    })
}

/// `n` descriptors of one loopback TCP connection (dups of it), for lat_select tcp's wait over
/// many. This process holds the other end too: a peer process would bring a watchdog thread,
/// and in a process of two threads every descriptor a select looks at is reference-counted
/// (fdget's shortcut is for a file table no other thread shares), 20-40% more here
/// (docs/design-notes.md); lmbench's client is single-threaded.
struct Descriptors {
    fds: Vec<i32>,
    _conn: OwnedFd,
    _other_end: OwnedFd,
}

impl Descriptors {
    fn new(m: &Meter, c: &Case) -> Result<Descriptors, BenchError> {
        let n = c.int("fds")? as usize;
        ensure_fds(n as u64 + 16)?;
        let _ = m;
        let (other_end, conn) = tcp_connection()?;
        let mut fds = Vec::with_capacity(n);
        for _ in 0..n {
            // SAFETY: a plain syscall on a descriptor we own.
            let d = unsafe { libc::fcntl(conn.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
            if d < 0 {
                fds.iter().for_each(|&f| close(f));
                return Err(BenchError::failed("dup", errno()));
            }
            fds.push(d);
        }
        Ok(Descriptors {
            fds,
            _conn: conn,
            _other_end: other_end,
        })
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        self.fds.iter().for_each(|&f| close(f));
    }
}

/// Fail unless a wait found all `n` ready.
fn all_ready(got: i32, n: usize, what: &str) -> Result<(), BenchError> {
    if got as usize == n {
        Ok(())
    } else {
        Err(BenchError::Failed(format!(
            "{what} found {got} of {n} descriptors ready"
        )))
    }
}

fn select_tcp(m: &Meter, c: &Case) -> Measured {
    let d = Descriptors::new(m, c)?;
    let max = d.fds.iter().copied().max().unwrap_or(0);
    if max >= libc::FD_SETSIZE as i32 {
        return Err(BenchError::Failed(format!(
            "descriptor {max} is past select's FD_SETSIZE"
        )));
    }
    // SAFETY: an all-zero fd_set is empty; FD_SET below stays under FD_SETSIZE.
    let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
    for &f in &d.fds {
        // SAFETY: f < FD_SETSIZE, checked above.
        unsafe { libc::FD_SET(f, &mut set) };
    }
    let wait = |s: &mut libc::fd_set| {
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        // SAFETY: live sets and timeval.
        unsafe {
            libc::select(
                max + 1,
                std::ptr::null_mut(),
                s,
                std::ptr::null_mut(),
                &mut tv,
            )
        }
    };
    all_ready(wait(&mut set.clone()), d.fds.len(), "select")?;
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            let mut s = set;
            std::hint::black_box(wait(&mut s));
        }
    });
    Ok(o.param("fds", d.fds.len()))
}

fn poll_tcp(m: &Meter, c: &Case) -> Measured {
    let d = Descriptors::new(m, c)?;
    let mut fds: Vec<libc::pollfd> = d
        .fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    let len = fds.len() as libc::nfds_t;
    // SAFETY: a live array of `len` pollfds.
    let mut wait = || unsafe { libc::poll(fds.as_mut_ptr(), len, 0) };
    all_ready(wait(), d.fds.len(), "poll")?;
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            std::hint::black_box(wait());
        }
    });
    Ok(o.param("fds", d.fds.len()))
}

fn epoll_tcp(m: &Meter, c: &Case) -> Measured {
    let d = Descriptors::new(m, c)?;
    // SAFETY: a plain syscall.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(BenchError::failed("epoll_create1", errno()));
    }
    // SAFETY: just made; closed on drop.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &f in &d.fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLOUT as u32,
            u64: f as u64,
        };
        // SAFETY: a live event for a descriptor we own.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, f, &mut ev) } != 0 {
            return Err(BenchError::failed("epoll_ctl", errno()));
        }
    }
    let n_fds = d.fds.len();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; n_fds];
    // SAFETY: a live array of n_fds events.
    let mut wait =
        || unsafe { libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), n_fds as i32, 0) };
    all_ready(wait(), n_fds, "epoll_wait")?;
    let o = m.batched(&mut |n| {
        for _ in 0..n {
            std::hint::black_box(wait());
        }
    });
    Ok(o.param("fds", n_fds))
}
