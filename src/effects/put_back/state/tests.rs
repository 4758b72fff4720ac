//! Unit tests of `state`.

use super::*;

#[test]
fn state_names_are_one_per_path_and_never_a_path() {
    assert_eq!(
        state_name(Path::new("/proc/sys/kernel/randomize_va_space")),
        "%2Fproc%2Fsys%2Fkernel%2Frandomize_va_space"
    );
    assert_eq!(state_name(Path::new("/a%2Fb")), "%2Fa%252Fb");
    assert_ne!(
        state_name(Path::new("/a/b")),
        state_name(Path::new("/a%2Fb"))
    );
    assert!(!state_name(Path::new("/../x\n")).contains('/'));
}

#[test]
fn only_resolved_kernel_files_are_setting_files() {
    assert!(setting_file(Path::new("/proc/sys/kernel/randomize_va_space")).is_ok());
    for bad in [
        "/proc/sys/../../tmp",
        "/proc/sys/kernel/../kernel/randomize_va_space",
        "/proc/sys//kernel/randomize_va_space",
        "/proc/sys/./kernel/randomize_va_space",
        "/etc/hostname",
        "/proc/self/environ",
        "proc/sys/kernel/randomize_va_space",
    ] {
        assert!(setting_file(Path::new(bad)).is_err(), "{bad}");
    }
}

#[test]
fn a_state_written_in_other_namespaces_is_told_apart_by_kind() {
    let ours = namespaces();
    assert!(
        ours.contains_key("net") && ours.contains_key("mnt"),
        "{ours:?}"
    );
    assert!(other_namespaces(&ours, &ours).is_empty());
    // A state from before namespaces were recorded is from anywhere.
    assert!(other_namespaces(&Default::default(), &ours).is_empty());
    let mut theirs = ours.clone();
    theirs.insert("net".into(), ours["net"] + 1);
    assert_eq!(other_namespaces(&theirs, &ours), vec!["net".to_string()]);
    // Recorded and read back as written.
    let r = SettingRecord {
        file: "/proc/sys/net/ipv4/ip_default_ttl".into(),
        original: "64".into(),
        holder: "x".into(),
        boot: boot_id(),
        unput: None,
        namespaces: theirs.clone(),
        told_elsewhere: false,
    };
    let back: SettingRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.namespaces, theirs);
}

#[test]
fn a_record_must_name_the_file_its_name_does() {
    let r = SettingRecord {
        file: "/proc/sys/kernel/randomize_va_space".into(),
        original: "2".into(),
        holder: "x".into(),
        boot: boot_id(),
        unput: None,
        namespaces: Default::default(),
        told_elsewhere: false,
    };
    let text = serde_json::to_string(&r).unwrap();
    assert_eq!(trusted_record(&text, &state_name(&r.file)), Ok(r.clone()));
    assert!(trusted_record(&text, "%2Fproc%2Fsys%2Fvm%2Fswappiness").is_err());
    let forged = SettingRecord {
        file: "/proc/sys/../../tmp/victim".into(),
        ..r
    };
    let text = serde_json::to_string(&forged).unwrap();
    assert!(trusted_record(&text, &state_name(&forged.file)).is_err());
    assert!(trusted_record("{\"pid\":1}", "x").is_err());
}
