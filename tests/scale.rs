//! scale/: copies at once, as processes and threads. The null call scales; a TLB flush and
//! mmap/munmap cost threads of one address space more than processes, with IPIs to show why;
//! nothing is left behind, also after Ctrl-C; and the results are compared, set in a matrix
//! and ab'd like any other.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::*;
use oscost::analysis::compare::{Comparison, Verdict};
use serde_json::Value;

fn param(r: &BenchResult, k: &str) -> f64 {
    r.params
        .get(k)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{}: no {k}: {:?}", r.id, r.params))
}

fn ci(r: &BenchResult, k: &str) -> [f64; 2] {
    serde_json::from_value(
        r.params
            .get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{}: no {k}", r.id)),
    )
    .unwrap()
}

/// A scratch base of its own (TMPDIR), empty again once oscost has ended.
fn assert_empty(dir: &Path, what: &str) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR after {what}: {left:?}");
}

#[test]
fn the_null_call_scales_and_a_shared_address_space_shows_its_cost() {
    let _g = measuring();
    let cpus = allowed_cpus();
    let tag = unique_tag("scale");
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("run.json");
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let out = oscost(&tag)
        .env("TMPDIR", &scratch)
        .args([
            "run",
            "--quick",
            "--no-save",
            "scale/getppid",
            "scale/tlb-flush",
            "scale/mmap-anon",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    let run = read_run(&json);
    assert!(wait_until_gone(&tag, Duration::from_secs(1)).is_empty());
    assert_empty(&scratch, "a scale run");
    let n = cpus.len();
    if n < 2 {
        assert_eq!(state(&run, "scale/getppid/process-1"), "ok");
        skip("scale contention", "one allowed CPU: no second copy");
        return;
    }
    // Every case at 1 and every allowed CPU, both modes.
    for case in ["getppid", "tlb-flush", "mmap-anon"] {
        for mode in ["process", "thread"] {
            for k in [1, n] {
                let id = format!("scale/{case}/{mode}-{k}");
                assert_eq!(
                    state(&run, &id),
                    "ok",
                    "{id}: {:?}",
                    result(&run, &id).status
                );
                let r = result(&run, &id);
                assert!(param(r, "ops_per_s_per_task") > 0.0);
                let total = param(r, "ops_per_s_total");
                assert!((total / param(r, "ops_per_s_per_task") - k as f64).abs() < 1e-6);
                assert!((0.0..=100.0).contains(&param(r, "idle_pct")));
            }
        }
    }
    // The null call scales in both modes: two copies do clearly more than one (a point above
    // 0.6, where 0.5 is no gain), measured from windows paired in time, and it scales better
    // than the TLB flush of threads sharing one address space (~0.2 here). Not a point above
    // 0.9: on these guests two busy vCPUs each run at 0.75 or 0.87 of one for the first
    // 0.3-1 s after the second wakes (the host's placement settling; a C loop shows the same
    // levels, docs/design-notes.md, "Efficiency from one instant"), and a repetition is
    // shorter than that; paired, the CI is tight around whichever level the host gave. The
    // 0.9 goal is scripts/check-efficiency.sh's, measured on the host at hand.
    let flush = param(
        result(&run, &format!("scale/tlb-flush/thread-{n}")),
        "efficiency",
    );
    for mode in ["process", "thread"] {
        let r = result(&run, &format!("scale/getppid/{mode}-{n}"));
        let e = param(r, "efficiency");
        assert_eq!(
            r.params.get("efficiency_paired"),
            Some(&serde_json::json!(true)),
            "{}",
            r.id
        );
        let e_ci = ci(r, "efficiency_ci95");
        assert!(
            e > 0.6 && e_ci[0] <= e && e <= e_ci[1] && e > flush,
            "{}: efficiency {e} {e_ci:?}, the threads' TLB flush {flush}",
            r.id
        );
    }
    // Threads of one address space pay for the TLB flush and for mmap/munmap what processes
    // do not: called with a CI, and the IPIs that say why: more per operation for the threads
    // than for the processes, CI against CI (any run with one IPI per repetition would pass
    // "above 0").
    for case in ["tlb-flush", "mmap-anon"] {
        let t = result(&run, &format!("scale/{case}/thread-{n}"));
        let p = result(&run, &format!("scale/{case}/process-{n}"));
        assert!(
            param(t, "efficiency") < param(p, "efficiency"),
            "{case}: threads {} processes {}",
            param(t, "efficiency"),
            param(p, "efficiency")
        );
        let vs = ci(t, "vs_processes_ci95");
        assert!(vs[0] > 1.0, "{case}: threads against processes {vs:?}");
        let (ipis_t, ipis_p) = (ci(t, "ipis_per_op_ci95"), ci(p, "ipis_per_op_ci95"));
        assert!(
            ipis_t[0] > ipis_p[1],
            "{case}: IPIs per operation, threads {ipis_t:?} processes {ipis_p:?}"
        );
        assert!(
            t.notes
                .iter()
                .any(|x| x.kind == oscost::base::model::NoteKind::ThreadsPay)
        );
    }
    // A TLB flush across CPUs is an IPI per page at least half the time.
    let t = result(&run, &format!("scale/tlb-flush/thread-{n}"));
    assert!(param(t, "tlb_ipis_per_op") > 0.5, "{:?}", t.params);
}

#[test]
fn copies_past_the_allowed_cpus_are_refused_before_measuring() {
    let n = allowed_cpus().len();
    let out = oscost(&unique_tag("scale-bad"))
        .args(["run", "--no-save", "scale/getppid", "--copies"])
        .arg((n + 1).to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--copies") && err.contains("CPUs"), "{err}");
}

#[test]
fn an_interrupted_scale_run_leaves_no_process_and_no_file() {
    let _g = measuring();
    let tag = unique_tag("scale-int");
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    // Partners (a copy's own child or thread), files of each copy's own, and a 128 MiB
    // file per copy: everything a case makes.
    let mut child = oscost(&tag)
        .env("TMPDIR", &scratch)
        .args([
            "run",
            "--no-save",
            "scale/pipe-pair",
            "scale/open-dirs",
            "scale/page-fault-file",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once a worker measures (its copies make their files), not after a guessed time.
    assert!(
        wait_for_process(&tag, "__worker", Duration::from_secs(30)),
        "measuring never started"
    );
    std::thread::sleep(Duration::from_millis(100));
    signal_expect_clean_exit(&mut child, &tag, libc::SIGINT, "scale/", None);
    assert_empty(&scratch, "Ctrl-C");
}

fn ok(out: &Output) -> String {
    assert_success(out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn scale_results_are_compared_set_in_a_matrix_and_abd() {
    let _g = measuring();
    let tag = unique_tag("scale-cmp");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let with_db = |args: &[&str]| -> Output {
        oscost(&tag)
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        ok(&with_db(&[
            "run",
            "--quick",
            "scale/getppid",
            "--copies",
            "1",
        ]));
    }
    let cmp_json = dir.path().join("cmp.json");
    let text = ok(&with_db(&[
        "compare",
        "1",
        "2",
        "--together",
        "--json",
        cmp_json.to_str().unwrap(),
    ]));
    let cmp: Comparison =
        serde_json::from_str(&std::fs::read_to_string(&cmp_json).unwrap()).unwrap();
    for id in ["scale/getppid/process-1", "scale/getppid/thread-1"] {
        let row = cmp
            .rows
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{id} not compared: {text}"));
        assert!(row.slowdown_ci95[0] <= row.slowdown_ci95[1]);
    }
    let m_json = dir.path().join("m.json");
    ok(&with_db(&[
        "matrix",
        "1",
        "2",
        "--json",
        m_json.to_str().unwrap(),
    ]));
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&m_json).unwrap()).unwrap();
    let text = m.to_string();
    assert!(text.contains("scale/getppid/thread-1"), "{text}");

    // ab of a wrapper that changes nothing: both sides measured, nothing called slower.
    let ab_json = dir.path().join("ab.json");
    ok(&with_db(&[
        "ab",
        "--quick",
        "--b",
        "env OSCOST_AB_SIDE=b",
        "scale/getppid",
        "--copies",
        "1",
        "--json",
        ab_json.to_str().unwrap(),
    ]));
    let ab: Comparison = serde_json::from_str(&std::fs::read_to_string(&ab_json).unwrap()).unwrap();
    assert_eq!(ab.rows.len(), 2, "{ab:?}");
    assert!(
        ab.rows.iter().all(|r| r.verdict != Verdict::Slower),
        "{ab:?}"
    );
    assert!(wait_until_gone(&tag, Duration::from_secs(1)).is_empty());
}

/// The zero-filled end of the binary's last loadable segment, in bytes past its file data
/// (`p_memsz - p_filesz` of the PT_LOAD with the highest address), read from the ELF64
/// program headers; None for a binary this test cannot read that way.
fn bss_tail_bytes(elf: &[u8]) -> Option<u64> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    // "\x7fELF", 64-bit, little-endian.
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (phoff, phentsize, phnum) = (u64_at(0x20)? as usize, u16_at(0x36)?, u16_at(0x38)?);
    (0..phnum as usize)
        .map(|i| phoff + i * phentsize as usize)
        .filter(|&h| u32_at(h) == Some(1))
        .filter_map(|h| Some((u64_at(h + 16)?, u64_at(h + 32)?, u64_at(h + 40)?)))
        .max_by_key(|&(vaddr, _, _)| vaddr)
        .map(|(_, filesz, memsz)| memsz.saturating_sub(filesz))
}

/// Every build maps the same: the zero-filled tail of its data runs past the page its file
/// data ends in, so the kernel always gives it an anonymous mapping of its own. Without
/// `BSS_TAIL` (src/main.rs) whether it did followed from code size, and one mapping more or
/// less moved `scale/mmap-anon` in threads between 220,000 and 330,000 operations a second.
#[test]
fn every_build_gives_its_zero_filled_data_a_mapping_of_its_own() {
    let elf = std::fs::read(bin()).expect("read the oscost binary");
    let Some(tail) = bss_tail_bytes(&elf) else {
        skip(
            "every_build_gives_its_zero_filled_data_a_mapping_of_its_own",
            "the binary is not a little-endian ELF64 with a loadable segment",
        );
        return;
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    assert!(
        tail > page,
        "the last segment's zero-filled tail is {tail} bytes, not past a {page}-byte page: \
         whether it gets a mapping of its own then depends on where code size puts it"
    );
}
