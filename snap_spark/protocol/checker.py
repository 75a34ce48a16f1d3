"""Check whole files of input lines without Spark: the reference the Spark job must equal.

Examples:
    >>> results = check_lines([b'{"x": 1}', b"garbage"], ReceiptClock.refuse())
    >>> [(r.line_no, r.error_code) for r in results]
    [(1, 1003), (2, 1003)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from snap_spark.protocol.errors import ERROR_NAMES
from snap_spark.protocol.records import parse_line
from snap_spark.protocol.replay import line_name, resolve
from snap_spark.protocol.validate import Checked, ReceiptClock, check_record
from snap_spark.protocol.verdict import DEFAULT_MAX_DRIFT, DEFAULT_REPLAY_WINDOW, verdict_name


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """The verdict of one input line."""

    line_no: int
    verdict: str  # "valid" or "rejected"
    error_code: int | None
    error_detail: str

    def as_dict(self) -> dict[str, object]:
        return {
            "line_no": self.line_no,
            "verdict": self.verdict,
            "error_code": self.error_code,
            "error_detail": self.error_detail,
        }


def check_one(raw: bytes | None, clock: ReceiptClock, max_drift: float) -> Checked:
    """Stateless checks of one raw line, keeping only what the replay step needs."""
    checked = check_record(parse_line(raw), clock, max_drift=max_drift)
    checked.payload = None  # the replay step does not need it; keep memory flat
    checked.canonical_payload = None
    return checked


def check_lines(
    lines: Iterable[bytes | None],
    clock: ReceiptClock,
    *,
    max_drift: float = DEFAULT_MAX_DRIFT,
    replay_window: float = DEFAULT_REPLAY_WINDOW,
    read_errors: dict[int, str] | None = None,
    names: Sequence[str] | None = None,
) -> list[LineVerdict]:
    """Verdicts for a sequence of raw lines (numbered from 1), replay applied in receipt order.

    ``names`` name the lines in 2006 details (e.g. ``line 3 of a.jsonl``, see
    :func:`snap_spark.protocol.replay.line_name`); by default ``line N``.

    Raises:
        MissingReceiptTime: a bare line needs a receipt clock and ``clock`` refuses.
    """
    checked: list[Checked] = []
    for raw in lines:
        checked.append(check_one(raw, clock, max_drift))
    if read_errors:
        for line_no, message in read_errors.items():
            checked[line_no - 1] = Checked.unreadable(message)
    return final_verdicts(checked, replay_window=replay_window, names=names)


def final_verdicts(
    checked: Sequence[Checked],
    *,
    replay_window: float = DEFAULT_REPLAY_WINDOW,
    names: Sequence[str] | None = None,
) -> list[LineVerdict]:
    """The verdict of each line from its stateless checks, replay applied in receipt order
    (lines numbered from 1; ``names`` as in :func:`check_lines`)."""
    if names is None:
        names = [line_name(None, n) for n in range(1, len(checked) + 1)]
    finals = resolve(checked, replay_window, names)
    return [
        LineVerdict(n, verdict_name(code), code, detail)
        for n, (code, detail) in enumerate(finals, start=1)
    ]


def format_balance(lines_read: int, counts: Mapping[int | None, int]) -> list[str]:
    """The end-of-run balance for people: valid + rejected against the lines read (each
    side counted on its own, so a lost or invented line shows as MISMATCH), then the count
    of each error code.

    Examples:
        >>> print("\\n".join(format_balance(3, {None: 2, 1003: 1})))
        lines read: 3   valid: 2   rejected: 1   balance: OK
          1003 InvalidMessageError      1
    """
    valid = counts.get(None, 0)
    rejected = sum(n for code, n in counts.items() if code is not None)
    balance = "OK" if valid + rejected == lines_read else "MISMATCH"
    rows = [f"lines read: {lines_read}   valid: {valid}   rejected: {rejected}   "
            f"balance: {balance}"]
    for code in sorted(c for c in counts if c is not None):
        rows.append(f"  {code} {ERROR_NAMES.get(code, '?'):<24} {counts[code]}")
    return rows
