//! Tests of `table`.

use super::*;
use crate::base::model::{Note, testdata};

#[test]
fn table_shows_scaled_units_flags_and_numbered_reasons() {
    let text = render_at(
        &testdata::run(),
        false,
        TableOptions {
            verbose: false,
            wide: true,
        },
        100,
    );
    assert!(text.contains("call/f0"));
    assert!(text.contains("1.50 ns"));
    assert!(text.contains("155 us"));
    assert!(text.contains("-3.2/+3.2%"), "{text}");
    assert!(text.contains("disturbed [1]"));
    assert!(text.contains("[1] syscall/getppid: disturbed: other CPU busy 97%"));
    assert!(text.contains("skipped [2]"));
    assert!(text.contains("[2] timer/rdtscp: no rdtscp"));
    assert!(!text.contains('\u{1b}'), "no escape codes without color");
    assert!(!text.contains("events not counted"));
}

#[test]
fn events_that_could_not_be_counted_are_listed_once_by_reason() {
    let mut run = testdata::run();
    let no_pmu = "not supported: no hardware counters here";
    for (i, r) in run.results.iter_mut().take(2).enumerate() {
        let mut e = crate::base::model::Events::default();
        e.unavailable.insert("cycles".into(), no_pmu.into());
        e.unavailable.insert("instructions".into(), no_pmu.into());
        if i == 1 {
            e.unavailable
                .insert("context-switches".into(), "not permitted".into());
        }
        r.events = Some(e);
    }
    let text = render_at(&run, false, TableOptions::default(), 1000);
    assert!(
        text.contains(&format!(
            "events not counted: context-switches (not permitted); cycles, instructions ({no_pmu})"
        )),
        "{text}"
    );
}

#[test]
fn departures_the_machine_explains_are_said_once_and_a_lone_one_stays_with_its_result() {
    use crate::base::model::Repetition;
    let mut run = testdata::run();
    let rep = |at: f64, pct: Option<f64>| Repetition {
        start: 0,
        samples: 1,
        median_ns: 1.0,
        started_ms: at,
        startup_ms: 1.0,
        preempted: 0,
        departs_pct: pct,
        witness_ns: None,
        exit_witness_ns: None,
        memory_events: Default::default(),
        block: None,
    };
    // Three results depart together at about 1.8 s; one of them and a fourth also depart
    // alone, at other moments (or the other way).
    let departures = [
        vec![rep(1800.0, Some(4.0)), rep(5000.0, None)],
        vec![rep(1850.0, Some(5.5)), rep(9000.0, Some(-6.0))],
        vec![rep(1900.0, Some(3.0))],
        vec![rep(1820.0, Some(-4.0))],
    ];
    run.results.truncate(3);
    run.results.push(run.results[0].clone());
    run.results[3].id = "call/f1".into();
    for (r, reps) in run.results.iter_mut().zip(departures) {
        r.repetitions = reps;
        r.notes = vec![Note::new(
            NoteKind::Departure { departed: 1 },
            format!(
                "{}repetition (at some ms)",
                crate::base::model::note::DEPARTURE_NOTE
            ),
        )];
    }
    let (moves, explained) = crate::analysis::shared_departures(&run);
    assert_eq!(moves.len(), 1);
    assert_eq!((moves[0].results, moves[0].pct), (3, [3.0, 5.5]));
    assert_eq!(
        explained,
        vec![0, 2],
        "result 1 also departed alone; 3 the other way"
    );
    let text = render_at(&run, false, TableOptions::default(), 1000);
    assert!(
        text.contains("note: the machine moved repetitions of several results together at 1.8 s (+3.0% to +5.5%, 3 results)"),
        "{text}"
    );
    // Results 1 and 3 departed alone, with too few other repetitions to weigh what that did
    // to their CI: counted in one line, not a note each.
    assert_eq!(
        text.matches(crate::base::model::note::DEPARTURE_NOTE)
            .count(),
        0,
        "{text}"
    );
    assert!(
        text.contains("note: 2 results had repetitions depart alone (-6.0% to -4.0%), 2 with too few other repetitions to weigh them against"),
        "{text}"
    );
    let verbose = render_at(
        &run,
        false,
        TableOptions {
            verbose: true,
            wide: false,
        },
        1000,
    );
    assert_eq!(
        verbose
            .matches(crate::base::model::note::DEPARTURE_NOTE)
            .count(),
        4
    );
    assert!(!verbose.contains("the machine moved repetitions"));
}

/// A result of 8 repetitions of 40 samples each, at `levels`, started 5 s apart, with
/// the repetitions `departing` marked as `name_departures` would and the repetitions' CI
/// for a 1% target, as a run has them.
fn result_with_levels(id: &str, levels: &[f64], departing: &[usize]) -> BenchResult {
    let per = 40;
    let samples: Vec<f64> = levels
        .iter()
        .flat_map(|&l| (0..per).map(move |k| l * (1.0 + 0.002 * ((k % 5) as f64 - 2.0))))
        .collect();
    let mut r = testdata::result(id, samples);
    let center = crate::base::stats::median(levels);
    r.repetitions = levels
        .iter()
        .enumerate()
        .map(|(k, &l)| crate::base::model::Repetition {
            start: k * per,
            samples: per,
            departs_pct: departing.contains(&k).then(|| 100.0 * (l / center - 1.0)),
            ..testdata::repetition(l, 5000.0 * k as f64)
        })
        .collect();
    let reps: Vec<&[f64]> = r.samples_ns.chunks(per).collect();
    let st = r.stats.as_mut().unwrap();
    st.ci95 =
        crate::analysis::repetition_ci(&reps, 1000, st.median, crate::analysis::FINAL_JUDGING)
            .unwrap();
    r.uncertainty = Some(crate::base::model::Uncertainty {
        method: String::new(),
        repetitions: levels.len(),
        halfwidth_pct: 100.0 * crate::analysis::halfwidth(Some(st.ci95), st.median),
        target_pct: 1.0,
        stopped: crate::base::model::RepetitionStop::Budget,
        within_stream_ci95: st.ci95,
        host_slow: None,
    });
    r.notes = vec![Note::new(
        NoteKind::Departure {
            departed: departing.len(),
        },
        format!(
            "{}repetition {} sat far from the others",
            crate::base::model::note::DEPARTURE_NOTE,
            departing[0] + 1
        ),
    )];
    r
}

#[test]
fn a_lone_departure_is_noted_with_its_result_only_where_it_is_why_the_ci_is_wide() {
    let mut run = testdata::run();
    let flat = [100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.3, 99.7];
    let mut slight = flat;
    slight[3] = 102.5;
    let mut far = flat;
    far[5] = 140.0;
    run.results = vec![
        result_with_levels("syscall/a", &slight, &[3]),
        result_with_levels("syscall/b", &far, &[5]),
    ];
    let d = crate::analysis::departures(&run);
    assert!(d.moves.is_empty());
    let noted: Vec<(usize, bool)> = d.lone.iter().map(|l| (l.result, l.noted)).collect();
    assert_eq!(noted, vec![(0, false), (1, true)]);
    let [with, without] = d.lone[1].halfwidth_pct.unwrap();
    assert!(with > 3.0 && without < with / 2.0, "{with} {without}");
    let text = render_at(&run, false, TableOptions::default(), 1000);
    assert_eq!(
        text.matches(crate::base::model::note::DEPARTURE_NOTE)
            .count(),
        0,
        "{text}"
    );
    let b = text.lines().find(|l| l.contains("syscall/b")).unwrap();
    assert!(b.trim_end().ends_with("rep 6 +40%"), "{text}");
    assert!(text.contains(DEPARTURE_LEGEND), "{text}");
    assert!(
        text.contains("note: 1 result had repetitions depart alone (+2.5% to +2.5%)"),
        "{text}"
    );
    let verbose = render_at(
        &run,
        false,
        TableOptions {
            verbose: true,
            wide: false,
        },
        1000,
    );
    assert_eq!(
        verbose
            .matches(crate::base::model::note::DEPARTURE_NOTE)
            .count(),
        2
    );
    assert!(!verbose.contains("depart alone"), "{verbose}");
    assert!(verbose.contains("with it, ±"), "{verbose}");
    assert!(!verbose.contains("rep 6 +40%"), "{verbose}");
}

#[test]
fn a_family_at_two_levels_is_said_once_and_a_lone_two_level_result_by_its_ratio_in_its_row() {
    let mut run = testdata::run();
    let levels = |hi: f64| [100.0, hi, 100.2, hi * 1.001, 99.9, 100.1, 100.0, 99.8];
    let two = |id: &str, hi: f64| {
        let mut r = result_with_levels(id, &levels(hi), &[1, 3]);
        r.notes = vec![Note::new(
            NoteKind::TwoLevels,
            format!(
                "{}repetitions 2, 4",
                crate::base::model::note::TWO_LEVELS_NOTE
            ),
        )];
        r
    };
    run.results = vec![
        two("syscall/a", 108.0),
        two("syscall/b", 106.0),
        two("syscall/c", 110.0),
        two("spawn/d", 120.0),
    ];
    // Spread the departures in time so that no moment is shared.
    for (i, r) in run.results.iter_mut().enumerate() {
        for (k, rep) in r.repetitions.iter_mut().enumerate() {
            rep.started_ms = 10_000.0 * k as f64 + 1000.0 * i as f64;
        }
    }
    let d = crate::analysis::departures(&run);
    assert!(d.moves.is_empty());
    assert_eq!(d.family_levels.len(), 1);
    assert_eq!(d.family_levels[0].results, vec![0, 1, 2]);
    let text = render_at(&run, false, TableOptions::default(), 1000);
    assert_eq!(
        text.matches(crate::base::model::note::TWO_LEVELS_NOTE)
            .count(),
        0,
        "{text}"
    );
    // The lone one is said in its row by its ratio, and in the run's one line for such flags.
    assert!(!text.contains("spawn/d: two levels"), "{text}");
    let row = text.lines().find(|l| l.contains("spawn/d")).unwrap();
    assert!(row.contains("levels x1.20"), "{text}");
    assert!(text.contains("`levels xN`: whole repetitions sat at one of two levels N apart"));
    assert!(text.contains("(1 result, x1.20)"), "{text}");
    assert!(
        text.contains("note: 3 syscall/ results ran at two levels, each whole repetition at one or the other (x1.06 to x1.10"),
        "{text}"
    );
}

#[test]
fn a_moment_goes_on_while_shared_departures_follow_each_other() {
    let mut run = testdata::run();
    run.results.truncate(1);
    let one = run.results[0].clone();
    run.results = (0..6)
        .map(|i| {
            let mut r = one.clone();
            r.id = format!("call/f{i}");
            // Departures 150 ms apart: 0, 150, ..., 750 ms, each with two others in 300 ms.
            r.repetitions = vec![crate::base::model::Repetition {
                departs_pct: Some(5.0),
                ..testdata::repetition(1.0, 150.0 * i as f64)
            }];
            r
        })
        .collect();
    let (moves, explained) = crate::analysis::shared_departures(&run);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0].results, 6);
    assert_eq!(explained.len(), 6);
}

#[test]
fn a_lone_departure_is_noted_where_the_ci_is_3x_the_target_and_twice_the_others() {
    use crate::analysis::noted_alone;
    assert!(noted_alone(Some([3.0, 1.5]), 1.0));
    assert!(!noted_alone(Some([2.9, 0.1]), 1.0), "under 3x the target");
    assert!(
        !noted_alone(Some([8.0, 4.1]), 1.0),
        "under twice the others'"
    );
    assert!(noted_alone(None, 1.0), "too few others to tell");
    assert!(!noted_alone(Some([5.0, 1.0]), 2.0), "--quick asks 2%");
}

#[test]
fn the_default_table_fits_100_columns_and_wide_adds_min_and_events() {
    let mut run = testdata::run();
    run.notes = vec![Note::remark("a run-level note ".repeat(20))];
    let narrow = render_at(&run, false, TableOptions::default(), 100);
    for line in narrow.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let header = narrow.lines().next().unwrap();
    assert!(
        !header.contains("events/op") && !header.contains(" min "),
        "{header}"
    );
    let wide = render_at(
        &run,
        false,
        TableOptions {
            verbose: false,
            wide: true,
        },
        100,
    );
    let header = wide.lines().next().unwrap();
    assert!(
        header.contains("events/op") && header.contains("min"),
        "{header}"
    );
    assert_eq!(wrap("aaa bbb ccc", 7, 2), "aaa bbb\n  ccc");
}

/// A long id beside a result that is disturbed, has a definition not met and notes: its
/// flag gives way to the short form, references kept, and the table still fits.
#[test]
fn a_row_of_many_flags_is_shortened_to_fit_100_columns() {
    let mut run = testdata::run();
    let mut r = testdata::result("ipc/posix-mq-roundtrip/64KiB@cross", vec![1.0e6; 9]);
    r.disturbed.flag = vec!["other CPU busy 97%".into()];
    r.notes = vec![
        Note::new(
            NoteKind::DefinitionNotMet,
            "definition not met: 2 context-switches per op expected",
        ),
        Note::remark("a note"),
        Note::remark("another note"),
    ];
    run.results.push(r);
    let text = render_at(&run, false, TableOptions::default(), 100);
    let table: Vec<&str> = text.lines().take(run.results.len() + 2).collect();
    for line in &table {
        assert!(line.chars().count() <= 100, "{line}");
    }
    let row = table
        .iter()
        .find(|l| l.contains("posix-mq-roundtrip"))
        .unwrap();
    assert!(row.trim_end().ends_with(']') && row.contains(','), "{row}");
    // Every reference still has its note under the table.
    assert!(text.contains("another note"));
    assert_eq!(
        compact_flag("disturbed [12] rep 3 +24% note [13]", true),
        "rep 3 +24% disturbed [12,13]"
    );
    assert_eq!(compact_flag("note [4] note [5]", true), "notes [4,5]");
    assert_eq!(compact_flag("note [4] note [5]", false), "[4,5]");
    assert_eq!(compact_flag("rep 2 -8%", true), "rep 2 -8%");
}

/// A run with one note of each kind a view acts on, and a remark, on a run whose
/// departures the table says with their results (`--verbose` keeps every note).
fn run_with_every_kind_of_note() -> Run {
    let mut run = testdata::run();
    let flat = [100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.3, 99.7];
    let mut far = flat;
    far[5] = 140.0;
    let mut levels_at_two = flat;
    (levels_at_two[1], levels_at_two[3]) = (120.0, 120.4);
    let mut missed = testdata::result("switch/pipe-proc@same", vec![1.0e4; 9]);
    missed.notes = vec![
        Note::new(
            NoteKind::DefinitionNotMet,
            "definition not met: 2 context-switches per op (±0.1) expected, 0.30 counted",
        ),
        Note::remark("the kernel did not hand out a huge page"),
    ];
    let mut two = result_with_levels("syscall/c", &levels_at_two, &[1, 3]);
    two.notes = vec![Note::new(
        NoteKind::TwoLevels,
        format!(
            "{}repetitions 2, 4",
            crate::base::model::note::TWO_LEVELS_NOTE
        ),
    )];
    run.results = vec![result_with_levels("syscall/b", &far, &[5]), two, missed];
    run.notes = vec![Note::new(
        NoteKind::MachineSpeed,
        "the machine changed speed during this run",
    )];
    run
}

/// A run stored before notes had kinds (schema version 2: each note its bare words) loads
/// with the kinds the views act on, and prints as the same run does today.
#[test]
fn a_run_stored_with_bare_word_notes_loads_and_prints_as_before() {
    let run = run_with_every_kind_of_note();
    let mut v = serde_json::to_value(&run).unwrap();
    v["schema_version"] = 2.into();
    let words = |notes: &mut serde_json::Value| {
        for n in notes.as_array_mut().unwrap() {
            *n = n["text"].clone();
        }
    };
    words(&mut v["notes"]);
    for r in v["results"].as_array_mut().unwrap() {
        words(&mut r["notes"]);
    }
    assert!(v["results"][0]["notes"][0].is_string());
    let old = crate::base::model::load::run_from_json(&v.to_string(), "v2.json").unwrap();
    for (was, now) in run.results.iter().zip(&old.results) {
        assert_eq!(was.notes, now.notes, "{}", was.id);
    }
    assert_eq!(old.notes[0].kind, NoteKind::Remark);
    for verbose in [false, true] {
        let opts = TableOptions {
            verbose,
            wide: false,
        };
        assert_eq!(
            render_at(&old, false, opts, 1000),
            render_at(&run, false, opts, 1000)
        );
    }
}

/// The table acts on a note's kind: the same notes in other words are left out, grouped and
/// flagged exactly as before.
#[test]
fn rewording_a_note_changes_nothing_but_its_words_in_the_table() {
    let run = run_with_every_kind_of_note();
    let mut reworded = run.clone();
    for r in &mut reworded.results {
        for n in &mut r.notes {
            n.text = format!("Reworded {}", n.text.len());
        }
    }
    let (a, b) = (
        render_at(&run, false, TableOptions::default(), 1000),
        render_at(&reworded, false, TableOptions::default(), 1000),
    );
    let shape = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('['))
            .map(|l| l.to_string())
            .collect()
    };
    assert_eq!(shape(&a), shape(&b), "{a}\n---\n{b}");
    assert!(b.contains("definition not met ["), "{b}");
    assert_eq!(
        b.matches("Reworded").count(),
        a.lines().filter(|l| l.starts_with('[')).count(),
        "{b}"
    );
}

#[test]
fn steal_preemption_and_unstable_results_are_said_in_their_rows_and_once_for_the_run() {
    use crate::base::model::DisturbanceCause;
    let mut run = testdata::run();
    run.results.truncate(1);
    let one = run.results[0].clone();
    let with = |id: &str, causes: &[DisturbanceCause], unstable: Option<f64>| {
        let mut r = one.clone();
        r.id = id.into();
        r.disturbed = Default::default();
        r.disturbed.steal_pct = 9.4;
        r.disturbed.preempted_samples = 1;
        for c in causes {
            r.disturbed.add(*c, format!("{c:?} in words"));
        }
        if let Some(factor) = unstable {
            r.notes = vec![Note::new(
                NoteKind::Unstable { factor },
                "repetitions disagree",
            )];
        }
        r
    };
    run.results = vec![
        with("call/stolen", &[DisturbanceCause::Steal], None),
        with(
            "call/both",
            &[DisturbanceCause::Steal, DisturbanceCause::Preempted],
            Some(3.25),
        ),
        // A sibling's load is not said by a figure of its own: it stays a numbered note.
        with(
            "call/sibling",
            &[DisturbanceCause::SiblingBusy, DisturbanceCause::Steal],
            None,
        ),
    ];
    let text = render_at(&run, false, TableOptions::default(), 100);
    let row = |id: &str| text.lines().find(|l| l.contains(id)).unwrap().to_string();
    assert!(row("call/stolen").contains("steal 9%"), "{text}");
    assert!(
        row("call/both").contains("steal 9% preempted 20% unstable x3.25"),
        "{text}"
    );
    assert!(row("call/sibling").contains("disturbed [1]"), "{text}");
    assert!(text.contains("[1] call/sibling: disturbed: SiblingBusy in words"));
    assert!(!text.contains("[2]"), "{text}");
    let joined = text.replace("\n    ", " ");
    assert!(
        joined.contains("the hypervisor took N% of the measuring CPU's time (2 results, 9%)"),
        "{text}"
    );
    assert!(joined.contains("(1 result, x3.25)"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    // --verbose: each its note, as before.
    let verbose = render_at(
        &run,
        false,
        TableOptions {
            verbose: true,
            wide: false,
        },
        100,
    );
    assert!(
        verbose.contains("call/stolen: disturbed: Steal in words"),
        "{verbose}"
    );
    assert!(
        verbose.contains("call/both: repetitions disagree"),
        "{verbose}"
    );
    assert!(!verbose.contains("`steal N%`"), "{verbose}");
}
