//! `oscost scale CASE`: will-it-scale's runtest.py on oscost's engine. It measures one scale/
//! case at 1 to N copies (every count up to the allowed CPUs, as runtest.py steps them, or
//! `--copies`), as processes and as threads, and prints will-it-scale's table on stdout
//! (`report::wis`) so that scripts written for it read oscost's numbers; each point's CI,
//! efficiency and IPIs go to stderr. Like `ctx`, it saves nothing; `--json` writes the run.

use std::path::PathBuf;

use clap::Args;

use super::args::usage;
use super::print_stdout;
use super::{Command, Given};
use crate::effects::gate::Effects;
use crate::processes::scheduler;
use crate::{effects::output, report};

#[derive(Debug, Args, Clone)]
/// `oscost scale`'s arguments.
pub struct ScaleArgs {
    /// The case: a scale/ id (`scale/getppid`) or its name (`getppid`); `oscost list` gives
    /// each with the will-it-scale test it is.
    #[arg(value_name = "CASE")]
    pub case: String,
    /// Copies to run at once: a list of counts, or `all` [default: every count from 1 to the
    /// allowed CPUs, as will-it-scale's runtest.py].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub copies: Option<Vec<String>>,
    /// A shorter, less precise pass.
    #[arg(long)]
    pub quick: bool,
    /// Also write the run (the result model) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl ScaleArgs {
    /// The catalogue id of the case asked for.
    fn id(&self) -> anyhow::Result<&'static str> {
        let name = self.case.trim().trim_end_matches('/');
        let id = if name.starts_with("scale/") {
            name.to_string()
        } else {
            format!("scale/{name}")
        };
        crate::bench::find(&id).map(|b| b.id).ok_or_else(|| {
            let known: Vec<&str> = crate::bench::scale::BENCHMARKS
                .iter()
                .map(|b| b.id.trim_start_matches("scale/"))
                .collect();
            usage(format!(
                "no scale case '{}'; one of: {}",
                self.case,
                known.join(", ")
            ))
        })
    }
}

impl Command for ScaleArgs {
    /// The run's JSON; the store is kept safe though scale saves nothing.
    fn effects(&self) -> Effects {
        Effects::new()
            .store(None)
            .writes("--json", self.json.as_ref())
    }

    /// Measure the case at each count of copies and print will-it-scale's table.
    fn run(self, _: Given) -> anyhow::Result<i32> {
        let stop = crate::effects::signals::guard_processes()?;
        let id = self.id()?;
        let mut request = super::plan::Request::new(vec![id.to_string()]);
        request.quick = self.quick;
        request.copies = Some(self.copies.clone().unwrap_or_else(|| {
            let cpus = crate::measuring::placement::allowed_cpus().len().max(1);
            (1..=cpus).map(|n| n.to_string()).collect()
        }));
        let mut plan = super::plan::build(&request)?;
        super::plan::settle_cpu(&mut plan);
        let run = scheduler::execute(&plan, &stop)?;
        let mut late = Vec::new();
        if let Some(p) = &self.json
            && let Err(e) = output::export(&run, &[(p.clone(), Box::new(report::json::Json) as _)])
        {
            late.push(e.to_string());
        }
        let (text, notes) = report::wis::table(&run, id);
        crate::say_part!("{notes}");
        print_stdout(&text)?;
        Ok(super::session::conclude(&[&run], &late))
    }
}
