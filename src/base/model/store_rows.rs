//! The rows the store's queries give back (`results`, `history`, trends): a result's summary,
//! a run's line and one benchmark's point in one run, before any view renders them.

/// One result's summary row, as `results` keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    /// The result's id.
    pub bench: String,
    /// "ok", "skipped" or "failed".
    pub status: String,
    /// Its median, ns (`None` without one).
    pub median: Option<f64>,
    /// Its CI's lower bound, ns.
    pub ci_lo: Option<f64>,
    /// Its CI's upper bound, ns.
    pub ci_hi: Option<f64>,
    /// How many samples it took.
    pub samples: i64,
    /// Whether anything disturbed it.
    pub disturbed: bool,
    /// The median of its repetitions' exit witnesses, ns (`Repetition::exit_witness_ns`: the
    /// host's answer to its guest while it ran; `None` before schema 7 or outside a guest's
    /// measuring workers).
    pub exit_witness_ns: Option<f64>,
    /// The median of its repetitions' speed witnesses, ns per loop (`Repetition::witness_ns`:
    /// the user-space loop its workers timed, the CPU's own speed while it ran; `None` before
    /// schema 8).
    pub speed_witness_ns: Option<f64>,
}

/// One line of `oscost history`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The run's id in the store.
    pub id: i64,
    /// When it started, RFC 3339.
    pub started_at: String,
    /// Its label.
    pub label: Option<String>,
    /// The host it ran on.
    pub host: Option<String>,
    /// The kernel release it ran on.
    pub kernel: Option<String>,
    /// The wrapper it ran under.
    pub wrapper: Option<String>,
    /// How many results it holds.
    pub benchmarks: i64,
    /// The rest of its environment, hashed (`store::rows::env_key`); `None` for a store opened
    /// read-only before schema 5.
    pub env_key: Option<String>,
}

/// One benchmark in one run, for trends.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPoint {
    /// The run's id in the store.
    pub run_id: i64,
    /// When the run started, RFC 3339.
    pub started_at: String,
    /// The run's label.
    pub label: Option<String>,
    /// The wrapper the run ran under.
    pub wrapper: Option<String>,
    /// "ok", "skipped" or "failed".
    pub status: String,
    /// The median, ns.
    pub median: Option<f64>,
    /// Its CI's lower bound, ns.
    pub ci_lo: Option<f64>,
    /// Its CI's upper bound, ns.
    pub ci_hi: Option<f64>,
    /// Whether anything disturbed it.
    pub disturbed: bool,
    /// The median of its repetitions' exit witnesses, ns (see `ResultRow::exit_witness_ns`).
    pub exit_witness_ns: Option<f64>,
    /// The median of its repetitions' speed witnesses, ns (see `ResultRow::speed_witness_ns`).
    pub speed_witness_ns: Option<f64>,
}
