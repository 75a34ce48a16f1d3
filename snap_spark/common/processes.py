"""Is a process of this host still running? What run markers and the commit lease ask.

A pid alone can be reused: the process's start time (from ``/proc``) tells a new process
with the same pid from the one that was recorded. A zombie (killed, not yet reaped) runs no
more and counts as gone.

Examples:
    >>> import os
    >>> process_alive(os.getpid(), process_start(os.getpid()))
    True
    >>> owner_alive("another-host", 1, None)  # another host cannot be looked at
    True
"""

from __future__ import annotations

import os
import socket


def process_start(pid: int) -> str | None:
    """The start time of a local process (``/proc``), to tell a reused pid from the one
    recorded; ``None`` when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_alive(pid: int, started: str | None = None) -> bool:
    """False when the local process ``pid`` (started at ``started``, if known) is gone, a
    zombie, or another process that got its pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True  # no /proc: the signal said it exists
    if fields and fields[0] == "Z":
        return False
    return started is None or len(fields) < 20 or fields[19] == started


def owner_alive(host: str, pid: int, started: str | None) -> bool:
    """False only when the process ``pid`` of ``host`` is known to be gone (a process of
    another host cannot be looked at, and counts as running)."""
    return host != socket.gethostname() or process_alive(pid, started)


def current_owner() -> tuple[str, int, str | None]:
    """``(host, pid, process start)`` of this process."""
    return socket.gethostname(), os.getpid(), process_start(os.getpid())
