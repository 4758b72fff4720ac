//! Durations as people read them: nanoseconds scaled to ns/us/ms/s with three significant
//! digits. Here, below everything, so a note written by `analysis` and a table written by
//! `report` print a time the same way.

/// Scale nanoseconds to ns/us/ms/s with three significant digits.
pub fn format_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "-".into();
    }
    let (v, unit) = scale(ns);
    format!("{} {unit}", three_digits(v))
}

/// The unit a value is shown in, and the value in it.
pub fn scale(ns: f64) -> (f64, &'static str) {
    let a = ns.abs();
    if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "us")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    }
}

/// Three significant digits (at least the integer part).
pub fn three_digits(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale_with_three_significant_digits() {
        assert_eq!(format_ns(1.234), "1.23 ns");
        assert_eq!(format_ns(12.34), "12.3 ns");
        assert_eq!(format_ns(999.4), "999 ns");
        assert_eq!(format_ns(1_500.0), "1.50 us");
        assert_eq!(format_ns(230_000.0), "230 us");
        assert_eq!(format_ns(2.5e6), "2.50 ms");
        assert_eq!(format_ns(3.2e9), "3.20 s");
        assert_eq!(format_ns(-0.5), "-0.50 ns");
        assert_eq!(format_ns(f64::NAN), "-");
    }
}
