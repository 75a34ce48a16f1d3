"""Replay protection (check 6): a repeat of an *accepted* ``(from, id)`` within the window.

The rule, per key ``(from, id)``, over the messages that passed checks 1–5 (*candidates*)
taken in receipt order (``received_at``, ties in input order): a candidate is a 2006 when an
accepted candidate of the same key has receipt time ``a`` with ``received_at - a <= window``
(``authentication.md`` asks to track ids for *at least* 120 s, so exactly 120 s is still a
duplicate). Otherwise it is accepted when its check-7/8 code is ``None``, and keeps that
code, unaccepted, when not: a forged copy seen first never shadows the genuine message. A
duplicate does not refresh the accepted time. The window compares full receipt times,
fractions included. The drift check runs first and reads the receipt clock in whole seconds
(±60 s: from 60 s early to less than 61 s late), so a repeat 121 s or more later is always
a 2004 before it could be a 2006; a repeat 120 < d < 121 s after a copy accepted more than
59 s early can pass the drift check and, past the window, is accepted again.

The rule is written once, as an incremental step over one key's state
(:func:`replay_step`, :func:`expire`), and driven by one function, :func:`fold_candidates`
(a key's state and candidates in, decisions and the new state out), so a batch fold
(:func:`resolve`, :func:`replayed_rows`), the lake's replay store, a stream's state
processor and a full rebuild run the same code.
The state is a :class:`ReplayKeyState`, which :meth:`~ReplayKeyState.to_plain` turns into
JSON-able values for a state store row or a Delta column.

A stream's state processor keyed by ``(from, id)`` steps each candidate (``ref`` naming
its row, ``order`` its input position, e.g. ``(source_file, line_no)``), writes the
decision for that row and for every ``changed`` row (a row that is no longer a 2006 gets
back its own check-7/8 code and detail), and at each watermark calls :func:`expire` and
deletes keys left empty. ``window`` must be the same in every call for a key.

Examples:
    >>> state, window = EMPTY_STATE, 120
    >>> decision, state = replay_step(state, ReplayCandidate(10.0, None, "line 1"), window)
    >>> decision.duplicate_of is None
    True
    >>> decision, state = replay_step(state, ReplayCandidate(130.0, None, "line 2"), window)
    >>> decision.duplicate_of
    10.0
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple, TypeAlias

from snap_spark.protocol.errors import fmt_seconds
from snap_spark.protocol.validate import Checked
from snap_spark.protocol.verdict import (
    DEFAULT_REPLAY_WINDOW,
    candidate_code,
    candidate_verdict,
)

#: The spec's replay window (seconds of receipt time), kept under its old name too.
DEFAULT_WINDOW = DEFAULT_REPLAY_WINDOW

#: A JSON-able value: what state and row references are made of.
Plain: TypeAlias = "bool | int | float | str | list[Plain] | dict[str, Plain] | None"

#: Tiebreak between candidates of one key with equal receipt times, in input order, e.g.
#: ``(source_file, line_no)``. Candidates of one key must use tuples of the same shape.
Order: TypeAlias = tuple[int | float | str, ...]



class ReplayCandidate(NamedTuple):
    """A message that passed checks 1–5, offered to the replay rule.

    ``ref`` identifies its row for the caller (plain, e.g. ``[source_file, line_no]``; lists,
    not tuples, survive a JSON round trip unchanged). ``order`` breaks ties of
    ``received_at`` in input order; candidates with equal ``(received_at, order)`` are taken
    in the order they are stepped.
    """

    received_at: float
    auth_code: int | None  # first failure of checks 7-8, None when they pass
    ref: Plain = None
    order: Order = ()


class ReplayVerdict(NamedTuple):
    """A candidate and its current replay verdict."""

    candidate: ReplayCandidate
    #: Receipt time of the accepted copy this one duplicates; ``None``: not a duplicate.
    duplicate_of: float | None

    @property
    def ref(self) -> Plain:
        return self.candidate.ref

    @property
    def code(self) -> int | None:
        """Final error code: 2006 for a duplicate, else the candidate's check-7/8 code."""
        return candidate_code(self.candidate.auth_code, self.duplicate_of is not None)

    def detail(self, window: float) -> str | None:
        """The 2006 detail, or ``None`` when the row keeps its own (check 7/8) detail.

        Examples:
            >>> ReplayVerdict(ReplayCandidate(25.0, None), 10.0).detail(120)
            'same (from, id) accepted 15s earlier (receipt time 10, window 120s)'
        """
        if self.duplicate_of is None:
            return None
        return duplicate_detail(self.duplicate_of, self.candidate.received_at, window)


class ReplayDecision(NamedTuple):
    """What one :func:`replay_step` decided."""

    #: The stepped candidate's verdict: receipt time of the accepted copy it duplicates,
    #: ``None`` when it is not a duplicate.
    duplicate_of: float | None
    #: Candidates stepped earlier whose verdict this one changed (a late, earlier-received
    #: candidate re-decides its key), with their new verdicts; empty for in-order arrivals.
    changed: tuple[ReplayVerdict, ...] = ()
    #: False only for a candidate received before the key's horizon (see :func:`expire`).
    exact: bool = True


class ReplayKeyState(NamedTuple):
    """Replay state of one ``(from, id)`` key; immutable, steps return a new one.

    ``candidates`` are the kept candidates in fold order (``(received_at, order)``, then
    step order) and ``duplicate_of`` their current verdicts, position by position.
    ``anchor`` is the last accepted receipt time among candidates :func:`expire` dropped
    (``None`` once it can no longer make anything a duplicate), ``horizon`` the watermark
    below which candidates were dropped. ``last_accepted`` is the fold's accepted time after
    all kept candidates (derived, so :meth:`to_plain` leaves it out).
    """

    candidates: tuple[ReplayCandidate, ...] = ()
    duplicate_of: tuple[float | None, ...] = ()
    anchor: float | None = None
    horizon: float | None = None
    last_accepted: float | None = None

    @property
    def is_empty(self) -> bool:
        """True when the state holds nothing: the key's state can be deleted."""
        return not self.candidates and self.anchor is None

    def verdicts(self) -> list[ReplayVerdict]:
        """The kept candidates with their current verdicts, in fold order."""
        return [ReplayVerdict(c, d) for c, d in zip(self.candidates, self.duplicate_of,
                                                    strict=True)]

    def to_plain(self) -> dict[str, Plain]:
        """JSON-able form, for a state store row or a Delta column.

        Examples:
            >>> _, s = replay_step(EMPTY_STATE, ReplayCandidate(10.0, None, ["f", 1], ("f", 1)))
            >>> s.to_plain()["candidates"], s.to_plain()["anchor"]
            ([[10.0, None, ['f', 1], ['f', 1], None]], None)
            >>> ReplayKeyState.from_plain(s.to_plain()) == s
            True
        """
        candidates = self.candidates
        rows: list[Plain]
        if len(candidates) == 1:  # most keys (a hot path)
            c = candidates[0]
            rows = [[c.received_at, c.auth_code, c.ref, [*c.order], self.duplicate_of[0]]]
        else:
            rows = [[c.received_at, c.auth_code, c.ref, [*c.order], d]
                    for c, d in zip(candidates, self.duplicate_of, strict=True)]
        return {"candidates": rows, "anchor": self.anchor, "horizon": self.horizon}

    @classmethod
    def from_plain(cls, plain: dict[str, Any]) -> ReplayKeyState:
        """The state :meth:`to_plain` described (also after a JSON round trip)."""
        candidates = tuple(
            ReplayCandidate(float(at), code, ref, tuple(order))
            for at, code, ref, order, _ in plain["candidates"]
        )
        duplicate_of = tuple(_float_or_none(row[4]) for row in plain["candidates"])
        anchor = _float_or_none(plain["anchor"])
        return cls(candidates, duplicate_of, anchor, _float_or_none(plain["horizon"]),
                   _accepted_before(candidates, duplicate_of, len(candidates), anchor))


EMPTY_STATE = ReplayKeyState()

#: The decision of every in-order candidate that is not a duplicate (shared: no allocation).
_FRESH = ReplayDecision(None, (), True)
_NOT_SEEN = (None,)
_ONE_FRESH = (_FRESH,)
_NEVER = sys.maxsize  # a count of candidates no state reaches
# NamedTuple's own __new__ is slower on the hot path (docs/speed.md, *Figures behind the
# code*)
_tuple_new = tuple.__new__


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _duplicate_of(accepted: float | None, received_at: float, window: float) -> float | None:
    """The rule: the accepted receipt time a candidate duplicates, or ``None``."""
    if accepted is not None and received_at - accepted <= window:
        return accepted
    return None


def _accepted_before(candidates: tuple[ReplayCandidate, ...],
                     duplicate_of: tuple[float | None, ...], end: int,
                     anchor: float | None) -> float | None:
    """The fold's accepted time just before position ``end``."""
    for i in range(end - 1, -1, -1):
        if duplicate_of[i] is None and candidates[i].auth_code is None:
            return candidates[i].received_at
    return anchor


def _fold_key(candidate: ReplayCandidate) -> tuple[float, Order]:
    return candidate.received_at, candidate.order


def line_name(source_file: str | None, line_no: int) -> str:
    """How a 2006 detail names the accepted line: ``line N of FILE`` (``line N`` alone when
    the source has no name).

    Examples:
        >>> line_name("data/a.jsonl", 12)
        'line 12 of data/a.jsonl'
    """
    return f"line {line_no}" if not source_file else f"line {line_no} of {source_file}"


def duplicate_detail(seen: float, received_at: float, window: float,
                     accepted: str | None = None) -> str:
    """The 2006 detail of a candidate received at ``received_at`` that repeats the copy
    accepted at ``seen``; ``accepted`` names that copy's line (:func:`line_name`).

    Examples:
        >>> duplicate_detail(10.0, 130.0, 120)
        'same (from, id) accepted 120s earlier (receipt time 10, window 120s)'
        >>> duplicate_detail(10.0, 40.0, 120, "line 3 of a.jsonl")
        'same (from, id) accepted 30s earlier (receipt time 10, window 120s) as line 3 of a.jsonl'
    """
    text = (
        f"same (from, id) accepted {fmt_seconds(received_at - seen)}s earlier "
        f"(receipt time {fmt_seconds(seen)}, window {fmt_seconds(window)}s)"
    )
    return text if accepted is None else f"{text} as {accepted}"


def replay_step(state: ReplayKeyState, candidate: ReplayCandidate,
                window: float = DEFAULT_WINDOW) -> tuple[ReplayDecision, ReplayKeyState]:
    """Offer one candidate to its key's state: its verdict, changed verdicts, new state.

    Candidates may arrive in any order. One that sorts after every kept candidate (the
    common case) is decided against the last accepted time alone. One that sorts before
    some (a late arrival) is inserted and the key re-folded from there, so every verdict
    equals the batch fold over all the key's candidates in receipt order; the verdicts of
    earlier candidates that changed are returned in ``changed`` (an accepted one can become
    a 2006, and a former 2006 accepted in turn). Every candidate is kept until
    :func:`expire` drops it.

    A candidate received before ``state.horizon`` cannot be decided exactly (what it could
    change was dropped): it is decided against ``state.anchor`` alone (a duplicate when the
    anchor is at most ``window`` before it), not kept, changes nothing, and the decision
    says ``exact=False``.

    Examples:
        >>> s = EMPTY_STATE
        >>> d, s = replay_step(s, ReplayCandidate(100.0, None, "late copy"), 120)
        >>> d.duplicate_of is None
        True
        >>> d, s = replay_step(s, ReplayCandidate(50.0, None, "original"), 120)
        >>> d.duplicate_of is None, [(v.ref, v.code) for v in d.changed]
        (True, [('late copy', 2006)])
    """
    candidates = state.candidates
    received_at = candidate.received_at
    horizon = state.horizon
    if horizon is not None and received_at < horizon:
        return _beyond_horizon(state, candidate, window), state
    if candidates:
        last = candidates[-1]
        in_order = received_at > last.received_at or (
            received_at == last.received_at and not candidate.order < last.order)
        if not in_order:
            return _refold(state, candidate, window)
    accepted = state.last_accepted
    seen = None if accepted is None else _duplicate_of(accepted, received_at, window)
    if seen is None:
        return _FRESH, _tuple_new(ReplayKeyState, (
            (*candidates, candidate), state.duplicate_of + _NOT_SEEN, state.anchor, horizon,
            received_at if candidate.auth_code is None else accepted))
    return _tuple_new(ReplayDecision, (seen, (), True)), _tuple_new(ReplayKeyState, (
        (*candidates, candidate), (*state.duplicate_of, seen), state.anchor, horizon,
        accepted))


def _refold(state: ReplayKeyState, candidate: ReplayCandidate, window: float
            ) -> tuple[ReplayDecision, ReplayKeyState]:
    """Insert a late candidate and re-decide the kept candidates after it."""
    candidates, old_seen = state.candidates, state.duplicate_of
    n = len(candidates)
    at = bisect_right(candidates, _fold_key(candidate), key=_fold_key)
    accepted = _accepted_before(candidates, old_seen, at, state.anchor)
    own = _duplicate_of(accepted, candidate.received_at, window)
    old_accepted = accepted  # the fold's accepted time before the insertion, re-walked
    if own is None and candidate.auth_code is None:
        accepted = candidate.received_at
    new_seen = [*old_seen[:at], own]
    changed: list[ReplayVerdict] = []
    i = at
    # Once the new fold's accepted time equals the old one at the same point, every later
    # verdict is unchanged: stop there.
    while i < n and accepted != old_accepted:
        other, was = candidates[i], old_seen[i]
        if was is None and other.auth_code is None:
            old_accepted = other.received_at
        now = _duplicate_of(accepted, other.received_at, window)
        if now is None and other.auth_code is None:
            accepted = other.received_at
        new_seen.append(now)
        if now != was:
            changed.append(ReplayVerdict(other, now))
        i += 1
    new_seen.extend(old_seen[i:])
    new_state = ReplayKeyState(
        (*candidates[:at], candidate, *candidates[at:]), tuple(new_seen), state.anchor,
        state.horizon, accepted if i == n else state.last_accepted)
    return ReplayDecision(own, tuple(changed), True), new_state


def _beyond_horizon(state: ReplayKeyState, candidate: ReplayCandidate, window: float
                    ) -> ReplayDecision:
    anchor = state.anchor
    seen = (_duplicate_of(anchor, candidate.received_at, window)
            if anchor is not None and anchor <= candidate.received_at else None)
    return ReplayDecision(seen, (), False)


def expire(state: ReplayKeyState, watermark: float, window: float = DEFAULT_WINDOW
           ) -> ReplayKeyState:
    """Drop what no candidate received at or after ``watermark`` can need.

    Candidates received before ``watermark`` are dropped (their verdicts are final); the
    last accepted receipt time among them is kept as ``anchor`` while it is within
    ``window`` of ``watermark``, and ``horizon`` becomes ``watermark``. The kept state thus
    holds the candidates received in ``[watermark, newest]`` plus at most one anchor, so
    its size depends on the traffic since the watermark, never on history. An empty result
    (:attr:`ReplayKeyState.is_empty`) means the key can be deleted.

    Exactness: if every candidate of the key received before ``watermark`` has been stepped
    (``watermark`` is a true watermark), every later step for a candidate with
    ``received_at >= watermark`` returns exactly the batch fold's verdicts (its own and the
    changed ones). A candidate received before ``watermark`` is beyond that guarantee: while
    the key has state it is flagged (``exact=False``, see :func:`replay_step`); once the key
    was deleted it is indistinguishable from a first copy, so the caller must not send
    candidates older than its watermark, or must re-decide their key from the full history.

    Examples:
        >>> s = EMPTY_STATE
        >>> for at in (10.0, 100.0, 200.0):  # accepted, duplicate, accepted
        ...     _, s = replay_step(s, ReplayCandidate(at, None), 120)
        >>> s = expire(s, 120.0, 120)
        >>> [c.received_at for c in s.candidates], s.anchor, s.horizon
        ([200.0], 10.0, 120.0)
        >>> expire(s, 201.0, 120).is_empty
        False
        >>> expire(s, 400.0, 120).is_empty
        True
    """
    candidates, seen = state.candidates, state.duplicate_of
    cut = bisect_left(candidates, watermark, key=lambda c: c.received_at)
    anchor = _accepted_before(candidates, seen, cut, state.anchor)
    # A candidate received at t >= watermark is a duplicate of anchor only if
    # t - anchor <= window, which watermark - anchor > window rules out.
    if anchor is not None and watermark - anchor > window:
        anchor = None
    if cut == 0 and anchor == state.anchor:
        return state
    if cut == len(candidates) and anchor is None:
        return EMPTY_STATE
    kept, kept_seen = candidates[cut:], seen[cut:]
    horizon = watermark if state.horizon is None else max(state.horizon, watermark)
    return ReplayKeyState(kept, kept_seen, anchor, horizon,
                          _accepted_before(kept, kept_seen, len(kept), anchor))


def _fold_runs(runs: Iterable[ReplayCandidate | list[ReplayCandidate]], window: float
               ) -> list[tuple[int, float, int]]:
    """``(row, duplicate_of, accepted row)`` of the candidates that are 2006, sorted;
    ``accepted row`` is the row of the copy accepted at ``duplicate_of``.

    A run is one key's candidates in input order (a lone one not wrapped in a list: most
    keys have one), each ``ref`` its row number. A run is folded in receipt order (ties in
    input order) by :func:`fold_candidates` with ``in_order``, so memory is bounded by the
    busiest key's traffic within one window.
    """
    out: list[tuple[Any, float, Any]] = []  # refs are ints (Any: no cast() calls)
    fold = _fold_general  # a run has two candidates or more: no shortcut to look for
    for run in runs:
        if not isinstance(run, list):
            continue  # a lone candidate is never a duplicate (nothing was accepted before it)
        run.sort(key=_received_at)  # stable: ties keep input order
        _, decisions, _, accepted = fold(EMPTY_STATE, run, window, None, True, True, None)
        for i, decision in enumerate(decisions):
            if decision.duplicate_of is not None:
                out.append((run[i].ref, decision.duplicate_of, accepted[i]))
    out.sort()
    return out


#: Candidates a key's state may hold, in a fold in receipt order (``in_order`` of
#: :func:`fold_candidates`), before it is expired at the newest one: keeps a long run of
#: one key linear.
IN_ORDER_EXPIRE_AT = 64


class KeyFold(NamedTuple):
    """What :func:`fold_candidates` decided for one key's candidates."""

    #: The key's state after the fold.
    state: ReplayKeyState
    #: One per candidate, in the order given: its decision, final for this fold (when a
    #: later candidate of the same fold changed it, the new verdict is here), ``changed``
    #: always empty.
    decisions: Sequence[ReplayDecision]
    #: Candidates the state held *before* the fold whose verdict it changed, each once, in
    #: the order first changed, with its new verdict; empty when the fold changed none
    #: (always so when every candidate sorts after the state's).
    changed: Sequence[ReplayVerdict]
    #: With ``track_accepted``: one per candidate, the ``ref`` of the latest copy accepted
    #: before it (``None``: none), which is the copy its ``duplicate_of`` names when it is
    #: a duplicate; else empty.
    accepted: Sequence[Plain]


def fold_candidates(
    state: ReplayKeyState, candidates: Sequence[ReplayCandidate],
    window: float = DEFAULT_WINDOW, *, watermark: float | None = None,
    in_order: bool = False, track_accepted: bool = False, accepted: Plain = None,
) -> KeyFold:
    """Offer one key's ``candidates`` to its ``state``, in the order given (fold order,
    ``(received_at, order)``, unless late ones are to re-decide the key): every caller of
    the rule (the batch fold, the lake's replay store, the stream's state) steps
    candidates through :func:`replay_step` here, and only here.

    Options, for what differs between the callers:

    - ``watermark`` (the stream): first :func:`expire` the state at ``watermark``; a key
      left with nothing gets ``horizon = watermark``, so candidates received before it
      come out ``exact=False`` (what they could change may have been dropped).
    - ``in_order`` (the batch fold, the lake): the candidates are in receipt order and
      nothing received before them is still to come, so once the state holds
      :data:`IN_ORDER_EXPIRE_AT` candidates it is expired at the current one's receipt
      time, which changes no verdict and keeps a long run of one key linear.
    - ``track_accepted``: also give, per candidate, the ``ref`` of the latest copy accepted
      before it, the one a duplicate repeats (every step must be in order, as with
      ``in_order``); ``accepted`` is the ``ref`` of the copy accepted at
      ``state.last_accepted`` before the fold.

    A verdict the fold changes is reported once: on the candidate's own decision when it
    is one of ``candidates``, in :attr:`KeyFold.changed` when the state held it before
    (only when it really moved). Candidates are told apart by ``ref`` (a list is compared
    as a tuple): equal refs are one row. A state that ends up holding nothing but a
    horizon comes back as :data:`EMPTY_STATE`.

    A key with no state (:data:`EMPTY_STATE`) and one candidate, most keys, takes a
    shortcut, :func:`fresh_state`.

    Examples:
        >>> copies = [ReplayCandidate(at, None, line) for at, line in
        ...           ((10.0, "line 1"), (40.0, "line 2"), (300.0, "line 3"))]
        >>> fold = fold_candidates(EMPTY_STATE, copies, 120, in_order=True,
        ...                        track_accepted=True)
        >>> [d.duplicate_of for d in fold.decisions], fold.accepted
        ([None, 10.0, None], [None, 'line 1', 'line 1'])
        >>> late = fold_candidates(fold.state, [ReplayCandidate(5.0, None, "line 0")], 120,
        ...                        watermark=1.0)
        >>> late.decisions[0].duplicate_of, [(v.ref, v.duplicate_of) for v in late.changed]
        (None, [('line 1', 5.0), ('line 2', 5.0)])
        >>> state = EMPTY_STATE
        >>> for at in range(100):  # a long run in order keeps a bounded state
        ...     state = fold_candidates(state, [ReplayCandidate(at * 200.0, None)], 120,
        ...                             in_order=True).state
        >>> len(state.candidates) < IN_ORDER_EXPIRE_AT
        True
    """
    if state is EMPTY_STATE and len(candidates) == 1:
        first = fresh_state(candidates[0], watermark)
        if first is not None:
            return _tuple_new(KeyFold, (first, _ONE_FRESH, (),
                                        (accepted,) if track_accepted else ()))
    return _fold_general(state, candidates, window, watermark, in_order, track_accepted,
                         accepted)


def _fold_general(state: ReplayKeyState, candidates: Sequence[ReplayCandidate],
                  window: float, watermark: float | None, in_order: bool,
                  track_accepted: bool, accepted: Plain) -> KeyFold:
    """:func:`fold_candidates` without the shortcut for a key seen once (positional)."""
    if watermark is not None:
        state = expire(state, watermark, window)
        if state.is_empty:
            # Nothing known about the key: what was received before the watermark may
            # have been dropped, so candidates behind it must come out inexact.
            state = ReplayKeyState(horizon=watermark)
    before = state
    decisions: list[ReplayDecision] = []
    accepted_refs: list[Plain] = []
    late: list[int] | None = None  # positions of the decisions that changed other verdicts
    step, expire_at = replay_step, IN_ORDER_EXPIRE_AT if in_order else _NEVER
    for candidate in candidates:
        decision, state = step(state, candidate, window)
        if len(state.candidates) >= expire_at:
            state = expire(state, candidate.received_at, window)
        if decision.changed:
            late = [] if late is None else late
            late.append(len(decisions))
        decisions.append(decision)
        if track_accepted:
            # In order, the copy a duplicate names is the latest accepted one before it.
            accepted_refs.append(accepted)
            if decision.duplicate_of is None and candidate.auth_code is None:
                accepted = candidate.ref
    if state.horizon is not None and not state.candidates and state.anchor is None:
        state = EMPTY_STATE  # only the horizon marker: nothing worth keeping
    moved = () if late is None else _apply_changes(before, candidates, decisions, late)
    return _tuple_new(KeyFold, (state, decisions, moved, accepted_refs))


def _apply_changes(before: ReplayKeyState, candidates: Sequence[ReplayCandidate],
                   decisions: list[ReplayDecision], late: list[int]) -> list[ReplayVerdict]:
    """Settle the verdicts a fold's late candidates changed (at the positions ``late``, in
    step order): one of the fold's own candidates gets its new verdict in ``decisions``,
    and those of the candidates ``before`` held are returned, each once and only if its
    verdict really moved. Every decision loses its ``changed``."""
    changed: dict[Any, ReplayVerdict] = {}
    position: dict[Any, int] = {}  # the fold's candidates stepped so far, by ref
    done = 0
    for i in late:
        for j in range(done, i):
            position[_ref_key(candidates[j].ref)] = j
        done = i
        decision = decisions[i]
        for verdict in decision.changed:
            key = _ref_key(verdict.ref)
            at = position.get(key)
            if at is not None:  # not expected in fold order; kept exact all the same
                decisions[at] = ReplayDecision(verdict.duplicate_of, (), decisions[at].exact)
            else:
                changed[key] = verdict
        decisions[i] = ReplayDecision(decision.duplicate_of, (), decision.exact)
    was = {_ref_key(c.ref): d for c, d in zip(before.candidates, before.duplicate_of,
                                              strict=True)}
    return [v for key, v in changed.items() if key in was and was[key] != v.duplicate_of]


def fresh_state(candidate: ReplayCandidate, watermark: float | None = None
                ) -> ReplayKeyState | None:
    """The shortcut :func:`fold_candidates` takes for a key seen for the first time (no
    state) with one candidate: the key's new state, the candidate's decision being "not a
    duplicate, exact"; ``None`` when the candidate is received before ``watermark`` (the
    general fold decides that one).

    Expiring the empty state at ``watermark`` leaves only ``horizon = watermark``; a
    candidate at or after it has nothing accepted before it, so it is not a duplicate and
    becomes the state's only candidate (one candidate never reaches
    :data:`IN_ORDER_EXPIRE_AT`, so the mode does not matter). ``tests/unit/test_replay.py``
    checks that the general fold gives the same. A hot path: a stream's processor calls
    it directly for the keys it sees once.

    Examples:
        >>> fresh_state(ReplayCandidate(10.0, None, "line 1"), 5.0).to_plain()
        {'candidates': [[10.0, None, 'line 1', [], None]], 'anchor': None, 'horizon': 5.0}
        >>> fresh_state(ReplayCandidate(10.0, None), 20.0) is None
        True
    """
    received_at = candidate.received_at
    if watermark is not None and received_at < watermark:
        return None
    return _tuple_new(ReplayKeyState, ((candidate,), _NOT_SEEN, None, watermark,
                                       received_at if candidate.auth_code is None else None))


def _ref_key(ref: Plain) -> Any:
    """A candidate's ``ref`` as a dict key (a list, e.g. ``[file_key, line_no]``, as a
    tuple)."""
    return tuple(ref) if isinstance(ref, list) else ref


def _add_to_run(runs: dict[Any, ReplayCandidate | list[ReplayCandidate]], key: Any,
                candidate: ReplayCandidate) -> None:
    run = runs.get(key)
    if run is None:
        runs[key] = candidate
    elif isinstance(run, list):
        run.append(candidate)
    else:
        runs[key] = [run, candidate]


_received_at = itemgetter(0)  # of a ReplayCandidate


def resolve(
    items: Sequence[Checked], window: float = DEFAULT_WINDOW,
    names: Sequence[str] | None = None,
) -> list[tuple[int | None, str]]:
    """Final ``(error_code, detail)`` for each item, in the order given.

    Items are processed in receipt order; equal receipt times keep the given order, so pass
    items in input order (file, line). ``names`` name each item's line
    (:func:`line_name`), for the 2006 details to say which line was accepted.

    Examples:
        >>> items = [Checked(sender="a", msg_id="m", received_at=at) for at in (10.0, 20.0)]
        >>> [code for code, _ in resolve(items)]
        [None, 2006]
    """
    results: list[tuple[int | None, str]] = [
        (item.stateless_code, item.stateless_detail) for item in items
    ]
    runs: dict[Any, ReplayCandidate | list[ReplayCandidate]] = {}
    for row, item in enumerate(items):
        if item.pre_code is None:  # a replay candidate: checks 1-5 passed
            assert item.received_at is not None  # check 5 needed it
            _add_to_run(runs, (item.sender, item.msg_id), _tuple_new(
                ReplayCandidate, (item.received_at, item.auth_code, row, ())))
    for row, seen, accepted in _fold_runs(runs.values(), window):
        results[row] = candidate_verdict(items[row].auth_code, items[row].auth_detail,
                                         duplicate_detail(
            seen, items[row].received_at or 0.0, window,
            None if names is None else names[accepted]))
    return results


def replayed_rows(
    senders: Sequence[str],
    msg_ids: Sequence[str],
    received: Sequence[float],
    auth_codes: Sequence[int | None],
    window: float = DEFAULT_WINDOW,
    names: Sequence[str] | None = None,
) -> list[tuple[int, str]]:
    """``(row index, detail)`` of the rows :func:`resolve` turns into 2006, for columns of
    messages that passed checks 1-5 (``auth_codes``: their check-7/8 code), given in input
    order, ``names`` naming their lines (see :func:`resolve`). The columnar form the Spark
    folds use.

    Examples:
        >>> replayed_rows(["a", "a", "a"], ["m", "m", "m"], [10.0, 20.0, 200.0],
        ...               [None, None, None])
        [(1, 'same (from, id) accepted 10s earlier (receipt time 10, window 120s)')]
    """
    runs: dict[Any, ReplayCandidate | list[ReplayCandidate]] = {}
    for row, (sender, msg_id, at, code) in enumerate(
            zip(senders, msg_ids, received, auth_codes, strict=True)):
        _add_to_run(runs, (sender, msg_id), _tuple_new(ReplayCandidate, (float(at), code, row, ())))
    return [
        (row, duplicate_detail(seen, float(received[row]), window,
                               None if names is None else names[accepted]))
        for row, seen, accepted in _fold_runs(runs.values(), window)
    ]
