//! The per-task speculation controls (`prctl` PR_SET_SPECULATION_CTRL): read, judged, tried
//! and applied to the calling thread, which a measuring worker does before its first sample.

use super::*;

// From linux/prctl.h, as i32 (libc has them as u32, and lacks PR_SPEC_L1D_FLUSH).
pub(super) const PR_SPEC_STORE_BYPASS: i32 = 0;
pub(super) const PR_SPEC_INDIRECT_BRANCH: i32 = 1;
pub(super) const PR_SPEC_L1D_FLUSH: i32 = 2;
pub(super) const PR_SPEC_NOT_AFFECTED: i32 = 0;
pub(super) const PR_SPEC_PRCTL: i32 = 1;
pub(super) const PR_SPEC_ENABLE: i32 = 1 << 1;
pub(super) const PR_SPEC_DISABLE: i32 = 1 << 2;
pub(super) const PR_SPEC_FORCE_DISABLE: i32 = 1 << 3;

/// `PR_SPEC_*` control names and values.
fn speculation_value(word: &str) -> Option<libc::c_ulong> {
    Some(match word {
        "enable" | "on" => PR_SPEC_ENABLE as libc::c_ulong,
        "disable" | "off" => PR_SPEC_DISABLE as libc::c_ulong,
        "force-disable" => PR_SPEC_FORCE_DISABLE as libc::c_ulong,
        _ => return None,
    })
}

pub(super) fn speculation_word(state: i32) -> &'static str {
    if state < 0 {
        return "unsupported";
    }
    let s = state & !PR_SPEC_PRCTL;
    if s & PR_SPEC_FORCE_DISABLE != 0 {
        "force-disable"
    } else if s & PR_SPEC_DISABLE != 0 {
        "disable"
    } else if s & PR_SPEC_ENABLE != 0 {
        "enable"
    } else if state == PR_SPEC_NOT_AFFECTED {
        "not-affected"
    } else {
        "not-controllable"
    }
}

pub(super) fn read_speculation(which: i32) -> std::io::Result<i32> {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_GET_SPECULATION_CTRL, which, 0, 0, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r)
}

/// Whether `value` is one a per-task setting takes; why not, when not.
pub fn check_task_value(name: &str, value: &str) -> Result<(), SettingError> {
    match speculation_value(value) {
        Some(_) => Ok(()),
        None => Err(SettingError::Refused {
            name: name.into(),
            why: format!("'{value}' is not enable, disable or force-disable"),
        }),
    }
}

/// A per-task setting tried in a child that applies it, reads it back and exits: a value this
/// CPU or kernel refuses or does not keep is found before measuring, and oscost's own
/// controls stay as they were (force-disable cannot be undone in a task).
pub fn try_task(name: &str, value: &str) -> Result<(), SettingError> {
    check_task_value(name, value)?;
    let Some((which, v)) = task_params(name, value) else {
        return Err(SettingError::Refused {
            name: name.into(),
            why: "not a per-task setting".into(),
        });
    };
    // SAFETY: the child calls only prctl and _exit, on integers made before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SettingError::Refused {
            name: name.into(),
            why: format!("cannot try it: {}", std::io::Error::last_os_error()),
        });
    }
    if pid == 0 {
        let code = match set_and_check(which, v) {
            Ok(()) => 0,
            Err(TaskFailure::Refused(errno)) => 10 + errno.clamp(0, 200),
            Err(TaskFailure::NotKept) => 1,
            Err(TaskFailure::Unknown) => 2,
        };
        // SAFETY: _exit ends the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waitpid on the child just forked.
    unsafe { libc::waitpid(pid, &raw mut status, 0) };
    let refused = |why: String| SettingError::Refused {
        name: name.into(),
        why,
    };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(1) => Err(refused(format!(
            "the kernel did not keep '{value}' for a task (it reads otherwise)"
        ))),
        Some(c) if c >= 10 => Err(refused(format!(
            "this CPU or kernel does not let a task set it ({})",
            std::io::Error::from_raw_os_error(c - 10)
        ))),
        _ => Err(refused("it could not be tried".into())),
    }
}

/// Why a per-task control was not applied.
enum TaskFailure {
    /// prctl refused it (errno).
    Refused(i32),
    /// Applied, but it reads back otherwise.
    NotKept,
    /// Not a per-task setting or value.
    Unknown,
}

/// The control and value a per-task setting names (`None`: not one).
fn task_params(name: &str, value: &str) -> Option<(i32, libc::c_ulong)> {
    let (e, _) = entry(name)?;
    match (e.kind, speculation_value(value)) {
        (Encoding::Speculation(which), Some(v)) => Some((which, v)),
        _ => None,
    }
}

/// Apply a per-task control to the calling thread and read it back; only prctl (it runs in
/// `try_task`'s forked child too).
fn set_and_check(which: i32, v: libc::c_ulong) -> Result<(), TaskFailure> {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_SPECULATION_CTRL, which, v, 0, 0) };
    if r < 0 {
        // SAFETY: reading errno.
        return Err(TaskFailure::Refused(unsafe { *libc::__errno_location() }));
    }
    // SAFETY: prctl with integer arguments only.
    let now = unsafe { libc::prctl(libc::PR_GET_SPECULATION_CTRL, which, 0, 0, 0) };
    // The state reads with the prctl bit beside the value set (force-disable has its own).
    if now < 0 || (now & v as i32) == 0 {
        return Err(TaskFailure::NotKept);
    }
    Ok(())
}

/// A per-task control applied to the calling thread and read back.
fn task_control(name: &str, value: &str) -> Result<(), TaskFailure> {
    let (which, v) = task_params(name, value).ok_or(TaskFailure::Unknown)?;
    set_and_check(which, v)
}

/// Apply a per-task setting to the calling thread (the worker, before it measures) and read
/// it back.
pub fn apply_to_self(name: &str, value: &str) -> Result<(), SettingError> {
    let refused = |why: String| SettingError::Refused {
        name: name.into(),
        why,
    };
    match task_control(name, value) {
        Ok(()) => Ok(()),
        Err(TaskFailure::Refused(errno)) => Err(refused(format!(
            "this CPU or kernel does not let a task set it ({})",
            std::io::Error::from_raw_os_error(errno)
        ))),
        Err(TaskFailure::NotKept) => Err(refused(format!(
            "the kernel did not keep '{value}' (it reads otherwise)"
        ))),
        Err(TaskFailure::Unknown) => {
            check_task_value(name, value)?;
            Err(refused("not a per-task setting".into()))
        }
    }
}
