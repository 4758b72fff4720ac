//! How one operation is timed (docs/ARCHITECTURE.md §2): the clocks, the sampler and its
//! counters, CPU placement, the noise guards and the speed witness, the worker's own
//! confinement and memory watch, the scaling board, sampled profiles with their symbols, and
//! the contract a benchmark function measures under (`case`). The lowest layer above `base`:
//! it knows nothing of tracing, of the machine's description or of the catalogue.

pub mod case;
pub mod clock;
pub mod confinement;
pub mod counters;
pub mod error;
pub mod group_guard;
pub mod ipc_guard;
pub mod memory;
pub mod noise;
pub mod os;
pub mod placement;
pub mod profile;
pub mod sampler;
pub mod scaling;
pub mod symbols;
pub mod vdso;
pub mod witness;
