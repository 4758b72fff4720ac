//! A comparison as a person reads it: one row per benchmark with both medians, the slowdown and
//! the addition with their CIs, the p-value and the verdict; the largest changes said in a
//! sentence ("syscall/getpid: x3.80 slower, +420 ns on a 150 ns base"); a summary line; and
//! what could not be compared. Markdown and JSON views of the same `Comparison`.

use comfy_table::{Cell, CellAlignment, Color};

use super::{format_ns, signed_ns};
use crate::analysis::compare::rounds::{Decision, Rounds};
use crate::analysis::compare::{BenchComparison, Comparison, Verdict};
use crate::base::stats::units::format_rate;

const HEADERS: [&str; 8] = [
    "benchmark",
    "base",
    "candidate",
    "slowdown",
    "95% CI",
    "addition",
    "p",
    "verdict",
];

fn cells(r: &BenchComparison) -> [String; 8] {
    [
        super::printable(&r.id).into_owned(),
        format_ns(r.base_median_ns),
        format_ns(r.cand_median_ns),
        format!("x{:.3}", r.slowdown),
        format!("{:.3}-{:.3}", r.slowdown_ci95[0], r.slowdown_ci95[1]),
        signed_ns(r.addition_ns),
        if r.p_value < 0.001 {
            "<0.001".into()
        } else {
            format!("{:.3}", r.p_value)
        },
        format!(
            "{}{}{}{}",
            if r.apart_unknown {
                "? (apart)"
            } else if r.rounds.is_some_and(|x| x.decision == Decision::Undecided) {
                "undecided"
            } else {
                r.verdict.word()
            },
            if r.verdict == Verdict::NoChange
                && !r.within_band
                && !r.apart_unknown
                && r.rounds.is_none()
            {
                "*"
            } else {
                ""
            },
            r.rounds.map(rounds_words).unwrap_or_default(),
            if r.disturbed { " (disturbed)" } else { "" }
        ),
    ]
}

/// `ab`'s rows whose budget ended before they decided, each in words with its CI.
pub fn undecided_lines(c: &Comparison) -> Vec<String> {
    c.rows
        .iter()
        .filter(|r| r.rounds.is_some_and(|x| x.decision == Decision::Undecided))
        .map(|r| {
            format!(
                "undecided: {}: the change is between x{:.3} and x{:.3} after {}, against \
                 a noise band of ±{:.1}%; {}",
                super::printable(&r.id),
                r.slowdown_ci95[0],
                r.slowdown_ci95[1],
                match r.rounds {
                    Some(Rounds {
                        blocks: Some(b), ..
                    }) => format!("{b} blocks"),
                    x => format!("{} rounds", x.map_or(0, |x| x.rounds)),
                },
                c.threshold * 100.0,
                undecided_advice(r.slowdown, r.slowdown_ci95, c.threshold)
            )
        })
        .collect()
}

/// What an undecided row's reader can do. A longer `--budget` decides every row in the end,
/// but where the estimate lies inside the band it will most likely end as "no change": a real
/// change smaller than the band (an agent's 1% on a fork) is called only at a smaller
/// `--threshold`, which the user chooses; oscost says so rather than leave them waiting for
/// a call the band forbids.
fn undecided_advice(point: f64, ci: [f64; 2], threshold: f64) -> String {
    let (lo, hi) = (ci[0], ci[1]);
    let inside = point.is_finite() && (point - 1.0).abs() < threshold;
    let way = if point >= 1.0 { "slower" } else { "faster" };
    if inside && (lo > 1.0 || hi < 1.0) {
        format!(
            "B is {way} (the CI excludes x1.000) by less than the band so far: run longer \
             (--budget) to decide whether it reaches the band, or give a smaller --threshold \
             to call a change this small"
        )
    } else if inside {
        format!(
            "run longer (--budget) to decide; the estimate, x{point:.3}, lies inside the band, \
             so a longer run will most likely end as no change: a change this small is called \
             only with a smaller --threshold (and a longer --budget)"
        )
    } else {
        "run longer (--budget) to decide".into()
    }
}

/// How `ab` judged its rows, when it judged them by rounds.
pub const ROUNDS_LINE: &str = "ab: each benchmark's A and B repetitions alternated in rounds \
    until its comparison decided: called when the slowdown's CI excludes 1 and the slowdown lies \
    beyond the noise band, no change when the CI lies inside the band. The slowdown is the \
    geometric mean of the rounds' ratios, its 95% CI sequential (valid however many times it \
    was looked at: at 10, 12, 14, 17, ... rounds and at the budget's end)";

/// Said below `ROUNDS_LINE` where some row's sides alternated in blocks.
pub const BLOCKS_LINE: &str = "blocks: a program ran during a side, so the sides alternated in \
    blocks of rounds (A B, B A, ...); a block's rounds share the host's level of those seconds, \
    so each block is one pair (its B repetitions' median over its A repetitions'), and the \
    looks and the CI count blocks";

/// A row's rounds as its verdict's tail: ", 126 rounds", or ", 14 blocks (98 rounds)".
fn rounds_words(r: Rounds) -> String {
    match r.blocks {
        Some(b) => format!(", {b} blocks ({} rounds)", r.rounds),
        None => format!(", {} rounds", r.rounds),
    }
}

fn side_line(c: &Comparison) -> String {
    let side = |s: &crate::analysis::compare::ComparedSide| {
        let mut t = format!("{} ({})", s.name, s.started_at);
        if let Some(l) = &s.label {
            t.push_str(&format!(", label '{l}'"));
        }
        if let Some(w) = &s.wrapper {
            t.push_str(&format!(", under `{w}`"));
        }
        if !s.settings.is_empty() {
            t.push_str(&format!(", set {}", s.settings.join(" ")));
        }
        if let Some(d) = &s.during {
            t.push_str(&format!(", during `{d}`"));
        }
        let mut t = super::printable(&t).into_owned();
        if let Some(k) = &s.kernel {
            t.push_str(&format!(", kernel {k}"));
        }
        t
    };
    format!("base: {}\ncandidate: {}\n", side(&c.base), side(&c.cand))
}

/// The bandwidths of a comparison as rates, base to candidate: the table's medians are times
/// per MiB, and a lower rate is what its "slower" means.
pub fn bandwidth_lines(c: &Comparison) -> Vec<String> {
    let rated: Vec<(&BenchComparison, (f64, f64))> = c
        .rows
        .iter()
        .filter_map(|r| r.rates().map(|x| (r, x)))
        .collect();
    if rated.is_empty() {
        return vec![];
    }
    let mut lines = vec![
        "bandwidths (the table's medians are times per MiB moved; here as rates):".to_string(),
    ];
    for (r, (base, cand)) in rated {
        lines.push(format!(
            "  {}: {} to {} ({:+.1}%), {}",
            super::printable(&r.id),
            format_rate(base),
            format_rate(cand),
            100.0 * (cand / base - 1.0),
            r.verdict.word()
        ));
    }
    lines
}

/// The sentences for the largest changes, most changed first.
pub fn headlines(c: &Comparison, most: usize) -> Vec<String> {
    let mut changed: Vec<&BenchComparison> = c
        .rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Slower | Verdict::Faster))
        .collect();
    changed.sort_by(|a, b| b.slowdown.ln().abs().total_cmp(&a.slowdown.ln().abs()));
    changed
        .into_iter()
        .take(most)
        .map(|r| {
            let (factor, word) = if r.slowdown >= 1.0 {
                (r.slowdown, "slower")
            } else {
                (1.0 / r.slowdown, "faster")
            };
            match r.rates() {
                // A bandwidth says its rates: slower is a lower one.
                Some((base, cand)) => format!(
                    "{}: x{factor:.2} {word}, {} from {} ({:+.1}%)",
                    super::printable(&r.id),
                    format_rate(cand),
                    format_rate(base),
                    100.0 * (cand / base - 1.0)
                ),
                None => format!(
                    "{}: x{factor:.2} {word}, {} on a {} base",
                    super::printable(&r.id),
                    signed_ns(r.addition_ns),
                    format_ns(r.base_median_ns)
                ),
            }
        })
        .collect()
}

/// What a comparison of runs measured apart could and could not judge, in words (none for
/// `ab`, whose sides alternated).
pub fn apart_line(c: &Comparison) -> Option<String> {
    if c.alternated {
        return None;
    }
    let unknown = crate::analysis::compare::unknown_apart(c).len();
    let learned: Vec<_> = c.rows.iter().filter_map(|r| r.run_to_run).collect();
    if unknown > 0 {
        return Some(format!(
            "measured apart: {unknown} of {} benchmark(s) cannot be judged (? (apart)): no run-to-run spread is known here (fewer than 3 stored runs of either run's environment: host, kernel, wrapper, CPU, mitigations, THP, boot parameters, kernel settings, what confined the workers and oscost version), and the runs' own CIs cannot see the host's drift between them; run `oscost run --runs 3` in each environment, use `oscost ab` if the change can be wrapped, or give --together if these runs' repetitions were interleaved",
            c.rows.len()
        ));
    }
    if learned.is_empty() {
        return None;
    }
    let (lo, hi) = crate::base::stats::extent(learned.iter().map(|r| r.percent));
    Some(format!(
        "measured apart: each interval adds the run-to-run spread learned from the store (±{lo:.1}% to ±{hi:.1}%, from {} to {} runs){}",
        learned.iter().map(|r| r.runs).min().unwrap_or(0),
        learned.iter().map(|r| r.runs).max().unwrap_or(0),
        projection_words(&learned, "benchmark(s)").map_or(String::new(), |w| format!("; {w}"))
    ))
}

/// What the projection to one level of a witness did among `terms` (cells or rows of runs
/// measured apart, `run_to_run::judge_apart`), in words; `None` where nothing was projected.
pub fn projection_words(
    terms: &[crate::analysis::run_to_run::RunToRun],
    what: &str,
) -> Option<String> {
    use crate::analysis::run_to_run::DriftWitness;
    let projected: Vec<(f64, f64, DriftWitness)> = terms
        .iter()
        .filter_map(|t| {
            let (f, s) = t.drift_factor.zip(t.drift_slope)?;
            // What older versions wrote projected on the exit witness only.
            Some((f, s, t.drift_witness.unwrap_or(DriftWitness::Exit)))
        })
        .collect();
    if projected.is_empty() {
        return None;
    }
    let on = |w: DriftWitness| projected.iter().filter(|p| p.2 == w).count();
    let witnesses = match (on(DriftWitness::Exit), on(DriftWitness::Speed)) {
        (_, 0) => DriftWitness::Exit.words().to_string(),
        (0, _) => DriftWitness::Speed.words().to_string(),
        (e, s) => format!(
            "{} for {e}, {} for {s}",
            DriftWitness::Exit.words(),
            DriftWitness::Speed.words()
        ),
    };
    let (flo, fhi) = crate::base::stats::extent(projected.iter().map(|p| p.0));
    let (slo, shi) = crate::base::stats::extent(projected.iter().map(|p| p.1));
    Some(format!(
        "{} of {} {what} projected to the base's level of a witness first ({witnesses}): the host's drift between the runs that the witness saw (x{flo:.3} to x{fhi:.3} on the candidate) taken out of the ratio, by slopes {slo:.2} to {shi:.2} learned from the store's runs of the environment, and the spread the projected levels still scatter added instead",
        projected.len(),
        terms.len()
    ))
}

/// One line of counts: how many slower, faster, unchanged, and the geometric mean.
pub fn summary_line(c: &Comparison) -> String {
    let s = &c.summary;
    format!(
        "{} compared: {} slower, {} faster, {} no change ({} of them inconclusive: CI wider than the ±{:.1}% noise band){}; geometric mean slowdown {}",
        c.rows.len(),
        s.slower,
        s.faster,
        s.no_change,
        s.inconclusive,
        c.threshold * 100.0,
        if s.apart_unknown > 0 {
            format!(", {} not judged (measured apart)", s.apart_unknown)
        } else {
            String::new()
        },
        s.geomean_slowdown
            .map_or("-".into(), |g| format!("x{g:.3}"))
    )
}

/// The changed benchmarks moved by about one factor over a wide range of costs, in words.
pub fn one_factor_line(c: &Comparison) -> Option<String> {
    let f = c.summary.one_factor.as_ref()?;
    let [lo, hi] = f.slowdown;
    let factors = if lo >= 1.0 {
        format!("x{lo:.2}-x{hi:.2}")
    } else {
        format!("x{:.2}-x{:.2} faster", 1.0 / hi, 1.0 / lo)
    };
    let [small, large] = f.addition_ns;
    let (a, b) = if small >= 0.0 {
        (small, large)
    } else {
        (large, small)
    };
    let apart = if c.alternated {
        "A and B alternated, so the machine's drift fell on both alike"
    } else {
        "two runs measured apart cannot tell a change from the machine's drift between them: \
         `oscost ab` alternates the two"
    };
    Some(format!(
        "the {} {} moved by about one factor ({factors}) over bases from {} to {}, so by very \
         different amounts ({} to {}): as a machine running at another speed does (a host, a \
         clock, virtualization), not as a cost added to each operation; {apart}",
        f.changed,
        f.verdict.word(),
        format_ns(f.base_ns[0]),
        format_ns(f.base_ns[1]),
        signed_ns(a),
        signed_ns(b),
    ))
}

/// What the two sides' speed witnesses say, when both have one, and then their exit
/// witnesses, when both have one.
pub fn witness_words(c: &Comparison) -> Option<String> {
    use crate::analysis::witness::{RunWitness, exit_shift_words, shift_words};
    let side = |s: &crate::analysis::compare::ComparedSide| {
        Some(RunWitness {
            ns: s.witness_ns?,
            workers: s.witness_workers?,
        })
    };
    let speed = shift_words(side(&c.base)?, side(&c.cand)?);
    Some(match (c.base.exit_witness_ns, c.cand.exit_witness_ns) {
        (Some(b), Some(a)) => format!("{speed}; {}", exit_shift_words(b, a)),
        _ => speed,
    })
}

fn tail(c: &Comparison) -> String {
    let mut out = String::new();
    for (title, list) in [
        ("only measured in base", &c.only_base),
        ("only measured in candidate", &c.only_cand),
        ("measured in neither", &c.unmeasured),
    ] {
        if !list.is_empty() {
            out.push_str(&format!("{title}:\n"));
            for l in list {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    if let Some(words) = witness_words(c) {
        out.push_str(&format!("{words}\n"));
    }
    if !c.differs.is_empty() {
        out.push_str(&format!(
            "the runs differ in: {}\n",
            super::printable(&super::differences_words(&c.differs))
        ));
    }
    for (name, side) in [("base", &c.base), ("candidate", &c.cand)] {
        for n in &side.notes {
            out.push_str(&format!("note ({name}): {}\n", super::printable(n)));
        }
    }
    out
}

/// The comparison as a terminal table, its notes below.
pub fn render(c: &Comparison, color: bool) -> String {
    let mut t = super::plain_table(color, HEADERS);
    for r in &c.rows {
        let colour = match r.verdict {
            Verdict::Slower => Some(Color::Red),
            Verdict::Faster => Some(Color::Green),
            _ => None,
        };
        t.add_row(cells(r).into_iter().enumerate().map(|(i, s)| {
            let cell = Cell::new(s);
            match colour {
                Some(c) if color && i == 7 => cell.fg(c),
                _ => cell,
            }
        }));
    }
    for i in 1..=6 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = side_line(c);
    out.push_str(&t.to_string());
    out.push('\n');
    for line in bandwidth_lines(c) {
        out.push_str(&format!("{line}\n"));
    }
    for h in headlines(c, 5) {
        out.push_str(&format!("  {h}\n"));
    }
    out.push_str(&summary_line(c));
    out.push('\n');
    if let Some(a) = apart_line(c) {
        out.push_str(&format!("{a}\n"));
    }
    if let Some(p) = one_factor_line(c) {
        out.push_str(&format!("{p}\n"));
    }
    for u in undecided_lines(c) {
        out.push_str(&format!("{u}\n"));
    }
    if c.rows.iter().any(|r| r.rounds.is_some()) {
        out.push_str(&format!("{ROUNDS_LINE}\n"));
    }
    if c.rows
        .iter()
        .any(|r| r.rounds.is_some_and(|x| x.blocks.is_some()))
    {
        out.push_str(&format!("{BLOCKS_LINE}\n"));
    }
    if c.summary.inconclusive > 0 && c.rows.iter().any(|r| r.rounds.is_none()) {
        out.push_str(&format!("{}\n", INCONCLUSIVE));
    }
    for line in super::profile::attribution_lines(c) {
        out.push_str(&format!("{line}\n"));
    }
    out.push_str(&tail(c));
    out
}

const INCONCLUSIVE: &str = "* no change detected, but the CI is wider than the noise band: a smaller change cannot be ruled out (more --rounds, a longer --budget or a quieter machine narrow it)";

/// One CSV row per compared benchmark.
pub fn csv(c: &Comparison) -> String {
    let mut out = String::from(
        "id,base_median_ns,cand_median_ns,slowdown,slowdown_ci_lo,slowdown_ci_hi,addition_ns,addition_ci_lo,addition_ci_hi,p_value,verdict,disturbed\n",
    );
    for r in &c.rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}\n",
            crate::base::text::csv_field(&r.id),
            r.base_median_ns,
            r.cand_median_ns,
            r.slowdown,
            r.slowdown_ci95[0],
            r.slowdown_ci95[1],
            r.addition_ns,
            r.addition_ci95[0],
            r.addition_ci95[1],
            r.p_value,
            r.verdict.word(),
            r.disturbed
        ));
    }
    out
}

/// The comparison as Markdown (for a pull request or an issue).
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from("# oscost comparison\n\n");
    for l in side_line(c).lines() {
        out.push_str(&format!("- {l}\n"));
    }
    out.push_str(&format!("\n| {} |\n", HEADERS.join(" | ")));
    out.push_str("|---|--:|--:|--:|--:|--:|--:|---|\n");
    for r in &c.rows {
        out.push_str(&format!("| {} |\n", cells(r).join(" | ")));
    }
    out.push('\n');
    if let Some((head, lines)) = bandwidth_lines(c).split_first() {
        out.push_str(&format!("{head}\n\n"));
        for l in lines {
            out.push_str(&format!("- {}\n", l.trim()));
        }
        out.push('\n');
    }
    for h in headlines(c, 5) {
        out.push_str(&format!("- {h}\n"));
    }
    out.push_str(&format!("\n{}\n", summary_line(c)));
    if let Some(a) = apart_line(c) {
        out.push_str(&format!("\n{a}\n"));
    }
    if let Some(p) = one_factor_line(c) {
        out.push_str(&format!("\n{p}\n"));
    }
    let t = tail(c);
    if !t.is_empty() {
        out.push_str(&format!("\n```\n{t}```\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{Options, compare};
    use crate::base::model::testdata;

    #[test]
    fn says_what_changed_in_a_sentence_and_a_table() {
        let base = testdata::run();
        let mut cand = testdata::run_scaled(3.8);
        cand.wrapper = Some("strace -f".into());
        cand.notes = vec![crate::base::model::Note::new(
            crate::base::model::NoteKind::MachineSpeed,
            "the machine changed speed during this run",
        )];
        let c = compare(&base, &cand, "run 1", "run 2", &Options::default());
        let text = render(&c, false);
        assert!(text.contains("candidate: run 2"), "{text}");
        assert!(text.contains("under `strace -f`"));
        assert!(text.contains("x3.800"));
        assert!(
            text.contains("spawn/fork: x3.80 slower, +434 us on a 155 us base"),
            "{text}"
        );
        assert!(text.contains("measured in neither:\n  timer/rdtscp"));
        assert!(text.ends_with("note (candidate): the machine changed speed during this run\n"));
        let md = markdown(&c);
        assert!(md.contains("| call/f0 |"));
        assert!(md.contains("geometric mean slowdown x3.800"));
        // Everything 3.8x over costs from ns to us: one factor, said with what it cannot tell.
        let line = one_factor_line(&c).unwrap();
        assert!(
            line.starts_with(
                "the 3 slower moved by about one factor (x3.80-x3.80) over bases from 1.50 ns to \
                 155 us, so by very different amounts (+4.20 ns to +434 us): as a machine"
            ),
            "{line}"
        );
        assert!(line.ends_with("`oscost ab` alternates the two"), "{line}");
        assert!(text.contains(&format!("\n{line}\n")));
        assert!(md.contains(&format!("\n{line}\n")));
        let alternated = Comparison {
            alternated: true,
            ..c.clone()
        };
        assert!(
            one_factor_line(&alternated)
                .unwrap()
                .ends_with("A and B alternated, so the machine's drift fell on both alike")
        );
    }

    /// ab's rows say how their stop rule ended: the rounds behind each, "undecided" for a row
    /// whose budget ended first (with a line giving its CI and what to do), the rounds line
    /// once; a comparison of two runs says none of it.
    #[test]
    fn abs_rounds_and_undecided_rows_are_said() {
        use crate::analysis::compare::rounds::{Decision, Rounds};
        let base = testdata::run();
        let cand = testdata::run_scaled(1.02);
        let plain = compare(&base, &cand, "A", "B", &Options::default());
        let text = render(&plain, false);
        assert!(
            !text.contains(ROUNDS_LINE) && !text.contains(" rounds") && !text.contains("undecided"),
            "{text}"
        );
        let mut c = plain.clone();
        c.rows[0].rounds = Some(Rounds {
            rounds: 23,
            decision: Decision::Called,
            blocks: None,
        });
        c.rows[1].rounds = Some(Rounds {
            rounds: 80,
            decision: Decision::Undecided,
            blocks: None,
        });
        let text = render(&c, false);
        assert!(text.contains(", 23 rounds"), "{text}");
        assert!(text.contains("undecided, 80 rounds"), "{text}");
        assert_eq!(text.matches(ROUNDS_LINE).count(), 1, "{text}");
        let lines = undecided_lines(&c);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with(&format!(
                "undecided: {}: the change is between x",
                c.rows[1].id
            )) && lines[0].contains("after 80 rounds")
                && lines[0].ends_with("run longer (--budget) to decide"),
            "{}",
            lines[0]
        );
        assert!(text.contains(&lines[0]), "{text}");
    }

    #[test]
    fn an_undecided_row_inside_the_band_says_a_longer_run_will_not_call_it() {
        // An agent's 0.8% on a fork against ±2%: more rounds will end as "no change".
        let inside = undecided_advice(1.008, [0.994, 1.023], 0.02);
        assert!(
            inside.starts_with(
                "run longer (--budget) to decide; the estimate, x1.008, lies inside the band"
            ),
            "{inside}"
        );
        assert!(inside.contains("smaller --threshold"), "{inside}");
        // The CI already excludes x1 but not the band: B is slower by how much is open.
        let excludes = undecided_advice(0.992, [0.985, 0.999], 0.02);
        assert!(
            excludes.starts_with("B is faster (the CI excludes x1.000) by less than the band"),
            "{excludes}"
        );
        // An estimate beyond the band needs only time.
        assert_eq!(
            undecided_advice(1.03, [0.99, 1.07], 0.02),
            "run longer (--budget) to decide"
        );
        // A row with no estimate is not advised on its size.
        assert_eq!(
            undecided_advice(f64::NAN, [f64::NAN, f64::NAN], 0.02),
            "run longer (--budget) to decide"
        );
    }

    #[test]
    fn a_projection_names_its_witness_and_old_json_reads_as_the_exit_witness() {
        use crate::analysis::run_to_run::{DriftWitness, RunToRun};
        let term = |w: Option<DriftWitness>, f: f64| RunToRun {
            percent: 1.0,
            runs: 8,
            quantile: 2.4,
            drift_factor: Some(f),
            drift_slope: Some(0.7),
            drift_witness: w,
        };
        let plain = RunToRun {
            drift_factor: None,
            drift_slope: None,
            ..term(None, 1.0)
        };
        let speed =
            projection_words(&[term(Some(DriftWitness::Speed), 1.04), plain], "cells").unwrap();
        assert!(speed.starts_with("1 of 2 cells projected"), "{speed}");
        assert!(
            speed.contains("(speed witness (a user-space loop))"),
            "{speed}"
        );
        assert!(speed.contains("x1.040 to x1.040"), "{speed}");
        let both = [term(None, 1.1), term(Some(DriftWitness::Speed), 1.02)];
        let both = projection_words(&both, "cells").unwrap();
        assert!(
            both.contains("exit witness (CPUID) for 1, speed witness"),
            "{both}"
        );
        assert_eq!(projection_words(&[plain], "cells"), None);
        // What a version before the speed witness wrote: its names, its witness.
        let old: RunToRun =
            serde_json::from_str(r#"{"percent":1.0,"runs":8,"exit_factor":1.1,"exit_slope":0.7}"#)
                .unwrap();
        assert_eq!((old.drift_factor, old.drift_witness), (Some(1.1), None));
        let old = projection_words(&[old], "cells").unwrap();
        assert!(old.contains("(exit witness (CPUID))"), "{old}");
    }
}
