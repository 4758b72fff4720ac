//! The layers of docs/ARCHITECTURE.md, kept by the build: every `crate::` path in `src/` (test
//! modules aside) must point at a module of the same layer or one below, and the modules'
//! dependencies must have no circle. A new top-level module must be given a layer here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first. Same number: same layer (they may use each other, but not in a circle).
const LAYERS: &[(&str, u32)] = &[
    ("stats", 0),
    ("text", 0),
    ("sample_codec", 0),
    ("reserve", 0),
    ("model", 1),
    ("env", 2),
    ("harness", 2),
    ("bench", 3),
    ("analysis", 4),
    ("compare", 4),
    ("select", 4),
    ("matrix", 4),
    ("report", 5),
    ("output", 6),
    ("gate", 6),
    ("store", 6),
    ("scratch", 6),
    ("signals", 6),
    ("worker", 7),
    ("program", 7),
    ("scheduler", 7),
    ("commands", 8),
    ("cli", 9),
    ("lib", 10),
    ("main", 10),
];

fn layer(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to: `src/report/html.rs` -> `report`.
fn top(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The code of a file without its test module (by convention the last item).
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// The top-level modules a piece of code names through `crate::`, with each line.
fn references(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        out.push((name.to_string(), n + 1));
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push((name, n + 1));
                }
            }
        }
    }
    out
}

#[test]
fn no_module_imports_a_layer_above_it_and_no_modules_form_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    let mut unknown = BTreeSet::new();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let from = top(&src, f);
        let Some(from_layer) = layer(&from) else {
            unknown.insert(from);
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (to, line) in references(without_tests(&text)) {
            let Some(to_layer) = layer(&to) else {
                continue; // an item of lib.rs itself, or a macro's path
            };
            if to != from {
                uses.entry(from.clone()).or_default().insert(to.clone());
            }
            if to_layer > from_layer {
                upward.push(format!(
                    "{}:{line}: {from} (layer {from_layer}) uses {to} (layer {to_layer})",
                    f.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules without a layer (add them to LAYERS and to docs/ARCHITECTURE.md): {unknown:?}"
    );
    assert!(
        upward.is_empty(),
        "imports that point up a layer:\n{}",
        upward.join("\n")
    );
    // No circle: repeatedly remove modules that use nothing left.
    let mut left = uses.clone();
    loop {
        let done: Vec<String> = left
            .iter()
            .filter(|(_, to)| to.iter().all(|t| !left.contains_key(t)))
            .map(|(m, _)| m.clone())
            .collect();
        if done.is_empty() {
            break;
        }
        for m in done {
            left.remove(&m);
        }
    }
    assert!(
        left.is_empty(),
        "modules that use each other in a circle: {:?}",
        left.keys().collect::<Vec<_>>()
    );
}

#[test]
fn the_checker_sees_grouped_and_plain_paths() {
    let code =
        "use crate::{model::Run, stats};\nlet x = crate::report::printable(y); // crate::cli\n";
    let names: Vec<String> = references(code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["model", "stats", "report"]);
    assert_eq!(
        without_tests("fn a() {}\n#[cfg(test)]\nmod tests {}\n"),
        "fn a() {}\n"
    );
}
