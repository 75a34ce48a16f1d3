"""Memory helpers shared by the hot loops of the checking and replay steps."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector around one batch of work.

    The hot loops (checking lines, stepping replay state) allocate many small, acyclic
    objects that reference counting frees; left on, the collector rescans the live ones
    again and again, which slows both loops markedly (docs/speed.md, *Figures behind the
    code*). Cycles made meanwhile are collected after the batch.

    Examples:
        >>> import gc
        >>> with gc_paused():
        ...     gc.isenabled()
        False
        >>> gc.isenabled()
        True
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
