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

/// The calling process's address space: its mappings (each one a fork duplicates), its
/// anonymous memory (pages whose table entries a fork copies) and its page tables (a fork
/// allocates, zeroes and fills a table page in the child for each one of the parent's that
/// maps anonymous pages: the same memory spread over more 2 MiB regions costs more).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddressSpace {
    /// Lines of /proc/self/maps.
    pub mappings: usize,
    /// `Anonymous` of /proc/self/smaps_rollup, KiB.
    pub anon_kib: u64,
    /// `VmPTE` of /proc/self/status: the page tables' size, KiB.
    pub page_table_kib: u64,
}

impl AddressSpace {
    /// The calling process's, now (`None` where /proc cannot be read).
    pub fn own() -> Option<AddressSpace> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        Some(AddressSpace {
            mappings: maps.lines().count(),
            anon_kib: super::os::kib_field(&rollup, "Anonymous")?,
            page_table_kib: super::os::kib_field(&status, "VmPTE")?,
        })
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
    fn an_address_space_is_read_from_the_rollup_and_the_maps() {
        let rollup = "Rss:  1760 kB\nAnonymous:   116 kB\nSwap: 0 kB\n";
        let field = crate::measuring::os::kib_field;
        assert_eq!(field(rollup, "Anonymous"), Some(116));
        assert_eq!(field(rollup, "Anon"), None, "a field's whole name");
        assert_eq!(field("Rss: 4 kB\n", "Anonymous"), None);
        // This test process: its binary's segments, a libc, a stack and a heap at least, and
        // anonymous pages (other tests' threads allocate beside it, so nothing exact).
        let own = AddressSpace::own().expect("/proc/self is readable");
        assert!(own.mappings >= 5 && own.anon_kib > 0, "{own:?}");
        // At least one table page maps those pages.
        assert!(own.page_table_kib >= 4, "{own:?}");
    }
}
