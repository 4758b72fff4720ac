//! Profiles as a person reads them (`--profile`): each profiled result's costliest functions
//! in ns per operation with their intervals (`run`, `show --profile`), what sampling without a
//! PMU cannot see, an addition split by function (`ab`, `compare`), a stacked bar for the
//! pages, and the folded stacks flamegraph tools read (`--folded FILE`).

use std::fmt::Write as _;

use crate::analysis::compare::Comparison;
use crate::analysis::profile::{self, FunctionCost};
use crate::base::model::profile::{OTHER, Profile, Space};
use crate::base::model::{BenchResult, Run};
use crate::base::stats::units::format_ns;

/// Functions listed for a result.
pub const TOP: usize = 10;

/// Results whose profiles `run` prints whole; past this it points to `show --profile`.
const PRINTED_WHOLE: usize = 3;

/// A result's costliest functions, a line each: share, ns per operation, interval, where.
pub fn result_lines(r: &BenchResult, top: usize) -> Vec<String> {
    let Some(p) = r.profile.as_ref() else {
        return vec![];
    };
    let costs = profile::costs(p);
    let mut out = vec![format!(
        "{}: {} samples in {} repetitions ({}, {} Hz), ns per operation:",
        r.id,
        p.samples(),
        p.repetitions.len(),
        p.sampling.event,
        p.sampling.rate_hz
    )];
    let width = costs
        .iter()
        .take(top)
        .map(|c| format_ns(c.ns).len())
        .max()
        .unwrap_or(0);
    for c in costs.iter().take(top) {
        out.push(format!(
            "  {:>5.1}%  {:>width$}  [{}, {}]  {}{}",
            c.share * 100.0,
            format_ns(c.ns),
            format_ns(c.ci95[0]),
            format_ns(c.ci95[1]),
            c.symbol,
            if c.symbol == OTHER {
                ""
            } else {
                space_mark(c.space)
            }
        ));
    }
    let rest: f64 = costs.iter().skip(top).map(|c| c.ns).sum();
    if costs.len() > top {
        out.push(format!(
            "  {} in {} more functions",
            format_ns(rest),
            costs.len() - top
        ));
    }
    out.extend(limits(p, &costs).into_iter().map(|l| format!("  {l}")));
    out
}

fn space_mark(s: Space) -> &'static str {
    match s {
        Space::Kernel => "",
        Space::Bpf => "  (BPF, JIT)",
        Space::User => "  (user)",
    }
}

/// What this profile cannot see, said where it applies.
pub fn limits(p: &Profile, costs: &[FunctionCost]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(why) = &p.sampling.kernel_refused {
        out.push(why.clone());
    }
    let kernel = costs.iter().any(|c| c.space != Space::User);
    if p.sampling.event == "cpu-clock" && kernel {
        let first = costs
            .iter()
            .find(|c| c.space == Space::Kernel)
            .map_or("the first such function", |c| c.symbol.as_str());
        out.push(format!(
            "sampled by the software clock (no PMU): a sample lands where interrupts are next \
enabled, so entry and exit code that runs with them off is counted in the function after it \
({first} here) and is under-counted itself"
        ));
    }
    if p.sampling.scope == crate::base::model::profile::SamplingScope::Task {
        out.push(
            "sampled by a clock that follows the measuring task (sampling each CPU the case \
ran on needs root, CAP_PERFMON or kernel.perf_event_paranoid <= 0): a child's clock starts a \
whole period after it first runs, so a child that lives less than that (a fork's) is not \
sampled and its time is missing"
                .to_string(),
        );
    }
    let lost: u64 = p.repetitions.iter().map(|r| r.lost).sum();
    if lost > 0 {
        out.push(format!(
            "{lost} samples lost (the kernel's buffer was full)"
        ));
    }
    out
}

/// What `run` prints after its table: a few results' profiles whole, or, past
/// `PRINTED_WHOLE`, a line each with its three costliest functions (`show --profile` lists
/// them all).
pub fn summary(run: &Run) -> String {
    let profiled: Vec<&BenchResult> = run.results.iter().filter(|r| r.profile.is_some()).collect();
    if profiled.len() <= PRINTED_WHOLE {
        return render_results(&profiled, TOP);
    }
    let mut out = String::new();
    for r in &profiled {
        let Some(p) = &r.profile else { continue };
        let top: Vec<String> = profile::costs(p)
            .iter()
            .take(3)
            .map(|c| format!("{} {}", c.symbol, format_ns(c.ns)))
            .collect();
        let _ = writeln!(out, "profile {}: {}", r.id, top.join(", "));
    }
    out
}

/// Every profiled result of a run (`show --profile`).
pub fn render(run: &Run) -> String {
    let profiled: Vec<&BenchResult> = run.results.iter().filter(|r| r.profile.is_some()).collect();
    if profiled.is_empty() {
        return "no result of this run was profiled (measure with --profile)\n".into();
    }
    render_results(&profiled, TOP)
}

fn render_results(results: &[&BenchResult], top: usize) -> String {
    let mut out = String::new();
    for r in results {
        for l in result_lines(r, top) {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

/// A comparison's additions split by function, a line per profiled row.
pub fn attribution_lines(c: &Comparison) -> Vec<String> {
    c.rows
        .iter()
        .filter_map(|r| {
            let a = r.attribution.as_ref()?;
            Some(format!("why {}: {}", r.id, profile::words(a)))
        })
        .collect()
}

/// Folded stacks (`frame;frame;leaf count`, a line each), the result's id as the root frame,
/// `prefix` before it (a comparison's side): what flamegraph.pl and inferno read.
pub fn folded(run: &Run, prefix: Option<&str>) -> String {
    let mut out = String::new();
    for r in &run.results {
        let Some(p) = &r.profile else { continue };
        for s in &p.stacks {
            let mut frames: Vec<String> = prefix.map(str::to_string).into_iter().collect();
            frames.push(r.id.clone());
            frames.extend(s.frames.iter().cloned());
            let line: Vec<String> = frames.iter().map(|f| folded_frame(f)).collect();
            let _ = writeln!(out, "{} {}", line.join(";"), s.samples);
        }
    }
    out
}

/// A frame as folded stacks allow it: no `;` (the separator) and no line break; spaces are
/// allowed in a frame but not before the count, so they become `_`.
fn folded_frame(f: &str) -> String {
    f.chars()
        .map(|c| match c {
            ';' => ':',
            ' ' | '\n' | '\r' | '\t' => '_',
            c => c,
        })
        .collect()
}

/// A stacked bar of a result's functions as HTML (a page's figure): each function's share
/// of one operation, the largest first, the rest as one segment.
pub fn bar_html(r: &BenchResult, top: usize) -> Option<String> {
    let p = r.profile.as_ref()?;
    let costs = profile::costs(p);
    let total: f64 = costs.iter().map(|c| c.ns).sum();
    if total <= 0.0 {
        return None;
    }
    let mut out = String::from("<div class=\"profile-bar\">");
    const COLOURS: [&str; 6] = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    ];
    let colour = |i: usize, c: &FunctionCost| match c.space {
        Space::Bpf => "#b07aa1",
        Space::User => "#9c755f",
        Space::Kernel => COLOURS[i % COLOURS.len()],
    };
    for (i, c) in costs.iter().take(top).enumerate() {
        let pct = c.ns / total * 100.0;
        let colour = colour(i, c);
        let _ = write!(
            out,
            "<span style=\"width:{pct:.2}%;background:{colour}\" title=\"{} {} ({:.1}%)\"></span>",
            super::junit::escape(&c.symbol),
            format_ns(c.ns),
            c.share * 100.0
        );
    }
    let rest: f64 = costs.iter().skip(top).map(|c| c.ns).sum();
    if rest > 0.0 {
        let _ = write!(
            out,
            "<span style=\"width:{:.2}%;background:#bab0ac\" title=\"{} more functions {}\"></span>",
            rest / total * 100.0,
            costs.len() - top,
            format_ns(rest)
        );
    }
    out.push_str("</div><ol class=\"profile-legend\">");
    for (i, c) in costs.iter().take(top).enumerate() {
        let _ = write!(
            out,
            "<li><i style=\"background:{}\"></i><code>{}</code> {} [{}, {}]{}</li>",
            colour(i, c),
            super::junit::escape(&c.symbol),
            format_ns(c.ns),
            format_ns(c.ci95[0]),
            format_ns(c.ci95[1]),
            space_mark(c.space)
        );
    }
    out.push_str("</ol>");
    Some(out)
}

/// A compared row's attribution as HTML (the comparison page's figure): a bar a function,
/// its length its addition against the largest, red an addition and green a saving, with
/// the interval; then what is within noise and what the profiles do not account for.
pub fn attribution_html(id: &str, a: &profile::Attribution) -> String {
    let mut out = format!(
        "<h3><code>{}</code> {}</h3><table class=\"profile-parts\">",
        super::junit::escape(id),
        signed(a.measured_ns)
    );
    let widest = a
        .parts
        .iter()
        .map(|p| p.added_ns.abs())
        .fold(a.measured_ns.abs(), f64::max)
        .max(1e-9);
    for p in &a.parts {
        let colour = if p.added_ns >= 0.0 {
            "#e15759"
        } else {
            "#59a14f"
        };
        let _ = write!(
            out,
            "<tr><td><code>{}</code>{}</td><td class=\"num\">{}</td><td class=\"num\">{} to {}</td>\
<td class=\"bar\"><span style=\"width:{:.1}%;background:{colour}\"></span></td></tr>",
            super::junit::escape(&p.symbol),
            space_mark(p.space),
            signed(p.added_ns),
            signed(p.ci95[0]),
            signed(p.ci95[1]),
            p.added_ns.abs() / widest * 100.0
        );
    }
    out.push_str("</table>");
    if a.parts.is_empty() {
        out.push_str("<p>No function's change is past noise.</p>");
    }
    let _ = write!(
        out,
        "<p class=\"muted\">{} functions judged; within noise {}; not in the \
profiles {}.</p>",
        a.judged,
        signed(a.within_noise_ns),
        signed(a.remainder_ns)
    );
    out
}

/// `signed_ns`, with "±0 ns" for what rounds to nothing (not "-0.00 ns").
fn signed(x: f64) -> String {
    if x.abs() < 0.005 {
        "±0 ns".into()
    } else {
        super::signed_ns(x)
    }
}

/// Folded stacks as an export (`--folded FILE`).
#[derive(Debug, Clone, Copy)]
pub struct Folded;

impl super::Exporter<Run> for Folded {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        Ok(folded(run, None).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::profile::{ProfileRepetition, Sampling, Stack};
    use crate::base::model::testdata;

    fn profiled() -> Run {
        let mut run = testdata::run();
        let mut r = testdata::result("syscall/getppid", vec![100.0; 5]);
        let functions = [
            ("do_syscall_64".to_string(), 60),
            ("bpf_prog_1 [bpf]".into(), 40),
        ];
        r.profile = Some(Profile {
            sampling: Sampling {
                event: "cpu-clock".into(),
                rate_hz: 10_000,
                kernel_refused: None,
                scope: Default::default(),
            },
            repetitions: vec![ProfileRepetition {
                samples: 100,
                lost: 0,
                window_ns_per_op: 100.0,
                functions: functions.into_iter().collect(),
            }],
            spaces: [
                ("do_syscall_64".to_string(), Space::Kernel),
                ("bpf_prog_1 [bpf]".into(), Space::Bpf),
            ]
            .into_iter()
            .collect(),
            stacks: vec![Stack {
                frames: vec!["entry_SYSCALL_64".into(), "bpf_prog_1 [bpf]".into()],
                samples: 40,
            }],
        });
        run.results = vec![r];
        run
    }

    #[test]
    fn folded_stacks_are_one_line_a_chain_rooted_at_the_result() {
        let f = folded(&profiled(), Some("B"));
        assert_eq!(
            f,
            "B;syscall/getppid;entry_SYSCALL_64;bpf_prog_1_[bpf] 40\n"
        );
    }

    #[test]
    fn a_result_lists_its_functions_with_intervals_and_what_the_clock_cannot_see() {
        let run = profiled();
        let lines = result_lines(&run.results[0], TOP);
        assert!(lines[0].starts_with("syscall/getppid: 100 samples in 1 repetitions"));
        assert!(lines[1].contains("60.0%") && lines[1].contains("do_syscall_64"));
        assert!(lines[2].contains("(BPF, JIT)"));
        assert!(lines.iter().any(|l| l.contains("software clock")));
        // Sampled per task (the fixture's default): the children it cannot see are said; a
        // CPU-wide profile says nothing of them.
        assert!(lines.iter().any(|l| l.contains("a child that lives less")));
        let mut wide = run.clone();
        if let Some(p) = wide.results[0].profile.as_mut() {
            p.sampling.scope = crate::base::model::profile::SamplingScope::Cpu;
        }
        let wide_lines = result_lines(&wide.results[0], TOP);
        assert!(
            !wide_lines
                .iter()
                .any(|l| l.contains("a child that lives less"))
        );
        let bar = bar_html(&run.results[0], TOP).unwrap();
        assert!(bar.contains("width:60.00%") && bar.contains("bpf_prog_1 [bpf]"));
    }
}
