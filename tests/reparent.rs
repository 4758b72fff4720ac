//! What oscost starts to outlive it (the settings guard, a `--during` program's keeper) is
//! never its child, even though the coordinator is a child subreaper: the coordinator SIGKILLs
//! every child it has after each worker, and a guard or keeper killed that way puts nothing
//! back. This binary holds one test because it makes its own process a subreaper, which the
//! tests of another binary must not inherit.

use std::io::BufRead;

/// The parent pid of `pid` (`/proc/PID/stat`'s fourth field).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn a_reparented_program_is_never_a_child_of_its_subreaper_starter() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let me = std::process::id() as i32;
    // The middle child's exit hands the program on a moment after `spawn` can return: a
    // starter that took its subreaper flag back in that moment became the program's parent.
    // The moment is short (6000 starts of the old code here did not hit it, where ab's keeper
    // once did); many starts give it its chances, and the test cannot fail otherwise.
    for i in 0..200 {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "echo $$; exec sleep 30"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        // The middle child it returns is already reaped (`spawn_reparented` waits for it).
        #[allow(clippy::zombie_processes)]
        let mut middle = oscost::measuring::os::spawn_reparented(&mut cmd, || {})
            .expect("spawn a reparented sh");
        let mut line = String::new();
        std::io::BufReader::new(middle.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its pid");
        let pid: i32 = line.trim().parse().expect("a pid");
        let parent = parent_of(pid);
        // SAFETY: kill with integer arguments, to a process this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_ne!(
            parent,
            Some(me),
            "start {i}: the program is this subreaper's child"
        );
        // And the starter is a subreaper again.
        let mut flag: libc::c_int = 0;
        // SAFETY: prctl writes one int to a local that outlives the call.
        unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &raw mut flag, 0, 0, 0) };
        assert_eq!(flag, 1, "start {i}: the subreaper flag was not put back");
    }
}
