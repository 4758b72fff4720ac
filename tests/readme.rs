//! The README's command lines, run: every line of its code blocks that starts with `oscost`
//! (after a `$ ` prompt or `sudo `), in order, in a temporary directory with a temporary store
//! prepared with the runs the lines name (`last~1`, run 7, runs 3, 9 and 14, kernels 6.1 and
//! 6.6, host box1, label nightly), measuring commands in `--quick`. A line that changes the
//! machine or lasts past a minute is in `NOT_RUN`, with why; any other line that exits non-zero
//! fails the test, and so does a `NOT_RUN` entry no line matches, so a line added to the README
//! is run from the day it is written and the list cannot go stale. docs/ci.md's recipe is run
//! by tests/ci_recipe.rs.

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

/// The command lines of the README's code blocks, as written (prompt and `sudo` off, and the
/// trailing comment).
fn readme_lines() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut fenced = false;
    let mut lines = Vec::new();
    for raw in doc.lines() {
        if raw.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let line = raw.trim_start_matches("$ ").trim_start_matches("sudo ");
        let line = line
            .strip_prefix("source <(")
            .map_or(line.to_string(), |l| {
                // `source <(oscost completions bash)`: the command inside.
                l.split(')').next().unwrap_or(l).to_string()
            });
        if !fenced || !(line == "oscost" || line.starts_with("oscost ")) {
            continue;
        }
        let command = line.split("  #").next().unwrap_or(&line).trim_end();
        lines.push(command.to_string());
    }
    lines
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

#[test]
fn every_command_line_the_readme_shows_runs() {
    let lines = readme_lines();
    assert!(lines.len() >= 40, "{lines:?}");
    for (start, _) in NOT_RUN {
        assert!(
            lines.iter().any(|l| format!("{l} ").starts_with(start)),
            "NOT_RUN names {start:?}, which no README line starts with: take it out"
        );
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    let mut ran = 0;
    let mut took = Vec::new();
    for line in &lines {
        if let Some(why) = not_run(line) {
            skip(line, &format!("not run: {why}"));
            continue;
        }
        if let Some((word, need)) = NEEDS.iter().find(|(w, _)| line.contains(w))
            && !(on_path(need)
                || std::env::var_os("OSCOST_TEST_PG").is_some() && *need == "postgres")
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
        let cmd = run.replacen("oscost", &format!("\"{}\"", bin().display()), 1);
        let t = std::time::Instant::now();
        let out = sh(dir.path(), &cmd);
        assert!(
            out.status.success(),
            "README line `{line}` (run as `{run}`) exited {:?} (before it:\n{}):\n{}\n{}",
            out.status.code(),
            took.join("\n"),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        took.push(format!("{:>6.1} s  {run}", t.elapsed().as_secs_f64()));
        ran += 1;
    }
    assert!(
        ran >= 35,
        "only {ran} of {} lines ran:\n{}",
        lines.len(),
        took.join("\n")
    );
}

#[test]
fn the_readme_lines_are_read_as_written() {
    let lines = readme_lines();
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
        Some(NOT_RUN[5].1)
    );
    assert_eq!(
        not_run("oscost ab --b 'strace -f -o /dev/null' syscall/getpid spawn/fork"),
        None
    );
}
