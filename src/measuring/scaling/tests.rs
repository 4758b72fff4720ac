//! Tests of `scaling`.

use super::*;

/// 8 CPUs: 4 cores of 2 hardware threads, siblings n and n+4 (as Intel numbers them).
struct FourCoresSmt;
impl Topology for FourCoresSmt {
    fn core_of(&self, cpu: usize) -> Option<(usize, usize)> {
        Some((0, cpu % 4))
    }
}

/// 2 packages of 2 cores, siblings adjacent (0,1), (2,3), ... (as AMD often numbers them).
struct AdjacentSiblings;
impl Topology for AdjacentSiblings {
    fn core_of(&self, cpu: usize) -> Option<(usize, usize)> {
        Some((cpu / 4, (cpu % 4) / 2))
    }
}

struct Unknown;
impl Topology for Unknown {
    fn core_of(&self, _: usize) -> Option<(usize, usize)> {
        None
    }
}

#[test]
fn copies_take_one_cpu_per_core_before_any_sibling() {
    let all: Vec<usize> = (0..8).collect();
    assert_eq!(layout(&all, 0, &FourCoresSmt), vec![0, 1, 2, 3, 4, 5, 6, 7]);
    // The measuring CPU's core leads, with the measuring CPU itself first.
    assert_eq!(layout(&all, 6, &FourCoresSmt), vec![6, 0, 1, 3, 2, 4, 5, 7]);
    assert_eq!(
        layout(&all, 0, &AdjacentSiblings),
        vec![0, 2, 4, 6, 1, 3, 5, 7]
    );
    // Only the allowed CPUs, each once.
    assert_eq!(layout(&[5, 1, 4, 1], 1, &FourCoresSmt), vec![1, 4, 5]);
    // A machine that says nothing: every CPU a core of its own.
    assert_eq!(layout(&[3, 1, 2], 2, &Unknown), vec![2, 1, 3]);
    // N copies of N <= cores share no core.
    let l = layout(&all, 0, &AdjacentSiblings);
    let cores: std::collections::BTreeSet<_> = l[..4]
        .iter()
        .map(|&c| AdjacentSiblings.core_of(c))
        .collect();
    assert_eq!(cores.len(), 4);
}

#[test]
fn ipis_are_summed_over_every_cpu() {
    let text = "           CPU0       CPU1\n  0:         34          0   IO-APIC   2-edge      timer\n\
                RES:      10059       7812   Rescheduling interrupts\n\
                CAL:      49518      41481   Function call interrupts\n\
                TLB:      16783      25131   TLB shootdowns\n";
    let i = crate::measuring::os::parse_ipis(text, None);
    assert_eq!(
        i,
        Ipis {
            resched: 17871,
            call: 90999,
            tlb: 41914
        }
    );
}

#[test]
fn modes_have_words() {
    for m in Mode::BOTH {
        assert_eq!(Mode::parse(m.word()), Some(m));
    }
    assert_eq!(Mode::parse("proc"), None);
}

/// Two copies of a counting body, both modes: they start together, count, stop when told
/// and leave nothing running (a process copy that outlived the case would keep counting).
#[test]
fn copies_count_together_and_stop() {
    let body = |t: &Task| -> Result<(), TaskError> {
        if !t.start() {
            return Ok(());
        }
        while t.running() {
            std::hint::black_box(t.index);
            t.done(1);
        }
        Ok(())
    };
    let cpus = crate::measuring::placement::allowed_cpus();
    for mode in Mode::BOTH {
        let shape = Shape {
            mode,
            cpus: vec![cpus[0]; 2],
            window_ns: 2_000_000,
            warmup_ns: 1_000_000,
            length_ns: 60_000_000,
            watched: cpus.clone(),
        };
        // Both copies on one CPU: together each gets about half of what copy 0 alone got in
        // the windows paired with them (the other waits on the board meanwhile). The unit
        // tests beside this one run on the same CPUs and can slow copy 0's few solo windows
        // (0.62-0.81 seen in 4 of 18 runs of the suite) or its paired ones (0.35, 0.39 and
        // 1.02 in one CI run), so a pass disturbed that way is measured again, up to six
        // times, each over 60 ms; a slow path while alone (1.6, the bug this catches) or
        // copies that do not share (1.0) is out of the band every time.
        let mut seen = Vec::new();
        for _ in 0..6 {
            let o = measure(&shape, &body).unwrap();
            assert!(o.measurement.samples_ns.len() >= 3);
            assert!(o.measurement.samples_ns.iter().all(|&x| x > 0.0));
            assert!(o.params["ops_per_s_per_task"].as_f64().unwrap() > 0.0);
            let paired = o.params["paired_efficiency"].as_f64().unwrap();
            seen.push(paired);
            if (0.35..0.7).contains(&paired) {
                break;
            }
        }
        assert!(
            seen.iter().any(|p| (0.35..0.7).contains(p)),
            "{mode:?}: paired efficiency {seen:?}"
        );
    }
    let failing = |t: &Task| -> Result<(), TaskError> {
        if t.index == 1 {
            return Err(TaskError {
                what: "opening its file",
                errno: libc::ENOENT,
            });
        }
        t.start();
        Ok(())
    };
    let shape = Shape {
        mode: Mode::Process,
        cpus: vec![cpus[0]; 2],
        window_ns: 2_000_000,
        warmup_ns: 1_000_000,
        length_ns: 10_000_000,
        watched: cpus.clone(),
    };
    let e = measure(&shape, &failing).unwrap_err().to_string();
    assert!(e.contains("copy 1 of 2: opening its file"), "{e}");
}
