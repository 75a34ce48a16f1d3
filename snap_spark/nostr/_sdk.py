"""Small helpers shared by the modules that call nostr-sdk."""

from __future__ import annotations


def reason_of(exc: BaseException) -> str:
    """A one-line reason from a nostr-sdk error: its text without the quotes nostr-sdk's
    errors put around it (``'Address already in use (os error 98)'``), at most 300 chars.

    Examples:
        >>> reason_of(ValueError("'timeout'")), reason_of(KeyError())
        ('timeout', 'KeyError')
    """
    text = str(exc).strip().strip("'\"") or type(exc).__name__
    return " ".join(text.split())[:300]
