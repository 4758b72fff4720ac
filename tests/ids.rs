//! Every id oscost prints runs: a result's id, given back to `run` (with a size, a count, a
//! ring's shape, a placement, or a prefix of those), measures that result and no other case
//! of its benchmark; `list` filters by the same grammar; a mistyped command is said as one.

mod common;

use common::*;

/// The result ids of a run of benchmarks with every kind of case, given back in one command,
/// are measured, each once and nothing else; a prefix of case ids selects those cases.
#[test]
fn result_ids_given_back_measure_those_results() {
    let _g = measuring();
    let (_, first) = run_json(
        &unique_tag("ids-first"),
        &[
            "--quick",
            "--no-save",
            "switch/ring",
            "mem/mmap",
            "spawn/fork-rss",
        ],
    );
    // One result of each benchmark, and a prefix of mem/mmap's.
    let mut asked: Vec<String> = Vec::new();
    for b in ["switch/ring/", "spawn/fork-rss/"] {
        let r = first
            .results
            .iter()
            .find(|r| r.id.starts_with(b))
            .unwrap_or_else(|| panic!("no {b} result"));
        asked.push(r.id.clone());
    }
    asked.push("mem/mmap/4KiB".into());
    let mut args = vec!["--quick", "--no-save"];
    args.extend(asked.iter().map(String::as_str));
    let (_, again) = run_json(&unique_tag("ids-again"), &args);
    let mut got: Vec<&str> = again.results.iter().map(|r| r.id.as_str()).collect();
    got.sort();
    let mut want: Vec<&str> = vec![
        asked[0].as_str(),
        asked[1].as_str(),
        "mem/mmap/4KiB-touched",
        "mem/mmap/4KiB-untouched",
    ];
    want.sort();
    assert_eq!(got, want);
}

/// `list` takes ids as `run` does; a bare word close to a command is said as that command.
#[test]
fn list_filters_and_a_mistyped_command_is_named() {
    let out = oscost(&unique_tag("ids-list"))
        .args(["list", "syscall/"])
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        ids.len() > 5 && ids.iter().all(|i| i.starts_with("syscall/")),
        "{text}"
    );
    let out = oscost(&unique_tag("ids-typo"))
        .arg("lsit")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`oscost list`"), "{err}");
    let out = oscost(&unique_tag("ids-none"))
        .args(["run", "--no-save", "switch/ring/n99-s0k"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("switch/ring/n2-s0k"));
}
