//! The processes a measurement runs in and their order: the worker each repetition runs in
//! (`worker`), the scheduler that orders repetitions, sides and kernel settings
//! (`scheduler`), a program measured as a whole (`program`), and the run's scratch
//! directory (`scratch`).

pub mod program;
pub mod scheduler;
pub mod scratch;
pub mod worker;
