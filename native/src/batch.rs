//! BIP-340 batch verification (check 8 over many lines at once).
//!
//! `csrc/bip340_batch.c` checks a batch with one multi-scalar multiplication over
//! libsecp256k1's arithmetic, reading each key's multiples from its `KeyTable`. A batch
//! that fails is split in halves and re-checked, down to single verifies, so every `false`
//! comes from libsecp256k1's own one-signature verify and a batch only ever says "all of
//! these verify" (wrong with a probability of about 2^-128).
//!
//! The weights come from SHA-256 over the whole batch (keys, signatures and messages),
//! as BIP-340 allows: the verdicts are reproducible, and a signer cannot know a batch's
//! weights before choosing its signature.

use std::os::raw::c_int;
use std::sync::Arc;

use secp256k1::schnorr::Signature;
use secp256k1::XOnlyPublicKey;
use sha2::{Digest, Sha256};

extern "C" {
    fn snap_bip340_key_table_size() -> usize;
    fn snap_bip340_key_table(key_x: *const u8, table: *mut u8) -> c_int;
    fn snap_bip340_batch_verify(sigs: *const u8, chals: *const u8, weights: *const u8,
                                key_of: *const u32, n: usize, tables: *const *const u8,
                                k: usize) -> c_int;
}

/// A key's odd multiples, as the batch sum reads them (`csrc/bip340_batch.c`): built once
/// per key and kept with it in the checking thread's cache (`check::KeyCache`).
pub struct KeyTable(Box<[u8]>);

impl KeyTable {
    /// The table of the x-only key `key_x`, or `None` when `key_x` is no curve point's x.
    pub fn of(key_x: &[u8; 32]) -> Option<KeyTable> {
        // SAFETY: the buffer holds the size the C side asks for; it writes no more.
        unsafe {
            let mut table = vec![0u8; snap_bip340_key_table_size()].into_boxed_slice();
            (snap_bip340_key_table(key_x.as_ptr(), table.as_mut_ptr()) == 1).then_some(KeyTable(table))
        }
    }
}

/// The x-only key `key_x` parsed for the single verify and with its table for the batch
/// sum, or `None` when `key_x` is no curve point's x.
pub fn parse_key(key_x: &[u8; 32]) -> Option<(XOnlyPublicKey, Arc<KeyTable>)> {
    let key = XOnlyPublicKey::from_byte_array(*key_x).ok()?;
    Some((key, Arc::new(KeyTable::of(key_x)?)))
}

impl std::fmt::Debug for KeyTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyTable")
    }
}

/// One signature to check: the key's x coordinate, the parsed key and its table, r || s,
/// the 32-byte message (SNAP signs a SHA-256 digest).
#[derive(Debug)]
pub struct Pending {
    pub key_x: [u8; 32],
    pub key: XOnlyPublicKey,
    pub table: Arc<KeyTable>,
    pub sig: [u8; 64],
    pub msg: [u8; 32],
}

/// Below this many signatures a failed batch is settled one by one.
const SINGLE_BELOW: usize = 8;
/// The bounds of a batch's size. The size follows the share of bad signatures seen so
/// far (about a quarter of one over that share): clean traffic gets large batches, whose
/// sums are cheapest per signature, and traffic with many bad signatures small ones,
/// which rarely fail.
const SMALLEST: usize = 8;
const LARGEST: usize = 256;

/// The share of bad signatures seen so far, forgetting slowly.
struct BadShare {
    bad: f64,
    seen: f64,
}

impl BadShare {
    fn new() -> Self {
        BadShare { bad: 1.0, seen: 64.0 }
    }
    fn record(&mut self, verdicts: &[bool]) {
        self.seen += verdicts.len() as f64;
        self.bad += verdicts.iter().filter(|v| !**v).count() as f64;
        if self.seen > 4096.0 {
            self.seen /= 2.0;
            self.bad /= 2.0;
        }
    }
    fn batch_size(&self) -> usize {
        let share = self.bad / self.seen;
        ((0.25 / share) as usize).clamp(SMALLEST, LARGEST)
    }
}

fn challenge_prefix() -> Sha256 {
    let tag = Sha256::digest(b"BIP0340/challenge");
    let mut hasher = Sha256::new();
    hasher.update(tag);
    hasher.update(tag);
    hasher
}

/// One libsecp256k1 verify.
pub fn verify_one(item: &Pending) -> bool {
    secp256k1::schnorr::verify(&Signature::from_byte_array(item.sig), &item.msg, &item.key).is_ok()
}

/// Do all of `items` verify? One batch equation; `false` says that at least one does not.
pub fn batch_holds(items: &[&Pending]) -> bool {
    let n = items.len();
    if n == 0 {
        return true;
    }
    let prefix = challenge_prefix();
    let mut seed = Sha256::new();
    seed.update(b"snap-spark/bip340-batch");
    let mut keys: Vec<[u8; 32]> = Vec::new();
    let mut tables: Vec<*const u8> = Vec::new();
    let mut key_of: Vec<u32> = Vec::with_capacity(n);
    let mut sigs: Vec<u8> = Vec::with_capacity(64 * n);
    let mut chals: Vec<u8> = Vec::with_capacity(32 * n);
    for item in items {
        // few keys per batch (they come sorted by key): a scan beats a map
        let index = match keys.iter().rposition(|k| *k == item.key_x) {
            Some(found) => found,
            None => {
                keys.push(item.key_x);
                tables.push(item.table.0.as_ptr());
                keys.len() - 1
            }
        };
        key_of.push(index as u32);
        sigs.extend_from_slice(&item.sig);
        let mut challenge = prefix.clone();
        challenge.update(&item.sig[..32]);
        challenge.update(item.key_x);
        challenge.update(item.msg);
        chals.extend_from_slice(&challenge.finalize());
        seed.update(item.key_x);
        seed.update(item.sig);
        seed.update(item.msg);
    }
    let seed: [u8; 32] = seed.finalize().into();
    let mut weights: Vec<u8> = Vec::with_capacity(16 * n);
    for i in 0..n {
        let mut weight = Sha256::new();
        weight.update(seed);
        weight.update((i as u64).to_le_bytes());
        weights.extend_from_slice(&weight.finalize()[..16]);
    }
    // SAFETY: every buffer holds exactly what the C function reads: n * 64, n * 32,
    // n * 16 bytes and n indices, all below k = tables.len(); each table is a whole one
    // (`KeyTable::of`) and lives in `items` for the call.
    unsafe {
        snap_bip340_batch_verify(sigs.as_ptr(), chals.as_ptr(), weights.as_ptr(), key_of.as_ptr(), n,
                                 tables.as_ptr(), tables.len()) == 1
    }
}

fn settle(items: &[&Pending], out: &mut [bool]) -> bool {
    if items.len() < SINGLE_BELOW {
        for (item, verdict) in items.iter().zip(out.iter_mut()) {
            *verdict = verify_one(item);
        }
        return out.iter().all(|v| *v);
    }
    if batch_holds(items) {
        out.fill(true);
        return true;
    }
    let half = items.len() / 2;
    let (left, right) = out.split_at_mut(half);
    settle(&items[..half], left);
    settle(&items[half..], right);
    false
}

/// Whether each of `items` verifies, exactly as one verify each would say.
///
/// The signatures are taken key by key (a batch's signatures under one key share one
/// point of its sum), in batches whose size adapts to how often batches fail.
pub fn verify_all(items: &[&Pending]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].key_x);
    let sorted: Vec<&Pending> = order.iter().map(|&i| items[i]).collect();
    let mut verdicts = vec![false; items.len()];
    let mut share = BadShare::new();
    let mut start = 0;
    while start < sorted.len() {
        let end = (start + share.batch_size()).min(sorted.len());
        settle(&sorted[start..end], &mut verdicts[start..end]);
        share.record(&verdicts[start..end]);
        start = end;
    }
    let mut out = vec![false; items.len()];
    for (k, &i) in order.iter().enumerate() {
        out[i] = verdicts[k];
    }
    out
}
