//! JSON export: the result model itself (docs/ARCHITECTURE.md §1), raw samples included. Compact rather than
//! pretty: a full suite holds over a million samples, and one per line would double the file.

use super::Exporter;
use crate::analysis::compare::Comparison;
use crate::base::model::Run;

/// A run as oscost's JSON (`--json`): every sample and all the evidence.
pub struct Json;

impl Exporter<Run> for Json {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        let mut v = terminal_safe(serde_json::to_vec(run)?);
        v.push(b'\n');
        Ok(v)
    }
}

impl Exporter<Comparison> for Json {
    fn serialize(&self, cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
        Ok(terminal_safe(serde_json::to_vec_pretty(cmp)?))
    }
}

impl Exporter<crate::analysis::matrix::Matrix> for Json {
    fn serialize(&self, m: &crate::analysis::matrix::Matrix) -> anyhow::Result<Vec<u8>> {
        Ok(terminal_safe(serde_json::to_vec_pretty(m)?))
    }
}

/// JSON that a terminal may show (`--json -`): serde_json escapes control characters already;
/// bidirectional overrides and marks are valid in a JSON string and would reorder what the
/// terminal shows, so they are written as `\uXXXX` too. Lossless: a JSON reader gets the same
/// string back. They can only occur inside strings, so the replacement keeps the JSON valid.
fn terminal_safe(json: Vec<u8>) -> Vec<u8> {
    let text = match String::from_utf8(json) {
        Ok(t) => t,
        // serde_json writes UTF-8; anything else is passed on as it is.
        Err(e) => return e.into_bytes(),
    };
    if !text.chars().any(crate::report::is_spoofing) {
        return text.into_bytes();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if crate::report::is_spoofing(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::SCHEMA_VERSION;
    use crate::base::model::load::run_from_json;
    use crate::base::model::testdata;

    #[test]
    fn bidirectional_overrides_are_escaped_losslessly() {
        let mut run = testdata::run();
        run.label = Some("a\u{202e}b\u{1b}".into());
        let text = String::from_utf8(Json.serialize(&run).unwrap()).unwrap();
        assert!(!text.contains('\u{202e}') && !text.contains('\u{1b}'));
        assert!(text.contains("a\\u202eb\\u001b"), "{text}");
        assert_eq!(run_from_json(&text, "x").unwrap().label, run.label);
    }

    #[test]
    fn round_trips_and_carries_schema_version_and_samples() {
        let run = testdata::run();
        let bytes = Json.serialize(&run).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["results"][0]["samples_ns"].as_array().unwrap().len(), 5);
        assert_eq!(v["results"][3]["status"]["state"], "skipped");
        let back = run_from_json(&text, "x").unwrap();
        assert_eq!(back.results, run.results);
    }

    #[test]
    fn other_schema_versions_and_garbage_are_refused_clearly() {
        let e = run_from_json(r#"{"schema_version": 99}"#, "f.json").unwrap_err();
        assert!(e.to_string().contains("schema_version 99"), "{e}");
        let e = run_from_json(r#"{"schema_version": 1, "resu"#, "f.json").unwrap_err();
        assert!(e.to_string().contains("not an oscost run file"), "{e}");
        let e = run_from_json("{}", "f.json").unwrap_err();
        assert!(e.to_string().contains("missing schema_version"), "{e}");
        let e = run_from_json("[]", "f.json").unwrap_err();
        assert!(e.to_string().contains("not an oscost run file"), "{e}");
    }

    #[test]
    fn version_1_runs_load_with_a_note_and_no_repetitions() {
        let mut run = testdata::run();
        run.schema_version = 1;
        let text = String::from_utf8(Exporter::<Run>::serialize(&Json, &run).unwrap()).unwrap();
        let back = run_from_json(&text, "old.json").unwrap();
        assert_eq!(
            back.notes,
            vec![crate::base::model::Note::new(
                crate::base::model::NoteKind::OlderFormat,
                crate::base::model::V1_NOTE
            )]
        );
        assert!(back.results.iter().all(|r| r.repetitions.is_empty()));
    }

    #[test]
    fn a_missing_ci_survives_the_round_trip_as_nan() {
        let mut run = testdata::run();
        run.results[0].stats.as_mut().unwrap().ci95 = [f64::NAN, f64::NAN];
        let text = String::from_utf8(Exporter::<Run>::serialize(&Json, &run).unwrap()).unwrap();
        let back = run_from_json(&text, "x").unwrap();
        assert!(back.results[0].stats.as_ref().unwrap().ci95[0].is_nan());
    }
}
