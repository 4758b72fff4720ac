//! The narrow table made to fit its 100 columns: the longest flags give way to their short
//! form, their references kept.

use super::{TableLine, table_of};

/// The columns the default table fits in.
pub const TABLE_COLUMNS: usize = 100;

fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// A flag's short form: a `rep K +X%` departure as it is, and every numbered reference in one
/// bracket, after one word (`worded`: "disturbed [12,13]" when one of them is, else
/// "notes [12,13]") or alone ("[12,13]"), for a table that is still too wide.
pub(super) fn compact_flag(flag: &str, worded: bool) -> String {
    let refs: Vec<&str> = flag
        .split('[')
        .skip(1)
        .filter_map(|x| x.split(']').next())
        .collect();
    if refs.is_empty() {
        return flag.to_string();
    }
    // "rep 3 +24%" or "reps 2,6 +22..+35%": three words from where it starts.
    let departure = flag
        .find("rep")
        .map(|i| flag[i..].split(' ').take(3).collect::<Vec<_>>().join(" "));
    let word = if flag.starts_with("FAILED") {
        "FAILED"
    } else if flag.starts_with("skipped") {
        "skipped"
    } else if flag.contains("disturbed") {
        "disturbed"
    } else {
        "notes"
    };
    let short = if worded {
        format!("{word} [{}]", refs.join(","))
    } else {
        format!("[{}]", refs.join(","))
    };
    match departure {
        Some(d) => format!("{d} {short}"),
        None => short,
    }
}

/// The table of `rows` in the columns `shown`. The narrow table fits 100 columns: the longest
/// flags give way to their short form (their references kept) until it does.
pub(super) fn fitted_table(
    mut rows: Vec<TableLine>,
    shown: &[usize],
    color: bool,
    wide: bool,
) -> comfy_table::Table {
    let mut t = table_of(&rows, shown, color);
    while !wide && widest(&t.to_string()) > TABLE_COLUMNS {
        let shorter = |f: &str| {
            [compact_flag(f, true), compact_flag(f, false)]
                .into_iter()
                .find(|c| c.len() < f.len())
        };
        let Some(longest) = rows
            .iter_mut()
            .filter(|r| shorter(&r.cells[7]).is_some())
            .max_by_key(|r| r.cells[7].len())
        else {
            break;
        };
        longest.cells[7] = shorter(&longest.cells[7]).unwrap_or_default();
        t = table_of(&rows, shown, color);
    }
    t
}
