//! Reports: the files exist, every SVG is well-formed XML carrying its series and labels, the
//! page is self-contained HTML naming every result (a failed and a skipped one included), and
//! a comparison report draws the slowdown chart with the noise band.

mod common;

use std::path::Path;

use common::*;

fn svg_texts(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("|")
}

/// A real quick run, plus a failed result, saved as a JSON file.
fn run_file(dir: &Path) -> std::path::PathBuf {
    let json = dir.join("run.json");
    let out = oscost(&unique_tag("rep"))
        .args([
            "run",
            "--quick",
            "--no-save",
            "syscall/getpid",
            "call/f0",
            "spawn/fork",
            "spawn/thread-scope-process",
            "switch/ring",
            "spawn/fork-rss",
            "--fork-sizes",
            "0,64",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut run = read_run(&json);
    run.results.push(BenchResult::not_measured(
        "syscall/broken",
        "a benchmark whose worker crashed",
        Status::Failed {
            reason: "worker killed by SIGSEGV".into(),
        },
    ));
    std::fs::write(&json, serde_json::to_string(&run).unwrap()).unwrap();
    json
}

#[test]
fn a_run_report_has_its_page_figures_and_every_result() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let json = run_file(dir.path());
    let out_dir = dir.path().join("report");
    let out = oscost("rep")
        .args([
            "report",
            json.to_str().unwrap(),
            "-o",
            out_dir.to_str().unwrap(),
            "--png",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // minijinja escapes "/" in text as &#x2f;.
    let html = std::fs::read_to_string(out_dir.join("index.html"))
        .unwrap()
        .replace("&#x2f;", "/");
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    for id in [
        "syscall/getpid",
        "call/f0",
        "spawn/fork",
        "switch/ring/n2-s0k",
        "spawn/fork-rss/64MiB",
    ] {
        assert!(html.contains(id), "{id} not on the page");
    }
    assert!(
        html.contains("failed: worker killed by SIGSEGV"),
        "the failed result renders"
    );
    assert!(
        html.contains("skipped: PTHREAD_SCOPE_PROCESS"),
        "the skipped one too"
    );
    assert!(
        html.contains("kernel") && html.contains("clocksource"),
        "the environment is shown"
    );
    assert!(
        !html.contains("<script") && !html.contains("<link"),
        "nothing to fetch"
    );
    let fig = out_dir.join("fig");
    let t = svg_texts(&fig.join("syscall-getpid-series.svg"));
    assert!(
        t.contains("every sample in order")
            && t.contains("per operation (ns)")
            && t.contains("median"),
        "{t}"
    );
    let t = svg_texts(&fig.join("syscall-getpid-hist.svg"));
    assert!(t.contains("samples per bin") && t.contains("95% CI"), "{t}");
    let t = svg_texts(&fig.join("family-syscall.svg"));
    assert!(
        t.contains("syscall/getpid") && t.contains("log scale"),
        "{t}"
    );
    let t = svg_texts(&fig.join("ring.svg"));
    assert!(
        t.contains("0 KB per process")
            && t.contains("16 KB per process")
            && t.contains("per switch"),
        "{t}"
    );
    let t = svg_texts(&fig.join("fork-rss.svg"));
    assert!(
        t.contains("resident memory") && t.contains("per fork"),
        "{t}"
    );
    let t = svg_texts(&fig.join("clock.svg"));
    assert!(t.contains("clock calibration"), "{t}");
    for name in ["syscall-getpid-series.png", "ring.png", "clock.png"] {
        let b = std::fs::read(fig.join(name)).unwrap();
        assert_eq!(&b[1..4], b"PNG", "{name}");
    }
}

#[test]
fn a_comparison_report_draws_the_slowdown_with_the_noise_band() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let a = run_file(dir.path());
    let b = dir.path().join("b.json");
    std::fs::copy(&a, &b).unwrap();
    let out_dir = dir.path().join("cmp");
    let out = oscost("cmp-rep")
        .args([
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--no-save",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "compare takes no --no-save");
    let out = oscost("cmp-rep")
        .args([
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--report",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // minijinja escapes "/" in text as &#x2f;.
    let html = std::fs::read_to_string(out_dir.join("index.html"))
        .unwrap()
        .replace("&#x2f;", "/");
    assert!(html.contains("What changed") && html.contains("syscall/getpid"));
    assert!(
        html.contains("syscall/broken"),
        "what could not be compared is listed"
    );
    let t = svg_texts(&out_dir.join("fig/slowdown.svg"));
    assert!(
        t.contains("no-change band") && t.contains("slowdown") && t.contains("call/f0"),
        "{t}"
    );
}

#[test]
fn run_with_report_writes_both() {
    let _g = measuring();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let out = oscost("run-rep")
        .args([
            "run",
            "--quick",
            "--no-save",
            "syscall/getuid",
            "--report",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out_dir.join("index.html").exists());
    assert!(out_dir.join("fig/syscall-getuid-series.svg").exists());
    let bad = oscost("run-rep")
        .args(["report", "nope.json", "-o", out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// The run and comparison pages in a real browser (headless Chromium, when installed): every
/// figure loads, nothing overflows, figure text at least 11 px at 1280 px wide; the matrix page too.
#[test]
#[ignore = "slow: two measured runs and eight browser renders; .ci/run runs it"]
fn report_pages_pass_the_browser_check() {
    let has_browser = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|b| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if !has_browser {
        skip_needing(
            "browser check",
            &["chromium"],
            "no Chromium installed (apt-get install chromium)",
        );
        return;
    }
    let _g = measuring();
    let out = std::process::Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/check-report.sh"
        ))
        .env("OSCOST", bin())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Four pages (run, comparison, matrix, history) at two widths.
    assert_eq!(text.matches(": ok").count(), 8, "{text}");
}
