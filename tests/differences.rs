//! What differs between two stored runs is named exactly: one run measured, then copies of it
//! whose environment is edited in one fact (a boot parameter, THP's mode, a sysctl of the
//! settings catalogue) imported beside it; `compare` and `matrix` must name that fact and
//! nothing else.

mod common;

use common::*;
use serde_json::Value;

/// A start time, an edit of the environment, what compare says and what matrix names.
type Case = (
    &'static str,
    Box<dyn Fn(&mut Value)>,
    &'static str,
    &'static str,
);

fn edited(base: &Value, start: &str, edit: impl Fn(&mut Value)) -> Value {
    let mut v = base.clone();
    // Another start: another run's identity, whatever else the edit leaves equal.
    v["started_at"] = Value::String(start.into());
    edit(&mut v["env"]);
    v
}

#[test]
fn one_boot_parameter_thp_mode_or_sysctl_changed_is_named_by_compare_and_matrix() {
    let _m = measuring();
    let tag = unique_tag("differences");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let base_file = dir.path().join("base.json");
    let out = oscost(&tag)
        .args(["run", "syscall/getppid", "--quick", "--no-save", "--json"])
        .arg(&base_file)
        .output()
        .unwrap();
    assert_success(&out);
    let mut base: Value =
        serde_json::from_str(&std::fs::read_to_string(&base_file).unwrap()).unwrap();
    base["env"]["boot_cmdline"] = Value::String("ro quiet mitigations=auto".into());
    base["env"]["thp_enabled"] = Value::String("always [madvise] never".into());
    base["env"]["settings"]["numa-balancing"] = Value::String("0".into());
    let cases: [Case; 3] = [
        (
            "2026-01-01T00:00:01Z",
            Box::new(|e| e["boot_cmdline"] = "ro quiet mitigations=off".into()),
            "boot parameter mitigations: auto -> off",
            "boot parameter mitigations",
        ),
        (
            "2026-01-01T00:00:02Z",
            Box::new(|e| e["thp_enabled"] = "[always] madvise never".into()),
            "THP enabled madvise -> always",
            "THP enabled",
        ),
        (
            "2026-01-01T00:00:03Z",
            Box::new(|e| e["settings"]["numa-balancing"] = "1".into()),
            "setting numa-balancing 0 -> 1",
            "setting numa-balancing",
        ),
    ];
    let mut files = vec![dir.path().join("run-0.json")];
    std::fs::write(&files[0], serde_json::to_string(&base).unwrap()).unwrap();
    for (i, (start, edit, _, _)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("run-{}.json", i + 1));
        std::fs::write(
            &f,
            serde_json::to_string(&edited(&base, start, edit)).unwrap(),
        )
        .unwrap();
        files.push(f);
    }
    let out = oscost(&tag)
        .arg("import")
        .args(&files)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_success(&out);
    for (i, (_, _, said, named)) in cases.iter().enumerate() {
        let cand = (i + 2).to_string();
        let out = oscost(&tag)
            .args(["compare", "1", &cand, "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert_success(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("the runs differ in: "))
            .unwrap_or_else(|| panic!("no difference named: {text}"));
        assert_eq!(line, format!("the runs differ in: {said}"), "{text}");

        let m_json = dir.path().join(format!("matrix-{cand}.json"));
        let out = oscost(&tag)
            .args(["matrix", "1", &cand, "--db"])
            .arg(&db)
            .arg("--json")
            .arg(&m_json)
            .output()
            .unwrap();
        assert_success(&out);
        let m: Value = serde_json::from_str(&std::fs::read_to_string(&m_json).unwrap()).unwrap();
        assert_eq!(m["differs"], serde_json::json!([named]), "{m}");
    }
}
