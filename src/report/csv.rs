//! CSV export: one row of statistics per result, times in ns. Raw samples stay in the JSON.

use super::Exporter;
use crate::analysis::compare::Comparison;
use crate::base::model::Run;

/// A run as CSV: one line per result.
pub struct Csv;

const HEADER: &str = "id,family,status,reason,unit,count,min,p1,p5,p25,median,p75,p95,p99,max,mean,stddev,mad,ci95_lo,ci95_hi,baseline_ns,batch_size,outliers_mild,outliers_severe,preempted_samples,disturbed,events_per_op,definition,events_unavailable";

use crate::base::text::csv_field as field;

impl Exporter<Run> for Csv {
    fn serialize(&self, run: &Run) -> anyhow::Result<Vec<u8>> {
        let mut out = String::from(HEADER);
        out.push('\n');
        for r in &run.results {
            let mut row = vec![
                field(&r.id),
                field(&r.family),
                r.status.word().to_string(),
                field(r.status.reason().unwrap_or("")),
                r.unit.clone(),
            ];
            match &r.stats {
                Some(s) => {
                    row.push(s.count.to_string());
                    for v in [
                        s.min, s.p1, s.p5, s.p25, s.median, s.p75, s.p95, s.p99, s.max, s.mean,
                        s.stddev, s.mad, s.ci95[0], s.ci95[1],
                    ] {
                        row.push(format!("{v}"));
                    }
                }
                None => row.extend(std::iter::repeat_n(String::new(), 15)),
            }
            row.push(format!("{}", r.baseline_ns));
            row.push(r.batch.size.to_string());
            row.push(r.outliers.mild.to_string());
            row.push(r.outliers.severe.to_string());
            row.push(r.disturbed.preempted_samples.to_string());
            row.push(field(&r.disturbed.flag.join("; ")));
            let ev = r.events.as_ref();
            row.push(field(&ev.map_or(String::new(), |e| {
                let v: Vec<String> = e.per_op.iter().map(|(k, v)| format!("{k}={v}")).collect();
                v.join(";")
            })));
            row.push(match ev.and_then(|e| e.check.as_ref()) {
                Some(c) if c.met => "met".into(),
                Some(_) => "not met".into(),
                None => String::new(),
            });
            row.push(field(&ev.map_or(String::new(), |e| {
                e.unavailable.keys().cloned().collect::<Vec<_>>().join(";")
            })));
            out.push_str(&row.join(","));
            out.push('\n');
        }
        Ok(out.into_bytes())
    }
}

impl Exporter<Comparison> for Csv {
    fn serialize(&self, cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
        Ok(super::comparison::csv(cmp).into_bytes())
    }
}

impl Exporter<crate::analysis::matrix::Matrix> for Csv {
    fn serialize(&self, m: &crate::analysis::matrix::Matrix) -> anyhow::Result<Vec<u8>> {
        Ok(crate::report::matrix_views::render_csv(m).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::testdata;

    #[test]
    fn every_row_has_the_header_width_and_values_are_exact() {
        let text = String::from_utf8(Csv.serialize(&testdata::run()).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let width = HEADER.split(',').count();
        assert_eq!(lines.len(), 5);
        for l in &lines {
            assert_eq!(l.split(',').count(), width, "{l}");
        }
        let f0: Vec<&str> = lines[1].split(',').collect();
        assert_eq!(f0[0], "call/f0");
        assert_eq!(f0[10], "1.5"); // median of 1, 1.25, 1.5, 1.75, 2
        assert!(lines[4].starts_with("timer/rdtscp,timer,skipped,no rdtscp"));
    }

    #[test]
    fn quotes_commas() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(field("x\"y,"), "\"x\"\"y,\"");
    }
}
