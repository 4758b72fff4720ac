//! The machine's facts, once (`facts`): `oscost env` prints them as `key: value` lines, and
//! the report page shows the same list.

use crate::base::model::Env;

/// Every fact about the machine that is shown, in order, as (label, value): the one list
/// `oscost env` prints and the report page shows (`analysis::facts`; its vulnerabilities are
/// listed after, by each view).
pub fn facts(env: &Env) -> Vec<(String, String)> {
    crate::analysis::facts::facts(env)
        .into_iter()
        .filter_map(|f| Some((f.label, f.shown?)))
        .collect()
}

/// The widest line `oscost env` prints: long values (the boot command line, the kernel
/// config's options) wrap under themselves.
const WIDTH: usize = 100;

/// `oscost env` as text lines of `key: value`, within `WIDTH` columns.
pub fn render(env: &Env) -> String {
    use crate::base::text::wrap;
    let mut out = String::new();
    let line = |out: &mut String, head: String, value: &str| {
        let indent = " ".repeat(head.len());
        out.push_str(&head);
        out.push_str(&wrap(value, WIDTH, head.len(), &indent));
        out.push('\n');
    };
    for (k, v) in facts(env) {
        line(&mut out, format!("{k:<24} "), &v);
    }
    out.push_str("vulnerabilities:\n");
    for (k, v) in &env.vulnerabilities {
        line(&mut out, format!("  {k:<30} "), v);
    }
    for n in env
        .confinement
        .as_ref()
        .map(crate::analysis::confinement::said)
        .unwrap_or_default()
    {
        line(&mut out, "note: ".into(), &n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_has_a_line_and_unknowns_say_so() {
        let mut e = Env {
            kernel_release: Some("6.1.0".into()),
            ..Env::default()
        };
        e.vulnerabilities
            .insert("spectre_v2".into(), "Mitigation: Retpolines".into());
        e.boot_cmdline = Some(vec!["console=ttyS0"; 60].join(" "));
        let text = render(&e);
        assert!(text.lines().all(|l| l.len() <= WIDTH), "{text}");
        assert!(text.contains("kernel release") && text.contains("6.1.0"));
        assert!(text.contains("vulnerabilities:"));
        assert!(text.contains("(unknown)"));
        // A run stored before confinement was recorded reads as not recorded, never as
        // unconfined.
        assert!(text.contains("confinement") && text.contains("(not recorded)"));
        let json = serde_json::to_string(&Env::default()).unwrap();
        assert!(
            !json.contains("confinement"),
            "an old run's env has no such key"
        );
        let old: Env = serde_json::from_str(&json).unwrap();
        assert_eq!(old.confinement, None);
    }
}
