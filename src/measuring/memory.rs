//! Memory activity around a repetition, as evidence: the kernel's counters of reclaim,
//! compaction, swapping, page migration, khugepaged and the balloon (`/proc/vmstat`), read by
//! the worker just before and just after its cases for the benchmarks whose cost they move
//! (process creation and page faults). A repetition during which any of them moved carries the
//! counts; `analysis` sets those repetitions' level against the others' and says so in the
//! result's note, so a fork that drifted is tied to reclaim that was counted, never guessed.
//!
//! The counters are system-wide: they count the whole machine's activity during the
//! repetition, the benchmark's own included (a fault benchmark under memory pressure causes
//! the reclaim it then pays for). Two things they cannot see: free page reporting (pages handed
//! back to a hypervisor have no counter in the guest; `oscost env` says whether it is on) and
//! the host's own reclaim of a guest's memory.
//!
//! Also the process's own address space (`AddressSpace`): what a fork copies, so the fork
//! benchmarks record their parent's mappings, anonymous memory and page tables beside the
//! cost, and a fork timed here can be set beside one timed in a smaller parent (a course
//! program's).

use std::collections::BTreeMap;

/// The calling process's address space: its mappings (each one a fork duplicates), those
/// holding anonymous pages (the only ones whose table entries a fork copies: a file mapping
/// no process wrote is refilled by faults instead), its anonymous memory, the 2 MiB regions
/// that memory lies in (a fork allocates, zeroes and fills a table page in the child for
/// each: the same memory spread over more regions costs more) and its page tables' size
/// (which counts the tables of file pages too, that a fork does not copy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddressSpace {
    /// Mappings (lines of /proc/self/maps).
    pub mappings: usize,
    /// Mappings with anonymous pages.
    pub anon_mappings: usize,
    /// Anonymous memory, KiB (`Anonymous` summed over the mappings).
    pub anon_kib: u64,
    /// 2 MiB regions spanned by the mappings with anonymous pages (of a sparse mapping, every
    /// region it spans: an upper bound where its pages lie in few of them).
    pub anon_regions: usize,
    /// `VmPTE` of /proc/self/status: the page tables' size, KiB.
    pub page_table_kib: u64,
}

/// A table page's reach on x86-64 and arm64 with 4 KiB pages: 512 entries of 4 KiB.
const TABLE_REACH: u64 = 2 << 20;

impl AddressSpace {
    /// The calling process's, now (`None` where /proc cannot be read).
    pub fn own() -> Option<AddressSpace> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        Some(AddressSpace {
            page_table_kib: super::os::kib_field(&status, "VmPTE")?,
            ..Self::of_smaps(&smaps)
        })
    }

    /// The mappings of an smaps text (page tables 0: smaps does not say them).
    fn of_smaps(smaps: &str) -> AddressSpace {
        // Each mapping: its range, then its `Name: N kB` lines.
        let mut spans: Vec<(u64, u64, u64)> = Vec::new();
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            let parsed = range.and_then(|(a, b)| {
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                ))
            });
            if let Some((start, end)) = parsed {
                spans.push((start, end, 0));
            } else if let (Some(last), Some(kib)) =
                (spans.last_mut(), super::os::kib_field(line, "Anonymous"))
            {
                last.2 = kib;
            }
        }
        let anon: Vec<_> = spans.iter().filter(|s| s.2 > 0).collect();
        let regions: std::collections::BTreeSet<u64> = anon
            .iter()
            .flat_map(|&&(start, end, _)| start / TABLE_REACH..=(end - 1) / TABLE_REACH)
            .collect();
        AddressSpace {
            mappings: spans.len(),
            anon_mappings: anon.len(),
            anon_kib: anon.iter().map(|s| s.2).sum(),
            anon_regions: regions.len(),
            page_table_kib: 0,
        }
    }
}

/// The counters read: activity beside the benchmark, not the faults it makes itself.
const COUNTERS: &[&str] = &[
    "allocstall_dma32",
    "allocstall_normal",
    "allocstall_movable",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pswpin",
    "pswpout",
    "zswpin",
    "zswpout",
    "compact_stall",
    "compact_fail",
    "pgmigrate_success",
    "thp_collapse_alloc",
    "thp_split_page",
    "balloon_inflate",
    "balloon_deflate",
    "balloon_migrate",
    "drop_pagecache",
];

/// The counters now (`None` where /proc/vmstat cannot be read).
pub fn snapshot() -> Option<BTreeMap<String, u64>> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    Some(parse(&text))
}

fn parse(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            COUNTERS
                .contains(&k)
                .then(|| Some((k.to_string(), v.trim().parse().ok()?)))
                .flatten()
        })
        .collect()
}

/// What moved between two snapshots (only counters that moved).
pub fn delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, a)| {
            let d = a.saturating_sub(*before.get(k)?);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// The activity in words: "kswapd scanned 5120 pages, 2 compaction stalls".
pub fn words(counts: &BTreeMap<String, u64>) -> String {
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    let sum = |ks: &[&str]| ks.iter().map(|k| get(k)).sum::<u64>();
    let mut out = Vec::new();
    let mut say = |n: u64, what: &str| {
        if n > 0 {
            out.push(format!("{n} {what}"));
        }
    };
    say(get("pgscan_kswapd"), "pages scanned by kswapd");
    say(get("pgscan_direct"), "pages scanned in direct reclaim");
    say(
        sum(&[
            "allocstall_dma32",
            "allocstall_normal",
            "allocstall_movable",
        ]),
        "allocation stalls",
    );
    say(sum(&["pswpout", "zswpout"]), "pages swapped out");
    say(sum(&["pswpin", "zswpin"]), "pages swapped in");
    say(get("compact_stall"), "compaction stalls");
    say(get("pgmigrate_success"), "pages migrated");
    say(
        get("thp_collapse_alloc"),
        "huge pages collapsed by khugepaged",
    );
    say(get("thp_split_page"), "huge pages split");
    say(
        sum(&["balloon_inflate", "balloon_deflate", "balloon_migrate"]),
        "balloon page moves",
    );
    say(get("drop_pagecache"), "page cache drops");
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_counters_that_moved_are_kept_and_said() {
        let before = parse("nr_free_pages 100\npgscan_kswapd 10\ncompact_stall 1\npgfault 5\n");
        let after = parse("nr_free_pages 50\npgscan_kswapd 5130\ncompact_stall 3\npgfault 900\n");
        assert!(
            !before.contains_key("pgfault"),
            "the benchmark's own faults are not read"
        );
        let d = delta(&before, &after);
        assert_eq!(d.len(), 2);
        assert_eq!(
            words(&d),
            "5120 pages scanned by kswapd, 2 compaction stalls"
        );
        assert!(delta(&after, &after).is_empty());
    }

    #[test]
    fn an_address_space_counts_the_mappings_a_fork_copies() {
        // Three mappings: a binary's text (no anonymous pages), its relocated data (written,
        // anonymous) and a heap whose anonymous pages cross a 2 MiB boundary.
        let smaps = "\
55d0a0000000-55d0a0010000 r-xp 00000000 08:01 12 /bin/x
Rss:                  64 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
55d0a0010000-55d0a0012000 rw-p 00010000 08:01 12 /bin/x
Anonymous:             8 kB
55d0a01ff000-55d0a0201000 rw-p 00000000 00:00 0 [heap]
Anonymous:             8 kB
";
        let field = crate::measuring::os::kib_field;
        assert_eq!(field(smaps, "Anonymous"), Some(0), "the first such line");
        assert_eq!(field(smaps, "Anon"), None, "a field's whole name");
        let a = AddressSpace::of_smaps(smaps);
        assert_eq!((a.mappings, a.anon_mappings, a.anon_kib), (3, 2, 16));
        // The data in region 0x55d0a00, the heap in it and in the next one.
        assert_eq!(a.anon_regions, 2);
        // This test process: its binary's segments, a libc, a stack and a heap at least, and
        // anonymous pages (other tests' threads allocate beside it, so nothing exact).
        let own = AddressSpace::own().expect("/proc/self is readable");
        assert!(own.mappings >= 5 && own.anon_mappings >= 2, "{own:?}");
        assert!(own.anon_kib > 0 && own.anon_regions >= 1, "{own:?}");
        assert!(own.anon_mappings <= own.mappings, "{own:?}");
        // At least one table page maps those pages.
        assert!(own.page_table_kib >= 4, "{own:?}");
    }
}
