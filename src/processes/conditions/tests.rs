//! Tests of each kind of condition, on fakes: what entering a side changes in its launch,
//! the words that name it, and how it marks the side's run.

use super::*;
use crate::base::model::testdata;
use crate::effects::settings_guard::{NotHeld, SideSettings};

fn launch() -> Launch {
    Launch {
        wrapper: vec![],
        opts: WorkerOptions::for_tests(),
    }
}

fn wrapped(text: &str) -> Side {
    Side {
        wrapper: Some(Wrapper {
            argv: text.split(' ').map(str::to_string).collect(),
            text: text.into(),
        }),
        ..Side::default()
    }
}

const NO_LEVELS: &CaseLevels = &Vec::new();

fn marking(compared: bool) -> Marking<'static> {
    Marking {
        compared,
        levels: NO_LEVELS,
    }
}

#[test]
fn a_wrapper_starts_its_sides_workers_under_it_and_names_the_run() {
    let sides = [Side::default(), wrapped("strace -f")];
    let mut w = wrapper::Wrappers::of(&sides);
    let mut l = launch();
    w.enter(1, &mut l).unwrap();
    assert_eq!(l.wrapper, ["strace", "-f"]);
    // Back to the plain side: no wrapper left over from the last one.
    w.enter(0, &mut l).unwrap();
    assert!(l.wrapper.is_empty());
    assert_eq!(w.words(0), None);
    assert_eq!(w.words(1).as_deref(), Some("strace -f"));
    let mut run = testdata::run();
    w.mark(1, &mut run, &marking(true));
    assert_eq!(run.wrapper.as_deref(), Some("strace -f"));
    assert!(!w.blocks());
}

#[test]
fn a_side_of_its_own_cpu_is_measured_there_and_the_other_where_the_plan_says() {
    let sides = [
        Side::default(),
        Side {
            cpu: Some(5),
            ..Side::default()
        },
    ];
    let mut c = cpu::MeasuringCpus::of(&sides);
    let mut l = launch();
    let plan_cpu = l.opts.cpu;
    c.enter(0, &mut l).unwrap();
    assert_eq!(l.opts.cpu, plan_cpu);
    c.enter(1, &mut l).unwrap();
    assert_eq!(l.opts.cpu, 5);
    assert_eq!((c.words(0), c.words(1).as_deref()), (None, Some("CPU 5")));
}

/// A switch that logs what it is asked, and refuses side 2.
#[derive(Default)]
struct LoggedSwitch(Vec<usize>);

impl Switch for LoggedSwitch {
    fn apply(&mut self, i: usize) -> Result<(), NotHeld> {
        self.0.push(i);
        if i == 2 {
            return Err(NotHeld::Unreadable {
                setting: "x".into(),
                why: "gone".into(),
            });
        }
        Ok(())
    }

    fn task_settings(&self, i: usize) -> Vec<(String, String)> {
        vec![("speculation".into(), format!("side {i}"))]
    }
}

fn held() -> HeldSettings {
    let side = |given: &[&str]| SideSettings {
        system: vec![],
        task: vec![],
        given: given.iter().map(|g| g.to_string()).collect(),
    };
    HeldSettings {
        sides: vec![side(&[]), side(&["thp=never"]), side(&["y=1"])],
        before: [("thp".to_string(), "madvise".to_string())].into(),
        settle_s: 0.2,
    }
}

#[test]
fn kernel_settings_are_switched_before_a_side_and_a_refusal_ends_the_measurement() {
    let held = held();
    let mut switch = LoggedSwitch::default();
    let mut k = KernelSettings {
        held: &held,
        guard: &mut switch,
    };
    let mut l = launch();
    k.enter(1, &mut l).unwrap();
    assert_eq!(
        l.opts.task_settings,
        [("speculation".into(), "side 1".into())]
    );
    assert!(matches!(
        k.enter(2, &mut l),
        Err(Stopped::SettingNotHeld(_))
    ));
    assert_eq!(
        (k.words(0), k.words(1).as_deref()),
        (None, Some("thp=never"))
    );
    // A comparison's side keeps its settings and the values before, and says them.
    let mut run = testdata::run();
    run.label = None;
    k.mark(1, &mut run, &marking(true));
    assert_eq!(run.settings, ["thp=never"]);
    assert_eq!(
        run.env.settings.get("thp").map(String::as_str),
        Some("madvise")
    );
    assert!(run.label.is_none());
    assert!(
        run.notes
            .last()
            .unwrap()
            .text
            .contains("put back after: thp=never")
    );
    // A run's one side is titled by its settings too.
    let mut run = testdata::run();
    run.label = Some("nightly".into());
    k.mark(1, &mut run, &marking(false));
    assert_eq!(run.label.as_deref(), Some("nightly (set thp=never)"));
    assert_eq!(switch.0, [1, 2]);
}

#[test]
fn a_program_during_asks_for_blocks_and_names_its_side() {
    let spec = crate::processes::during::DuringSpec {
        argv: vec!["sleep".into(), "100".into()],
        text: "sleep 100".into(),
        ready: None,
        ready_timeout: std::time::Duration::from_secs(1),
    };
    let sides = [
        Side::default(),
        Side {
            during: Some(spec),
            ..Side::default()
        },
    ];
    let d = during::DuringProgram::new(&sides, Stop::never(), std::time::Instant::now());
    assert!(d.blocks());
    assert_eq!(
        (d.words(0), d.words(1).as_deref()),
        (None, Some("during `sleep 100`"))
    );
    // Only the kinds some side has are conditions, in the order they are entered.
    let conditions = of(&sides, None, &Stop::never(), std::time::Instant::now());
    assert_eq!(conditions.len(), 1);
    assert_eq!(side_words(&conditions, 0), None);
    let both = [wrapped("env"), sides[1].clone()];
    let conditions = of(&both, None, &Stop::never(), std::time::Instant::now());
    assert_eq!(
        side_words(&conditions, 1).as_deref(),
        Some("during `sleep 100`")
    );
    assert_eq!(side_words(&conditions, 0).as_deref(), Some("env"));
}

#[test]
fn a_side_without_the_program_says_where_its_level_before_and_after_differ() {
    let levels: CaseLevels = vec![
        (
            "syscall/getppid".into(),
            vec![
                (10.0, 300.0),
                (20.0, 301.0),
                (30.0, 299.0),
                (500.0, 330.0),
                (510.0, 331.0),
                (520.0, 329.0),
            ],
        ),
        (
            "syscall/getpid".into(),
            vec![
                (10.0, 300.0),
                (20.0, 301.0),
                (30.0, 299.0),
                (500.0, 300.5),
                (510.0, 299.5),
                (520.0, 300.0),
            ],
        ),
    ];
    let moved = during::before_and_after(&levels, 100.0, 400.0);
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(moved[0].0.starts_with("syscall/getppid"), "{moved:?}");
    assert!((moved[0].1 - 1.1).abs() < 0.01);
}
