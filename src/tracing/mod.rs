//! Tracing and hooks (docs/ARCHITECTURE.md §2): loading and attaching BPF programs, ftrace and
//! tracefs, the ring buffer a trace is read from, audit rules, the markers that bracket a
//! measured span in a trace, the system-call counts of a traced program, and the observers
//! (BPF programs, audit rules, tracers) found attached to the machine. Above `measuring`,
//! whose placement and OS calls it uses.

pub mod audit;
pub mod bpf;
pub mod ftrace;
pub mod marker;
pub mod observers;
pub mod ringbuf;
pub mod syscount;
pub mod trace;
pub mod tracefs;
