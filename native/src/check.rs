//! The stateless checks of one input line (1-5, 7, 8), equal to the reference core's
//! `parse_line` + `check_record` + `task_fields` on every output column.
//!
//! Checks, first failure wins: 1003 not JSON / not an object / a required field absent;
//! 1004 wrong type or broken constraint; 2005 a bad P2TR address; 1004 mixed networks;
//! 2004 timestamp drift (against the whole receipt second); then (after replay, decided
//! elsewhere) 2002 a request without `sig` and 2001 a signature that does not verify.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use secp256k1::XOnlyPublicKey;
use sha2::{Digest, Sha256};

use crate::batch::{parse_key, verify_all, KeyTable, Pending};
use crate::jcs;
use crate::json::{self, json_type, Doc, JStr, Node, Num, ParseError};
use crate::text::{fmt_seconds, table_text};

pub const INVALID_MESSAGE: i32 = 1003;
pub const INVALID_PAYLOAD: i32 = 1004;
pub const SIGNATURE_INVALID: i32 = 2001;
pub const SIGNATURE_MISSING: i32 = 2002;
pub const TIMESTAMP_EXPIRED: i32 = 2004;
pub const IDENTITY_INVALID: i32 = 2005;

const REQUIRED_FIELDS: [&str; 7] = ["id", "version", "from", "type", "method", "payload", "timestamp"];
const MESSAGE_FIELDS: [&str; 9] = ["id", "version", "from", "to", "type", "method", "payload", "timestamp", "sig"];
/// The six task states (`messages.md` "Task States").
pub const STATES: [&str; 6] = ["submitted", "working", "input_required", "completed", "failed", "canceled"];
const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
const MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;
const MAX_EXACT_SIZE_ABOVE: usize = 10 * 1024 * 1024 - 4096;
const MAX_SAFE_INTEGER: i128 = (1i128 << 53) - 1;
const MISSING_CLOCK: &str = "a bare message line has no received_at; choose a receipt clock \
                             (--bare-clock now|message|<unix seconds>)";

/// Which clock gives the receipt time of a bare line (the reference's `ReceiptClock`).
#[derive(Clone, Copy, Debug)]
pub enum Clock {
    Refuse,
    Fixed(f64),
    Message,
}

/// Every output column of one line, and the verify call still to make (check 8).
#[derive(Default, Debug)]
pub struct LineOut {
    pub is_envelope: bool,
    pub source: Option<String>,
    pub envelope_received_at: Option<f64>,
    pub received_at: Option<f64>,
    pub msg_id: Option<String>,
    pub version: Option<String>,
    pub sender: Option<String>,
    pub recipient: Option<String>,
    pub msg_type: Option<String>,
    pub method: Option<String>,
    pub timestamp: Option<i64>,
    pub has_sig: bool,
    pub canonical_payload: Option<String>,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    pub task_state: Option<String>,
    pub pre_code: Option<i32>,
    pub pre_detail: Option<String>,
    pub auth_code: Option<i32>,
    pub auth_detail: Option<String>,
    pub needs_clock: bool,
    /// The reference core must decide this line (see `json::ParseError::Defer`).
    pub deferred: bool,
    pub pending: Option<Pending>,
}

/// Decoded P2TR addresses (at most `CACHED`) and parsed x-only keys with their tables of
/// multiples for the batch sum (at most `KEYS_CACHED`; a parse lifts the point, a square
/// root in the field, and a table costs about fifteen point additions).
///
/// A checking thread takes one from a pool kept for the process and gives it back when its
/// range is done (`take`, `give_back`), so the agents of one batch are known to the next:
/// traffic of thousands of agents met each of them again only in the next batch, which
/// paid the decode and the lift again for most of its lines.
#[derive(Default)]
pub struct KeyCache {
    addresses: HashMap<Vec<u8>, Result<(bool, [u8; 32]), String>>,
    keys: HashMap<[u8; 32], Option<(XOnlyPublicKey, Arc<KeyTable>)>>,
}

/// Addresses a `KeyCache` holds at most (about 6 MB).
const CACHED: usize = 1 << 16;
/// Keys a `KeyCache` holds at most (about 1.2 KB each with its table, 20 MB in all); when
/// full it starts again empty, so that the agents of the traffic now flowing are the ones
/// kept.
const KEYS_CACHED: usize = 1 << 14;
/// Caches kept between batches: one per checking thread at most.
static POOL: Mutex<Vec<KeyCache>> = Mutex::new(Vec::new());
/// Caches the pool keeps at most.
const POOLED: usize = 16;

impl KeyCache {
    /// A cache from the pool (an empty one when none is left).
    pub fn take() -> KeyCache {
        POOL.lock().ok().and_then(|mut pool| pool.pop()).unwrap_or_default()
    }

    /// Back to the pool, for the next range checked in this process.
    pub fn give_back(self) {
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOLED {
                pool.push(self);
            }
        }
    }

    fn decode(&mut self, address: &JStr) -> Result<(bool, [u8; 32]), String> {
        if let Some(hit) = self.addresses.get(&address.bytes) {
            return hit.clone();
        }
        let result = decode_p2tr(address);
        if self.addresses.len() < CACHED {
            self.addresses.insert(address.bytes.clone(), result.clone());
        }
        result
    }

    fn key(&mut self, program: &[u8; 32]) -> Option<(XOnlyPublicKey, Arc<KeyTable>)> {
        if let Some(hit) = self.keys.get(program) {
            return hit.clone();
        }
        let key = parse_key(program);
        if self.keys.len() >= KEYS_CACHED {
            self.keys.clear();
        }
        self.keys.insert(*program, key.clone());
        key
    }
}

const CHARSET: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const BECH32M_CONST: u32 = 0x2BC830A3;

fn polymod(values: impl Iterator<Item = u8>) -> u32 {
    const GEN: [u32; 5] = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3];
    let mut chk: u32 = 1;
    for v in values {
        let top = chk >> 25;
        chk = ((chk & 0x1FFFFFF) << 5) ^ v as u32;
        for (i, g) in GEN.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

/// A strict P2TR address: `(is_mainnet, program)`, or the reference's reason.
pub fn decode_p2tr(address: &JStr) -> Result<(bool, [u8; 32]), String> {
    let length = address.char_len();
    if length != 62 {
        return Err(format!("P2TR address must be 62 characters, got {length}"));
    }
    let s = &address.bytes;
    if address.lone || !s.is_ascii() || s.iter().any(|c| c.is_ascii_uppercase()) {
        return Err("P2TR address must be lowercase ASCII".into());
    }
    let prefix = &s[..4];
    if prefix != b"bc1p" && prefix != b"tb1p" {
        let shown = json::repr_ascii(prefix).expect("ASCII");
        return Err(format!("P2TR address must start with bc1p or tb1p, not {shown}"));
    }
    let bad = || "bad bech32m checksum or character".to_string();
    if s.iter().any(|&c| !(33..=126).contains(&c)) {
        return Err(bad());
    }
    let pos = s.iter().rposition(|&c| c == b'1').unwrap_or(0);
    if pos < 1 || pos + 7 > s.len() || s.len() > 90 {
        return Err(bad());
    }
    let mut data = Vec::with_capacity(s.len() - pos - 1);
    for &c in &s[pos + 1..] {
        match CHARSET.iter().position(|&x| x == c) {
            Some(v) => data.push(v as u8),
            None => return Err(bad()),
        }
    }
    let hrp = &s[..pos];
    let expanded = hrp
        .iter()
        .map(|c| c >> 5)
        .chain(std::iter::once(0))
        .chain(hrp.iter().map(|c| c & 31))
        .chain(data.iter().copied());
    let constant = polymod(expanded);
    if constant != 1 && constant != BECH32M_CONST {
        return Err(bad());
    }
    if constant != BECH32M_CONST {
        return Err("bech32 (BIP-173) checksum; witness v1 needs bech32m (BIP-350)".into());
    }
    let data = &data[..data.len() - 6];
    if data.is_empty() {
        return Err("no witness version or program before the checksum".into());
    }
    if data[0] != 1 {
        return Err(format!("witness version {}, P2TR needs version 1", data[0]));
    }
    let mut acc: u32 = 0;
    let mut bits: u32 = 0;
    let mut program = Vec::with_capacity(33);
    for &v in &data[1..] {
        acc = ((acc << 5) | v as u32) & 0xFFF;
        bits += 5;
        while bits >= 8 {
            bits -= 8;
            program.push(((acc >> bits) & 0xFF) as u8);
        }
    }
    if bits >= 5 || ((acc << (8 - bits)) & 0xFF) != 0 {
        return Err("non-zero padding bits in the witness program".into());
    }
    if program.len() != 32 {
        return Err(format!("witness program is {} bytes, P2TR needs 32", program.len()));
    }
    let mainnet = hrp == b"bc";
    if !mainnet && hrp != b"tb" {
        return Err("bad bech32m checksum or character".into()); // unreachable: see above
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(&program);
    Ok((mainnet, out))
}

/// One parsed input line (the reference's `Record`).
struct Record {
    doc: Option<Doc>,
    message: Option<u32>,
    received_at: Option<f64>,
    source: Option<String>,
    is_envelope: bool,
    size: usize,
    error: Option<(i32, String)>,
    deferred: bool,
}

impl Record {
    fn failed(detail: String) -> Record {
        Record { doc: None, message: None, received_at: None, source: None, is_envelope: false,
                 size: 0, error: Some((INVALID_MESSAGE, detail)), deferred: false }
    }
    fn defer() -> Record {
        let mut r = Record::failed(String::new());
        r.deferred = true;
        r
    }
}

fn is_py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn load_text(text: &[u8], lone_possible: bool) -> Result<Doc, ParseError> {
    if text.starts_with(b"\xEF\xBB\xBF") {
        return Err(ParseError::Reason("not JSON: starts with a byte order mark".into()));
    }
    json::parse(text, lone_possible)
}

fn number_seconds(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Big(f) | Num::Float(f) => f,
    }
}

fn parse_line(raw: Option<&[u8]>) -> Record {
    let Some(raw) = raw else {
        return Record::failed("line could not be read".into());
    };
    // a leading UTF-8 byte order mark is not part of the line's JSON text (RFC 8259 lets a
    // parser ignore it; the reference's `parse_line` does)
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    let loaded = match std::str::from_utf8(raw) {
        Err(e) => Err(ParseError::Reason(format!("not valid UTF-8 (byte {})", e.valid_up_to()))),
        Ok(_) => load_text(raw, false),
    };
    let doc = match loaded {
        Ok(doc) => doc,
        Err(err) => {
            if raw.iter().all(|b| is_py_space(*b)) {
                let mut r = Record::failed("empty line".into());
                r.size = raw.len();
                return r;
            }
            return match err {
                ParseError::Defer => Record::defer(),
                ParseError::Reason(reason) => {
                    let mut r = Record::failed(reason);
                    r.size = raw.len();
                    r
                }
            };
        }
    };
    let root = doc.root;
    let envelope = match doc.node(root) {
        Node::Obj(entries) => {
            entries.iter().any(|(k, _)| k.eq_ascii("message"))
                && !entries.iter().any(|(k, _)| MESSAGE_FIELDS.iter().any(|f| k.eq_ascii(f)))
        }
        _ => false,
    };
    if !envelope {
        return Record { doc: Some(doc), message: Some(root), received_at: None, source: None,
                        is_envelope: false, size: raw.len(), error: None, deferred: false };
    }
    let mut record = Record { doc: None, message: None, received_at: None, source: None,
                              is_envelope: true, size: raw.len(), error: None, deferred: false };
    record.source = doc.get(root, "source").and_then(|id| doc.str_of(id)).map(table_text);
    if let Some(id) = doc.get(root, "received_at") {
        let seconds = match doc.node(id) {
            Node::Null => None,
            Node::Num(n) => Some(number_seconds(*n)),
            _ => Some(f64::NAN),
        };
        if let Some(seconds) = seconds {
            // `received < 0` in the reference compares the exact value; only its sign matters
            let negative = match doc.node(id) {
                Node::Num(Num::Int(i)) => *i < 0,
                _ => seconds < 0.0,
            };
            if !seconds.is_finite() || negative {
                record.error = Some((INVALID_MESSAGE,
                    "envelope received_at must be non-negative unix seconds (a number)".into()));
                return record;
            }
            record.received_at = Some(seconds);
        }
    }
    let inner = doc.get(root, "message").expect("an envelope has a message");
    if let Node::Str(text) = doc.node(inner) {
        match load_text(&text.bytes, text.lone) {
            Ok(inner_doc) => {
                record.size = text.bytes.len();
                record.message = Some(inner_doc.root);
                record.doc = Some(inner_doc);
            }
            Err(ParseError::Defer) => return Record::defer(),
            Err(ParseError::Reason(reason)) => {
                record.error = Some((INVALID_MESSAGE, format!("envelope message text: {reason}")));
            }
        }
        return record;
    }
    if matches!(doc.node(inner), Node::Obj(_)) && raw.len() > MAX_EXACT_SIZE_ABOVE {
        // the reference re-measures such a message with orjson's own number forms
        return Record::defer();
    }
    record.message = Some(inner);
    record.doc = Some(doc);
    record
}

struct Failure(i32, String);

fn payload_err(detail: impl Into<String>) -> Failure {
    Failure(INVALID_PAYLOAD, detail.into())
}

fn string_field<'a>(doc: &'a Doc, msg: u32, name: &str) -> Result<&'a JStr, Failure> {
    let id = doc.get(msg, name).expect("required field present");
    match doc.node(id) {
        Node::Str(s) => Ok(s),
        other => Err(payload_err(format!("{name} must be a string, got {}", json_type(other)))),
    }
}

fn full_match(s: &JStr, min: usize, max: usize, ok: impl Fn(u8) -> bool) -> bool {
    !s.lone && (min..=max).contains(&s.bytes.len()) && s.bytes.iter().all(|&c| ok(c))
}

/// `^[0-9]+\.[0-9]+$`
fn is_version(s: &JStr) -> bool {
    let b = &s.bytes;
    match b.iter().position(|&c| c == b'.') {
        Some(dot) => dot > 0 && dot + 1 < b.len()
            && b[..dot].iter().all(u8::is_ascii_digit) && b[dot + 1..].iter().all(u8::is_ascii_digit),
        None => false,
    }
}

/// `^[a-z]+/[a-z_]+$`
fn is_method(s: &JStr) -> bool {
    let b = &s.bytes;
    match b.iter().position(|&c| c == b'/') {
        Some(slash) => slash > 0 && slash + 1 < b.len()
            && b[..slash].iter().all(u8::is_ascii_lowercase)
            && b[slash + 1..].iter().all(|&c| c.is_ascii_lowercase() || c == b'_'),
        None => false,
    }
}

fn check_timestamp(node: &Node) -> Result<i64, Failure> {
    let ts: i128 = match node {
        Node::Num(Num::Int(i)) => *i,
        Node::Num(Num::Big(_)) => i128::MAX,
        Node::Num(Num::Float(f)) if f.is_finite() && f.fract() == 0.0 => *f as i128,
        Node::Num(_) => return Err(payload_err("timestamp must be an integer number of seconds")),
        other => return Err(payload_err(format!("timestamp must be an integer, got {}", json_type(other)))),
    };
    if !(0..=MAX_SAFE_INTEGER).contains(&ts) {
        return Err(payload_err("timestamp out of range 0..2^53-1"));
    }
    Ok(ts as i64)
}

/// Checks 1 and 2 (`_structure` of the reference); fills `out` as it goes.
fn structure(doc: &Doc, msg: u32, out: &mut LineOut, size: usize) -> Result<u32, Failure> {
    for name in REQUIRED_FIELDS {
        if doc.get(msg, name).is_none() {
            return Err(Failure(INVALID_MESSAGE, format!("required field '{name}' is absent")));
        }
    }
    let text_of = |name: &str| doc.get(msg, name).and_then(|id| doc.str_of(id)).map(table_text);
    out.msg_id = text_of("id");
    out.sender = text_of("from");
    out.msg_type = text_of("type");
    out.method = text_of("method");
    out.version = text_of("version");
    out.recipient = text_of("to");
    if size > MAX_MESSAGE_BYTES {
        return Err(payload_err(format!("message is {size} bytes, over the 10 MiB limit")));
    }
    let id = string_field(doc, msg, "id")?;
    if !full_match(id, 1, 128, |c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        return Err(payload_err("id must be 1-128 characters of [A-Za-z0-9_-]"));
    }
    if !is_version(string_field(doc, msg, "version")?) {
        return Err(payload_err("version must match ^\\d+\\.\\d+$ (ASCII digits)"));
    }
    string_field(doc, msg, "from")?;
    if let Some(to) = doc.get(msg, "to") {
        if !matches!(doc.node(to), Node::Str(_)) {
            return Err(payload_err(format!("to must be a string when present, got {}",
                                           json_type(doc.node(to)))));
        }
    }
    let kind = string_field(doc, msg, "type")?;
    if !(kind.eq_ascii("request") || kind.eq_ascii("response") || kind.eq_ascii("event")) {
        return Err(payload_err("type must be one of request, response, event"));
    }
    let method = string_field(doc, msg, "method")?;
    if method.char_len() > 64 || method.lone || !is_method(method) {
        return Err(payload_err("method must be 1-64 characters matching ^[a-z]+/[a-z_]+$"));
    }
    let payload = doc.get(msg, "payload").expect("required");
    if !matches!(doc.node(payload), Node::Obj(_)) {
        return Err(payload_err(format!("payload must be an object, got {}",
                                       json_type(doc.node(payload)))));
    }
    out.timestamp = Some(check_timestamp(doc.node(doc.get(msg, "timestamp").expect("required")))?);
    if let Some(sig) = doc.get(msg, "sig") {
        let Node::Str(sig) = doc.node(sig) else {
            return Err(payload_err(format!("sig must be a string, got {}", json_type(doc.node(sig)))));
        };
        if !full_match(sig, 128, 128, |c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
            return Err(payload_err("sig must be 128 lowercase hex characters"));
        }
        out.has_sig = true;
    }
    let canonical = jcs::canonicalize(doc, payload).map_err(payload_err)?;
    if canonical.len() > MAX_PAYLOAD_BYTES {
        return Err(payload_err(format!("JCS(payload) is {} bytes, over the 1 MiB limit",
                                       canonical.len())));
    }
    out.canonical_payload = Some(String::from_utf8(canonical).expect("JCS of valid Unicode"));
    Ok(payload)
}

/// The whole second of a receipt time, which the drift check (2004) compares with the
/// timestamp (the spec's `Math.floor(Date.now() / 1000)`); the reference's `receipt_second`.
/// Receipt order and the replay window keep the full time.
fn receipt_second(received: f64) -> f64 {
    received.floor()
}

/// The reason of a 2004, the reference's `raise_expired`: the offset is from the receipt
/// second, which the reason names when the receipt time has a fraction.
fn expired(timestamp: i64, received: f64, max_drift: f64) -> String {
    let second = receipt_second(received);
    let offset = timestamp as f64 - second;
    let direction = if offset > 0.0 { "ahead of" } else { "behind" };
    if second == received {
        format!("timestamp {timestamp} is {}s {direction} receipt time {} (max drift {}s)",
                fmt_seconds(offset.abs()), fmt_seconds(received), fmt_seconds(max_drift))
    } else {
        format!("timestamp {timestamp} is {}s {direction} receipt second {} (receipt time {}, \
                 max drift {}s)",
                fmt_seconds(offset.abs()), fmt_seconds(second), fmt_seconds(received),
                fmt_seconds(max_drift))
    }
}

fn task_fields(doc: &Doc, payload: u32, out: &mut LineOut) {
    let text = |id: Option<u32>| id.and_then(|i| doc.str_of(i)).map(table_text);
    match doc.get(payload, "task") {
        Some(task) if matches!(doc.node(task), Node::Obj(_)) => {
            out.task_id = text(doc.get(task, "id"));
            out.context_id = text(doc.get(task, "contextId"));
            let is_response = out.msg_type.as_deref() == Some("response");
            if is_response && out.task_id.as_deref().is_some_and(|t| !t.is_empty()) {
                let state = doc
                    .get(task, "status")
                    .filter(|s| matches!(doc.node(*s), Node::Obj(_)))
                    .and_then(|s| doc.get(s, "state"))
                    .and_then(|s| doc.str_of(s));
                if let Some(state) = state {
                    if let Some(known) = STATES.iter().find(|name| state.eq_ascii(name)) {
                        out.task_state = Some((*known).to_string());
                    }
                }
            }
        }
        _ => out.task_id = text(doc.get(payload, "taskId")),
    }
}

/// Checks 1-5, 7 and the preparation of 8 for a parsed message (`check_message`).
fn check_message(doc: &Doc, msg: u32, record: &Record, clock: Clock, max_drift: f64,
                 keys: &mut KeyCache, out: &mut LineOut) {
    let Node::Obj(_) = doc.node(msg) else {
        out.pre_code = Some(INVALID_MESSAGE);
        out.pre_detail = Some(format!("message is not a JSON object but {}", json_type(doc.node(msg))));
        return;
    };
    let payload = match structure(doc, msg, out, record.size) {
        Ok(payload) => payload,
        Err(Failure(code, detail)) => {
            out.pre_code = Some(code);
            out.pre_detail = Some(detail);
            return;
        }
    };
    // from here on the message is well formed: the task columns are known
    task_fields(doc, payload, out);
    let sender_text = doc.str_of(doc.get(msg, "from").expect("required")).expect("a string");
    let (sender_main, program) = match keys.decode(sender_text) {
        Ok(v) => v,
        Err(detail) => {
            out.pre_code = Some(IDENTITY_INVALID);
            out.pre_detail = Some(format!("from: {detail}"));
            return;
        }
    };
    let to = doc.get(msg, "to").and_then(|id| doc.str_of(id));
    if let Some(to_text) = to {
        match keys.decode(to_text) {
            Err(detail) => {
                out.pre_code = Some(IDENTITY_INVALID);
                out.pre_detail = Some(format!("to: {detail}"));
                return;
            }
            Ok((to_main, _)) if to_main != sender_main => {
                let name = |main: bool| if main { "mainnet" } else { "testnet" };
                out.pre_code = Some(INVALID_PAYLOAD);
                out.pre_detail = Some(format!("from is {} but to is {}: mixed networks",
                                              name(sender_main), name(to_main)));
                return;
            }
            Ok(_) => {}
        }
    }
    let timestamp = out.timestamp.expect("checked");
    let received = match (record.received_at, clock) {
        (Some(at), _) => at,
        (None, Clock::Fixed(v)) => v,
        (None, Clock::Message) => timestamp as f64,
        (None, Clock::Refuse) => {
            // the reference replaces the whole outcome with this one (MissingReceiptTime)
            let (is_env, source, env_at) = (out.is_envelope, out.source.take(), out.envelope_received_at);
            *out = LineOut { is_envelope: is_env, source, envelope_received_at: env_at,
                             pre_code: Some(INVALID_MESSAGE), pre_detail: Some(MISSING_CLOCK.into()),
                             needs_clock: true, ..LineOut::default() };
            return;
        }
    };
    out.received_at = Some(received); // the full time: receipt order and the replay window
    if (receipt_second(received) - timestamp as f64).abs() > max_drift {
        out.pre_code = Some(TIMESTAMP_EXPIRED);
        out.pre_detail = Some(expired(timestamp, received, max_drift));
        return;
    }
    // checks 7 and 8
    if !out.has_sig {
        if out.msg_type.as_deref() == Some("request") {
            out.auth_code = Some(SIGNATURE_MISSING);
            out.auth_detail = Some("request has no sig".into());
        }
        return;
    }
    let Some((key, table)) = keys.key(&program) else {
        out.auth_code = Some(SIGNATURE_INVALID);
        out.auth_detail = Some("from's witness program is not a valid x-only public key".into());
        return;
    };
    let field = |name: &str| doc.get(msg, name).and_then(|id| doc.str_of(id)).map(|s| s.bytes.as_slice());
    let mut hasher = Sha256::new();
    hasher.update(field("id").unwrap_or_default());
    hasher.update([0u8]);
    hasher.update(field("from").unwrap_or_default());
    hasher.update([0u8]);
    hasher.update(field("to").unwrap_or_default());
    hasher.update([0u8]);
    hasher.update(field("type").unwrap_or_default());
    hasher.update([0u8]);
    hasher.update(field("method").unwrap_or_default());
    hasher.update([0u8]);
    hasher.update(out.canonical_payload.as_deref().unwrap_or_default().as_bytes());
    hasher.update([0u8]);
    hasher.update(timestamp.to_string().as_bytes());
    let digest: [u8; 32] = hasher.finalize().into();
    let sig_hex = field("sig").expect("checked");
    let mut sig = [0u8; 64];
    for (i, pair) in sig_hex.chunks(2).enumerate() {
        let nibble = |c: u8| if c.is_ascii_digit() { c - b'0' } else { c - b'a' + 10 };
        sig[i] = (nibble(pair[0]) << 4) | nibble(pair[1]);
    }
    out.pending = Some(Pending { key_x: program, key, table, sig, msg: digest });
}

/// All checks of one line but the signature verify itself (left in `pending` for
/// `finish_all`).
pub fn check_line(raw: Option<&[u8]>, read_error: Option<&str>, clock: Clock, max_drift: f64,
                  keys: &mut KeyCache) -> LineOut {
    let record = parse_line(raw);
    let mut out = LineOut { deferred: record.deferred, ..LineOut::default() };
    if record.deferred {
        return out;
    }
    out.is_envelope = record.is_envelope;
    out.source = record.source.clone();
    out.envelope_received_at = record.received_at;
    if let Some(reason) = read_error {
        out.pre_code = Some(INVALID_MESSAGE);
        out.pre_detail = Some(format!("file could not be read: {reason}"));
        return out;
    }
    if let Some((code, detail)) = &record.error {
        out.pre_code = Some(*code);
        out.pre_detail = Some(detail.clone()).filter(|d| !d.is_empty());
        return out;
    }
    let doc = record.doc.as_ref().expect("a parsed line");
    let msg = record.message.expect("a message");
    check_message(doc, msg, &record, clock, max_drift, keys, &mut out);
    out
}

/// Check 8 for many lines: their signatures checked in batches (`batch::verify_all`), with
/// the verdicts one verify each would give.
pub fn finish_all(outs: &mut [LineOut]) {
    let verdicts = {
        let items: Vec<&Pending> = outs.iter().filter_map(|o| o.pending.as_ref()).collect();
        verify_all(&items)
    };
    let mut verdicts = verdicts.into_iter();
    for out in outs.iter_mut() {
        if out.pending.take().is_some() {
            settle_verdict(out, verdicts.next().expect("one verdict per signature"));
        }
    }
}

fn settle_verdict(out: &mut LineOut, verifies: bool) {
    if !verifies {
        out.auth_code = Some(SIGNATURE_INVALID);
        out.auth_detail = Some("signature does not verify against from's tweaked key".into());
    }
}
