//! Tests of `settings`.

use super::*;

#[test]
fn names_resolve_to_entries_with_their_argument() {
    assert_eq!(entry("thp").unwrap().0.name, "thp");
    let (e, arg) = entry("mthp.64kB").unwrap();
    assert_eq!((e.name, arg.as_str()), ("mthp.{arg}", "64kB"));
    assert_eq!(entry("idle-state.2").unwrap().1, "2");
    assert!(entry("idle-state.").is_none());
    assert!(entry("mthp.../x").is_none());
    assert!(entry("nosuch").is_none());
}

#[test]
fn values_read_as_the_kernel_shows_them() {
    assert_eq!(selected("always [madvise] never\n"), Some("madvise"));
    assert_eq!(
        value_of(Encoding::Bracketed, "always [madvise] never\n"),
        "madvise"
    );
    assert_eq!(value_of(Encoding::Plain, " 200000\n"), "200000");
    assert_eq!(shown(&["1".into(), "1".into()]), "1");
    assert_eq!(shown(&["0".into(), "1".into(), "0".into()]), "mixed (0, 1)");
}

#[test]
fn only_paths_in_the_kernel_trees_are_settings() {
    assert_eq!(
        resolve("/etc/passwd", &[0]),
        Err(SettingError::Outside("/etc/passwd".into()))
    );
    assert!(matches!(
        resolve("/proc/sys/../../etc/passwd", &[0]),
        Err(SettingError::Outside(_))
    ));
    assert!(matches!(
        resolve("/proc/sys/kernel/no_such_knob", &[0]),
        Err(SettingError::Missing { .. })
    ));
    assert!(matches!(
        resolve("nosuch", &[0]),
        Err(SettingError::Unknown(_))
    ));
    let s = resolve("/proc/sys/kernel/randomize_va_space", &[0]).unwrap();
    assert_eq!(s.kind, Encoding::Plain);
    let cpus = resolve("/sys/devices/system/cpu/cpu*/online", &[0]);
    if let Ok(s) = cpus {
        assert!(!s.files.is_empty());
    }
}

#[test]
fn assignments_are_parsed() {
    assert_eq!(
        parse_assignment("thp=never"),
        Ok(("thp".into(), "never".into()))
    );
    assert!(parse_assignment("thp").is_err());
    assert!(parse_assignment("=1").is_err());
    assert!(parse_assignment("thp=").is_err());
}
