"""BIP-340 batch verification in the native core (check 8 over many lines at once).

The native core checks signatures in batches (``native/src/batch.rs``,
``native/csrc/bip340_batch.c``) and re-checks a failed batch down to single verifies. These
tests hold it to libsecp256k1's one-signature verify as coincurve calls it, which is an
independent build of the library used here as the reference:

- every batch of valid signatures holds, at every size, with one key, a few keys or many
  (each key's table of multiples built by the C side, as the checking threads keep them);
- one bad signature anywhere in a batch breaks it, for each way a signature can be bad:
  a flipped bit, ``s`` negated, ``r`` not below p or not an x-coordinate, ``s`` not below
  the group order, a signature made with an odd-y nonce point, another key, another message;
- two bad signatures made to cancel in an unweighted sum still break a batch (the weights);
- for Hypothesis-drawn mixes, and for a long run with bad signatures scattered and in runs,
  the batched verdicts equal one verify each, item by item.

Private keys are derived from fixed seeds and never printed: failures name item indices.
"""

from __future__ import annotations

import hashlib
import importlib
import random
from types import ModuleType

import pytest
from coincurve import PrivateKey, PublicKeyXOnly
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: The group order and the field prime of secp256k1.
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
PRIVS = [hashlib.sha256(b"snap-spark batch verify key %d" % i).digest() for i in range(40)]
KEYS = [PrivateKey(p) for p in PRIVS]
XONLY = [k.public_key_xonly.format() for k in KEYS]

Item = tuple[bytes, bytes, bytes]


@pytest.fixture(scope="module")
def native() -> ModuleType:
    try:
        return importlib.import_module("snap_spark._native")
    except ImportError as exc:
        pytest.fail(f"the native checking core is not built ({exc}); run `make native`",
                    pytrace=False)


def msg(i: int) -> bytes:
    return hashlib.sha256(b"message %d" % i).digest()


def good(key: int, i: int) -> Item:
    m = msg(i)
    return XONLY[key], KEYS[key].sign_schnorr(m, hashlib.sha256(b"aux %d" % i).digest()), m


def reference(items: list[Item]) -> list[bool]:
    """One libsecp256k1 verify per item, through coincurve."""
    out = []
    for key, sig, m in items:
        try:
            out.append(bool(PublicKeyXOnly(key).verify(sig, m)))
        except ValueError:  # no such key: nothing verifies under it
            out.append(False)
    return out


def _tagged(tag: str, data: bytes) -> bytes:
    t = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(t + t + data).digest()


def odd_nonce_signature(key: int, m: bytes) -> bytes:
    """A signature made as BIP-340 says except that the nonce point R keeps an odd y:
    ``s = k + e d`` satisfies ``s G = R + e P`` with the real R, which single verification
    refuses (it wants R with an even y). A batch that lifted r to the wrong point would
    accept it."""
    d = int.from_bytes(PRIVS[key], "big")
    if KEYS[key].public_key.format()[0] == 3:  # P = dG must have an even y: negate d
        d = N - d
    for attempt in range(1000):
        k = int.from_bytes(hashlib.sha256(b"odd nonce %d" % attempt + m).digest(), "big") % N
        point = PrivateKey(k.to_bytes(32, "big")).public_key.format()
        if point[0] == 3:  # odd y: what is wanted here
            r = point[1:]
            e = int.from_bytes(_tagged("BIP0340/challenge", r + XONLY[key] + m), "big") % N
            return r + ((k + e * d) % N).to_bytes(32, "big")
    raise AssertionError("no odd nonce point found")


def not_an_x(start: int) -> bytes:
    """The first x >= start below p with no curve point (x^3 + 7 not a square)."""
    x = start
    while True:
        y2 = (pow(x, 3, P) + 7) % P
        if pow(y2, (P - 1) // 2, P) != 1:
            return x.to_bytes(32, "big")
        x += 1


def corrupt(item: Item, how: str, rng: random.Random) -> Item:
    key, sig, m = item
    r, s = sig[:32], int.from_bytes(sig[32:], "big")
    if how == "flip-s":
        bit = rng.randrange(256)
        return key, r + (s ^ (1 << bit)).to_bytes(32, "big"), m
    if how == "flip-r":
        flipped = bytearray(sig)
        flipped[rng.randrange(32)] ^= 1 << rng.randrange(8)
        return key, bytes(flipped), m
    if how == "negate-s":
        return key, r + (N - s).to_bytes(32, "big"), m
    if how == "r-not-below-p":
        return key, (P + rng.randrange(2**32 - 977)).to_bytes(32, "big") + sig[32:], m
    if how == "r-not-an-x":
        return key, not_an_x(rng.randrange(P // 2)) + sig[32:], m
    if how == "s-not-below-n":
        return key, r + (s + N if s + N < 2**256 else N).to_bytes(32, "big"), m
    if how == "s-zero":
        return key, r + bytes(32), m
    if how == "odd-nonce":
        return key, odd_nonce_signature(XONLY.index(key), m), m
    if how == "other-key":
        return XONLY[(XONLY.index(key) + 1) % len(XONLY)], sig, m
    if how == "other-message":
        return key, sig, hashlib.sha256(m).digest()
    raise ValueError(how)


WAYS = ("flip-s", "flip-r", "negate-s", "r-not-below-p", "r-not-an-x", "s-not-below-n",
        "s-zero", "odd-nonce", "other-key", "other-message")


def test_the_reference_refuses_every_corruption() -> None:
    """Each corruption really makes the signature bad (else the tests below prove little)."""
    rng = random.Random(1)
    for way in WAYS:
        item = corrupt(good(3, 7), way, rng)
        assert reference([good(3, 7), item]) == [True, False], way


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 31, 43, 44, 87, 88, 130, 300])
@pytest.mark.parametrize("keys", [1, 3, 40])
def test_valid_batches_hold(native: ModuleType, size: int, keys: int) -> None:
    items = [good(i % keys, i) for i in range(size)]
    assert all(reference(items))
    assert native.batch_holds(items)
    assert native.verify_signatures(items) == [True] * size


@pytest.mark.parametrize("way", WAYS)
def test_one_bad_signature_breaks_a_batch(native: ModuleType, way: str) -> None:
    rng = random.Random(way)
    items = [good(i % 3, i) for i in range(24)]
    for position in (0, 1, 11, 23):
        bad = list(items)
        bad[position] = corrupt(items[position], way, rng)
        assert not native.batch_holds(bad), (way, position)
        expected = [i != position for i in range(24)]
        assert reference(bad) == expected
        assert native.verify_signatures(bad) == expected, (way, position)
        assert native.verify_signatures(bad, batched=False) == expected, (way, position)
    # and in a large batch
    big = [good(i % 5, i) for i in range(200)]
    big[137] = corrupt(big[137], way, rng)
    assert not native.batch_holds(big), way
    assert native.verify_signatures(big) == [i != 137 for i in range(200)], way


def test_errors_that_cancel_in_a_plain_sum_break_a_batch(native: ModuleType) -> None:
    """s1 + d and s2 - d: each signature is bad, and their unweighted sum equals the good
    sum. Only the batch's random weights catch it, whether the keys are the same or not."""
    for keys in ((0, 0), (0, 1)):
        one, two = good(keys[0], 1), good(keys[1], 2)
        s1, s2 = int.from_bytes(one[1][32:], "big"), int.from_bytes(two[1][32:], "big")
        delta = 12345
        forged = [(one[0], one[1][:32] + ((s1 + delta) % N).to_bytes(32, "big"), one[2]),
                  (two[0], two[1][:32] + ((s2 - delta) % N).to_bytes(32, "big"), two[2])]
        assert reference(forged) == [False, False]
        assert not native.batch_holds(forged), keys
        assert not native.batch_holds([good(2, 3), *forged, good(2, 4)]), keys
        assert native.verify_signatures(forged * 10) == [False] * 20, keys


def test_a_key_that_is_no_point(native: ModuleType) -> None:
    items = [good(0, 1), (not_an_x(5), good(0, 2)[1], msg(2)), good(0, 3)]
    assert native.verify_signatures(items) == [True, False, True]
    assert not native.batch_holds(items)


def test_a_long_run_with_bad_signatures_scattered_and_in_runs(native: ModuleType) -> None:
    """2,000 signatures by 40 keys: clean stretches (the batches grow), a stretch with 3 %
    bad (they shrink), and a run of 30 bad in a row; the verdicts equal one verify each."""
    rng = random.Random(2026)
    items = [good(rng.randrange(40), i) for i in range(2000)]
    for i in range(800, 1600):
        if rng.random() < 0.03:
            items[i] = corrupt(items[i], rng.choice(WAYS), rng)
    for i in range(1700, 1730):
        items[i] = corrupt(items[i], "flip-s", rng)
    expected = reference(items)
    assert 40 < expected.count(False) < 100
    assert native.verify_signatures(items) == expected
    assert native.verify_signatures(items, batched=False) == expected


HYPOTHESIS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10**6),
                          st.none() | st.sampled_from(WAYS)), max_size=120),
       st.integers(0, 2**32))
def test_generated_mixes_equal_single_verifies(
        native: ModuleType, drawn: list[tuple[int, int, str | None]], seed: int) -> None:
    rng = random.Random(seed)
    items = [corrupt(good(key, i), way, rng) if way else good(key, i)
             for key, i, way in drawn]
    expected = reference(items)
    assert native.verify_signatures(items) == expected
    assert native.batch_holds(items) == all(expected)
