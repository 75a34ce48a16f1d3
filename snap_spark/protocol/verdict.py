"""The final verdict of a message: one rule, used by every job, table and checker.

The checks run in the order of docs/architecture.md, *Verdict order*, and the first failure
wins. They fall in three groups whose codes never overlap, so the stateless code alone says
which group failed:

- checks 1-5 (:data:`PRE_REPLAY_CODES`: 1003, 1004, 2005, 2004) need only the line;
- check 6, replay (2006), needs the other accepted messages of the same ``(from, id)``;
- checks 7-8 (:data:`POST_REPLAY_CODES`: 2002, 2001) need only the line again.

So the final code is: the checks 1-5 code, else 2006 when the replay step says so, else the
checks 7-8 code, else valid. A message is a *replay candidate* (it can be a duplicate, or be
accepted and make later copies duplicates) exactly when checks 1-5 passed.

The rule is two functions: :func:`stateless_verdict` is a line's outcome without the replay
step (checks 1-5, then 7-8), and :func:`candidate_verdict` (:func:`candidate_code`) the
final outcome of a replay candidate, a 2006 overriding checks 7-8, which every replay driver
calls. :func:`snap_spark.protocol.replay.resolve` composes the two over a batch of lines.

Examples:
    >>> stateless_verdict(1003, "not JSON", 2001, "bad sig")
    (1003, 'not JSON')
    >>> stateless_verdict(None, "", 2001, "bad sig"), candidate_verdict(2001, "bad sig", "seen")
    ((2001, 'bad sig'), (2006, 'seen'))
    >>> verdict_name(None), verdict_name(2001)
    ('valid', 'rejected')
    >>> is_replay_candidate(2002), is_replay_candidate(2004)
    (True, False)
"""

from __future__ import annotations

from typing import Final, Literal

from snap_spark.protocol.errors import ErrorCode

#: The ``verdict`` column's two values.
VALID: Final = "valid"
REJECTED: Final = "rejected"
Verdict = Literal["valid", "rejected"]

#: Spec defaults (``authentication.md``): ±60 s timestamp drift (exactly 60 passes), and a
#: replay window of 120 s of receipt time (ids are tracked for at least that long).
DEFAULT_MAX_DRIFT: Final = 60.0
DEFAULT_REPLAY_WINDOW: Final = 120.0

#: Codes of checks 1-5 (decided before replay) and 7-8 (after it).
PRE_REPLAY_CODES: Final = frozenset((
    int(ErrorCode.INVALID_MESSAGE),
    int(ErrorCode.INVALID_PAYLOAD),
    int(ErrorCode.IDENTITY_INVALID),
    int(ErrorCode.TIMESTAMP_EXPIRED),
))
POST_REPLAY_CODES: Final = frozenset((
    int(ErrorCode.SIGNATURE_MISSING),
    int(ErrorCode.SIGNATURE_INVALID),
))
DUPLICATE: Final = int(ErrorCode.DUPLICATE_MESSAGE)


def verdict_name(code: int | None) -> Verdict:
    """``"valid"`` for no error code, else ``"rejected"``."""
    return VALID if code is None else REJECTED


def stateless_verdict(
    pre_code: int | None, pre_detail: str, auth_code: int | None, auth_detail: str
) -> tuple[int | None, str]:
    """``(code, detail)`` from the checks that need only the line (1-5, then 7-8)."""
    if pre_code is not None:
        return pre_code, pre_detail
    return candidate_verdict(auth_code, auth_detail, None)


def candidate_code(auth_code: int | None, duplicate: bool) -> int | None:
    """The final code of a replay candidate (checks 1-5 passed): 2006 when the replay step
    made it a duplicate (a 2006 overrides checks 7-8), else its checks 7-8 code (``None``:
    valid). Every replay driver (the batch fold, the lake's replay store, the stream's
    state, the audit's re-verification) decides a candidate's code with it.

    Examples:
        >>> candidate_code(2001, True), candidate_code(2001, False), candidate_code(None, False)
        (2006, 2001, None)
    """
    return DUPLICATE if duplicate else auth_code


def candidate_verdict(auth_code: int | None, auth_detail: str, replay_detail: str | None
                      ) -> tuple[int | None, str]:
    """``(code, detail)`` of a replay candidate: the 2006 and its detail when the replay
    step gave one (``replay_detail``), else its checks 7-8 outcome (``""`` when valid).

    Examples:
        >>> candidate_verdict(2001, "bad sig", "seen"), candidate_verdict(2001, "bad sig", None)
        ((2006, 'seen'), (2001, 'bad sig'))
    """
    code = candidate_code(auth_code, replay_detail is not None)
    if replay_detail is not None:
        return code, replay_detail
    return code, auth_detail if code is not None else ""


#: The final codes a replay candidate can have besides valid: checks 7-8, or 2006. A stored
#: ``messages`` row with one of these (or none) took part in the replay step.
CANDIDATE_CODES: Final = frozenset(POST_REPLAY_CODES | {DUPLICATE})


def took_part_in_replay(final_code: int | None) -> bool:
    """True when a row with this final code was a replay candidate (valid, 2001, 2002 or
    2006).

    Examples:
        >>> took_part_in_replay(2006), took_part_in_replay(2004)
        (True, False)
    """
    return final_code is None or final_code in CANDIDATE_CODES


def is_replay_candidate(stateless_code: int | None) -> bool:
    """True when checks 1-5 passed, given the stateless code (or the final code of a row
    that is not a 2006): the message takes part in the replay step."""
    return stateless_code is None or stateless_code in POST_REPLAY_CODES
