//! Raw samples as the store keeps them: a result's per-operation times as whole picoseconds
//! (the analysis rounds every sample to 0.001 ns, far below any clock's resolution, so this is
//! lossless), each stored as the zigzag varint of its difference from the previous one, the
//! whole deflated. About 1.5-2.5 bytes a sample instead of the ~16 of JSON text. Samples that
//! are not whole picoseconds (hand-made files) are kept exactly as f64, deflated.

use std::io::{Read, Write};

const PICOS: u8 = 1;
const RAW_F64: u8 = 2;

fn picos(x: f64) -> Option<i64> {
    let k = (x * 1000.0).round();
    // Exact: the value read back is the one that was written.
    (k.abs() < 9e15 && k / 1000.0 == x).then_some(k as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or("truncated samples")?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a malformed sample".into())
}

fn deflate(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(vec![kind], flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = e.write_all(payload);
    e.finish().unwrap_or_default()
}

/// Encode samples (see the module doc).
pub fn encode(samples: &[f64]) -> Vec<u8> {
    let ps: Option<Vec<i64>> = samples.iter().map(|&x| picos(x)).collect();
    match ps {
        Some(ps) => {
            let mut payload = Vec::with_capacity(samples.len() * 3);
            put_varint(&mut payload, ps.len() as u64);
            let mut prev = 0i64;
            for v in ps {
                let d = v.wrapping_sub(prev);
                put_varint(&mut payload, ((d << 1) ^ (d >> 63)) as u64);
                prev = v;
            }
            deflate(PICOS, &payload)
        }
        None => {
            let payload: Vec<u8> = samples.iter().flat_map(|x| x.to_le_bytes()).collect();
            deflate(RAW_F64, &payload)
        }
    }
}

/// Decode what `encode` wrote.
pub fn decode(bytes: &[u8]) -> Result<Vec<f64>, String> {
    let (&kind, rest) = bytes.split_first().ok_or("empty samples")?;
    let mut payload = Vec::new();
    flate2::read::DeflateDecoder::new(rest)
        .read_to_end(&mut payload)
        .map_err(|e| format!("samples cannot be inflated: {e}"))?;
    match kind {
        PICOS => {
            let mut pos = 0;
            let n = get_varint(&payload, &mut pos)? as usize;
            let mut out = Vec::with_capacity(n.min(payload.len()));
            let mut prev = 0i64;
            for _ in 0..n {
                let z = get_varint(&payload, &mut pos)?;
                let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
                prev = prev.wrapping_add(d);
                out.push(prev as f64 / 1000.0);
            }
            Ok(out)
        }
        RAW_F64 => Ok(payload
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect()),
        k => Err(format!("unknown sample encoding {k}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picosecond_samples_round_trip_exactly_in_under_three_bytes() {
        // getpid-like: ~200 ns at two levels with a tail, rounded as the analysis rounds.
        let mut x = 12345u64;
        let samples: Vec<f64> = (0..20_000)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let jitter = ((x >> 33) % 40_000) as f64 / 1000.0;
                let level = if (i / 700) % 3 == 0 { 156.0 } else { 212.0 };
                ((level + jitter) * 1000.0).round() / 1000.0
            })
            .collect();
        let bytes = encode(&samples);
        assert_eq!(decode(&bytes).unwrap(), samples);
        let per = bytes.len() as f64 / samples.len() as f64;
        assert!(per < 3.0, "{per:.2} bytes a sample");
        // Negative and zero samples too.
        let odd = vec![-0.5, 0.0, 1e6, 1.234];
        assert_eq!(decode(&encode(&odd)).unwrap(), odd);
    }

    #[test]
    fn samples_that_are_not_whole_picoseconds_are_kept_exactly() {
        let s = vec![1.0 / 3.0, 2.5e-4, 7.0];
        let b = encode(&s);
        assert_eq!(b[0], RAW_F64);
        assert_eq!(decode(&b).unwrap(), s);
        assert!(decode(&[]).is_err() && decode(&[9, 1, 2]).is_err());
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<f64>::new());
    }
}
