//! Number and text formatting exactly as the reference core writes it.

use crate::json::JStr;

/// Python's `str(int(x))` of an integral double, exact at any magnitude.
pub fn integral_double(x: f64) -> String {
    if x.abs() < 9.0e18 {
        return (x as i64).to_string();
    }
    let bits = x.to_bits();
    let negative = bits >> 63 == 1;
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1075;
    let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    // |x| = mantissa * 2^exp with exp > 0 here (|x| >= 2^63)
    let mut limbs: Vec<u32> = vec![(mantissa % 1_000_000_000) as u32, (mantissa / 1_000_000_000 % 1_000_000_000) as u32, (mantissa / 1_000_000_000_000_000_000) as u32];
    for _ in 0..exp {
        let mut carry = 0u64;
        for limb in limbs.iter_mut() {
            let v = (*limb as u64) * 2 + carry;
            *limb = (v % 1_000_000_000) as u32;
            carry = v / 1_000_000_000;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
    }
    while limbs.len() > 1 && *limbs.last().unwrap() == 0 {
        limbs.pop();
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&limbs.last().unwrap().to_string());
    for limb in limbs.iter().rev().skip(1) {
        out.push_str(&format!("{limb:09}"));
    }
    out
}

/// The reference's `fmt_seconds`: `1770163200`, not `1.77016e+09`; fractions kept to 6 places.
pub fn fmt_seconds(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 {
        return integral_double(value);
    }
    let text = format!("{value:.6}");
    let trimmed = text.trim_end_matches('0');
    trimmed.trim_end_matches('.').to_string()
}

/// ECMAScript's `Number.prototype.toString` of a finite double (RFC 8785's number form).
pub fn es_number(x: f64) -> String {
    if x == 0.0 {
        return "0".to_string();
    }
    let mut buffer = ryu_js::Buffer::new();
    buffer.format_finite(x).to_string()
}

/// A string field as the tables hold it (the reference's `text_value`): lone surrogates
/// become U+FFFD, and a high surrogate followed by a low one becomes their character.
pub fn table_text(s: &JStr) -> String {
    if !s.lone {
        return String::from_utf8(s.bytes.clone()).expect("valid UTF-8 without surrogates");
    }
    let mut units: Vec<u16> = Vec::with_capacity(s.bytes.len());
    for cp in code_points(&s.bytes) {
        if cp >= 0x10000 {
            let v = cp - 0x10000;
            units.push(0xD800 | (v >> 10) as u16);
            units.push(0xDC00 | (v & 0x3FF) as u16);
        } else {
            units.push(cp as u16);
        }
    }
    String::from_utf16_lossy(&units)
}

/// Code points of generalized UTF-8 (surrogates in their 3-byte form).
pub fn code_points(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= bytes.len() {
            return None;
        }
        let b = bytes[i];
        let (len, init) = match b {
            0x00..=0x7f => (1, b as u32),
            0xc0..=0xdf => (2, (b & 0x1f) as u32),
            0xe0..=0xef => (3, (b & 0x0f) as u32),
            _ => (4, (b & 0x07) as u32),
        };
        let mut cp = init;
        for k in 1..len {
            cp = (cp << 6) | (bytes.get(i + k).copied().unwrap_or(0x80) & 0x3f) as u32;
        }
        i += len;
        Some(cp)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(fmt_seconds(1770163200.0), "1770163200");
        assert_eq!(fmt_seconds(0.5), "0.5");
        assert_eq!(fmt_seconds(-0.0), "0");
        assert_eq!(fmt_seconds(1e300).len(), 301);
        assert_eq!(integral_double(2f64.powi(70)), "1180591620717411303424");
    }

    #[test]
    fn seconds_round_half_to_even_like_python() {
        // exact binary ties at the 7th decimal: Python's f"{x:.6f}" rounds them to even
        assert_eq!(fmt_seconds(0.0078125), "0.007812");
        assert_eq!(fmt_seconds(0.0234375), "0.023438");
        assert_eq!(fmt_seconds(1770163200.0078125), "1770163200.007812");
        assert_eq!(fmt_seconds(2.5e-7), "0");
        assert_eq!(fmt_seconds(1.5e-6), "0.000002");
        assert_eq!(fmt_seconds(4503599627370495.5), "4503599627370495.5");
        assert_eq!(fmt_seconds(f64::INFINITY), "inf");
    }

    #[test]
    fn es_numbers() {
        assert_eq!(es_number(1.0), "1");
        assert_eq!(es_number(1e21), "1e+21");
        assert_eq!(es_number(5e-324), "5e-324");
        assert_eq!(es_number(1e-7), "1e-7");
        assert_eq!(es_number(-0.0), "0");
        assert_eq!(es_number(0.000001), "0.000001");
    }
}
