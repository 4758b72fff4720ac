//! The measurement machinery every benchmark uses: clocks, the sampler, CPU placement and the
//! noise guards (docs/ARCHITECTURE.md §2).

pub mod audit;
pub mod bpf;
pub mod case;
pub mod clock;
pub mod confinement;
pub mod contention;
pub mod counters;
pub mod env;
pub mod error;
pub mod ftrace;
pub mod group_guard;
pub mod ipc_guard;
pub mod marker;
pub mod memory;
pub mod noise;
pub mod observers;
pub mod os;
pub mod placement;
pub mod profile;
pub mod ringbuf;
pub mod runner;
pub mod sampler;
pub mod scaling;
pub mod settings;
pub mod symbols;
pub mod syscount;
pub mod trace;
pub mod tracefs;
pub mod vdso;
pub mod witness;
