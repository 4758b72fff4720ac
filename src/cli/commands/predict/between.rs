//! `oscost predict --from RUN_A --to RUN_B -- CMD`: what moving a program from system A to
//! system B (two stored runs: two kernels, a kernel setting, a sandbox) costs it, without
//! running it on B. CMD runs once here, counted (`tracing::syscount`); its operations are
//! priced by what each benchmark's median moved from A to B (`analysis::compare` of the two
//! runs, so the CIs are a comparison's, with the run-to-run spread where it is known), and
//! summed as `predict --under` sums a wrapper's prices (`analysis::predict::predict`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Ctx, PredictArgs, model, shell_words};
use crate::analysis::predict::{Line, Price};
use crate::base::model::Run;
use crate::cli::commands::args::{SelectArgs, usage};
use crate::cli::commands::{load_run, print_stdout};

/// What `--from/--to` prints and writes (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct Moved {
    /// The program, as a person would type it.
    pub command: String,
    /// The runs it is moved between, as named.
    pub from: String,
    /// The run it is moved to.
    pub to: String,
    /// System calls by name, as counted here.
    pub syscalls: BTreeMap<String, u64>,
    /// The predicted added time, ns (negative: saved).
    pub predicted_added_ns: f64,
    /// Its 95% CI, ns.
    pub predicted_ci95: [f64; 2],
    /// Largest added time first.
    pub breakdown: Vec<Line>,
    /// Each priced benchmark's move from A to B.
    pub prices: BTreeMap<String, Price>,
    /// What the prediction assumed, in words.
    pub assumptions: Vec<String>,
}

/// Count CMD here, price it by the two runs, print (and write) the prediction.
pub(super) fn run(args: &PredictArgs, from: &str, to: &str) -> anyhow::Result<i32> {
    let select = SelectArgs::default();
    let (ra, na) = load_run(from, &args.store, &select)?;
    let (rb, nb) = load_run(to, &args.store, &select)?;
    crate::analysis::predict::has_null_call(&ra, &rb, &na, &nb).map_err(usage)?;
    super::check_program("the command", &args.command)?;
    let stop = crate::effects::signals::on_interrupt()?;
    let cpu = crate::cli::commands::plan::measuring_cpu(args.cpu)?;
    let plain = crate::processes::conditions::Side::default();
    let ctx = Ctx {
        args,
        side: &plain,
        cmd_text: shell_words(&args.command),
        cpu,
        stop: &stop,
    };
    let (counts, kinds) = ctx.count()?;
    let (prices, unjudged) = moved_prices(&ra, &rb, &args.store)?;
    let Some(mut pred) = model::predict(&kinds, &prices, "in both runs") else {
        anyhow::bail!("{} has no price between the two runs", model::NULL_CALL);
    };
    let used: Vec<String> = crate::analysis::predict::prices_needed(&kinds)
        .into_iter()
        .filter(|id| unjudged.contains(id))
        .collect();
    if !used.is_empty() {
        pred.assumptions.insert(
            0,
            format!(
                "the two runs were measured apart and the store has fewer than {} runs of this \
                 system to learn how far its runs scatter for {}: the interval is the runs' own \
                 and leaves out the host's drift between them (store more runs: `oscost run --runs 3`)",
                crate::analysis::run_to_run::MIN_RUNS,
                used.join(", ")
            ),
        );
    }
    let out = Moved {
        command: ctx.cmd_text.clone(),
        from: na,
        to: nb,
        syscalls: counts.syscalls,
        predicted_added_ns: pred.predicted_added_ns,
        predicted_ci95: pred.predicted_ci95,
        breakdown: pred.breakdown,
        prices,
        assumptions: pred.assumptions,
    };
    print_stdout(&words(&out))?;
    if let Some(j) = &args.json {
        crate::effects::output::write_file(j, &serde_json::to_vec_pretty(&out)?)?;
    }
    Ok(0)
}

/// Each benchmark's move from `a` to `b` as a price, judged as two runs measured apart (the
/// run-to-run spread the store learned is in each price's interval, the host's drift between
/// them projected out where it can be), and the benchmarks whose spread is unknown.
fn moved_prices(
    a: &Run,
    b: &Run,
    store: &crate::cli::commands::args::StoreArgs,
) -> anyhow::Result<(BTreeMap<String, Price>, Vec<String>)> {
    let mut cmp = crate::analysis::compare::compare(a, b, "from", "to", &Default::default());
    crate::cli::commands::compare::judge_apart_by_store(&mut cmp, store, a, b)?;
    let unjudged = crate::analysis::compare::unknown_apart(&cmp)
        .into_iter()
        .map(|r| r.id.clone())
        .collect();
    Ok((model::prices_of(&cmp), unjudged))
}

/// The prediction in lines: the total, then the breakdown's largest parts.
pub fn words(m: &Moved) -> String {
    let signed = crate::report::signed_ns;
    let calls: u64 = m.syscalls.values().sum();
    let mut s = format!(
        "`{}` moved from {} to {}: predicted {} ({} to {}) over its {calls} system calls\n",
        m.command,
        m.from,
        m.to,
        signed(m.predicted_added_ns),
        signed(m.predicted_ci95[0]),
        signed(m.predicted_ci95[1])
    );
    for l in m.breakdown.iter().take(8) {
        s.push_str(&format!(
            "  {:<28} {:>9} x {:>10} = {:>10}   (priced by {})\n",
            l.kind,
            l.count,
            signed(l.addition_ns),
            signed(l.added_ns),
            l.priced_by
        ));
    }
    if m.breakdown.len() > 8 {
        let rest: f64 = m.breakdown.iter().skip(8).map(|l| l.added_ns).sum();
        s.push_str(&format!(
            "  {} more kinds: {}\n",
            m.breakdown.len() - 8,
            signed(rest)
        ));
    }
    for a in &m.assumptions {
        s.push_str(&format!("note: {a}\n"));
    }
    s
}
