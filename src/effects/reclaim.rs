//! What a killed oscost left on the machine, reclaimed as every command starts (`cli::gated`):
//! the one place that knows every kind (settings, run cgroups, ftrace instances, audit rules)
//! and what says its owner is gone (ARCHITECTURE 5b lists them). It sits beside the kinds it
//! reclaims, and none of them imports it.

/// Reclaim everything oscosts killed whole (every process, guards and helpers too) left on
/// the machine, first thing in every command (`cli::gated`): kernel settings (`state`),
/// the run cgroups whose maker is gone (`effects::cgroup::reclaim`), the ftrace instances and
/// audit rules whose helper's marker is free (`tracing::ftrace`, `tracing::audit`), and the
/// old states kept in the user's data directory. Each kind costs a directory read where
/// nothing was left. The lines say what was done.
pub fn recover() -> Vec<String> {
    let mut said = super::put_back::state::recover();
    if let Ok(data) = super::store::data_dir() {
        said.extend(super::put_back::state::ignore_legacy(&data));
    }
    for gone in super::cgroup::reclaim() {
        said.push(format!(
            "removed the cgroup {}, left by a run killed with its guard",
            gone.display()
        ));
    }
    for gone in crate::tracing::ftrace::reclaim() {
        said.push(format!(
            "removed the ftrace instance {gone}, left by a run killed with its helper"
        ));
    }
    for gone in crate::tracing::audit::reclaim() {
        said.push(format!(
            "deleted the audit rule {gone}, left by a run killed with its helper"
        ));
    }
    said
}
