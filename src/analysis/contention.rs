//! Machine-wide contention said once: a run whose results saw other CPUs busy gets one note
//! with the figure and the programs that took the CPUs (`machine::contention`), and the views
//! leave out the per-result "other CPU busy" notes it stands for. On a loaded host about 90 of a
//! default run's 97 results carried the same note; a separate core's load is named, not a
//! disturbance (`assess`), so one line says all there is to say.

use super::Thresholds;
use crate::base::model::{BenchResult, Disturbance, Note, NoteKind};
use crate::machine::contention::ProgramShare;

/// A program using less than this share of one CPU is not named.
const NAMED_FROM_CPUS: f64 = 0.05;
/// At most this many programs are named.
const NAMED_AT_MOST: usize = 5;

/// Whether a result's disturbance is machine-wide contention on its own CPU, and how much of
/// its time it lost to it (percent): another task shared the CPU (the thread waited for it, or
/// the CPU's account shows other programs there), with no steal past the threshold and no
/// cgroup quota (those are said per result: they are the hypervisor's and the cgroup's, not
/// the load's). Preemptions and a busy SMT sibling come with a shared CPU and are explained by
/// it.
pub fn shared_cpu(d: &Disturbance) -> Option<f64> {
    if !d.is_disturbed()
        || d.steal_pct > Thresholds::default().steal_pct
        || d.throttled_ms.is_some()
    {
        return None;
    }
    let wait = d
        .cpu_wait_pct
        .filter(|&w| w > 100.0 * super::CPU_WAIT_SHARE);
    let foreign = d
        .cpu_foreign_pct
        .filter(|&f| f > 100.0 * super::CPU_FOREIGN_SHARE);
    match (wait, foreign) {
        (None, None) => None,
        (w, f) => Some(w.unwrap_or(0.0).max(f.unwrap_or(0.0))),
    }
}

/// The run's contention note, from its results' `OtherCpuBusy` notes, the results whose own
/// CPU was shared (`shared_cpu`), and the programs that used CPU time while it measured;
/// `None` where no result saw either.
pub fn contention_note(results: &[BenchResult], programs: &[ProgramShare]) -> Option<Note> {
    let busy: Vec<f64> = results
        .iter()
        .flat_map(|r| &r.notes)
        .filter_map(|n| match n.kind {
            NoteKind::OtherCpuBusy { busy_pct } => Some(busy_pct),
            _ => None,
        })
        .collect();
    let shared: Vec<f64> = results
        .iter()
        .filter_map(|r| shared_cpu(&r.disturbed))
        .collect();
    if busy.is_empty() && shared.is_empty() {
        return None;
    }
    let range = |v: &[f64]| {
        let (lo, hi) = crate::base::stats::extent(v.iter().copied());
        if hi - lo < 1.0 {
            format!("{hi:.0}%")
        } else {
            format!("{lo:.0}-{hi:.0}%")
        }
    };
    let named: Vec<&ProgramShare> = programs
        .iter()
        .filter(|p| p.cpus >= NAMED_FROM_CPUS)
        .take(NAMED_AT_MOST)
        .collect();
    let who = if named.is_empty() {
        "by no program oscost could see (the hypervisor, the kernel's own threads, or processes \
         that came and went)"
            .to_string()
    } else {
        let each: Vec<String> = named
            .iter()
            .map(|p| {
                let n = if p.processes > 1 {
                    format!("{} processes, ", p.processes)
                } else {
                    String::new()
                };
                format!("{} ({n}{:.2} CPUs)", p.name, p.cpus)
            })
            .collect();
        format!("by {}", each.join(", "))
    };
    let mut parts = vec![format!("contention: CPUs were taken {who} while this ran")];
    if !busy.is_empty() {
        parts.push(format!(
            "{} of {} results saw another CPU busy {} (a separate core: a disturbance only \
             where a result says so)",
            busy.len(),
            results.len(),
            range(&busy)
        ));
    }
    if !shared.is_empty() {
        parts.push(format!(
            "{} shared their own CPU, waiting {} of their time for it (flagged `shared CPU`; \
             --verbose says each)",
            shared.len(),
            range(&shared)
        ));
    }
    let extent = |v: &[f64]| {
        let (lo, hi) = crate::base::stats::extent(v.iter().copied());
        if v.is_empty() { [0.0, 0.0] } else { [lo, hi] }
    };
    Some(Note::new(
        NoteKind::Contention {
            results: busy.len(),
            busy_pct: extent(&busy),
            shared: shared.len(),
            wait_pct: extent(&shared),
            programs: named.iter().map(|p| (p.name.clone(), p.cpus)).collect(),
        },
        parts.join("; "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    #[test]
    fn many_busy_notes_become_one_line_naming_the_programs() {
        let mut results: Vec<BenchResult> = (0..4)
            .map(|i| testdata::result(&format!("syscall/x{i}"), vec![100.0; 20]))
            .collect();
        for (r, b) in results.iter_mut().zip([97.0, 100.0, 99.0]) {
            r.notes.push(Note::new(
                NoteKind::OtherCpuBusy { busy_pct: b },
                "other CPU busy",
            ));
        }
        let programs = [
            ProgramShare {
                name: "dd".into(),
                processes: 2,
                cpus: 1.96,
            },
            ProgramShare {
                name: "sshd".into(),
                processes: 1,
                cpus: 0.001,
            },
        ];
        let n = contention_note(&results, &programs).unwrap();
        assert_eq!(
            n.kind,
            NoteKind::Contention {
                results: 3,
                busy_pct: [97.0, 100.0],
                shared: 0,
                wait_pct: [0.0, 0.0],
                programs: vec![("dd".into(), 1.96)],
            }
        );
        assert!(
            n.text
                .contains("3 of 4 results saw another CPU busy 97-100%"),
            "{}",
            n.text
        );
        assert!(n.text.contains("dd (2 processes, 1.96 CPUs)"), "{}", n.text);
        assert!(!n.text.contains("sshd"), "{}", n.text);
        assert!(contention_note(&results[3..], &programs).is_none());
    }

    #[test]
    fn a_result_that_shared_its_cpu_is_counted_once_and_steal_is_not_contention() {
        let mut results: Vec<BenchResult> = (0..3)
            .map(|i| testdata::result(&format!("syscall/x{i}"), vec![100.0; 20]))
            .collect();
        for (r, w) in results.iter_mut().zip([50.0, 99.0]) {
            r.disturbed.cpu_wait_pct = Some(w);
            r.disturbed.flag = vec!["waited".into(), "preempted".into()];
        }
        assert_eq!(shared_cpu(&results[0].disturbed), Some(50.0));
        let mut stolen = results[1].disturbed.clone();
        stolen.steal_pct = 30.0;
        assert_eq!(shared_cpu(&stolen), None, "steal is said per result");
        assert_eq!(shared_cpu(&results[2].disturbed), None, "undisturbed");
        let n = contention_note(&results, &[]).unwrap();
        assert!(matches!(
            n.kind,
            NoteKind::Contention {
                shared: 2,
                results: 0,
                ..
            }
        ));
        assert!(
            n.text.contains("2 shared their own CPU, waiting 50-99%"),
            "{}",
            n.text
        );
        assert!(n.text.contains("no program oscost could see"), "{}", n.text);
    }
}
