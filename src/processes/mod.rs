//! The processes a measurement runs in and their order: the worker each repetition runs in
//! (`worker`), the scheduler that orders repetitions and sides (`scheduler`), what a side is
//! measured under (`conditions`: a wrapper, kernel settings, a program during it, its CPU), a
//! program measured as a whole (`program`), the keeper of a program that runs during a side
//! (`during`), and the run's scratch directory (`scratch`).

pub mod conditions;
pub mod during;
pub mod program;
pub mod scheduler;
pub mod scratch;
pub mod worker;
