"""Replay protection (check 6): a repeat of an *accepted* ``(from, id)`` within the window.

Only accepted messages enter the store, so a forged copy (bad signature) seen first never
shadows the genuine message. Messages are taken in receipt order (ties: input order).
A repeat whose receipt time is at most ``window`` seconds after the accepted one is a 2006
(``authentication.md`` asks to track ids for *at least* 120 s, so exactly 120 s is still a
duplicate). The drift check runs first, so with ±60 s drift a repeat more than 120 s later
is always a 2004 before it could be a 2006.

Examples:
    >>> w = ReplayWindow(120)
    >>> w.first_seen("bc1p...", "m1", 10.0) is None
    True
    >>> w.accept("bc1p...", "m1", 10.0)
    >>> w.first_seen("bc1p...", "m1", 130.0)
    10.0
"""

from __future__ import annotations

from collections.abc import Sequence

from snap_spark.protocol.errors import ErrorCode, fmt_seconds
from snap_spark.protocol.validate import Checked

DEFAULT_WINDOW = 120


class ReplayWindow:
    """Accepted ``(from, id)`` → receipt time, for messages offered in receipt order."""

    def __init__(self, window: float = DEFAULT_WINDOW) -> None:
        self.window = window
        self._accepted: dict[tuple[str, str], float] = {}
        self._since_purge = 0

    def first_seen(self, sender: str, msg_id: str, received_at: float) -> float | None:
        """Receipt time of the accepted original if this is a duplicate, else ``None``."""
        seen = self._accepted.get((sender, msg_id))
        if seen is not None and received_at - seen <= self.window:
            return seen
        return None

    def accept(self, sender: str, msg_id: str, received_at: float) -> None:
        """Record an accepted message (and now and then forget expired entries)."""
        self._accepted[(sender, msg_id)] = received_at
        self._since_purge += 1
        if self._since_purge >= 50_000:
            self.purge(received_at)

    def purge(self, now: float) -> None:
        """Forget entries that can no longer make anything a duplicate."""
        self._accepted = {
            key: seen for key, seen in self._accepted.items() if now - seen <= self.window
        }
        self._since_purge = 0

    def __len__(self) -> int:
        return len(self._accepted)


def duplicate_detail(seen: float, received_at: float, window: float) -> str:
    return (
        f"same (from, id) accepted {fmt_seconds(received_at - seen)}s earlier "
        f"(receipt time {fmt_seconds(seen)}, window {fmt_seconds(window)}s)"
    )


def resolve(
    items: Sequence[Checked], window: float = DEFAULT_WINDOW
) -> list[tuple[int | None, str]]:
    """Final ``(error_code, detail)`` for each item, in the order given.

    Items are processed in receipt order; equal receipt times keep the given order, so pass
    items in input order (file, line).
    """
    results: list[tuple[int | None, str]] = [
        (item.stateless_code, item.stateless_detail) for item in items
    ]
    order = sorted(
        (i for i, item in enumerate(items) if item.replay_candidate),
        key=lambda i: items[i].received_at or 0.0,
    )
    store = ReplayWindow(window)
    for i in order:
        item = items[i]
        assert item.sender is not None and item.msg_id is not None
        assert item.received_at is not None
        seen = store.first_seen(item.sender, item.msg_id, item.received_at)
        if seen is not None:
            results[i] = (
                int(ErrorCode.DUPLICATE_MESSAGE),
                duplicate_detail(seen, item.received_at, window),
            )
        elif item.auth_code is None:
            store.accept(item.sender, item.msg_id, item.received_at)
    return results


def replayed_rows(
    senders: Sequence[str],
    msg_ids: Sequence[str],
    received: Sequence[float],
    auth_codes: Sequence[int | None],
    window: float = DEFAULT_WINDOW,
) -> list[tuple[int, str]]:
    """``(row index, detail)`` of the rows :func:`resolve` turns into 2006, for columns of
    messages that passed checks 1-5 (``auth_codes``: their check-7/8 code), given in input
    order. The columnar form the Spark folds use.

    Examples:
        >>> replayed_rows(["a", "a", "a"], ["m", "m", "m"], [10.0, 20.0, 200.0],
        ...               [None, None, None])
        [(1, 'same (from, id) accepted 10s earlier (receipt time 10, window 120s)')]
    """
    items = [
        Checked(sender=sender, msg_id=msg_id, received_at=float(at), auth_code=code)
        for sender, msg_id, at, code in zip(senders, msg_ids, received, auth_codes, strict=True)
    ]
    return [
        (i, detail)
        for i, (code, detail) in enumerate(resolve(items, window))
        if code == ErrorCode.DUPLICATE_MESSAGE
    ]
