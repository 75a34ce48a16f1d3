//! Strict JSON reading with the reference core's exact outcome.
//!
//! The reference (`snap_spark.protocol.jsonparse`) accepts every RFC 8259 text: any depth,
//! any number (an integer literal keeps its exact value, a float literal becomes the nearest
//! double or infinity) and escaped lone surrogates. A duplicate key keeps the position of its
//! first occurrence and the value of its last. Its error texts name the character index
//! (code points, not bytes) where reading stopped; this parser writes the same texts.
//!
//! Text is handled as bytes in "generalized UTF-8": valid UTF-8 plus lone surrogates written
//! as their 3-byte form (what Python's `surrogatepass` writes). A top-level line is always
//! valid UTF-8; the text inside an envelope's `message` string may hold lone surrogates.
//!
//! Values live in one arena (`Doc::nodes`), so neither building nor dropping a deeply nested
//! value recurses.

use std::collections::HashMap;

/// A JSON number as the reference holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// An integer literal of at most 38 digits: its exact value.
    Int(i128),
    /// A longer integer literal: its nearest double (infinite when it overflows).
    Big(f64),
    /// A literal with a fraction or an exponent (or an integer of more than 4300 digits,
    /// which Python's `int()` refuses): its nearest double, possibly infinite.
    Float(f64),
}

/// A string value: its bytes (generalized UTF-8) and whether it holds a lone surrogate.
#[derive(Clone, Debug, Default)]
pub struct JStr {
    pub bytes: Vec<u8>,
    pub lone: bool,
}

impl JStr {
    /// The text when it is valid Unicode.
    pub fn as_str(&self) -> Option<&str> {
        if self.lone {
            None
        } else {
            // SAFETY-free: bytes without lone surrogates are valid UTF-8 by construction
            std::str::from_utf8(&self.bytes).ok()
        }
    }

    /// Number of code points (Python's `len`).
    pub fn char_len(&self) -> usize {
        self.bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count()
    }

    pub fn eq_ascii(&self, s: &str) -> bool {
        self.bytes == s.as_bytes()
    }
}

#[derive(Debug)]
pub enum Node {
    Null,
    Bool(bool),
    Num(Num),
    Str(JStr),
    Arr(Vec<u32>),
    Obj(Vec<(JStr, u32)>),
}

/// A parsed JSON text: the arena and the index of the root value.
#[derive(Debug)]
pub struct Doc {
    pub nodes: Vec<Node>,
    pub root: u32,
}

impl Doc {
    pub fn node(&self, id: u32) -> &Node {
        &self.nodes[id as usize]
    }

    /// Value of `key` in object `id` (`None` when absent or not an object).
    pub fn get(&self, id: u32, key: &str) -> Option<u32> {
        match self.node(id) {
            Node::Obj(entries) => entries
                .iter()
                .find(|(k, _)| k.bytes == key.as_bytes())
                .map(|(_, v)| *v),
            _ => None,
        }
    }

    pub fn str_of(&self, id: u32) -> Option<&JStr> {
        match self.node(id) {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The JSON type name the reference uses in its reasons.
pub fn json_type(node: &Node) -> &'static str {
    match node {
        Node::Null => "null",
        Node::Bool(_) => "boolean",
        Node::Num(_) => "number",
        Node::Str(_) => "string",
        Node::Arr(_) => "array",
        Node::Obj(_) => "object",
    }
}

/// Why a text was not read.
#[derive(Debug, PartialEq)]
pub enum ParseError {
    /// The reference's reason, complete (e.g. `not JSON: expected ':' at character 7`).
    Reason(String),
    /// A case whose reason needs Python's Unicode tables (the `repr` of a non-ASCII
    /// character): the caller hands the line to the reference core.
    Defer,
}

fn char_index(text: &[u8], pos: usize) -> usize {
    text[..pos.min(text.len())]
        .iter()
        .filter(|b| (**b & 0xC0) != 0x80)
        .count()
}

fn fail(text: &[u8], pos: usize, what: &str) -> ParseError {
    if pos >= text.len() {
        ParseError::Reason(format!("not JSON: {what} at end of input (truncated?)"))
    } else {
        ParseError::Reason(format!("not JSON: {what} at character {}", char_index(text, pos)))
    }
}

/// Python's `repr()` of one ASCII character (`None` for any other character).
pub fn repr_ascii_char(c: u8) -> Option<String> {
    let body = match c {
        b'\'' => return Some("\"'\"".to_string()),
        b'\\' => "\\\\".to_string(),
        b'\t' => "\\t".to_string(),
        b'\n' => "\\n".to_string(),
        b'\r' => "\\r".to_string(),
        0x20..=0x7e => (c as char).to_string(),
        0x00..=0x7f => format!("\\x{c:02x}"),
        _ => return None,
    };
    Some(format!("'{body}'"))
}

/// Python's `repr()` of an ASCII string (`None` if it is not ASCII).
pub fn repr_ascii(s: &[u8]) -> Option<String> {
    if !s.is_ascii() {
        return None;
    }
    let has_single = s.contains(&b'\'');
    let has_double = s.contains(&b'"');
    let quote = if has_single && !has_double { b'"' } else { b'\'' };
    let mut out = String::new();
    out.push(quote as char);
    for &c in s {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if c == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push(quote as char);
    Some(out)
}

fn skip(text: &[u8], mut idx: usize) -> usize {
    while idx < text.len() && matches!(text[idx], b' ' | b'\t' | b'\n' | b'\r') {
        idx += 1;
    }
    idx
}

fn push_code_point(out: &mut Vec<u8>, c: u32) {
    // Surrogates are written in their 3-byte form, like Python's "surrogatepass".
    if c < 0x80 {
        out.push(c as u8);
    } else if c < 0x800 {
        out.push(0xC0 | (c >> 6) as u8);
        out.push(0x80 | (c & 0x3F) as u8);
    } else if c < 0x10000 {
        out.push(0xE0 | (c >> 12) as u8);
        out.push(0x80 | ((c >> 6) & 0x3F) as u8);
        out.push(0x80 | (c & 0x3F) as u8);
    } else {
        out.push(0xF0 | (c >> 18) as u8);
        out.push(0x80 | ((c >> 12) & 0x3F) as u8);
        out.push(0x80 | ((c >> 6) & 0x3F) as u8);
        out.push(0x80 | (c & 0x3F) as u8);
    }
}

/// True when generalized-UTF-8 bytes hold a surrogate (ED A0..BF xx).
fn has_surrogate(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w[0] == 0xED && w[1] >= 0xA0)
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let mut v = 0u32;
    for &d in &text[at..at + 4] {
        let x = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | x as u32;
    }
    Some(v)
}

/// Read a string whose opening quote is at `start - 1`; returns it and the index after
/// its closing quote. Follows CPython's `_json.scanstring` (strict) to the error texts.
fn scan_string(text: &[u8], start: usize, surrogates_possible: bool) -> Result<(JStr, usize), ParseError> {
    let n = text.len();
    let begin = start - 1;
    let mut out = JStr::default();
    let mut end = start;
    loop {
        let mut next = end;
        while next < n {
            let d = text[next];
            if d == b'"' || d == b'\\' {
                break;
            }
            if d <= 0x1f {
                return Err(fail(text, next, "invalid control character at"));
            }
            next += 1;
        }
        if next == n {
            return Err(fail(text, begin, "unterminated string starting at"));
        }
        if next > end {
            let chunk = &text[end..next];
            if surrogates_possible && !out.lone && has_surrogate(chunk) {
                out.lone = true;
            }
            out.bytes.extend_from_slice(chunk);
        }
        let c = text[next];
        next += 1;
        if c == b'"' {
            end = next;
            break;
        }
        if next == n {
            return Err(fail(text, begin, "unterminated string starting at"));
        }
        let e = text[next];
        if e != b'u' {
            end = next + 1;
            let ch = match e {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                _ => return Err(fail(text, end - 2, "invalid \\escape")),
            };
            out.bytes.push(ch);
        } else {
            next += 1;
            end = next + 4;
            if end >= n {
                return Err(fail(text, next - 1, "invalid \\uxxxx escape"));
            }
            let mut cp = match hex4(text, next) {
                Some(v) => v,
                None => return Err(fail(text, end - 5, "invalid \\uxxxx escape")),
            };
            next = end;
            if (0xD800..0xDC00).contains(&cp)
                && end + 6 < n
                && text[next] == b'\\'
                && text[next + 1] == b'u'
            {
                next += 2;
                end += 6;
                let low = match hex4(text, next) {
                    Some(v) => v,
                    None => return Err(fail(text, end - 5, "invalid \\uxxxx escape")),
                };
                if (0xDC00..0xE000).contains(&low) {
                    cp = 0x10000 + (((cp - 0xD800) << 10) | (low - 0xDC00));
                } else {
                    end -= 6;
                }
            }
            if (0xD800..0xE000).contains(&cp) {
                out.lone = true;
            }
            push_code_point(&mut out.bytes, cp);
        }
    }
    Ok((out, end))
}

fn parse_key(text: &[u8], idx: usize, surr: bool) -> Result<(JStr, usize), ParseError> {
    if idx >= text.len() || text[idx] != b'"' {
        return Err(fail(text, idx, "expected a string key"));
    }
    let (key, mut idx) = scan_string(text, idx + 1, surr)?;
    idx = skip(text, idx);
    if idx >= text.len() || text[idx] != b':' {
        return Err(fail(text, idx, "expected ':'"));
    }
    Ok((key, skip(text, idx + 1)))
}

/// Match `-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?` at `idx`; returns the end and
/// whether a fraction or exponent was matched.
fn match_number(text: &[u8], idx: usize) -> Option<(usize, bool)> {
    let n = text.len();
    let digit = |i: usize| i < n && text[i].is_ascii_digit();
    let mut i = idx;
    if i < n && text[i] == b'-' {
        i += 1;
    }
    if !digit(i) {
        return None;
    }
    if text[i] == b'0' {
        i += 1;
    } else {
        while digit(i) {
            i += 1;
        }
    }
    let mut is_float = false;
    if i < n && text[i] == b'.' && digit(i + 1) {
        i += 1;
        while digit(i) {
            i += 1;
        }
        is_float = true;
    }
    if i < n && (text[i] == b'e' || text[i] == b'E') {
        let mut j = i + 1;
        if j < n && (text[j] == b'-' || text[j] == b'+') {
            j += 1;
        }
        if digit(j) {
            while digit(j) {
                j += 1;
            }
            i = j;
            is_float = true;
        }
    }
    Some((i, is_float))
}

/// Python's value of a number literal (`float()` or `int()`, see [`Num`]).
pub fn number_value(literal: &str, is_float: bool) -> Num {
    if is_float {
        return Num::Float(literal.parse::<f64>().unwrap_or(f64::INFINITY));
    }
    let digits = literal.len() - usize::from(literal.starts_with('-'));
    if digits <= 38 {
        Num::Int(literal.parse::<i128>().expect("a matched integer literal"))
    } else if digits > 4300 {
        // int() refuses it; the reference then takes float(), which overflows
        Num::Float(if literal.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY })
    } else {
        Num::Big(literal.parse::<f64>().unwrap_or(f64::INFINITY))
    }
}

enum Frame {
    Arr(Vec<u32>),
    Obj(Vec<(JStr, u32)>, Option<HashMap<Vec<u8>, usize>>, JStr),
}

const INDEX_KEYS_ABOVE: usize = 16;

fn obj_insert(entries: &mut Vec<(JStr, u32)>, index: &mut Option<HashMap<Vec<u8>, usize>>, key: JStr, value: u32) {
    if let Some(map) = index {
        if let Some(&at) = map.get(&key.bytes) {
            entries[at].1 = value;
            return;
        }
        map.insert(key.bytes.clone(), entries.len());
        entries.push((key, value));
        return;
    }
    if let Some(at) = entries.iter().position(|(k, _)| k.bytes == key.bytes) {
        entries[at].1 = value;
        return;
    }
    entries.push((key, value));
    if entries.len() > INDEX_KEYS_ABOVE {
        let mut map = HashMap::with_capacity(entries.len() * 2);
        for (i, (k, _)) in entries.iter().enumerate() {
            map.insert(k.bytes.clone(), i);
        }
        *index = Some(map);
    }
}

/// Parse one JSON text (the reference's `parse_strict`). `surrogates_possible` says the text
/// may hold lone surrogates in their 3-byte form (the text inside an envelope).
pub fn parse(text: &[u8], surrogates_possible: bool) -> Result<Doc, ParseError> {
    let n = text.len();
    let mut nodes: Vec<Node> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut idx = skip(text, 0);
    loop {
        if idx >= n {
            return Err(fail(text, idx, "expected a value"));
        }
        let ch = text[idx];
        let value: Node;
        match ch {
            b'{' => {
                idx = skip(text, idx + 1);
                if idx < n && text[idx] == b'}' {
                    value = Node::Obj(Vec::new());
                    idx += 1;
                } else {
                    let (key, next) = parse_key(text, idx, surrogates_possible)?;
                    idx = next;
                    stack.push(Frame::Obj(Vec::new(), None, key));
                    continue;
                }
            }
            b'[' => {
                idx = skip(text, idx + 1);
                if idx < n && text[idx] == b']' {
                    value = Node::Arr(Vec::new());
                    idx += 1;
                } else {
                    stack.push(Frame::Arr(Vec::new()));
                    continue;
                }
            }
            b'"' => {
                let (s, next) = scan_string(text, idx + 1, surrogates_possible)?;
                value = Node::Str(s);
                idx = next;
            }
            b'-' | b'0'..=b'9' => {
                let Some((end, is_float)) = match_number(text, idx) else {
                    return Err(fail(text, idx, "bad number"));
                };
                // ASCII by construction
                let literal = std::str::from_utf8(&text[idx..end]).expect("ASCII number");
                value = Node::Num(number_value(literal, is_float));
                idx = end;
            }
            _ if text[idx..].starts_with(b"true") => {
                value = Node::Bool(true);
                idx += 4;
            }
            _ if text[idx..].starts_with(b"false") => {
                value = Node::Bool(false);
                idx += 5;
            }
            _ if text[idx..].starts_with(b"null") => {
                value = Node::Null;
                idx += 4;
            }
            _ => return Err(unexpected(text, idx)),
        }
        // attach the finished value; close containers as far as possible
        nodes.push(value);
        let mut id = (nodes.len() - 1) as u32;
        loop {
            let Some(parent) = stack.last_mut() else {
                idx = skip(text, idx);
                if idx != n {
                    return Err(fail(text, idx, "extra data after the JSON value"));
                }
                return Ok(Doc { nodes, root: id });
            };
            let is_obj = matches!(parent, Frame::Obj(..));
            match parent {
                Frame::Arr(items) => items.push(id),
                Frame::Obj(entries, index, key) => {
                    obj_insert(entries, index, std::mem::take(key), id)
                }
            }
            idx = skip(text, idx);
            if idx >= n {
                return Err(fail(text, idx, "unterminated object or array"));
            }
            let ch = text[idx];
            if ch == b',' {
                idx = skip(text, idx + 1);
                if let Some(Frame::Obj(_, _, key)) = stack.last_mut() {
                    let (k, next) = parse_key(text, idx, surrogates_possible)?;
                    *key = k;
                    idx = next;
                }
                break;
            }
            if (ch == b'}' && is_obj) || (ch == b']' && !is_obj) {
                idx += 1;
                let done = match stack.pop().expect("a frame") {
                    Frame::Arr(items) => Node::Arr(items),
                    Frame::Obj(entries, _, _) => Node::Obj(entries),
                };
                nodes.push(done);
                id = (nodes.len() - 1) as u32;
                continue;
            }
            return Err(unexpected(text, idx));
        }
    }
}

fn unexpected(text: &[u8], idx: usize) -> ParseError {
    match repr_ascii_char(text[idx]) {
        Some(r) => fail(text, idx, &format!("unexpected character {r}")),
        None => ParseError::Defer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(s: &str) -> String {
        match parse(s.as_bytes(), false) {
            Err(ParseError::Reason(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reasons() {
        assert_eq!(reason("{\"a\" 1}"), "not JSON: expected ':' at character 5");
        assert_eq!(reason("[1,"), "not JSON: expected a value at end of input (truncated?)");
        assert_eq!(reason("\"ab"), "not JSON: unterminated string starting at at character 0");
        assert_eq!(reason("[1.]"), "not JSON: unexpected character '.' at character 2");
        assert_eq!(parse("é1".as_bytes(), false).unwrap_err(), ParseError::Defer);
    }

    #[test]
    fn duplicates_keep_first_position_last_value() {
        let doc = parse(b"{\"a\":1,\"b\":2,\"a\":3}", false).unwrap();
        match doc.node(doc.root) {
            Node::Obj(e) => {
                assert_eq!(e.len(), 2);
                assert!(e[0].0.eq_ascii("a"));
                assert!(matches!(doc.node(e[0].1), Node::Num(Num::Int(3))));
            }
            _ => panic!(),
        }
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let depth = 200_000;
        let text = "[".repeat(depth) + &"]".repeat(depth);
        assert!(parse(text.as_bytes(), false).is_ok());
    }
}
