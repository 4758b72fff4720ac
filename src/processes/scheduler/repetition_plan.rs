//! How many repetitions each benchmark of a plan gets and how long each samples: the shared
//! sampling time of a suite, the floor and ceiling of a repetition, and how far a noisy small
//! selection may go past its maximum.

/// How many repetitions each benchmark gets, how long each samples, and when to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepetitionPlan {
    /// Before the stop rule is asked (and the fewest that give a CI).
    pub min: usize,
    /// The budget: a benchmark stops here whatever its CI, unless `undecided_max` says more.
    pub max: usize,
    /// A benchmark still imprecise at `max` whose outlying repetitions could be half of them
    /// (`stats::bootstrap::outliers_could_be_half`) goes on to this many, so that more
    /// repetitions can tell whether the slow ones are a minority (0: never past `max`).
    pub undecided_max: usize,
    /// Sampling time of one repetition of one case.
    pub rep_ns: u64,
    /// Stop once the CI's half-width is within this fraction of the median.
    pub precision: f64,
    /// --samples N: exactly N samples per result, shared out over `min` repetitions.
    pub fixed_total: Option<usize>,
    /// `ab`: stop a benchmark once its comparison has decided against a noise band of this
    /// fraction (`compare::rounds::paired`, looked at on `stats::sequential`'s schedule), not once
    /// each side is precise.
    pub decide: Option<f64>,
}

/// Sampling time the repetitions of all selected cases share at their minimum count: the
/// default suite (~100 cases) gets ~40 ms repetitions and finishes in about half a minute; a
/// single benchmark gets 60 ms repetitions and a trustworthy number in well under a second.
const SHARED_SAMPLING_S: f64 = 20.0;
/// A repetition of this long or longer still sits inside one phase of the machine often enough
/// for the repetitions to sample the phases; shorter ones are mostly worker start-up.
pub(super) const REP_FLOOR_NS: u64 = 20_000_000;
pub(super) const REP_CEILING_NS: u64 = 60_000_000;
/// The fewest repetitions a benchmark gets (the fewest that give a CI).
pub const MIN_REPETITIONS: usize = crate::base::stats::bootstrap::MIN_REPETITIONS;
/// A selection of more cases than this is a suite: shorter repetitions, a maximum of 8 and no
/// `UNDECIDED_MAX`, so the default suite's time stays bounded however noisy the machine.
const SUITE_CASES: usize = 20;
/// How far a benchmark of a small selection (not a suite, no `--budget`, not `--quick`) goes
/// past its maximum while its outlying repetitions could be half of them. On a host whose slow
/// moments (every kernel-heavy benchmark 20-45% slower for 100-500 ms) fall on 20-40% of the
/// repetitions, ten cannot tell whether the slow ones are a minority: the median of all samples
/// could sit at either level, and the CI rightly spans both (getpid 13-42% wide while 7 of 8
/// runs agreed within 0.3%). Twenty can tell. Only such results go on: every benchmark going
/// to twenty narrowed the CIs of fork and pipe below what the next run sees (check-ci batches
/// of 2026-11-27, docs/design-notes.md, "Slow moments inside a run").
const UNDECIDED_MAX: usize = 4 * MIN_REPETITIONS;

/// The repetition plan for `cases` cases in all. `budget_s` (per benchmark) caps the repetitions;
/// without it a benchmark may take up to twice the minimum (fewer in a big suite, so the
/// default suite's time stays bounded however noisy the machine), and up to `UNDECIDED_MAX`
/// in a small selection while its outlying repetitions could be half. --quick stops at the
/// minimum.
pub fn repetition_plan(
    cases: usize,
    precision: f64,
    budget_s: Option<f64>,
    fixed_total: Option<usize>,
    quick: bool,
) -> RepetitionPlan {
    let share = SHARED_SAMPLING_S * 1e9 / (cases.max(1) * MIN_REPETITIONS) as f64;
    let rep_ns = if quick {
        REP_FLOOR_NS
    } else {
        (share as u64).clamp(REP_FLOOR_NS, REP_CEILING_NS)
    };
    let default_max = if quick {
        MIN_REPETITIONS
    } else if cases > SUITE_CASES {
        8
    } else {
        2 * MIN_REPETITIONS
    };
    let max = match budget_s {
        Some(b) => ((b * 1e9 / rep_ns as f64) as usize).max(MIN_REPETITIONS),
        None => default_max,
    };
    RepetitionPlan {
        min: MIN_REPETITIONS,
        max,
        undecided_max: if quick
            || budget_s.is_some()
            || fixed_total.is_some()
            || cases > SUITE_CASES
        {
            0
        } else {
            UNDECIDED_MAX
        },
        rep_ns,
        precision,
        fixed_total,
        decide: None,
    }
}
