"""Replay (check 6): the incremental step against an independent batch reference.

The reference below is the rule of docs/architecture.md, *Replay window*, written the plain
way (one dict of accepted receipt times, candidates in receipt order), as the code was
before the step; it shares nothing with ``replay_step``. Every way of feeding the step (in
order, cut into chunks with the state through JSON, in any arrival order, with expiry behind
a watermark) must end with the reference's verdicts and details.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snap_spark.protocol.errors import fmt_seconds
from snap_spark.protocol.replay import (
    EMPTY_STATE,
    IN_ORDER_EXPIRE_AT,
    ReplayCandidate,
    ReplayDecision,
    ReplayKeyState,
    _fold_general,
    duplicate_detail,
    expire,
    fold_candidates,
    fresh_state,
    replay_step,
    replayed_rows,
    resolve,
)
from snap_spark.protocol.validate import Checked

Key = tuple[str, str]
#: Per candidate row: (error code, detail) as the reference gives it.
Verdicts = dict[int, tuple[int | None, str]]


def reference(items: Sequence[Checked], window: float) -> list[tuple[int | None, str]]:
    """Final (code, detail) per item: the rule as written in docs/architecture.md,
    *Replay window*."""
    results = [(it.stateless_code, it.stateless_detail) for it in items]
    order = sorted((i for i, it in enumerate(items) if it.pre_code is None),
                   key=lambda i: items[i].received_at or 0.0)
    accepted: dict[Key, float] = {}
    for i in order:
        it = items[i]
        key = (str(it.sender), str(it.msg_id))
        at = it.received_at or 0.0
        seen = accepted.get(key)
        if seen is not None and at - seen <= window:
            results[i] = (2006, f"same (from, id) accepted {fmt_seconds(at - seen)}s earlier "
                                f"(receipt time {fmt_seconds(seen)}, window "
                                f"{fmt_seconds(window)}s)")
        elif it.auth_code is None:
            accepted[key] = at
    return results


# -- traffic ----------------------------------------------------------------------------------

KEYS = [("bc1pa", "m1"), ("bc1pa", "m2"), ("bc1pb", "m1")]
# Quarter seconds are exact in binary, so receipt time + delay - lateness is exact too.
times = st.one_of(st.integers(0, 40).map(lambda k: k * 10.0),  # many exact-window gaps
                  st.integers(0, 1600).map(lambda k: k / 4))
windows = st.sampled_from([120.0, 30.0, 0.0])


@st.composite
def traffic(draw: st.DrawFn, max_size: int = 30) -> list[Checked]:
    """Lines of a few keys: candidates (some forged) and a few that failed checks 1-5."""
    rows = draw(st.lists(st.tuples(st.sampled_from(KEYS), times,
                                   st.sampled_from([None, None, 2001, 2002]),
                                   st.sampled_from([None, None, None, 2004])),
                         max_size=max_size))
    return [
        Checked(sender=key[0], msg_id=key[1], received_at=at, auth_code=auth,
                auth_detail=f"auth {auth}" if auth else "", pre_code=pre,
                pre_detail="drift" if pre else "")
        for key, at, auth, pre in rows
    ]


def candidates(items: Sequence[Checked]) -> list[tuple[Key, ReplayCandidate]]:
    """The replay candidates, ref = row, tiebreak = input order (what a stream must pass)."""
    return [
        ((str(it.sender), str(it.msg_id)),
         ReplayCandidate(it.received_at or 0.0, it.auth_code, row, (row,)))
        for row, it in enumerate(items) if it.pre_code is None
    ]


def expected(items: Sequence[Checked], window: float) -> Verdicts:
    ref = reference(items, window)
    return {row: ref[row] for row, it in enumerate(items) if it.pre_code is None}


def as_verdict(items: Sequence[Checked], row: int, duplicate_of: float | None,
               window: float) -> tuple[int | None, str]:
    """(code, detail) of a row from the step's ``duplicate_of``."""
    it = items[row]
    if duplicate_of is None:
        return it.auth_code, it.auth_detail
    return 2006, duplicate_detail(duplicate_of, it.received_at or 0.0, window)


def through_json(state: ReplayKeyState) -> ReplayKeyState:
    return ReplayKeyState.from_plain(json.loads(json.dumps(state.to_plain())))


class Stream:
    """A running verdict map fed by steps, as a stream's sink would keep it."""

    def __init__(self, items: Sequence[Checked], window: float) -> None:
        self.items, self.window = items, window
        self.states: dict[Key, ReplayKeyState] = {}
        self.verdicts: Verdicts = {}

    def step(self, key: Key, candidate: ReplayCandidate) -> None:
        decision, state = replay_step(self.states.get(key, EMPTY_STATE), candidate,
                                      self.window)
        assert decision.exact
        self.states[key] = state
        row = candidate.ref
        assert isinstance(row, int)
        self.verdicts[row] = as_verdict(self.items, row, decision.duplicate_of, self.window)
        for changed in decision.changed:
            other = changed.ref
            assert isinstance(other, int)
            new = as_verdict(self.items, other, changed.duplicate_of, self.window)
            assert self.verdicts[other] != new, "reported as changed but is not"
            assert changed.code == new[0]
            assert (changed.detail(self.window) or self.items[other].auth_detail) == new[1]
            self.verdicts[other] = new
        # What the state remembers agrees with what was reported (later steps rely on it).
        for kept in state.verdicts():
            row = kept.ref
            assert isinstance(row, int)
            assert as_verdict(self.items, row, kept.duplicate_of, self.window) == \
                self.verdicts[row]
        assert through_json(state).last_accepted == state.last_accepted

    def json_round_trip(self) -> None:
        self.states = {key: through_json(state) for key, state in self.states.items()}

    def expire(self, watermark: float) -> None:
        for key, state in list(self.states.items()):
            kept = expire(state, watermark, self.window)
            assert all(c.received_at >= watermark for c in kept.candidates)
            if kept.is_empty:
                del self.states[key]
            else:
                self.states[key] = kept


def in_receipt_order(cands: list[tuple[Key, ReplayCandidate]]) -> list[int]:
    return sorted(range(len(cands)), key=lambda j: cands[j][1].received_at)


# -- batch entry points against the reference -------------------------------------------------


@given(traffic(), windows)
def test_resolve_equals_reference(items: list[Checked], window: float) -> None:
    assert resolve(items, window) == reference(items, window)


@given(traffic(), windows)
def test_replayed_rows_equals_reference(items: list[Checked], window: float) -> None:
    cands = [it for it in items if it.pre_code is None]
    ref = reference(cands, window)
    got = replayed_rows([str(c.sender) for c in cands], [str(c.msg_id) for c in cands],
                        [c.received_at or 0.0 for c in cands], [c.auth_code for c in cands],
                        window)
    assert got == [(i, detail) for i, (code, detail) in enumerate(ref) if code == 2006]


def test_resolve_on_long_runs_of_one_key() -> None:
    """Keys with far more candidates than the in-order fold keeps before expiring."""
    rng = random.Random(5)
    items = [Checked(sender="bc1pa", msg_id=rng.choice("xy"), received_at=rng.random() * 150_000,
                     auth_code=rng.choice([None, None, None, 2001])) for _ in range(2000)]
    got = resolve(items)
    assert got == reference(items, 120)
    assert 200 < sum(code == 2006 for code, _ in got) < 1800


# -- the step fed in different ways -----------------------------------------------------------


@given(traffic(), windows)
def test_steps_in_receipt_order(items: list[Checked], window: float) -> None:
    cands = candidates(items)
    stream = Stream(items, window)
    for j in in_receipt_order(cands):
        stream.step(*cands[j])
    assert stream.verdicts == expected(items, window)


@given(traffic(), windows, st.data())
def test_steps_cut_into_chunks_through_json(items: list[Checked], window: float,
                                            data: st.DataObject) -> None:
    cands = candidates(items)
    order = in_receipt_order(cands)
    cuts = data.draw(st.sets(st.integers(0, max(len(order) - 1, 0))))
    stream = Stream(items, window)
    for n, j in enumerate(order):
        if n in cuts:
            stream.json_round_trip()
        stream.step(*cands[j])
    assert stream.verdicts == expected(items, window)


@given(traffic(max_size=25), windows, st.data())
def test_steps_in_any_arrival_order(items: list[Checked], window: float,
                                    data: st.DataObject) -> None:
    """After every step the running map equals the batch over what has arrived: the step
    reports every verdict that changed, and only those."""
    cands = candidates(items)
    arrival = data.draw(st.permutations(range(len(cands))))
    cuts = data.draw(st.sets(st.integers(0, max(len(cands) - 1, 0))))
    stream = Stream(items, window)
    arrived: set[int] = set()
    for n, j in enumerate(arrival):
        if n in cuts:
            stream.json_round_trip()
        stream.step(*cands[j])
        row = cands[j][1].ref
        assert isinstance(row, int)
        arrived.add(row)
        so_far = [it if i in arrived else Checked(pre_code=1003, pre_detail="not yet")
                  for i, it in enumerate(items)]
        assert stream.verdicts == expected(so_far, window)
    assert stream.verdicts == expected(items, window)


@given(traffic(), windows, st.sampled_from([0, 7, 40]), st.data())
def test_steps_with_expiry_behind_a_watermark(items: list[Checked], window: float,
                                              lateness: int, data: st.DataObject) -> None:
    """Candidates arrive up to ``lateness`` seconds late; after each step the watermark is
    the latest arrival time minus ``lateness`` (no later candidate was received before it)
    and the state may be expired there: verdicts stay exact and only the candidates
    received since the watermark (plus an anchor) are kept."""
    cands = candidates(items)
    delays = data.draw(st.lists(st.integers(0, lateness), min_size=len(cands),
                                max_size=len(cands)))
    arrival = sorted(range(len(cands)), key=lambda j: cands[j][1].received_at + delays[j])
    expire_after = data.draw(st.sets(st.integers(0, max(len(cands) - 1, 0))))
    stream = Stream(items, window)
    for n, j in enumerate(arrival):
        stream.step(*cands[j])
        if n in expire_after:
            watermark = cands[j][1].received_at + delays[j] - lateness
            stream.expire(watermark)
            stream.json_round_trip()
            stepped = [cands[i] for i in arrival[:n + 1]]
            for key, state in stream.states.items():
                assert len(state.candidates) == sum(
                    1 for k, c in stepped if k == key and c.received_at >= watermark)
    assert stream.verdicts == expected(items, window)


@given(traffic(), windows)
def test_expire_past_everything_leaves_nothing(items: list[Checked], window: float) -> None:
    cands = candidates(items)
    stream = Stream(items, window)
    for j in in_receipt_order(cands):
        stream.step(*cands[j])
    last = max((c.received_at for _, c in cands), default=0.0)
    stream.expire(last + window + 1)
    assert stream.states == {}


@given(traffic(), windows)
def test_plain_form_round_trips(items: list[Checked], window: float) -> None:
    cands = candidates(items)
    stream = Stream(items, window)
    for j in reversed(range(len(cands))):  # out of order: changed verdicts in the state
        stream.step(*cands[j])
    for state in stream.states.values():
        plain = state.to_plain()
        assert json.loads(json.dumps(plain)) == plain
        assert through_json(state) == state


# -- the one driver: fold_candidates ----------------------------------------------------------


@given(traffic(), windows)
def test_fold_in_receipt_order_names_the_accepted_copy(items: list[Checked], window: float
                                                       ) -> None:
    """The batch folds' mode: each key's candidates in receipt order, expired as they go;
    every duplicate names the accepted copy its ``duplicate_of`` is the receipt time of."""
    want = expected(items, window)
    runs: dict[Key, list[ReplayCandidate]] = {}
    for key, c in candidates(items):
        runs.setdefault(key, []).append(c)
    got: Verdicts = {}
    for run in runs.values():
        run.sort(key=lambda c: c.received_at)
        fold = fold_candidates(EMPTY_STATE, run, window, in_order=True, track_accepted=True)
        assert fold.changed == () or list(fold.changed) == []
        for c, decision, accepted in zip(run, fold.decisions, fold.accepted, strict=True):
            assert decision.exact and decision.changed == ()
            row = c.ref
            assert isinstance(row, int)
            got[row] = as_verdict(items, row, decision.duplicate_of, window)
            if decision.duplicate_of is not None:
                assert isinstance(accepted, int)
                assert items[accepted].received_at == decision.duplicate_of
                assert want[accepted] == (None, "")  # accepted: valid, checks 7-8 passed
        assert len(fold.state.candidates) < max(IN_ORDER_EXPIRE_AT, len(run) + 1)
    assert got == want


def test_fold_in_receipt_order_expires_a_long_run() -> None:
    run = [ReplayCandidate(at * 50.0, None, at) for at in range(5 * IN_ORDER_EXPIRE_AT)]
    fold = fold_candidates(EMPTY_STATE, run, 120, in_order=True, track_accepted=True)
    assert len(fold.state.candidates) < IN_ORDER_EXPIRE_AT
    assert [d.duplicate_of for d in fold.decisions[:4]] == [None, 0.0, 0.0, None]
    assert list(fold.accepted[:4]) == [None, 0, 0, 0]
    again = fold_candidates(EMPTY_STATE, run, 120)  # not expired as it goes: all kept
    assert len(again.state.candidates) == len(run)
    assert again.decisions == fold.decisions


@given(traffic(max_size=25), windows, st.sampled_from([0, 7, 40]), st.booleans(), st.data())
def test_fold_in_batches_behind_a_watermark_equals_reference(
        items: list[Checked], window: float, lateness: int, fold_order: bool,
        data: st.DataObject) -> None:
    """The stream's mode: candidates arrive up to ``lateness`` late, cut into batches; each
    batch folds each key's candidates (in fold order, as the stream does, or in arrival
    order) into its state, expired first at the watermark (the latest arrival of earlier
    batches minus ``lateness``), the state going through JSON between batches and deleted
    when empty. Every verdict is exact; changed rows are rows of earlier batches whose
    verdict moved; after every batch the verdicts equal the batch rule over what arrived."""
    cands = [(key, c._replace(ref=["row", c.ref])) for key, c in candidates(items)]
    delays = data.draw(st.lists(st.integers(0, lateness), min_size=len(cands),
                                max_size=len(cands)))
    arrival = sorted(range(len(cands)), key=lambda j: cands[j][1].received_at + delays[j])
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(cands) - 1, 1)))))
    bounds = zip([0, *cuts], [*cuts, len(arrival)], strict=True)
    batches = [arrival[a:b] for a, b in bounds if arrival[a:b]]
    states: dict[Key, ReplayKeyState] = {}
    verdicts: Verdicts = {}
    arrived: set[int] = set()
    newest: float | None = None
    for batch in batches:
        watermark = None if newest is None else newest - lateness
        by_key: dict[Key, list[ReplayCandidate]] = {}
        for j in (sorted(batch, key=lambda j: (cands[j][1].received_at, cands[j][1].order))
                  if fold_order else batch):
            by_key.setdefault(cands[j][0], []).append(cands[j][1])
        for key, mine in by_key.items():
            fold = fold_candidates(states.get(key, EMPTY_STATE), mine, window,
                                   watermark=watermark)
            for c, decision in zip(mine, fold.decisions, strict=True):
                assert decision.exact and decision.changed == ()
                verdicts[c.ref[1]] = as_verdict(items, c.ref[1], decision.duplicate_of, window)
            for verdict in fold.changed:
                row = verdict.ref[1]  # type: ignore[index]
                assert row not in {c.ref[1] for c in mine}
                new = as_verdict(items, row, verdict.duplicate_of, window)
                assert verdicts[row] != new, "reported as changed but is not"
                verdicts[row] = new
            if fold.state.is_empty:
                states.pop(key, None)
            else:
                states[key] = through_json(fold.state)
        latest = max(cands[j][1].received_at + delays[j] for j in batch)
        newest = latest if newest is None else max(newest, latest)
        arrived.update(cands[j][1].ref[1] for j in batch)
        so_far = [it if i in arrived else Checked(pre_code=1003, pre_detail="not yet")
                  for i, it in enumerate(items)]
        assert verdicts == expected(so_far, window)
    assert verdicts == expected(items, window)


def test_a_row_changed_and_changed_back_in_one_fold_is_not_reported() -> None:
    """Late copies in arrival order: 100 makes the kept 200 a duplicate, 90 makes it a
    duplicate of 90, 70 (130 s before 200) accepts it again. Net, 200 did not move; the
    fold's own candidates carry their final verdicts."""
    _, state = steps(ReplayCandidate(200.0, None, "r"))
    late = [ReplayCandidate(at, None, name) for at, name in ((100.0, "a"), (90.0, "b"),
                                                             (70.0, "c"))]
    fold = fold_candidates(state, late, 120)
    assert list(fold.changed) == []
    assert [(d.duplicate_of, d.changed) for d in fold.decisions] == [
        (70.0, ()), (70.0, ()), (None, ())]
    assert [v.duplicate_of for v in fold.state.verdicts()] == [None, 70.0, 70.0, None]
    one_by_one = [replay_step(state, c, 120)[0] for c in late[:1]]
    assert [v.ref for v in one_by_one[0].changed] == ["r"]  # the first step did change it


received_times = st.one_of(st.floats(0, 2e9, allow_nan=False), st.integers(0, 400).map(float))


@given(received=received_times, behind=st.one_of(st.none(), st.floats(-1e6, 1e6)),
       code=st.sampled_from([None, 2001, 2002]), window=st.floats(0, 1e5),
       in_order=st.booleans(), track=st.booleans(), ref=st.sampled_from([None, 7, ["k", 3]]))
def test_the_fresh_key_shortcut_is_the_general_fold(
        received: float, behind: float | None, code: int | None, window: float,
        in_order: bool, track: bool, ref: Any) -> None:
    """A key with no state and one candidate: what fold_candidates gives (fresh_state,
    when the candidate is not behind the watermark) equals the general fold's result."""
    watermark = None if behind is None else received - behind
    candidate = ReplayCandidate(received, code, ref, ("f", 1))
    options = {"in_order": in_order, "track_accepted": track}
    fast = fold_candidates(EMPTY_STATE, [candidate], window, watermark=watermark, **options)
    slow = _fold_general(EMPTY_STATE, [candidate], window, watermark, in_order, track, None)
    assert fast.state == slow.state
    assert fast.state.to_plain() == slow.state.to_plain()
    assert (list(fast.decisions), list(fast.changed), list(fast.accepted)) == (
        list(slow.decisions), list(slow.changed), list(slow.accepted))
    first = fresh_state(candidate, watermark)
    if watermark is not None and received < watermark:
        assert first is None
        assert slow.decisions == [ReplayDecision(None, (), False)] and slow.state.is_empty
    else:
        assert first == slow.state
        assert slow.decisions == [ReplayDecision(None, (), True)]


@given(received=received_times, behind=st.one_of(st.none(), st.floats(-1e6, 1e6)),
       code=st.sampled_from([None, math.nan, 2001, 2002.0]), window=st.floats(0, 1e5),
       line=st.one_of(st.integers(1, 10**9), st.integers(1, 10**6).map(float)))
def test_the_stream_s_fresh_entry_is_the_fresh_state(
        received: float, behind: float | None, code: float | None, window: float,
        line: float) -> None:
    """The stream's direct entry for a new key seen once (:func:`fresh_entry`, landing
    mode) equals the state :func:`fresh_state` gives for it, stored as the processor stores
    it (expiry and plain form, through JSON as well); the record's fields come as pandas
    hands them over (an int column with a null as floats, NaN for the null)."""
    from snap_spark.stream.replay_state import _candidate, expiry_ms, fresh_entry

    watermark = None if behind is None else received - behind
    record = ("bc1p-sender", "msg-1", received, "file:///in/a.jsonl", line, code, "key")
    state = fresh_state(_candidate(record), watermark)
    entry = fresh_entry(record, watermark, window)
    if state is None:
        assert entry is None
    else:
        expected = [expiry_ms(state, window), state.to_plain()]
        assert entry == expected
        assert orjson.dumps(entry) == orjson.dumps(expected)


@given(received=st.floats(0, 1e12 - 1), behind=st.one_of(st.none(), st.floats(-1e6, 1e6)),
       code=st.sampled_from([None, 2001, 2002]), window=st.floats(0, 1e5),
       line=st.integers(1, 2**62))
def test_the_stream_s_fresh_rows_are_its_fresh_entries(
        received: float, behind: float | None, code: int | None, window: float,
        line: int) -> None:
    """Landing mode adds a new key seen once as a row of its bucket's table, computed in
    Arrow (:func:`_fresh_rows`): read back, the row is exactly :func:`fresh_entry` of the
    same record, its expiry to the millisecond."""
    import pandas as pd
    import pyarrow as pa

    from snap_spark.stream.replay_state import (
        _batch_table,
        _fresh_mask,
        _fresh_rows,
        _unexpired,
        fresh_entry,
        keys_of_table,
    )

    watermark = None if behind is None or received - behind <= 0 else received - behind
    frame = pd.DataFrame([("bc1p-sender", "msg-1", received, "file:///in/a.jsonl", line,
                           code, "key", None)],
                         columns=["sender", "msg_id", "received_at", "source_file",
                                  "line_no", "auth_code", "file_key", "task_id"])
    batch = _batch_table([frame])
    mask = _fresh_mask(batch, _unexpired(None, watermark), watermark)
    record = ("bc1p-sender", "msg-1", received, "file:///in/a.jsonl", line, code, "key")
    entry = fresh_entry(record, watermark, window)
    assert mask.to_pylist() == [entry is not None]
    if entry is not None:
        rows = _fresh_rows(batch.filter(pa.array([True])), watermark, window)
        assert keys_of_table(rows) == {"bc1p-sender\nmsg-1": entry}


# -- examples of the edges --------------------------------------------------------------------


def steps(*cands: ReplayCandidate, window: float = 120, state: ReplayKeyState = EMPTY_STATE
          ) -> tuple[list[Any], ReplayKeyState]:
    decisions = []
    for c in cands:
        decision, state = replay_step(state, c, window)
        decisions.append(decision)
    return decisions, state


def test_exactly_one_window_later_is_still_a_duplicate() -> None:
    (first, at_window, after), _ = steps(ReplayCandidate(10.0, None, 1),
                                         ReplayCandidate(130.0, None, 2),
                                         ReplayCandidate(130.5, None, 3))
    assert first.duplicate_of is None
    assert at_window.duplicate_of == 10.0
    assert after.duplicate_of is None  # 120.5 s after the accepted copy: accepted again


def test_a_forged_copy_first_does_not_shadow_the_genuine_message() -> None:
    (forged, genuine, replay), state = steps(ReplayCandidate(10.0, 2001, "forged"),
                                             ReplayCandidate(20.0, None, "genuine"),
                                             ReplayCandidate(30.0, None, "replay"))
    assert forged.duplicate_of is None and genuine.duplicate_of is None
    assert replay.duplicate_of == 20.0
    assert [v.code for v in state.verdicts()] == [2001, None, 2006]


def test_a_duplicate_does_not_refresh_the_accepted_time() -> None:
    (_, dup, later), _ = steps(ReplayCandidate(0.0, None, 1), ReplayCandidate(100.0, None, 2),
                               ReplayCandidate(200.0, None, 3))
    assert dup.duplicate_of == 0.0 and later.duplicate_of is None


def test_a_late_accepted_copy_cascades() -> None:
    """150 accepted, 250 a duplicate of it; then 50 arrives late and is accepted: 150
    becomes a duplicate of 50, so 250 (200 s after 50) is accepted."""
    (_, _, late), state = steps(ReplayCandidate(150.0, None, "b"),
                                ReplayCandidate(250.0, None, "c"),
                                ReplayCandidate(50.0, None, "a"))
    assert late.duplicate_of is None
    assert [(v.ref, v.code, v.duplicate_of) for v in late.changed] == [
        ("b", 2006, 50.0), ("c", None, None)]
    assert late.changed[0].detail(120) == (
        "same (from, id) accepted 100s earlier (receipt time 50, window 120s)")
    assert [c.ref for c in state.candidates] == ["a", "b", "c"]


def test_a_late_forged_copy_changes_nothing() -> None:
    (_, late), _ = steps(ReplayCandidate(150.0, None, "b"), ReplayCandidate(50.0, 2001, "a"))
    assert late.duplicate_of is None and late.changed == ()


def test_ties_follow_the_order_tiebreak_not_arrival() -> None:
    (_, first), _ = steps(ReplayCandidate(10.0, None, "line 2", ("f", 2)),
                          ReplayCandidate(10.0, None, "line 1", ("f", 1)))
    assert first.duplicate_of is None
    assert [(v.ref, v.duplicate_of) for v in first.changed] == [("line 2", 10.0)]


def test_equal_receipt_time_and_tiebreak_go_in_step_order() -> None:
    (_, _, late), _ = steps(ReplayCandidate(10.0, None, "a"), ReplayCandidate(20.0, None, "b"),
                            ReplayCandidate(10.0, None, "c"))
    assert late.duplicate_of == 10.0 and late.changed == ()


def test_a_candidate_before_the_horizon_is_flagged_inexact() -> None:
    _, state = steps(ReplayCandidate(100.0, None, 1), ReplayCandidate(300.0, None, 2))
    state = expire(state, 200.0, 120)
    assert state.anchor == 100.0 and state.horizon == 200.0
    (too_late,), after = steps(ReplayCandidate(150.0, None, 3), state=state)
    assert not too_late.exact and too_late.duplicate_of == 100.0 and too_late.changed == ()
    assert after == state  # not kept


@pytest.mark.parametrize(("watermark", "candidates", "anchor", "empty"), [
    (100.0, 1, None, False),   # nothing received before the watermark: unchanged
    (150.0, 0, 100.0, False),  # dropped; 100 can still make a later copy a duplicate
    (220.0, 0, 100.0, False),  # a copy received at 220 is exactly one window later
    (220.5, 0, None, True),    # nothing at or after 220.5 can be a duplicate of 100
])
def test_expire_keeps_an_anchor_while_it_can_matter(watermark: float, candidates: int,
                                                    anchor: float | None, empty: bool) -> None:
    _, state = steps(ReplayCandidate(100.0, None, 1))
    kept = expire(state, watermark, 120)
    assert (len(kept.candidates), kept.anchor, kept.is_empty) == (candidates, anchor, empty)


def test_an_anchor_alone_expires_once_the_watermark_passes_its_window() -> None:
    _, state = steps(ReplayCandidate(100.0, None, 1))
    anchored = expire(state, 150.0, 120)
    assert anchored.candidates == () and anchored.anchor == 100.0
    assert expire(anchored, 220.0, 120) == anchored
    assert expire(anchored, 221.0, 120).is_empty
