//! fs/ and sig/: every benchmark measures by its definition, says the file system its files
//! were on, and the costs keep the order what each operation does implies.

mod common;

use common::*;

#[test]
fn every_fs_and_sig_benchmark_measures_and_says_where_its_files_were() {
    let _g = measuring();
    let (_, run) = run_json(&unique_tag("fssig"), &["--quick", "fs/", "sig/"]);
    let ids: Vec<&str> = run.results.iter().map(|r| r.id.as_str()).collect();
    for want in [
        "fs/stat",
        "fs/fstat",
        "fs/open-close",
        "fs/statx",
        "fs/openat2/1-component",
        "fs/openat2/5-components",
        "fs/getdents64",
        "fs/getdents64-few",
        "fs/create/0KiB",
        "fs/create/10KiB",
        "fs/delete/0KiB",
        "fs/delete/10KiB",
        "fs/write/4KiB",
        "fs/write/1MiB",
        "fs/open",
        "fs/open-missing",
        "fs/dup2",
        "fs/access",
        "fs/readlink",
        "fs/getcwd",
        "fs/close-range",
        "fs/mmap/512KiB",
        "fs/mmap/16MiB",
        "fs/pagefault",
        "fs/fcntl-lock@same",
        "sig/install",
        "sig/catch",
        "sig/prot",
        "sig/sigprocmask",
        "sig/pingpong@same",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    for r in &run.results {
        // statx and openat2 may be skipped, with the kernel's reason, on a kernel without them.
        let skipped_with_reason =
            matches!(&r.status, Status::Skipped { reason } if reason.contains("ENOSYS"));
        assert!(
            r.status == Status::Ok || skipped_with_reason,
            "{}: {:?}",
            r.id,
            r.status
        );
        // Every fs/ result touched files but those that work on descriptors alone.
        let descriptors_only = ["fs/close-range", "fs/dup2", "fs/getcwd"];
        if r.id.starts_with("fs/")
            && !descriptors_only.contains(&r.id.as_str())
            && r.status == Status::Ok
        {
            let fs = r.params.get("fs").and_then(|v| v.as_str()).unwrap_or("");
            assert!(!fs.is_empty(), "{} does not say its file system", r.id);
        }
    }
    // A create is one file made, of the size asked, per operation; a delete leaves none.
    let param = |id: &str, key: &str| {
        result(&run, id)
            .params
            .get(key)
            .and_then(|v| v.as_f64())
            .unwrap_or_else(|| panic!("{id} has no {key}"))
    };
    for size in ["0KiB", "1KiB", "4KiB", "10KiB"] {
        assert_eq!(
            param(&format!("fs/create/{size}"), "files_made_per_op"),
            1.0
        );
        assert_eq!(
            param(&format!("fs/delete/{size}"), "files_left_per_op"),
            0.0
        );
    }
    // A first read of a cached file's page through a mapping: at most one fault a page (the
    // event, where the machine counts it).
    let pf = result(&run, "fs/pagefault");
    if let Some(f) = pf
        .events
        .as_ref()
        .and_then(|e| e.per_op.get("minor-faults"))
    {
        assert!((0.0..=1.02).contains(f), "fs/pagefault: {f} faults a page");
    }
}

/// Host-dependent orderings (slow tier, default sampling): costs that differ by what the
/// operation does (a path walked, a file opened, a signal delivered, 256x the bytes).
#[test]
#[ignore = "slow tier (orderings, default sampling): .ci/run runs it with --ignored"]
fn fs_and_sig_costs_are_ordered() {
    let _g = measuring();
    let ids = [
        "syscall/getppid",
        "fs/open",
        "fs/open-missing",
        "fs/stat",
        "fs/fstat",
        "fs/open-close",
        "fs/getdents64",
        "fs/getdents64-few",
        "fs/write",
        "sig/install",
        "sig/catch",
        "sig/prot",
        "sig/sigprocmask",
        "sig/pingpong",
        "fs/mmap",
        "fs/pagefault",
        "mem/fault-write",
        "fs/fcntl-lock",
    ];
    let tag = unique_tag("fssig-order");
    let (_, run) = run_json(&tag, &ids);
    assert_costlier(
        &tag,
        &run,
        &[],
        &[
            costlier(
                "fs/mmap/16MiB",
                "fs/mmap/512KiB",
                "lat_mmap writes a byte every 16 KiB of a tenth of the mapping: 103 pages at \
                 16 MiB against 4 at 512 KiB",
            ),
            costlier(
                "mem/fault-write",
                "fs/pagefault",
                "a cached file's page is mapped by fault-around or a whole folio at once, where \
                 a fresh anonymous page is allocated and zeroed one fault each",
            ),
            costlier(
                "fs/getdents64",
                "fs/getdents64-few",
                "102 entries copied out against 5, from the same kind of directory",
            ),
            costlier_by(
                "fs/fcntl-lock@same",
                2.0,
                "syscall/getppid",
                "two fcntl calls on a lock against the null call",
            ),
            costlier_by(
                "fs/stat",
                2.0,
                "syscall/getppid",
                "a walk of four components costs more than the null call",
            ),
            costlier(
                "fs/open",
                "fs/open-missing",
                "a found file is opened (a file allocated) where a missing one ends at the lookup",
            ),
            costlier(
                "fs/stat",
                "fs/fstat",
                "a four-component walk costs more than reading an open file's inode",
            ),
            costlier(
                "fs/open-close",
                "fs/stat",
                "an open allocates a file and a descriptor on top of the same walk",
            ),
            costlier(
                "fs/write/1MiB",
                "fs/write/4KiB",
                "256 times the bytes copied",
            ),
            costlier(
                "sig/catch",
                "sig/sigprocmask",
                "a delivery (frame built, handler run, sigreturn) is two kernel entries and more",
            ),
            costlier(
                "sig/pingpong@same",
                "sig/catch",
                "two processes, two signals and two switches against one signal to oneself",
            ),
            costlier(
                "sig/prot",
                "sig/install",
                "a fault delivered as a signal is an exception on top of a delivery",
            ),
        ],
    );
}
