//! Unit tests of `os`.

use super::*;

#[test]
fn a_mapping_is_writable_advisable_and_empty_when_asked_for_nothing() {
    let m = Mapping::anonymous(2 << 20, false, 0).unwrap();
    m.advise(libc::MADV_NOHUGEPAGE).unwrap();
    m.touch_pages();
    // SAFETY: inside the live mapping.
    assert_eq!(unsafe { m.ptr().read_volatile() }, 1);
    assert!(Mapping::resident(0).unwrap().is_empty());
}

#[test]
fn bytes_and_eventfd_counts_go_through() {
    let p = pipe().unwrap();
    assert!(write_byte(p[1]) && read_byte(p[0]));
    close(p[1]);
    assert!(!read_byte(p[0]), "end of file once the writer is closed");
    close(p[0]);
    let e = eventfd().unwrap();
    assert!(eventfd_post(e) && eventfd_take(e));
    close(e);
}

#[test]
fn the_state_directories_go_only_when_empty() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path().join("state");
    let (held, ignored) = (top.join("held"), top.join("ignored"));
    std::fs::create_dir_all(&held).unwrap();
    std::fs::write(held.join("a-state"), "").unwrap();
    prune_empty(&held);
    assert!(held.join("a-state").exists(), "a state is never removed");
    std::fs::remove_file(held.join("a-state")).unwrap();
    std::fs::create_dir(&ignored).unwrap();
    prune_empty(&held);
    assert!(!held.exists(), "the last state's kind goes with it");
    assert!(
        ignored.exists(),
        "another kind's directory stays, and with it the top"
    );
    std::fs::create_dir(&held).unwrap();
    std::fs::remove_dir(&ignored).unwrap();
    prune_empty(&held);
    assert!(!top.exists(), "an empty state directory goes");
    prune_empty(&held); // nothing there: nothing to do, no error
}
