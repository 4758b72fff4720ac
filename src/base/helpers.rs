//! The helper processes oscost starts from its own binary, each named by its first argument:
//! the one list of those names. `main` dispatches each name to its entry before anything else
//! runs (single-threaded, no clap tree, no gate, no reserve mapping); the modules that start a
//! helper, and `noise::task_label`, which knows a keeper's tasks by its name, use these.

/// A measuring worker: one benchmark, its samples streamed to the coordinator
/// (`processes::worker`).
pub const WORKER: &str = "__worker";
/// The guard that puts back what oscost changed outside itself (`effects::put_back`).
pub const GUARD: &str = "__guard";
/// The keeper of a program that runs during a side, `--during` (`processes::during`).
pub const KEEPER: &str = "__during";
/// Mounts tracefs in a mount namespace of its own (`tracing::tracefs`).
pub const TRACEFS: &str = "__tracefs";
/// Adds, lists and removes oscost's audit rules (`tracing::audit`).
pub const AUDIT_RULE: &str = "__audit-rule";
/// Counts a function's calls with ftrace (`tracing::ftrace`).
pub const FTRACE: &str = "__ftrace";

/// Every helper's name: `tests/cli.rs` starts each and checks main.rs dispatches it (a name
/// added here and not to main.rs's `HELPERS` fails there).
pub const ALL: [&str; 6] = [WORKER, GUARD, KEEPER, TRACEFS, AUDIT_RULE, FTRACE];
