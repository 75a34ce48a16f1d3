//! RFC 8785 (JCS) of a payload, with the reference's limits and error texts.
//!
//! Numbers are doubles as in every JavaScript signer. The reference first walks the value in
//! its own key order and raises the first depth or number problem it meets; only then does
//! serialization fail on a lone surrogate. This module keeps that order.

use crate::json::{Doc, JStr, Node, Num};
use crate::text::es_number;

pub const MAX_PAYLOAD_DEPTH: usize = 10;
const MAX_SAFE_INTEGER: i128 = (1i128 << 53) - 1;

fn check(doc: &Doc, id: u32, level: usize, lone: &mut bool) -> Result<(), String> {
    match doc.node(id) {
        Node::Null | Node::Bool(_) => Ok(()),
        Node::Str(s) => {
            *lone |= s.lone;
            Ok(())
        }
        Node::Num(n) => match *n {
            Num::Int(_) => Ok(()),
            Num::Big(f) if !f.is_finite() => Err("number too large for an IEEE-754 double".into()),
            Num::Big(_) => Ok(()),
            Num::Float(f) if !f.is_finite() => Err("number is not a finite IEEE-754 double".into()),
            Num::Float(_) => Ok(()),
        },
        Node::Arr(items) => {
            if level >= MAX_PAYLOAD_DEPTH {
                return Err(format!("payload nesting deeper than {MAX_PAYLOAD_DEPTH}"));
            }
            for &child in items {
                check(doc, child, level + 1, lone)?;
            }
            Ok(())
        }
        Node::Obj(entries) => {
            if level >= MAX_PAYLOAD_DEPTH {
                return Err(format!("payload nesting deeper than {MAX_PAYLOAD_DEPTH}"));
            }
            for (key, child) in entries {
                *lone |= key.lone;
                check(doc, *child, level + 1, lone)?;
            }
            Ok(())
        }
    }
}

fn write_number(n: Num, out: &mut Vec<u8>) {
    match n {
        Num::Int(i) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) => {
            out.extend_from_slice(i.to_string().as_bytes())
        }
        Num::Int(i) => out.extend_from_slice(es_number(i as f64).as_bytes()),
        Num::Big(f) | Num::Float(f) => {
            if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64 {
                out.extend_from_slice((f as i64).to_string().as_bytes())
            } else {
                out.extend_from_slice(es_number(f).as_bytes())
            }
        }
    }
}

fn write_string(s: &JStr, out: &mut Vec<u8>) {
    out.push(b'"');
    let mut start = 0;
    let bytes = &s.bytes;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Order of keys by their UTF-16 code units (RFC 8785 §3.2.3).
fn utf16_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    let a16 = std::str::from_utf8(a).map(|s| s.encode_utf16().collect::<Vec<u16>>());
    let b16 = std::str::from_utf8(b).map(|s| s.encode_utf16().collect::<Vec<u16>>());
    match (a16, b16) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

fn write(doc: &Doc, id: u32, out: &mut Vec<u8>) {
    match doc.node(id) {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Bool(true) => out.extend_from_slice(b"true"),
        Node::Bool(false) => out.extend_from_slice(b"false"),
        Node::Num(n) => write_number(*n, out),
        Node::Str(s) => write_string(s, out),
        Node::Arr(items) => {
            out.push(b'[');
            for (i, &child) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(doc, child, out);
            }
            out.push(b']');
        }
        Node::Obj(entries) => {
            let mut order: Vec<&(JStr, u32)> = entries.iter().collect();
            order.sort_by(|x, y| utf16_cmp(&x.0.bytes, &y.0.bytes));
            out.push(b'{');
            for (i, (key, child)) in order.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write(doc, *child, out);
            }
            out.push(b'}');
        }
    }
}

/// JCS bytes of value `id`, or the reason the reference gives (an InvalidPayload, 1004).
pub fn canonicalize(doc: &Doc, id: u32) -> Result<Vec<u8>, String> {
    let mut lone = false;
    check(doc, id, 0, &mut lone)?;
    if lone {
        return Err("payload cannot be canonicalized: input contains non-UTF-8 codepoints".into());
    }
    let mut out = Vec::new();
    write(doc, id, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn jcs(s: &str) -> Result<String, String> {
        let doc = parse(s.as_bytes(), false).unwrap();
        canonicalize(&doc, doc.root).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(jcs(r#"{"z":1,"a":[1.0,-0.0,"x"]}"#).unwrap(), r#"{"a":[1,0,"x"],"z":1}"#);
        assert_eq!(jcs(r#"{"n":9007199254740993}"#).unwrap(), r#"{"n":9007199254740992}"#);
        assert_eq!(jcs(r#"{"e":1e21,"f":5e-324}"#).unwrap(), r#"{"e":1e+21,"f":5e-324}"#);
        assert_eq!(jcs(r#"{"s":"\u0001\u007f"}"#).unwrap(), "{\"s\":\"\\u0001\u{7f}\"}");
        assert_eq!(jcs("[[[[[[[[[[[]]]]]]]]]]]").unwrap_err(), "payload nesting deeper than 10");
        assert_eq!(jcs("[1e400]").unwrap_err(), "number is not a finite IEEE-754 double");
    }
}
