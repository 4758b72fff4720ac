//! What a run's table says once instead of with each result: the moments the machine moved
//! many results together, families at two levels, lone departures the CI absorbs, contention,
//! and the reasons a row says by its figures (steal, preempted samples, two levels, unstable
//! repetitions) with one line for the run each kind is explained in. On a drifting cloud guest
//! a quick run went from 41 numbered notes to 2 and a few run lines by these.

use super::*;

/// A result whose lone departures are why its CI is wide.
#[derive(Debug)]
pub(super) struct Widened {
    /// The result.
    pub(super) result: usize,
    /// Its lone departing repetitions and how far each departed, percent.
    pub(super) departures: Vec<(usize, f64)>,
    /// The CI's half-width with and without them, percent.
    pub(super) halfwidth_pct: [f64; 2],
}

/// The departure notes a table says once for the run instead of with each result.
#[derive(Debug, Default)]
pub(super) struct SaidOnce {
    /// The moments the machine moved several results together.
    pub(super) moves: Vec<crate::analysis::SharedMove>,
    /// Results whose every departure was one of `moves`.
    pub(super) explained: Vec<usize>,
    /// Results whose lone departures left their CI near what the others give (percent of
    /// each departure), counted in one line.
    pub(super) quiet: Vec<(usize, Vec<f64>)>,
    /// Results whose lone departures are why their CI is wide.
    pub(super) widened: Vec<Widened>,
    /// Every note is printed with its result (`--verbose`): nothing is left out, and a
    /// widening departure is said in its note rather than as a flag.
    pub(super) verbose: bool,
    /// Families whose results ran at two levels together.
    pub(super) family_levels: Vec<crate::analysis::FamilyLevels>,
    /// The run says its contention once (a `Contention` note): no result repeats its
    /// "other CPU busy" note.
    pub(super) contention: bool,
    /// Reasons said in the row by their figures, with one line for the run, instead of a
    /// numbered note each (not `--verbose`): the hypervisor's steal, preempted samples
    /// (`Disturbance::only_steal_or_preempted`) and repetitions that disagree by a factor
    /// (`NoteKind::Unstable`). On a drifting cloud guest a quick run had 15 results with a
    /// steal or preemption note and 7 unstable ones, of 41 notes.
    pub(super) inline: bool,
    /// Results whose lone departures cannot be weighed against their CI (too few other
    /// repetitions for one), percent of each departure: counted with `quiet`.
    pub(super) untold: Vec<(usize, Vec<f64>)>,
}

impl SaidOnce {
    /// Sort `run`'s departures (`analysis::departures`) for a table; `verbose` leaves every
    /// note with its result.
    pub(super) fn of(run: &Run, verbose: bool) -> SaidOnce {
        let d = crate::analysis::departures(run);
        let has_note = |i: usize, two_levels: bool| {
            run.results[i]
                .notes
                .iter()
                .any(|n| n.is_departure() || (two_levels && n.is_two_levels()))
        };
        let mut said = SaidOnce {
            inline: !verbose,
            contention: !verbose
                && run
                    .notes
                    .iter()
                    .any(|n| matches!(n.kind, NoteKind::Contention { .. })),
            family_levels: d.family_levels,
            moves: d.moves,
            explained: d
                .explained
                .into_iter()
                .filter(|&i| has_note(i, true))
                .collect(),
            ..SaidOnce::default()
        };
        for lone in d.lone.into_iter().filter(|l| has_note(l.result, false)) {
            let reps = &run.results[lone.result].repetitions;
            let pct: Vec<(usize, f64)> = lone
                .reps
                .iter()
                .filter_map(|&k| reps.get(k).and_then(|r| r.departs_pct).map(|p| (k, p)))
                .collect();
            match (lone.noted, lone.halfwidth_pct) {
                (true, Some(w)) => said.widened.push(Widened {
                    result: lone.result,
                    departures: pct,
                    halfwidth_pct: w,
                }),
                (true, None) => said
                    .untold
                    .push((lone.result, pct.into_iter().map(|x| x.1).collect())),
                (false, _) => said
                    .quiet
                    .push((lone.result, pct.into_iter().map(|x| x.1).collect())),
            }
        }
        if verbose {
            // Every note stays with its result; only the widths are added to it.
            said = SaidOnce {
                widened: said.widened,
                verbose: true,
                ..SaidOnce::default()
            };
        }
        said
    }

    /// The departure note of result `i` is said for the run or as a flag, not with it.
    pub(super) fn leaves_out(&self, i: usize) -> bool {
        self.explained.contains(&i)
            || self.quiet.iter().any(|(q, _)| *q == i)
            || self.untold.iter().any(|(q, _)| *q == i)
            || (!self.verbose && self.widened.iter().any(|w| w.result == i))
    }

    /// The flag of result `i` whose lone departures widened its CI: "rep 3 +24%", or
    /// "reps 2,6 +22..+35%".
    pub(super) fn departure_flag(&self, i: usize) -> Option<String> {
        if self.verbose {
            return None;
        }
        let pct = &self.widened.iter().find(|w| w.result == i)?.departures;
        let ks: Vec<String> = pct.iter().map(|(k, _)| (k + 1).to_string()).collect();
        let (lo, hi) = crate::base::stats::extent(pct.iter().map(|x| x.1));
        let words = crate::base::stats::units::change_words;
        Some(match pct.len() {
            1 => format!("rep {} {}", ks[0], words(lo)),
            _ => format!("reps {} {}..{}", ks.join(","), words(lo), words(hi)),
        })
    }

    /// Whether result `i`'s note is said with it: not where the run says it once (a
    /// departure or two levels the machine explains, a busy other CPU the contention note
    /// covers).
    pub(super) fn keeps_with_result(&self, i: usize, kept: &crate::base::model::Note) -> bool {
        !((kept.is_departure() && self.leaves_out(i))
            || (kept.is_two_levels() && self.leaves_out_levels(i))
            || (self.contention && matches!(kept.kind, NoteKind::OtherCpuBusy { .. }))
            || (self.inline && matches!(kept.kind, NoteKind::Unstable { .. }))
            || (self.inline && kept.is_two_levels()))
    }

    /// A note of result `i` as the table says it: a departure that widened the CI adds by how
    /// much.
    pub(super) fn words(&self, i: usize, kept: &crate::base::model::Note) -> String {
        let widened = self.widened.iter().find(|w| w.result == i);
        let t = &kept.text;
        match (widened.map(|w| w.halfwidth_pct), &kept.kind) {
            (Some([with, without]), NoteKind::Departure { departed }) => format!(
                "{t}; the CI is ±{with:.1}% with {}, ±{without:.1}% from the other repetitions \
                 alone",
                if *departed == 1 { "it" } else { "them" }
            ),
            _ => t.clone(),
        }
    }

    /// The flags that say result `i`'s notes by their figures (`inline`): `unstable x20.8`,
    /// `levels x1.28`.
    pub(super) fn note_flags(&self, i: usize, r: &BenchResult) -> Vec<String> {
        let mut flags = Vec::new();
        for n in r.notes.iter().filter(|_| self.inline) {
            if let NoteKind::Unstable { factor } = n.kind {
                flags.push(format!("unstable x{}", three_digits(factor)));
            }
            if n.is_two_levels()
                && !self.leaves_out_levels(i)
                && let Some(x) = crate::analysis::departures::levels_ratio(r)
            {
                flags.push(format!("levels x{x:.2}"));
            }
        }
        flags
    }

    /// The two-levels note of result `i` is said for the run, not with it.
    pub(super) fn leaves_out_levels(&self, i: usize) -> bool {
        self.explained.contains(&i) || self.family_levels.iter().any(|f| f.results.contains(&i))
    }
}

/// What a `rep K +X%` flag means.
pub(super) const DEPARTURE_LEGEND: &str = "rep K +X%: repetition K departed alone, by X% (or xN: N \
    times the others' level), and is why the result's CI is wide (past 3x the precision asked, and twice what the other repetitions \
    give); kept (--verbose says how wide the CI is without it)";

/// The run-level line for each family whose results ran at two levels together.
pub(super) fn family_levels_lines(
    run: &Run,
    families: &[crate::analysis::FamilyLevels],
) -> Vec<String> {
    families
        .iter()
        .map(|f| {
            let names: Vec<String> = f
                .results
                .iter()
                .map(|&i| super::super::printable(&run.results[i].id).into_owned())
                .collect();
            format!(
                "{} {}/ results ran at two levels, each whole repetition at one or the other \
                 (x{:.2} to x{:.2}: the machine's speed, or how processes were laid out): {}; \
                 kept: each median follows its larger group, each CI spans both (--verbose \
                 says each)",
                names.len(),
                f.family,
                f.ratio[0],
                f.ratio[1],
                names.join(", ")
            )
        })
        .collect()
}

/// The run-level line for the results whose lone departures left their CI near what the
/// other repetitions give.
pub(super) fn quiet_line(
    quiet: &[(usize, Vec<f64>)],
    untold: &[(usize, Vec<f64>)],
) -> Option<String> {
    let all = quiet
        .iter()
        .chain(untold)
        .flat_map(|(_, p)| p.iter().copied());
    let (lo, hi) = crate::base::stats::extent(all);
    let s = |n: usize| if n == 1 { "" } else { "s" };
    let absorbed = (!quiet.is_empty()).then(|| {
        format!(
            "{} with a CI that absorbs them (under 3x the precision asked, or under twice what \
             the other repetitions give)",
            quiet.len()
        )
    });
    let unweighed = (!untold.is_empty()).then(|| {
        format!(
            "{} with too few other repetitions to weigh them against",
            untold.len()
        )
    });
    let parts: Vec<String> = absorbed.into_iter().chain(unweighed).collect();
    let n = quiet.len() + untold.len();
    (n > 0).then(|| {
        format!(
            "{n} result{} had repetitions depart alone ({lo:+.1}% to {hi:+.1}%), {}: kept, \
             marked `departs_pct` in the JSON (--verbose lists each)",
            s(n),
            parts.join(", ")
        )
    })
}

/// The row's words for a disturbance that is only steal and preempted samples, from their
/// figures: "steal 7%", "preempted 6%".
pub(super) fn inline_disturbance(r: &BenchResult) -> Vec<String> {
    use crate::base::model::DisturbanceCause;
    let d = &r.disturbed;
    d.causes
        .iter()
        .map(|c| match c {
            DisturbanceCause::Steal => format!("steal {:.0}%", d.steal_pct),
            _ => format!("preempted {:.0}%", preempted_pct(r)),
        })
        .collect()
}

/// The share of a result's samples that were preempted, percent.
pub(super) fn preempted_pct(r: &BenchResult) -> f64 {
    100.0 * r.disturbed.preempted_samples as f64 / r.samples_ns.len().max(1) as f64
}

/// The run's one line for the reasons its rows say by their figures (`SaidOnce::inline`):
/// how many results had each, and the range.
pub(super) fn inline_line(run: &Run, said: &SaidOnce) -> Option<String> {
    if !said.inline {
        return None;
    }
    let parts: Vec<String> = disturbance_parts(run, said)
        .into_iter()
        .chain(result_note_parts(run, said))
        .collect();
    (!parts.is_empty()).then(|| format!("{}; --verbose gives each a note", parts.join("; ")))
}

/// "2 results, 6% to 9%".
fn results_and_range(v: &[f64], unit: &str) -> String {
    let (lo, hi) = crate::base::stats::extent(v.iter().copied());
    let s = if v.len() == 1 { "" } else { "s" };
    let n = v.len();
    let whole = |x: f64| match unit {
        "%" => format!("{x:.0}%"),
        _ => format!("x{}", three_digits(x)),
    };
    if whole(lo) == whole(hi) {
        format!("{n} result{s}, {}", whole(lo))
    } else {
        format!("{n} result{s}, {} to {}", whole(lo), whole(hi))
    }
}

/// The line's parts for rows flagged `steal N%` and `preempted N%`.
fn disturbance_parts(run: &Run, said: &SaidOnce) -> Vec<String> {
    use crate::base::model::DisturbanceCause;
    let inline: Vec<&BenchResult> = run
        .results
        .iter()
        .filter(|r| {
            r.disturbed.only_steal_or_preempted()
                && !(said.contention
                    && crate::analysis::contention::shared_cpu(&r.disturbed).is_some())
        })
        .collect();
    let with = |c: DisturbanceCause| {
        inline
            .iter()
            .filter(move |r| r.disturbed.causes.contains(&c))
    };
    let steal: Vec<f64> = with(DisturbanceCause::Steal)
        .map(|r| r.disturbed.steal_pct)
        .collect();
    let preempted: Vec<f64> = with(DisturbanceCause::Preempted)
        .map(|r| preempted_pct(r))
        .collect();
    let mut parts = Vec::new();
    if !steal.is_empty() {
        parts.push(format!(
            "`steal N%`: the hypervisor took N% of the measuring CPU's time ({})",
            results_and_range(&steal, "%")
        ));
    }
    if !preempted.is_empty() {
        parts.push(format!(
            "`preempted N%`: N% of the samples were preempted ({})",
            results_and_range(&preempted, "%")
        ));
    }
    parts
}

/// The line's parts for rows flagged `levels xN` and `unstable xN`.
fn result_note_parts(run: &Run, said: &SaidOnce) -> Vec<String> {
    let levels: Vec<f64> = run
        .results
        .iter()
        .enumerate()
        .filter(|(i, r)| r.notes.iter().any(|n| n.is_two_levels()) && !said.leaves_out_levels(*i))
        .filter_map(|(_, r)| crate::analysis::departures::levels_ratio(r))
        .collect();
    let unstable: Vec<f64> = run
        .results
        .iter()
        .flat_map(|r| &r.notes)
        .filter_map(|n| match n.kind {
            NoteKind::Unstable { factor } => Some(factor),
            _ => None,
        })
        .collect();
    let mut parts = Vec::new();
    if !levels.is_empty() {
        parts.push(format!(
            "`levels xN`: whole repetitions sat at one of two levels N apart (the machine's \
             speed, or how processes were laid out), the median at the larger group's, the CI \
             spanning both ({})",
            results_and_range(&levels, "x")
        ));
    }
    if !unstable.is_empty() {
        parts.push(format!(
            "`unstable xN`: repetitions disagree by N times, highest level over lowest, so not a \
             stable cost here now, and the CI spans them ({})",
            results_and_range(&unstable, "x")
        ));
    }
    parts
}

/// The moments of the machine a run's line names, those that touched most results.
const MOMENTS_NAMED: usize = 4;

/// The run-level line for the moments the machine moved many results' repetitions together.
pub(super) fn shared_line(
    moves: &[crate::analysis::SharedMove],
    explained: usize,
) -> Option<String> {
    if moves.is_empty() {
        return None;
    }
    // The moments that touched most results, in time order: a drifting guest has ten or more
    // in a quick run, and the JSON keeps every one.
    let mut named: Vec<&crate::analysis::SharedMove> = moves.iter().collect();
    named.sort_by(|a, b| b.results.cmp(&a.results).then(a.at_ms.total_cmp(&b.at_ms)));
    named.truncate(MOMENTS_NAMED);
    named.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    let mut when: Vec<String> = named
        .iter()
        .map(|m| {
            let pct = if (m.pct[1] - m.pct[0]).abs() < 0.05 {
                format!("{:+.1}%", m.pct[0])
            } else {
                format!("{:+.1}% to {:+.1}%", m.pct[0], m.pct[1])
            };
            let s = if m.results == 1 { "" } else { "s" };
            format!("{:.1} s ({pct}, {} result{s})", m.at_ms / 1e3, m.results)
        })
        .collect();
    if moves.len() > MOMENTS_NAMED {
        when.push(format!("{} more", moves.len() - MOMENTS_NAMED));
    }
    Some(format!(
        "the machine moved repetitions of several results together at {}: kept, marked \
         `departs_pct` in the JSON, and not noted again for the {explained} results whose every \
         departing repetition was one of these (--verbose lists each)",
        when.join(", ")
    ))
}
