//! Why a benchmark gave no number: skipped (not applicable here, said, never faked) or failed.
//! Its own file because the lowest measuring modules (`os`, `placement`) raise it and the case
//! model (`case`) carries it; none of them needs the others for it.

use serde::{Deserialize, Serialize};

/// A benchmark could not produce a number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum BenchError {
    /// Not applicable here (not this OS, no such instruction, no permission): said, never faked.
    #[error("skipped: {0}")]
    Skipped(String),
    /// It should have run and did not.
    #[error("failed: {0}")]
    Failed(String),
}

impl BenchError {
    /// A failure of `what`, with the error that caused it.
    pub fn failed(what: &str, e: impl std::fmt::Display) -> BenchError {
        BenchError::Failed(format!("{what}: {e}"))
    }

    /// The system call `what` just failed (errno still set): a skip where the kernel lacks
    /// it (ENOSYS), naming the Linux version that brought it; a failure otherwise.
    pub fn of_call(what: &str, since: &str) -> BenchError {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            BenchError::Skipped(format!(
                "this kernel has no {what} (ENOSYS; it came in Linux {since})"
            ))
        } else {
            BenchError::failed(what, e)
        }
    }
}
