//! Notes as data: what kind of fact a note on a result or a run states, with its numbers, beside
//! the words it was said in. Views decide what to show, group or leave out by the kind and its
//! numbers, never by the words, so rewording a note changes no table. The words are made once,
//! where the fact is found, and kept, so a stored note reads the same in every later view;
//! runs stored before notes had kinds (schema versions 1 and 2, notes as bare strings) are
//! given theirs once, on load (`classify_legacy`), the only place a note's words are read.

use serde::{Deserialize, Serialize};

/// A note: its kind (with the numbers a view may need) and its words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    /// What kind of fact it states.
    #[serde(flatten)]
    pub kind: NoteKind,
    /// The words it was said in.
    pub text: String,
}

/// What a note says, with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoteKind {
    /// Repetitions departed from the others alone and were kept (`departs_pct` marks each).
    Departure {
        /// How many departed.
        departed: usize,
    },
    /// Whole repetitions sat at one of two levels.
    TwoLevels,
    /// The events counted per operation missed the definition's (`events.check`).
    DefinitionNotMet,
    /// Some repetitions were not measured; the result is the others.
    FailedRepetitions {
        /// Not measured.
        failed: usize,
        /// Of this many.
        of: usize,
    },
    /// Too few repetitions for a confidence interval.
    TooFewRepetitions {
        /// How many there were.
        repetitions: usize,
    },
    /// The repetitions' levels disagree so much that the CI spans a factor of
    /// `UNSTABLE_FROM` or more: not a stable cost on this machine at this time.
    Unstable {
        /// The highest repetition's level over the lowest's.
        factor: f64,
    },
    /// The median is at or below the loop's own baseline.
    AtOrBelowBaseline,
    /// Another CPU was busy while this ran.
    OtherCpuBusy {
        /// Its busy share, percent.
        busy_pct: f64,
    },
    /// Other CPUs were busy, or results' own CPUs shared, while the run measured: said once
    /// for the run, with the programs that took them, instead of an `OtherCpuBusy` note or a
    /// "waited for its CPU" disturbance on every result.
    Contention {
        /// How many results saw another CPU busy past the threshold.
        results: usize,
        /// Their busy shares, lowest and highest, percent.
        busy_pct: [f64; 2],
        /// How many results shared their own CPU with another task
        /// (`analysis::contention::shared_cpu`).
        #[serde(default)]
        shared: usize,
        /// The share of their time those waited for it, lowest and highest, percent.
        #[serde(default)]
        wait_pct: [f64; 2],
        /// The programs that took CPU time while the run measured (oscost's own tree left
        /// out), the most first: name and CPUs used (1.0: one CPU all the time).
        #[serde(default)]
        programs: Vec<(String, f64)>,
    },
    /// Memory activity (reclaim, compaction, ballooning) counted during some repetitions.
    MemoryActivity,
    /// A scale/ efficiency above 1 beyond its CI: the host moved.
    EfficiencyAboveOne,
    /// Threads cost more than processes at the same count of copies.
    ThreadsPay,
    /// A curve's slope (fork's cost per MiB of resident memory).
    Slope,
    /// The machine changed speed during the run.
    MachineSpeed,
    /// The host was slow during part of the run: the repetitions that ran then were set aside
    /// (`analysis::host_quiet`; each result's `uncertainty.host_slow` lists its own).
    HostSlow {
        /// Repetitions set aside, over every result.
        set_aside: usize,
        /// Of this many measured repetitions.
        of: usize,
        /// In this many results.
        results: usize,
        /// The run's quiet exit level, ns per CPUID.
        quiet_ns: f64,
        /// The exit witness above which a repetition was slow, ns.
        slow_above_ns: f64,
        /// How much dearer the slow repetitions sat than their results' others, the median
        /// over them, percent.
        dearer_pct: f64,
    },
    /// Kernel settings the run or side was measured under.
    Settings,
    /// A program ran during the run or side (`--during`): how it went, its CPU use.
    During {
        /// Blocks of repetitions it ran during.
        blocks: usize,
        /// Longest time it took to be ready, seconds.
        ready_max_s: f64,
        /// CPU time of its process tree while the side was measured, seconds.
        cpu_s: f64,
        /// Wall time the side was measured while it ran, seconds.
        measured_s: f64,
        /// CPU time of its process tree on each CPU while the side was measured (CPU,
        /// seconds); empty where it could not be counted by CPU.
        #[serde(default)]
        cpu_s_by_cpu: Vec<(usize, f64)>,
    },
    /// A side's level before the other side's program first ran and after it differ.
    BeforeAfter {
        /// After over before, for the case that moved most.
        ratio: f64,
    },
    /// One run of a `--runs` series.
    Series {
        /// Which, from 1.
        run: usize,
        /// Of how many.
        of: usize,
    },
    /// Measured by an older format with less in it (schema version 1).
    OlderFormat,
    /// Said by the benchmark itself, or stored before notes had kinds: words only.
    Remark,
}

impl Note {
    /// A note of `kind` in `text`.
    pub fn new(kind: NoteKind, text: impl Into<String>) -> Note {
        Note {
            kind,
            text: text.into(),
        }
    }

    /// A note in words only.
    pub fn remark(text: impl Into<String>) -> Note {
        Note::new(NoteKind::Remark, text)
    }

    /// Whether it is on repetitions that departed alone.
    pub fn is_departure(&self) -> bool {
        matches!(self.kind, NoteKind::Departure { .. })
    }

    /// Whether it is on repetitions at two levels.
    pub fn is_two_levels(&self) -> bool {
        self.kind == NoteKind::TwoLevels
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a note is stored: an object with its kind (schema version 3), or the bare words of the
/// versions before.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Kinded {
        #[serde(flatten)]
        kind: NoteKind,
        text: String,
    },
    Words(String),
}

impl<'de> Deserialize<'de> for Note {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Note, D::Error> {
        Ok(match Stored::deserialize(d)? {
            Stored::Kinded { kind, text } => Note { kind, text },
            Stored::Words(text) => Note::remark(text),
        })
    }
}

/// How a departure note's words begin. The analysis writes them; only `classify_legacy`
/// reads them, to give a bare-word note of an older run its kind.
pub const DEPARTURE_NOTE: &str = "kept, not removed: ";
/// How a two-levels note's words begin.
pub const TWO_LEVELS_NOTE: &str = "two levels, not one: ";
/// How a missed definition's note's words begin.
pub const DEFINITION_NOTE: &str = "definition not met: ";

/// The kind a note stored as bare words (schema versions 1 and 2) states, for the kinds a view
/// acts on; `departed` is how many of its result's repetitions are marked as departing. Run
/// once when such a run is loaded, never by a view.
pub fn classify_legacy(note: &mut Note, departed: usize) {
    if note.kind != NoteKind::Remark {
        return;
    }
    let t = note.text.as_str();
    note.kind = if t.starts_with(DEPARTURE_NOTE) {
        NoteKind::Departure { departed }
    } else if t.starts_with(TWO_LEVELS_NOTE) {
        NoteKind::TwoLevels
    } else if t.starts_with(DEFINITION_NOTE) {
        NoteKind::DefinitionNotMet
    } else if t == super::V1_NOTE {
        NoteKind::OlderFormat
    } else {
        NoteKind::Remark
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_stored_with_its_kind_and_numbers_beside_its_words() {
        let n = Note::new(NoteKind::Departure { departed: 2 }, "kept: two");
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind": "departure", "departed": 2, "text": "kept: two"})
        );
        let back: Note = serde_json::from_value(v).unwrap();
        assert_eq!(back, n);
        let r = Note::remark("THP gave 4 KiB pages");
        let back: Note = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn bare_words_load_as_a_remark_and_are_classified_once() {
        let mut n: Note =
            serde_json::from_str(r#""kept, not removed: repetition 3 (at 100 ms) sat +4.0%""#)
                .unwrap();
        assert_eq!(n.kind, NoteKind::Remark);
        classify_legacy(&mut n, 1);
        assert_eq!(n.kind, NoteKind::Departure { departed: 1 });
        let mut other: Note =
            serde_json::from_str(r#""median at the clock's resolution""#).unwrap();
        classify_legacy(&mut other, 0);
        assert_eq!(other.kind, NoteKind::Remark);
        // A note that has a kind keeps it, whatever its words.
        let mut kinded = Note::new(NoteKind::Settings, "definition not met");
        classify_legacy(&mut kinded, 0);
        assert_eq!(kinded.kind, NoteKind::Settings);
    }
}
