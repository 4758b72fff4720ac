//! The documented command lines, run: every line of the README's code blocks and then
//! docs/ci.md's that starts with `oscost` (after a `$ ` prompt, `sudo `, a CI file's `- `,
//! `sh '` or `target/release/`), in order, in a temporary directory with a temporary store
//! prepared with the runs the lines name (`last~1`, run 7, runs 3, 9 and 14, kernels 6.1 and
//! 6.6, host box1, label nightly), measuring commands in `--quick`. A line that changes the
//! machine or lasts past a minute is in `NOT_RUN`, with why; any other line that exits non-zero
//! fails the test, and so does a `NOT_RUN` entry no line matches, so a line added to the README
//! is run from the day it is written and the list cannot go stale. docs/ci.md's recipe is also
//! run by tests/ci_recipe.rs, which checks the files it writes.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// README lines not run, by how the line starts (its prompt, `sudo` and comment taken off),
/// and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "oscost run --runs 5",
        "five default suites 10 s apart: past a minute",
    ),
    ("oscost watch", "runs until it is stopped"),
    (
        "oscost run scale/ --quick",
        "every scale/ case at 1..N copies: 90 s on 2 CPUs (its README examples of one case, \
         `scale tlb-flush` and the four-case run, are run)",
    ),
    ("oscost ab --b-set", "changes a kernel setting"),
    ("oscost ab --a-set", "changes a kernel setting"),
    ("oscost run --set", "changes a kernel setting"),
    (
        "oscost ab --b 'strace -f -o /dev/null' syscall/ ",
        "every system call under strace until each is decided: past a minute (the headline's \
         subset under strace is run)",
    ),
    (
        "oscost ab --b-during",
        "a system-wide tracer on every system call of the family, A B B A blocks until \
         decided: past a minute",
    ),
];

/// Tools a line needs beyond oscost, by a word in it; without one the line is skipped, saying
/// so, and fails where CI installed it (`skip_needing`).
const NEEDS: &[(&str, &str)] = &[("strace", "strace"), ("postgresql://", "postgres")];

/// The command lines of `doc`'s code blocks, as written: a prompt (`$ `), `sudo `, a CI
/// file's list dash, `sh '...'` and `target/release/` taken off, a line continued with `\`
/// joined to the next, the trailing comment left off.
fn command_lines(doc: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    let mut pending: Option<String> = None;
    for raw in doc.lines() {
        if raw.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let mut line = raw.trim().to_string();
        if let Some(start) = pending.take() {
            line = format!("{start} {line}");
        }
        if let Some(start) = line.strip_suffix('\\') {
            pending = Some(start.trim_end().to_string());
            continue;
        }
        for prefix in ["- ", "$ ", "sudo ", "target/release/"] {
            line = line.strip_prefix(prefix).unwrap_or(&line).to_string();
        }
        if let Some(quoted) = line.strip_prefix("sh '").and_then(|l| l.strip_suffix('\'')) {
            line = quoted
                .strip_prefix("target/release/")
                .unwrap_or(quoted)
                .to_string();
        }
        if let Some(inner) = line.strip_prefix("source <(") {
            // `source <(oscost completions bash)`: the command inside.
            line = inner.split(')').next().unwrap_or(inner).to_string();
        }
        if !(line == "oscost" || line.starts_with("oscost ")) {
            continue;
        }
        let command = line.split("  #").next().unwrap_or(&line).trim_end();
        lines.push(command.to_string());
    }
    lines
}

/// The command lines of the README, then docs/ci.md's.
fn doc_lines() -> Vec<String> {
    ["README.md", "docs/ci.md"]
        .iter()
        .flat_map(|name| {
            let path = format!("{}/{name}", env!("CARGO_MANIFEST_DIR"));
            command_lines(&std::fs::read_to_string(path).unwrap())
        })
        .collect()
}

/// Why `line` is not run, if it is not.
fn not_run(line: &str) -> Option<&'static str> {
    let spaced = format!("{line} ");
    NOT_RUN
        .iter()
        .find(|(start, _)| spaced.starts_with(start))
        .map(|(_, why)| *why)
}

/// The line as run: `--quick` where it measures and does not say it, the fleet's URL the test's
/// own PostgreSQL.
fn as_run(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let measures = matches!(
        words.get(1).copied(),
        None | Some("run" | "ab" | "scale" | "predict")
    );
    let mut line = if line == "oscost" {
        "oscost run".to_string()
    } else {
        line.to_string()
    };
    if measures && !line.contains("--quick") {
        // Before a `--` that starts the program's own arguments.
        match line.find(" -- ") {
            Some(i) => line.insert_str(i, " --quick"),
            None => line.push_str(" --quick"),
        }
    }
    if let Ok(url) = std::env::var("OSCOST_TEST_PG") {
        line = line.replace("postgresql://me@db/fleet", &url);
    }
    line
}

/// Whether the test has `need`: the test's PostgreSQL server (`OSCOST_TEST_PG`), or a tool on
/// the PATH.
fn has(need: &str) -> bool {
    match need {
        "postgres" => std::env::var_os("OSCOST_TEST_PG").is_some(),
        tool => on_path(tool),
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// `oscost ARGS` in `dir` on its store, succeeding.
fn oscost_in(dir: &Path, args: &str) -> std::process::Output {
    let out = sh(dir, &format!("\"{}\" {args}", bin().display()));
    assert_success(&out);
    out
}

fn sh(dir: &Path, cmd: &str) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("OSCOST_DB", dir.join("results.db"))
        .env("NO_COLOR", "1")
        .env("MANPAGER", "cat")
        .env("CI_COMMIT", "0123abc")
        .output()
        .unwrap()
}

/// The store and files the README's lines name: fourteen runs before the lines' own (kernels
/// 6.1.0 and 6.6.0, host box1, label nightly), `base.json`, `new.json` and `run.json`, and
/// `scripts/ref/seccomp-layers` built from its source.
fn prepare(dir: &Path) {
    oscost_in(
        dir,
        "run syscall/getpid syscall/getppid spawn/fork --quick --no-save --json seed.json",
    );
    let seed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("seed.json")).unwrap()).unwrap();
    for k in 1..=14 {
        let mut run = seed.clone();
        let kernel = if k <= 7 { "6.1.0" } else { "6.6.0" };
        run["env"]["kernel_release"] = kernel.into();
        run["env"]["hostname"] = if k % 2 == 0 { "box1" } else { "box2" }.into();
        run["label"] = "nightly".into();
        run["started_at"] = format!("2026-11-{:02}T03:00:00Z", 10 + k).into();
        let name = format!("seed{k}.json");
        std::fs::write(dir.join(&name), run.to_string()).unwrap();
        oscost_in(dir, &format!("import {name}"));
    }
    for name in ["base.json", "new.json", "run.json"] {
        std::fs::copy(dir.join("seed.json"), dir.join(name)).unwrap();
    }
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/ref/seccomp-layers.c");
    std::fs::create_dir_all(dir.join("scripts/ref")).unwrap();
    let cc = Command::new("cc")
        .args(["-O2", "-o", "scripts/ref/seccomp-layers", src])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(cc.success(), "cc {src}");
}

/// Whether `line` exited as its documents say it may: 0, or 1 for a comparison with
/// `--fail-above` that found a regression past it (what the flag is for: two quick runs on a
/// busy CI host may differ that much) or that cannot tell without the run-to-run spread of 3
/// stored runs, as docs/ci.md says a first job does (tests/ci_recipe.rs stores the 3 and
/// checks the gate's own path).
fn exited_as_documented(line: &str, out: &std::process::Output) -> bool {
    let said = String::from_utf8_lossy(&out.stderr);
    let verdict = said.contains("slower by more than") || said.contains("cannot tell whether");
    out.status.success()
        || (line.contains("--fail-above") && out.status.code() == Some(1) && verdict)
}

// The slow tier (`cargo test -- --ignored`, a CI step of its own): the lines measure for about
// two and a half minutes in all, two default suites among them.
#[test]
#[ignore]
fn every_command_line_the_readme_and_the_ci_recipes_show_runs() {
    let lines = doc_lines();
    assert!(lines.len() >= 40, "{lines:?}");
    for (start, _) in NOT_RUN {
        assert!(
            lines.iter().any(|l| format!("{l} ").starts_with(start)),
            "NOT_RUN names {start:?}, which no line of the documents starts with: take it out"
        );
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    let mut ran = 0;
    let mut took = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for line in &lines {
        if let Some(why) = not_run(line) {
            skip(line, &format!("not run: {why}"));
            continue;
        }
        if let Some((word, need)) = NEEDS.iter().find(|(w, _)| line.contains(w))
            && !has(need)
        {
            skip_needing(line, &[need], &format!("needs {need} ({word})"));
            continue;
        }
        if line.starts_with("oscost man |") && !on_path("man") {
            skip(line, "man is not installed: `oscost man` alone is run");
            oscost_in(dir.path(), "man");
            continue;
        }
        let run = as_run(line);
        if done.contains(&run) {
            // `oscost` is `oscost run`: the same command is not measured twice.
            continue;
        }
        done.push(run.clone());
        let cmd = run.replacen("oscost", &format!("\"{}\"", bin().display()), 1);
        let t = std::time::Instant::now();
        let out = sh(dir.path(), &cmd);
        assert!(
            exited_as_documented(line, &out),
            "the documented line `{line}` (run as `{run}`) exited {:?} (before it:\n{}):\n{}\n{}",
            out.status.code(),
            took.join("\n"),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        took.push(format!("{:>6.1} s  {run}", t.elapsed().as_secs_f64()));
        ran += 1;
    }
    // What each line took, where CI's log shows it: a README line that grows slow is seen.
    use std::io::Write;
    let _ = std::io::stderr()
        .write_all(format!("documented lines run:\n{}\n", took.join("\n")).as_bytes());
    assert!(
        ran >= 35,
        "only {ran} of {} lines ran:\n{}",
        lines.len(),
        took.join("\n")
    );
}

#[test]
fn the_documents_lines_are_read_as_written() {
    let lines = doc_lines();
    // docs/ci.md's GitHub job: `target/release/` off, the continued line joined.
    assert!(lines.contains(&"oscost run syscall/ switch/ spawn/fork --label \"$CI_COMMIT\" --bmf bmf.json --github-benchmark github-benchmark.json".to_string()), "{lines:?}");
    // Jenkins: inside `sh '...'`.
    assert!(
        lines
            .contains(&"oscost compare last~1 last --fail-above 10 --junit oscost.xml".to_string())
    );
    assert!(lines.contains(&"oscost".to_string()), "{lines:?}");
    assert!(lines.contains(&"oscost completions bash".to_string()));
    assert!(
        lines.contains(
            &"oscost ab --b 'strace -f -o /dev/null' syscall/getpid spawn/fork".to_string()
        )
    );
    assert!(lines.iter().all(|l| !l.contains("  #")), "{lines:?}");
    assert_eq!(as_run("oscost"), "oscost run --quick");
    assert_eq!(
        as_run("oscost predict --under 'strace -f' -- find /usr"),
        "oscost predict --under 'strace -f' --quick -- find /usr"
    );
    assert_eq!(as_run("oscost history"), "oscost history");
    assert_eq!(
        not_run("oscost ab --b 'strace -f -o /dev/null' syscall/"),
        Some(NOT_RUN[6].1)
    );
    assert_eq!(
        not_run("oscost ab --b 'strace -f -o /dev/null' syscall/getpid spawn/fork"),
        None
    );
}
