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

/// Above this multiple a change reads as one ("x3.1"), not as a percentage ("+210%"): a
/// repetition 2430 times its neighbours printed as "+242971%", a figure nobody reads.
pub const MULTIPLE_FROM: f64 = 3.0;

/// A change of `pct` percent as people read it: "+24%" (whole percent), or, from
/// `MULTIPLE_FROM` times up, the multiple: "x3.1", "x2430".
pub fn change_words(pct: f64) -> String {
    let ratio = 1.0 + pct / 100.0;
    if !pct.is_finite() {
        "-".into()
    } else if ratio >= MULTIPLE_FROM {
        format!("x{}", three_digits(ratio))
    } else {
        format!("{pct:+.0}%")
    }
}

/// A rate in bytes per second as people read a bandwidth: MiB/s or GiB/s, three significant
/// digits (binary units, as lmbench's "MB/sec" are).
pub fn format_rate(bytes_per_s: f64) -> String {
    if !bytes_per_s.is_finite() || bytes_per_s <= 0.0 {
        return "-".into();
    }
    let mib = bytes_per_s / f64::from(1u32 << 20);
    if mib >= 1024.0 {
        format!("{} GiB/s", three_digits(mib / 1024.0))
    } else {
        format!("{} MiB/s", three_digits(mib))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_changes_read_as_multiples() {
        assert_eq!(change_words(24.4), "+24%");
        assert_eq!(change_words(-40.0), "-40%");
        assert_eq!(change_words(199.0), "+199%");
        assert_eq!(change_words(210.0), "x3.10");
        assert_eq!(change_words(242971.0), "x2431");
    }

    #[test]
    fn rates_read_in_binary_units() {
        assert_eq!(format_rate(3.5 * 1024.0 * 1048576.0), "3.50 GiB/s");
        assert_eq!(format_rate(900.0 * 1048576.0), "900 MiB/s");
        assert_eq!(format_rate(0.0), "-");
    }

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
