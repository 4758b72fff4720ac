//! What oscost does to the world outside its process, each through one door: files
//! written (`output`, behind the gate), the gate that proves every path and store before
//! work (`gate`), the results stores (`store`), signals and the processes they stop
//! (`signals`), and the kernel settings a run changes and the guard that puts them back
//! on every exit path (`settings_guard`, `put_back`), and the cgroup a run makes for the
//! benchmarks that start processes in one (`cgroup`), kept by the same guard; what runs killed
//! whole left, reclaimed as every command starts (`reclaim`).

pub mod cgroup;
pub mod gate;
pub mod output;
pub mod put_back;
pub mod reclaim;
pub mod settings_guard;
pub mod signals;
pub mod store;
