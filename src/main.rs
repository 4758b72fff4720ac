//! oscost: measure what the operating system charges for its primitives.
//!
//! `main` parses the command line, dispatches, and is the one error boundary: a usage error
//! exits 2, an interrupt 128 + signal, any other error 1, each with one line on stderr.

use clap::Parser;

use oscost::cli::{self, Cli, Command, UsageError};
use oscost::{bench, commands, env, harness, run, worker};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => e.exit(), // clap: help/version exit 0, usage errors exit 2
    };
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            if let Some(code) = run::interrupted_status(&e) {
                eprintln!("oscost: {e}; every benchmark process was stopped, nothing was saved");
                code
            } else if e.downcast_ref::<UsageError>().is_some() {
                eprintln!("oscost: {e}");
                2
            } else {
                eprintln!("oscost: {e:#}");
                1
            }
        }
    };
    std::process::exit(code);
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        None => run_command(cli.run),
        Some(Command::Run(args)) => run_command(args),
        Some(Command::List) => {
            run::print_stdout(&list_text())?;
            Ok(0)
        }
        Some(Command::Env { json }) => {
            let e = env::collect(Some(harness::clock::calibrate()));
            let text = if json {
                serde_json::to_string_pretty(&e)? + "\n"
            } else {
                oscost::report::env::render(&e)
            };
            run::print_stdout(&text)?;
            Ok(0)
        }
        Some(Command::History { bench, store }) => {
            commands::history(bench.as_deref(), &store)?;
            Ok(0)
        }
        Some(Command::Show { run, store }) => {
            commands::show(&run, &store)?;
            Ok(0)
        }
        Some(Command::Export {
            run,
            outputs,
            store,
        }) => {
            commands::export(&run, &outputs, &store)?;
            Ok(0)
        }
        Some(Command::Compare {
            base,
            cand,
            compare,
            outputs,
            report,
            png,
            store,
        }) => commands::compare_cmd(
            &base,
            &cand,
            &compare,
            &outputs,
            report.as_deref(),
            png,
            &store,
        ),
        Some(Command::Report {
            run,
            out,
            png,
            store,
        }) => {
            commands::report(&run, &out, png, &store)?;
            Ok(0)
        }
        Some(Command::Ab {
            a,
            b,
            rounds,
            compare,
            run,
        }) => {
            let interrupted = worker::install_guards()?;
            commands::ab(
                a.as_deref(),
                b.as_deref(),
                rounds,
                &compare,
                &run,
                interrupted,
            )
        }
        Some(Command::Ctx {
            sizes,
            parallel,
            warmup_us,
            repetitions,
            procs,
            json,
        }) => {
            let interrupted = worker::install_guards()?;
            commands::ctx(
                &sizes,
                parallel,
                warmup_us,
                repetitions,
                &procs,
                json.as_deref(),
                interrupted,
            )?;
            Ok(0)
        }
        Some(Command::Worker { id, config }) => Ok(worker::worker_main(&id, &config)),
    }
}

fn run_command(args: cli::RunArgs) -> anyhow::Result<i32> {
    let interrupted = worker::install_guards()?;
    let plan = run::plan(&args)?;
    if let Some(d) = &args.report {
        commands::check_report_dir(d)?;
    }
    // Open the store first: a database that cannot be used is refused before measuring.
    let mut store = if args.no_save {
        None
    } else {
        Some(commands::open_store(&args.store)?)
    };
    let result = run::execute(&plan, interrupted)?;
    run::output(&plan, &result)?;
    if let Some(s) = &mut store {
        let id = s.save(&result)?;
        eprintln!("oscost: saved as run {id} in {}", s.path().display());
    }
    if let Some(d) = &args.report {
        oscost::report::html::write_run(&result, d, false)?;
        eprintln!("oscost: report in {}", d.join("index.html").display());
    }
    Ok(0)
}

fn list_text() -> String {
    let mut out = String::new();
    for b in bench::registry() {
        out.push_str(&format!(
            "{:<28} ns/op  {}{}\n",
            b.id,
            b.definition,
            if b.default {
                ""
            } else {
                "  (not in the default suite)"
            }
        ));
    }
    out
}
