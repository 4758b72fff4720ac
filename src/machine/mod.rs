//! Describing the machine (docs/ARCHITECTURE.md §2): the environment a run records (CPU,
//! kernel and its configuration, topology, observers attached), the contention other programs
//! put on the CPUs, and the kernel settings oscost reads, names and holds for a comparison.
//! Above `tracing`, because the environment lists the observers found attached.

pub mod contention;
pub mod env;
pub mod settings;
