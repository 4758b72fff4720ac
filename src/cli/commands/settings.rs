//! `oscost settings`: the catalogue of kernel settings `run --set` and `ab --a-set/--b-set`
//! change on a running kernel (`machine::settings`): each one with its value here, whether it
//! is system-wide or per task, whether it can be changed here and if not why (not root, no
//! such file on this kernel, debugfs refused, a CPU without the control), what it means and
//! which benchmarks it is expected to move.

use clap::Args;

use super::print_stdout;
use super::{Command, Given};
use crate::effects::gate::Effects;
use crate::machine::settings::{self, Scope};

#[derive(Debug, Args, Clone)]
/// `oscost settings`'s arguments (none).
pub struct SettingsArgs {}

impl Command for SettingsArgs {
    /// It writes only to standard output; the default store is still kept safe.
    fn effects(&self) -> Effects {
        Effects::new().store(None)
    }

    /// Print the settings catalogue as this machine has it.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        print_stdout(&table())?;
        Ok(0)
    }
}

fn table() -> String {
    let cpus = crate::measuring::placement::allowed_cpus();
    let mut t = crate::report::plain_table(
        false,
        vec![
            "setting",
            "value here",
            "scope",
            "can change here",
            "moves",
            "meaning",
        ],
    );
    // Within 100 columns, a terminal's or a pipe's: the long cells wrap in their columns.
    t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_width(100);
    for name in settings::instances() {
        let Some((e, _)) = settings::entry(&name) else {
            continue;
        };
        let (value, can) = match settings::resolve(&name, &cpus) {
            Ok(s) => {
                let value = settings::read(&s)
                    .map(|v| settings::shown(&v))
                    .unwrap_or_else(|err| format!("(unreadable: {err})"));
                let can = match settings::changeable(&s) {
                    Ok(()) => "yes".to_string(),
                    Err(why) => format!("no: {why}"),
                };
                (value, can)
            }
            Err(err) => ("-".to_string(), format!("no: {err}")),
        };
        let scope = match e.scope {
            Scope::System => "system",
            Scope::Task => "per task",
        };
        t.add_row(vec![
            name,
            value,
            scope.into(),
            can,
            e.moves.join(" "),
            e.meaning.into(),
        ]);
    }
    let note = crate::base::text::wrap(
        "Also any file under /proc/sys or /sys (debugfs included) by its path; a glob names per-CPU files. \
         `oscost ab --a-set NAME=VALUE --b-set NAME=VALUE IDS` compares two values interleaved; \
         `oscost run --set NAME=VALUE` measures under one. Every value is read back after it is \
         written and put back at the end, on an error, a signal, or (by a guard process) when \
         oscost is killed.",
        100,
        0,
        "",
    );
    format!("{t}\n{note}\n")
}
