//! The command line: listing, usage errors (one line, exit 2, no partial file), no panics.

mod common;

use common::*;

fn fails_with_usage(args: &[&str], expect: &str) {
    let out = oscost(&unique_tag("usage")).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(expect),
        "{args:?}: expected '{expect}' in: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn list_names_every_family_with_definitions() {
    let out = oscost("list").arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for id in [
        "call/f0",
        "timer/rdtsc",
        "syscall/getppid",
        "syscall/sched-yield",
        "fs/stat",
        "sig/catch",
    ] {
        assert!(text.contains(id), "{id} missing from list");
    }
    // Within 100 columns: long definitions wrap under themselves.
    assert!(text.lines().all(|l| l.len() <= 100), "{text}");
    // A user of lmbench finds its tool's number under the id, after its definition.
    let peer_of = |id: &str| {
        let at = text
            .lines()
            .position(|l| l.starts_with(&format!("{id} ")))
            .unwrap();
        text.lines()
            .skip(at + 1)
            .take_while(|l| l.starts_with(' '))
            .map(str::trim)
            .find(|l| l.starts_with("as "))
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(peer_of("fs/stat"), "as lmbench lat_syscall stat");
    assert_eq!(peer_of("fs/create"), "as lmbench lat_fs (create)");
    assert!(peer_of("syscall/getppid").contains("lmbench lat_syscall null"));
}

#[test]
fn unknown_id_suggests_the_nearest() {
    fails_with_usage(&["run", "syscall/getpdi"], "did you mean 'syscall/getpid'");
    fails_with_usage(&["sycall/"], "did you mean 'syscall/'");
}

#[test]
fn bad_numbers_are_usage_errors() {
    fails_with_usage(&["run", "--precision", "abc"], "not a number");
    fails_with_usage(&["run", "--precision", "-1"], "out of range");
    fails_with_usage(&["run", "--budget", "0"], "out of range");
    fails_with_usage(&["run", "--samples", "3"], "--samples");
    fails_with_usage(&["run", "--samples", "many"], "--samples");
    fails_with_usage(&["run", "--cpu", "4096"], "not an allowed CPU");
    fails_with_usage(&["run", "--timeout", "nan"], "out of range");
}

#[test]
fn conflicting_options_are_usage_errors() {
    fails_with_usage(
        &["run", "--samples", "20", "--precision", "2"],
        "cannot be used with",
    );
    fails_with_usage(&["run", "--under", "'unbalanced"], "unbalanced quotes");
}

#[test]
fn unwritable_outputs_are_refused_before_measuring_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/out.json");
    fails_with_usage(
        &["run", "syscall/getpid", "--json", missing.to_str().unwrap()],
        "cannot write",
    );
    fails_with_usage(
        &[
            "run",
            "syscall/getpid",
            "--csv",
            dir.path().to_str().unwrap(),
        ],
        "is a directory",
    );
    let same = dir.path().join("x");
    let s = same.to_str().unwrap();
    fails_with_usage(&["run", "--json", s, "--csv", s], "same file");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no partial file"
    );
}

#[test]
fn env_describes_the_machine() {
    let out = oscost("env").arg("env").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for key in [
        "kernel release",
        "CPU model",
        "clocksource",
        "THP enabled",
        "vulnerabilities:",
        "libc",
    ] {
        assert!(text.contains(key), "env lacks {key}:\n{text}");
    }
    let out = oscost("env").args(["env", "--json"]).output().unwrap();
    let env: oscost::base::model::Env = serde_json::from_slice(&out.stdout).unwrap();
    assert!(env.clock.unwrap().cost_ns > 0.0);
}

#[test]
fn garbage_arguments_never_panic() {
    for args in [
        vec!["--nope"],
        vec!["run", "--json"],
        vec!["list", "extra"],
        vec!["__worker", "syscall/getpid", "{not json"],
        vec!["run", ""],
    ] {
        let out = oscost("garbage").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(0), "{args:?} should fail");
    }
}

/// Every helper (`base::helpers`) is dispatched by its name before the command line is parsed:
/// started by hand without its arguments, each answers as itself and fails, never as a
/// benchmark id or a command. `__tracefs` is left out: it does its work at once (it mounts
/// tracefs in a mount namespace of its own).
#[test]
fn every_helper_is_dispatched_by_its_name_before_the_parser() {
    use oscost::base::helpers;
    for name in helpers::ALL.iter().filter(|n| **n != helpers::TRACEFS) {
        let out = oscost("helpers").arg(name).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains("no benchmark matches") && !text.contains("panicked"),
            "{name}: {text}"
        );
        assert!(
            text.contains(name) || text.contains("required arguments"),
            "{name} did not answer as itself: {text}"
        );
        assert_ne!(out.status.code(), Some(0), "{name}: {text}");
    }
}

#[test]
fn bash_completion_completes_subcommands_and_the_man_page_names_them() {
    let out = oscost("comp")
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("oscost.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(oscost r); COMP_CWORD=1; COMP_LINE='oscost r'; COMP_POINT=8; \
         _oscost oscost r oscost; echo \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let got = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&got.stdout);
    assert_eq!(
        words.split_whitespace().collect::<Vec<_>>(),
        ["run", "report"],
        "{words}"
    );
    // Ids, a flag's values and stored runs complete; the internal worker is never offered.
    let complete = |words: &[&str]| -> Vec<String> {
        let line = words.join(" ");
        let cur = words.last().unwrap();
        let prev = words[words.len() - 2];
        let probe = format!(
            "source {}; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; \
             _oscost oscost '{cur}' '{prev}'; echo \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.len() - 1,
            line.len()
        );
        let got = std::process::Command::new("bash")
            .args(["-c", &probe])
            .output()
            .unwrap();
        String::from_utf8_lossy(&got.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let ids = complete(&["oscost", "run", "syscall/get"]);
    assert!(ids.contains(&"syscall/getppid".to_string()), "{ids:?}");
    assert!(ids.iter().all(|i| i.starts_with("syscall/get")), "{ids:?}");
    assert!(complete(&["oscost", "run", "switch/ri"]).contains(&"switch/ring/n2-s0k".into()));
    assert_eq!(
        complete(&["oscost", "run", "--placement", ""]),
        ["same", "cross", "free"]
    );
    assert!(complete(&["oscost", "compare", "la"]).contains(&"last".into()));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("__worker"));
    for shell in ["zsh", "fish"] {
        let out = oscost("comp")
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success() && !out.stdout.is_empty());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("__worker"),
            "{shell} offers the internal worker"
        );
        assert!(text.contains("syscall/getppid"), "{shell} completes no ids");
    }
    let man = oscost("man").arg("man").output().unwrap();
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(man.status.success() && text.contains(".TH oscost 1"));
    for sub in ["run", "compare", "report", "completions"] {
        assert!(text.contains(sub), "man page lacks {sub}");
    }
    // Synopses as man pages write them; each option's value is in OPTIONS, never dropped.
    assert!(
        text.contains("\\fBoscost run\\fR [\\fIOPTIONS\\fR] [\\fIIDS\\fR...]"),
        "{text}"
    );
    assert!(!text.contains("[\\fB\\-\\-precision\\fR]"), "{text}");
    assert!(text.contains(".SH EXAMPLES"), "{text}");
}

/// `-h` is the short help: the commands and where `run`'s options are, not every option of a
/// bare `oscost`; `--help` keeps them all. Both fit 100 columns in a pipe.
#[test]
fn short_help_lists_the_commands_and_long_help_every_option() {
    let text = |arg: &[&str]| {
        let out = oscost("help").args(arg).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{arg:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let short = text(&["-h"]);
    let long = text(&["--help"]);
    for (name, t) in [("-h", &short), ("--help", &long)] {
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{name}: {t}");
        for command in ["run", "ab", "compare", "history", "list"] {
            assert!(
                t.lines().any(|l| l.trim_start().starts_with(command)),
                "{name} lists {command}: {t}"
            );
        }
    }
    assert!(short.contains("oscost run -h"), "{short}");
    assert!(!short.contains("--placement"), "{short}");
    assert!(long.contains("--placement"), "{long}");
    assert!(short.lines().count() * 2 < long.lines().count(), "{short}");
    // A command's own -h still lists its options.
    assert!(text(&["run", "-h"]).contains("--placement"));
}
