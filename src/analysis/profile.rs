//! What a profile says in ns (`--profile`): each repetition's samples merged into a result's
//! profile, each function's time per operation with an interval from the repetitions, and,
//! between two sides, which functions an addition is made of.
//!
//! A repetition's function costs `samples in it / samples` of what one operation took in its
//! profiled window (the repetition's median plus the loop's baseline, which the window holds
//! too), so a repetition's functions sum to its window. A function's cost is the mean of its
//! repetitions' (means, not medians, so the functions sum to the mean window), its interval a
//! t interval over them: repetitions are fresh processes, as for every other CI. Between two
//! sides each function's addition is the difference of its means, judged by Welch's t at a
//! level Bonferroni-corrected for the functions judged (A/A must call none), and called only
//! past `CALLED_FLOOR_NS` and `CALLED_FLOOR_SHARE` of the base; the parts called, the rest
//! within noise and the remainder to the measured addition are all stated.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::base::model::profile::{Profile, Space, Stack};
use crate::base::model::{BenchResult, Repetition};

/// A function's time per operation in one result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCost {
    /// The function (kernel, BPF program or user space).
    pub symbol: String,
    /// Where it lives.
    pub space: Space,
    /// Its share of every sample, pooled over repetitions.
    pub share: f64,
    /// ns per operation, the mean over repetitions.
    pub ns: f64,
    /// 95% interval of `ns` over repetitions (the point twice with one repetition).
    pub ci95: [f64; 2],
    /// Samples in it over every repetition.
    pub samples: u64,
}

/// One function's part of an addition between two sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The function.
    pub symbol: String,
    /// Where it lives.
    pub space: Space,
    /// ns per operation added in the candidate (negative: saved).
    pub added_ns: f64,
    /// Its interval, at the corrected level the call was judged at.
    pub ci95: [f64; 2],
}

/// An addition split by function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// The candidate's median less the base's, ns per operation.
    pub measured_ns: f64,
    /// Functions whose change is past noise, the largest first.
    pub parts: Vec<Part>,
    /// What the other functions' changes sum to (each within noise).
    pub within_noise_ns: f64,
    /// How many functions were judged.
    pub judged: usize,
    /// The measured addition less every function's change (called or not): what the
    /// profiles' windows do not account for.
    pub remainder_ns: f64,
}

impl Attribution {
    /// Take `measured_ns` as the addition the parts are set against (`ab`'s, from its paired
    /// rounds, rather than the difference of the two medians).
    pub fn measure_against(&mut self, measured_ns: f64) {
        self.remainder_ns += measured_ns - self.measured_ns;
        self.measured_ns = measured_ns;
    }
}

/// Below this a function's change is not called, ns per operation.
pub const CALLED_FLOOR_NS: f64 = 0.5;
/// Below this share of the base's time per operation a function's change is not called.
pub const CALLED_FLOOR_SHARE: f64 = 0.005;
/// Functions with fewer samples than this on both sides together are not judged.
const MIN_SAMPLES: u64 = 20;

/// The repetitions' profiles merged into the result's: each `(profile, window ns per op)`
/// one repetition's; call chains summed; `None` where none was profiled.
pub fn merge(parts: Vec<(Profile, f64)>) -> Option<Profile> {
    let mut it = parts.into_iter();
    let (mut out, window) = it.next()?;
    for r in &mut out.repetitions {
        r.window_ns_per_op = window;
    }
    let mut stacks: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let mut add = |s: Vec<Stack>| {
        for x in s {
            *stacks.entry(x.frames).or_insert(0) += x.samples;
        }
    };
    add(std::mem::take(&mut out.stacks));
    for (p, window) in it {
        out.spaces.extend(p.spaces);
        add(p.stacks);
        out.repetitions
            .extend(p.repetitions.into_iter().map(|mut r| {
                r.window_ns_per_op = window;
                r
            }));
    }
    out.stacks = crate::base::model::profile::kept_stacks(stacks.into_iter().collect());
    Some(out)
}

/// What one operation took in a repetition's profiled window: its median plus the result's
/// baseline.
pub fn window_ns(rep: &Repetition, baseline_ns: f64) -> f64 {
    rep.median_ns + baseline_ns.max(0.0)
}

/// Each repetition's ns per operation in `symbol`.
fn per_repetition(p: &Profile, symbol: &str) -> Vec<f64> {
    p.repetitions
        .iter()
        .filter(|r| r.samples > 0 && r.window_ns_per_op.is_finite())
        .map(|r| {
            let n = r.functions.get(symbol).copied().unwrap_or(0);
            n as f64 / r.samples as f64 * r.window_ns_per_op
        })
        .collect()
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

fn t_quantile(df: f64, two_sided_alpha: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1.0))
        .map_or(f64::NAN, |t| t.inverse_cdf(1.0 - two_sided_alpha / 2.0))
}

/// Every sampled function's samples over all repetitions.
fn totals(p: &Profile) -> BTreeMap<&str, u64> {
    let mut t = BTreeMap::new();
    for r in &p.repetitions {
        for (k, v) in &r.functions {
            *t.entry(k.as_str()).or_insert(0) += v;
        }
    }
    t
}

/// Each function's time per operation, the costliest first.
pub fn costs(p: &Profile) -> Vec<FunctionCost> {
    let all = p.samples().max(1) as f64;
    let mut out: Vec<FunctionCost> = totals(p)
        .into_iter()
        .filter_map(|(symbol, samples)| {
            let v = per_repetition(p, symbol);
            if v.is_empty() {
                return None;
            }
            let (ns, sd) = mean_sd(&v);
            let half = if v.len() > 1 {
                t_quantile(v.len() as f64 - 1.0, 0.05) * sd / (v.len() as f64).sqrt()
            } else {
                0.0
            };
            Some(FunctionCost {
                symbol: symbol.to_string(),
                space: p.space(symbol),
                share: samples as f64 / all,
                ns,
                ci95: [(ns - half).max(0.0), ns + half],
                samples,
            })
        })
        .collect();
    out.sort_by(|a, b| b.ns.total_cmp(&a.ns).then_with(|| a.symbol.cmp(&b.symbol)));
    out
}

/// The addition from `base` to `cand` split by function, where both results were profiled.
pub fn attribute(base: &BenchResult, cand: &BenchResult) -> Option<Attribution> {
    let (pa, pb) = (base.profile.as_ref()?, cand.profile.as_ref()?);
    let measured_ns = cand.stats.as_ref()?.median - base.stats.as_ref()?.median;
    let base_ns = base.stats.as_ref()?.median;
    let (ta, tb) = (totals(pa), totals(pb));
    let mut names: Vec<&str> = ta.keys().chain(tb.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    let judged: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| ta.get(n).unwrap_or(&0) + tb.get(n).unwrap_or(&0) >= MIN_SAMPLES)
        .collect();
    let alpha = 0.05 / judged.len().max(1) as f64;
    let mut parts = Vec::new();
    let (mut within_noise_ns, mut every_ns) = (0.0, 0.0);
    for name in &names {
        let (va, vb) = (per_repetition(pa, name), per_repetition(pb, name));
        if va.is_empty() || vb.is_empty() {
            continue;
        }
        let ((ma, sa), (mb, sb)) = (mean_sd(&va), mean_sd(&vb));
        let added = mb - ma;
        every_ns += added;
        let (na, nb) = (va.len() as f64, vb.len() as f64);
        let (qa, qb) = (sa * sa / na, sb * sb / nb);
        let se = (qa + qb).sqrt();
        // Welch-Satterthwaite degrees of freedom.
        let df = if na > 1.0 && nb > 1.0 && se > 0.0 {
            (qa + qb).powi(2) / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0))
        } else {
            1.0
        };
        let half = t_quantile(df, alpha) * se;
        let past_noise = judged.contains(name)
            && na > 1.0
            && nb > 1.0
            && added.abs() > half
            && added.abs() >= CALLED_FLOOR_NS
            && added.abs() >= CALLED_FLOOR_SHARE * base_ns.abs();
        if past_noise {
            parts.push(Part {
                symbol: name.to_string(),
                space: pb
                    .spaces
                    .get(*name)
                    .or(pa.spaces.get(*name))
                    .copied()
                    .unwrap_or(Space::User),
                added_ns: added,
                ci95: [added - half, added + half],
            });
        } else {
            within_noise_ns += added;
        }
    }
    parts.sort_by(|a, b| b.added_ns.abs().total_cmp(&a.added_ns.abs()));
    Some(Attribution {
        measured_ns,
        parts,
        within_noise_ns,
        judged: judged.len(),
        remainder_ns: measured_ns - every_ns,
    })
}

/// The attribution in one line: "+141 ns: __seccomp_filter +62 ns (+48..+75), ...".
pub fn words(a: &Attribution) -> String {
    use crate::base::stats::units::format_ns;
    let signed = |x: f64| {
        if x < 0.0 {
            format!("-{}", format_ns(-x))
        } else {
            format!("+{}", format_ns(x))
        }
    };
    let mut s = format!("{}:", signed(a.measured_ns));
    if a.parts.is_empty() {
        s.push_str(&format!(
            " no function's change is past noise ({} judged)",
            a.judged
        ));
    }
    let shown: Vec<String> = a
        .parts
        .iter()
        .take(6)
        .map(|p| {
            format!(
                " {} {} ({}..{})",
                p.symbol,
                signed(p.added_ns),
                signed(p.ci95[0]),
                signed(p.ci95[1])
            )
        })
        .collect();
    s.push_str(&shown.join(","));
    let rest: f64 = a.parts.iter().skip(6).map(|p| p.added_ns).sum();
    if a.parts.len() > 6 {
        s.push_str(&format!(", {} more {}", a.parts.len() - 6, signed(rest)));
    }
    s.push_str(&format!(
        "; within noise {}; not in the profiles {}",
        signed(a.within_noise_ns),
        signed(a.remainder_ns)
    ));
    s
}

#[cfg(test)]
mod tests;
