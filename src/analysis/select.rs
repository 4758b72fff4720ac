//! Selecting stored runs by what they were: `--where KEY OP VALUE`, repeated (all must hold).
//! Keys: `label`, `host`, `kernel`, `wrapper`, `date` (the start, `2026-11-23T00:40:55Z`) and
//! `id`. Operators: `=` and `!=` (exact), `~` (contains), and for `date` and `id` also `>=`,
//! `<=`, `>`, `<`. A date is compared on as many characters as given, so `date=2026-11` is
//! that month and `date<=2026-11-01` includes that day. A missing label or wrapper is the
//! empty string (`label=` selects runs without one). Selection works on the runs' summary rows,
//! so it costs one query whatever the size of the store.

use std::cmp::Ordering;

use crate::base::model::RunSummary;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Label,
    Host,
    Kernel,
    Wrapper,
    Date,
    Id,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Contains,
    Ge,
    Le,
    Gt,
    Lt,
}

/// One `--where` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    key: Key,
    op: Op,
    value: String,
    /// As the user wrote it, for messages and pages.
    text: String,
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

const KEYS: &str = "label, host, kernel, wrapper, date, id";

impl std::str::FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Filter, String> {
        // Two-character operators first, so `>=` is not read as `>` then `=value`.
        let ops = [
            ("!=", Op::Ne),
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("~", Op::Contains),
            ("=", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let (at, text, op) = ops
            .iter()
            .filter_map(|(t, op)| s.find(t).map(|i| (i, *t, *op)))
            .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())))
            .ok_or_else(|| {
                format!("'{s}' is not a condition; give KEY=VALUE, KEY~TEXT, KEY!=VALUE or date>=DAY (keys: {KEYS})")
            })?;
        let name = s[..at].trim();
        let key = match name {
            "label" => Key::Label,
            "host" => Key::Host,
            "kernel" => Key::Kernel,
            "wrapper" => Key::Wrapper,
            "date" => Key::Date,
            "id" => Key::Id,
            _ => return Err(format!("'{name}' is not a key of a run (keys: {KEYS})")),
        };
        let value = s[at + text.len()..].trim().to_string();
        let ordered = matches!(op, Op::Ge | Op::Le | Op::Gt | Op::Lt);
        if ordered && !matches!(key, Key::Date | Key::Id) {
            return Err(format!("'{text}' compares dates and ids only, not {name}"));
        }
        if key == Key::Date && op != Op::Contains {
            check_date(&value)?;
        }
        if key == Key::Id && value.parse::<i64>().is_err() {
            return Err(format!("id takes a run number, not '{value}'"));
        }
        Ok(Filter {
            key,
            op,
            value,
            text: s.to_string(),
        })
    }
}

/// A date to compare with: a prefix of `2026-11-23T00:40:55Z` that names a real time, so that
/// `date>=banana` and `date=2026-13-45` are refused rather than silently selecting nothing (or
/// everything).
fn check_date(value: &str) -> Result<(), String> {
    const SHAPE: &str = "0000-00-00T00:00:00Z";
    let bad = || {
        format!(
            "'{value}' is not a date; give a prefix of YYYY-MM-DDTHH:MM:SSZ, e.g. 2026-11 or 2026-11-24"
        )
    };
    if value.is_empty() || value.len() > SHAPE.len() {
        return Err(bad());
    }
    let shaped = value.chars().zip(SHAPE.chars()).all(|(c, s)| match s {
        '0' => c.is_ascii_digit(),
        _ => c == s,
    });
    if !shaped || !value.is_ascii() {
        return Err(bad());
    }
    // Fill what was not given with the earliest valid value, then ask chrono.
    let full = format!("{value}{}", &"0000-01-01T00:00:00Z"[value.len()..]);
    chrono::NaiveDateTime::parse_from_str(&full, "%Y-%m-%dT%H:%M:%SZ")
        .map(drop)
        .map_err(|_| bad())?;
    // A prefix cut inside a field (`2026-1`) would compare as text to the wrong months.
    if !matches!(value.len(), 4 | 7 | 10 | 13 | 16 | 19 | 20) {
        return Err(bad());
    }
    Ok(())
}

impl Filter {
    /// Whether run `r` passes this filter.
    pub fn matches(&self, r: &RunSummary) -> bool {
        let order = match self.key {
            Key::Id => r.id.cmp(&self.value.parse::<i64>().unwrap_or(i64::MIN)),
            Key::Date => {
                // Bytes, not chars: a stored start time is ASCII, but nothing may panic on
                // one that is not.
                let have = r.started_at.as_bytes();
                have[..self.value.len().min(have.len())].cmp(self.value.as_bytes())
            }
            _ => {
                let have = match self.key {
                    Key::Label => &r.label,
                    Key::Host => &r.host,
                    Key::Kernel => &r.kernel,
                    _ => &r.wrapper,
                };
                let have = have.as_deref().unwrap_or("");
                if self.op == Op::Contains {
                    return have.contains(self.value.as_str());
                }
                have.cmp(self.value.as_str())
            }
        };
        match self.op {
            Op::Eq => order == Ordering::Equal,
            Op::Ne => order != Ordering::Equal,
            Op::Ge => order != Ordering::Less,
            Op::Le => order != Ordering::Greater,
            Op::Gt => order == Ordering::Greater,
            Op::Lt => order == Ordering::Less,
            // Dates and ids: contains on their text.
            Op::Contains => match self.key {
                Key::Id => r.id.to_string().contains(&self.value),
                _ => r.started_at.contains(&self.value),
            },
        }
    }
}

/// All of the conditions (none: every run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter(pub Vec<Filter>);

impl RunFilter {
    /// Whether it selects every run.
    pub fn is_all(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether run `r` is selected.
    pub fn matches(&self, r: &RunSummary) -> bool {
        self.0.iter().all(|f| f.matches(r))
    }

    /// The runs that match, in their order.
    pub fn apply(&self, runs: Vec<RunSummary>) -> Vec<RunSummary> {
        runs.into_iter().filter(|r| self.matches(r)).collect()
    }
}

/// What `--by KEY` groups runs by (`matrix --by kernel`, `history BENCH --by host`): runs
/// with the same value form one group, compared as a group against the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKey {
    /// The run's label.
    Label,
    /// The host's name.
    Host,
    /// The kernel release.
    Kernel,
    /// The wrapper.
    Wrapper,
    /// The day the run started (`2026-11-24`): two nights compared.
    Day,
}

impl std::str::FromStr for GroupKey {
    type Err = String;

    fn from_str(s: &str) -> Result<GroupKey, String> {
        Ok(match s.trim() {
            "label" => GroupKey::Label,
            "host" => GroupKey::Host,
            "kernel" => GroupKey::Kernel,
            "wrapper" => GroupKey::Wrapper,
            "day" | "date" => GroupKey::Day,
            other => {
                return Err(format!(
                    "'{other}' is not something runs are grouped by (keys: label, host, kernel, wrapper, day)"
                ));
            }
        })
    }
}

impl GroupKey {
    /// The key as `--by` takes it.
    pub fn name(self) -> &'static str {
        match self {
            GroupKey::Label => "label",
            GroupKey::Host => "host",
            GroupKey::Kernel => "kernel",
            GroupKey::Wrapper => "wrapper",
            GroupKey::Day => "day",
        }
    }

    /// The run's value of the key; a missing label, host, kernel or wrapper is "" (its own
    /// group, shown as "none").
    pub fn value_of(self, r: &RunSummary) -> String {
        let v = match self {
            GroupKey::Label => &r.label,
            GroupKey::Host => &r.host,
            GroupKey::Kernel => &r.kernel,
            GroupKey::Wrapper => &r.wrapper,
            GroupKey::Day => return r.started_at.chars().take(10).collect(),
        };
        v.clone().unwrap_or_default()
    }

    /// `runs` split by the key's value, groups in the order their first run comes.
    pub fn split(self, runs: &[RunSummary]) -> Vec<(String, Vec<RunSummary>)> {
        let mut groups: Vec<(String, Vec<RunSummary>)> = Vec::new();
        for r in runs {
            let v = self.value_of(r);
            match groups.iter_mut().find(|(k, _)| *k == v) {
                Some((_, g)) => g.push(r.clone()),
                None => groups.push((v, vec![r.clone()])),
            }
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, date: &str, label: Option<&str>, host: &str, kernel: &str) -> RunSummary {
        RunSummary {
            id,
            started_at: date.into(),
            label: label.map(Into::into),
            host: Some(host.into()),
            kernel: Some(kernel.into()),
            wrapper: None,
            benchmarks: 3,
            env_key: None,
        }
    }

    fn ids(conds: &[&str], runs: &[RunSummary]) -> Vec<i64> {
        let sel = RunFilter(conds.iter().map(|c| c.parse().unwrap()).collect());
        sel.apply(runs.to_vec()).iter().map(|r| r.id).collect()
    }

    #[test]
    fn runs_split_by_a_key_in_the_order_of_their_first_run() {
        let runs = vec![
            run(1, "2026-11-23T22:00:00Z", None, "a", "6.6"),
            run(2, "2026-11-23T23:00:00Z", Some("x"), "a", "6.1"),
            run(3, "2026-11-24T01:00:00Z", None, "b", "6.6"),
        ];
        let by = |k: &str| -> Vec<(String, Vec<i64>)> {
            k.parse::<GroupKey>()
                .unwrap()
                .split(&runs)
                .into_iter()
                .map(|(v, g)| (v, g.iter().map(|r| r.id).collect()))
                .collect()
        };
        assert_eq!(
            by("kernel"),
            [("6.6".into(), vec![1, 3]), ("6.1".into(), vec![2])]
        );
        assert_eq!(
            by("host"),
            [("a".into(), vec![1, 2]), ("b".into(), vec![3])]
        );
        assert_eq!(
            by("label"),
            [(String::new(), vec![1, 3]), ("x".into(), vec![2])]
        );
        assert_eq!(
            by("day"),
            [
                ("2026-11-23".into(), vec![1, 2]),
                ("2026-11-24".into(), vec![3])
            ]
        );
        assert!("colour".parse::<GroupKey>().unwrap_err().contains("kernel"));
    }

    #[test]
    fn conditions_select_by_label_host_kernel_date_and_id() {
        let runs = [
            run(1, "2026-10-31T23:00:00Z", None, "a", "6.1.0-13"),
            run(2, "2026-11-01T08:00:00Z", Some("nightly"), "a", "6.1.0-13"),
            run(3, "2026-11-01T09:00:00Z", Some("nightly"), "b", "6.18.44"),
            run(4, "2026-11-02T09:00:00Z", Some("tracer"), "b", "6.18.44"),
        ];
        assert_eq!(ids(&[], &runs), vec![1, 2, 3, 4]);
        assert_eq!(ids(&["host=a"], &runs), vec![1, 2]);
        assert_eq!(ids(&["kernel~6.1."], &runs), vec![1, 2]);
        assert_eq!(ids(&["kernel~6.1", "host=b"], &runs), vec![3, 4]);
        assert_eq!(ids(&["label="], &runs), vec![1]);
        assert_eq!(ids(&["label!=nightly"], &runs), vec![1, 4]);
        assert_eq!(ids(&["date=2026-11-01"], &runs), vec![2, 3]);
        assert_eq!(ids(&["date<=2026-11-01"], &runs), vec![1, 2, 3]);
        assert_eq!(ids(&["date>2026-11-01"], &runs), vec![4]);
        assert_eq!(ids(&["date>=2026-11"], &runs), vec![2, 3, 4]);
        assert_eq!(ids(&["id>=2", "id<4"], &runs), vec![2, 3]);
        assert_eq!(ids(&["date=2026-11-01T08:00:00Z"], &runs), vec![2]);
        // A stored start time that is not ASCII is compared byte by byte, never sliced
        // inside a character.
        let odd = [run(5, "é2026-11-24T00:00:00Z", None, "a", "6.1")];
        assert!(ids(&["date=2026-11"], &odd).is_empty());
        assert_eq!(ids(&["date>=2026"], &odd), vec![5]);
    }

    #[test]
    fn bad_conditions_say_what_is_allowed() {
        for (bad, says) in [
            ("host", "not a condition"),
            ("color=red", "not a key"),
            ("host>=a", "dates and ids only"),
            ("id=x", "run number"),
            ("date>=banana", "not a date"),
            ("date=2026-13-45", "not a date"),
            ("date=2026-02-30", "not a date"),
            ("date<2026-1", "not a date"),
            ("date=é2026", "not a date"),
        ] {
            let e = bad.parse::<Filter>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // `!=` is not `!` then `=`, `>=` is not `>` then `=`.
        assert_eq!(
            "host!=a".parse::<Filter>().unwrap().op,
            Op::Ne,
            "two-character operators win"
        );
        assert_eq!("date>=2026".parse::<Filter>().unwrap().value, "2026");
    }
}
