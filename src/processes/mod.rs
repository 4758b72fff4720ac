//! The processes a measurement runs in and their order: the worker each repetition runs in
//! (`worker`), the scheduler that orders repetitions, sides and kernel settings
//! (`scheduler`), a program measured as a whole (`program`), a program that runs during a
//! side (`during`), and the run's scratch directory (`scratch`).

pub mod during;
pub mod program;
pub mod scheduler;
pub mod scratch;
pub mod worker;
