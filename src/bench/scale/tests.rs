//! Tests of `scale`.

use super::*;

/// The family is as wide as will-it-scale's classes, each entry names its test, and none
/// is in the default suite (it takes every CPU).
#[test]
fn every_case_names_its_will_it_scale_test() {
    assert!(BENCHMARKS.len() >= 20);
    for b in BENCHMARKS {
        assert!(
            b.definition.contains(" [will-it-scale ") && b.definition.ends_with(']'),
            "{}",
            b.id
        );
        assert!(!b.default && matches!(b.cases, Cases::Copies), "{}", b.id);
    }
}
