"""The lake's commit lease: one writer at a time in the short decide-and-commit section.

Several snap-spark writers may land into one lake at once (a stream, a backfill, Nostr
ingestion). Each reads, checks and writes its files on its own; only the step that decides
replays against ``messages`` and commits the verdicts, the step that folds tasks and
commits ``task_events``/``tasks``, and the step of Nostr ingestion that reads, decides and
commits the three Nostr tables, run one writer at a time, under this lease.

How it works (on any store with an atomic create-if-absent):

- The lease is a folder ``<lake>/_snap_lease`` of small JSON files named by a number,
  ``00000000000000000007.json``. The file with the highest number says who holds the lease,
  until when (``expires``), and whether it was given back (``released``).
- To take the lease, a writer lists the folder. When the newest file is released, expired,
  or names a process of this host that no longer runs, it creates the next number, *only if
  absent*: a hard link on a local file system, a conditional put (``If-None-Match: *``) on
  S3. Of several writers racing for one number exactly one wins; the others wait and try
  again, with a growing pause, until :func:`lease_wait_seconds` have passed.
- The holder rewrites its own file every third of :func:`lease_seconds` with a later
  ``expires`` (a heartbeat thread), and marks it released when done. A holder that dies
  stops renewing: the lease is taken over when its time runs out, or at once on its own host
  (its process id is gone). There is no eternal lock.
- Files more than a few numbers old are deleted by the next holder.

The lease does not make a commit valid by itself: on the delta-rs backend the commit also
names the table version it was decided against and fails if another commit took the next
version (:func:`snap_spark.lake.delta_log.commit_files`). See ``docs/verdicts.md``
("Several writers at once") and docs/architecture.md (*Concurrent writers*).

Examples:
    >>> import tempfile
    >>> lake = tempfile.mkdtemp()
    >>> with commit_lease(lake, "messages") as held:
    ...     held.number
    0
    >>> with commit_lease(lake, "tasks") as held:
    ...     held.number
    1
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from snap_spark.common.extras import EXTRAS
from snap_spark.common.processes import owner_alive, process_start
from snap_spark.files import storage
from snap_spark.lake.api import LakeError

#: Folder of the lease files under the lake.
LEASE_FOLDER = "_snap_lease"
#: Environment settings (seconds) an operator may change; see :func:`lease_seconds`.
LEASE_SECONDS_ENV = "SNAP_SPARK_LEASE_SECONDS"
LEASE_WAIT_ENV = "SNAP_SPARK_LEASE_WAIT_SECONDS"
DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_LEASE_WAIT = 900.0
#: Lease files kept behind the newest one (older ones are deleted by the next holder).
KEEP_FILES = 8


class CommitContention(LakeError):
    """Another writer kept the lake's commit section: this writer gave up (exit 1). Nothing
    of the refused step was committed; running the job again completes it."""


def lease_seconds() -> float:
    """How long a lease lasts without a heartbeat (``SNAP_SPARK_LEASE_SECONDS``, default 60):
    the longest a dead holder on another host can keep the others waiting."""
    return _seconds(LEASE_SECONDS_ENV, DEFAULT_LEASE_SECONDS)


def lease_wait_seconds() -> float:
    """How long a writer waits for the lease before it gives up with
    :class:`CommitContention` (``SNAP_SPARK_LEASE_WAIT_SECONDS``, default 900)."""
    return _seconds(LEASE_WAIT_ENV, DEFAULT_LEASE_WAIT)


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise LakeError(f"{name}={text!r} is not a number of seconds") from None
    if not value > 0:
        raise LakeError(f"{name} must be positive, got {text!r}")
    return value


@dataclass
class HeldLease:
    """The lease as its holder knows it."""

    lake_dir: str
    number: int
    holder: str
    what: str
    #: set when the heartbeat found that another writer took the lease over
    lost: bool = False
    depth: int = 1


#: Leases this process holds, per (lake, thread): a thread that holds the lease may enter
#: the section again (the batch job's commit calls the task refresh, which takes it too).
_HELD: dict[tuple[str, int], HeldLease] = {}
_HELD_LOCK = threading.Lock()


@contextlib.contextmanager
def commit_lease(lake_dir: str, what: str, *, wait: float | None = None) -> Iterator[HeldLease]:
    """Hold the lake's commit lease for the block (``what`` names the step, for other
    writers' messages).

    Raises:
        CommitContention: the lease could not be had within ``wait`` seconds (default
            :func:`lease_wait_seconds`).
    """
    key = (storage.normalize(lake_dir), threading.get_ident())
    with _HELD_LOCK:
        mine = _HELD.get(key)
        if mine is not None:
            mine.depth += 1
    if mine is not None:
        try:
            yield mine
        finally:
            mine.depth -= 1
        return
    if not supports_lease(lake_dir):
        _warn_unleased(lake_dir)
        yield HeldLease(lake_dir, -1, "", what)  # no lease file: one writer at a time
        return
    held = _acquire(lake_dir, what, lease_wait_seconds() if wait is None else wait)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(held, stop), daemon=True,
                            name=f"snap-spark lease {held.number}")
    beat.start()
    with _HELD_LOCK:
        _HELD[key] = held
    try:
        yield held
    finally:
        with _HELD_LOCK:
            _HELD.pop(key, None)
        stop.set()
        beat.join()
        if not held.lost:
            with contextlib.suppress(OSError):
                _write(held, released=True)


def supports_lease(lake_dir: str) -> bool:
    """True when the lake's store has the atomic create-if-absent the lease needs (local
    and mounted file systems, S3 and S3-compatible servers).

    Examples:
        >>> supports_lease("/lake"), supports_lease("s3a://bkt/lake")
        (True, True)
        >>> supports_lease("gs://bkt/lake")
        False
    """
    return storage.is_local(lake_dir) or storage.split_scheme(lake_dir)[0] in storage.S3_SCHEMES


_WARNED: set[str] = set()


def _warn_unleased(lake_dir: str) -> None:
    if lake_dir in _WARNED:
        return
    _WARNED.add(lake_dir)
    import sys

    print(f"[snap-spark] {lake_dir}: this store has no create-if-absent snap-spark can use "
          "for the commit lease; run one writer at a time on this lake", file=sys.stderr)


def check_held(held: HeldLease) -> None:
    """Raise :class:`CommitContention` when ``held`` is no longer the lake's lease (its
    holder stalled past its time and another writer took it over)."""
    if held.number < 0:
        return  # a store without a lease (:func:`supports_lease`)
    newest = _newest(held.lake_dir)
    if held.lost or newest is None or newest[0] != held.number:
        held.lost = True
        raise CommitContention(
            f"lost the commit lease of {held.lake_dir} while {held.what} (this writer stalled "
            f"longer than {lease_seconds():g} s); nothing of that step was committed")


def _folder(lake_dir: str) -> str:
    return storage.join(lake_dir, LEASE_FOLDER)


def _name(number: int) -> str:
    return f"{number:020d}.json"


def _record(held: HeldLease, *, released: bool) -> bytes:
    return json.dumps({
        "holder": held.holder, "what": held.what, "host": socket.gethostname(),
        "pid": os.getpid(), "started": process_start(os.getpid()),
        "expires": time.time() + lease_seconds(),
        "released": released,
    }).encode()


def _numbers(lake_dir: str) -> list[int]:
    """The numbers of the lease files, ascending. Another holder deletes old files
    (:func:`_forget_old`) at any moment: a file gone between the folder's listing and its
    look at that file makes the listing start again (the last try raises)."""
    for _ in range(_LIST_TRIES - 1):
        with contextlib.suppress(FileNotFoundError):
            return _listed_numbers(_folder(lake_dir))
    return _listed_numbers(_folder(lake_dir))


#: Listings of the lease folder tried before a vanishing file is an error.
_LIST_TRIES = 20


def _listed_numbers(folder: str) -> list[int]:
    if storage.path_kind(folder) != "dir":
        return []
    numbers = []
    for location in storage.list_files(folder, (".json",)):
        stem = location.rstrip("/").rsplit("/", 1)[-1][: -len(".json")]
        if stem.isdigit() and len(stem) == 20:
            numbers.append(int(stem))
    return sorted(numbers)


def _newest(lake_dir: str) -> tuple[int, dict[str, Any] | None] | None:
    """The newest lease file's number and record (``None`` record: unreadable as yet)."""
    for _ in range(5):
        numbers = _numbers(lake_dir)
        if not numbers:
            return None
        number = numbers[-1]
        try:
            with storage.open_input(storage.join(_folder(lake_dir), _name(number))) as handle:
                data = handle.read()
        except FileNotFoundError:
            continue  # deleted meanwhile: list again
        try:
            record = json.loads(data)
        except ValueError:
            record = None
        return number, record if isinstance(record, dict) else None
    return None


def _free(record: dict[str, Any] | None, number_seen_since: float) -> bool:
    """True when a lease record no longer holds the lake."""
    if record is None:  # a file being written: free only once it is long stale
        return time.time() - number_seen_since > lease_seconds()
    if record.get("released"):
        return True
    if float(record.get("expires", 0)) < time.time():
        return True
    pid = record.get("pid")
    return isinstance(pid, int) and not owner_alive(str(record.get("host")), pid,
                                                     record.get("started"))


def _acquire(lake_dir: str, what: str, wait: float) -> HeldLease:
    holder = uuid.uuid4().hex
    deadline = time.monotonic() + wait
    pause = 0.02
    first_seen: dict[int, float] = {}
    blocker = ""
    storage.make_dirs(_folder(lake_dir))
    while True:
        newest = _newest(lake_dir)
        if newest is None:
            number = 0
            free = True
        else:
            number = newest[0] + 1
            seen = first_seen.setdefault(newest[0], time.time())
            free = _free(newest[1], seen)
            if not free and newest[1] is not None:
                blocker = (f"{newest[1].get('what', '?')} of pid {newest[1].get('pid')} on "
                           f"{newest[1].get('host')}")
        if free:
            held = HeldLease(lake_dir, number, holder, what)
            if _create_exclusive(storage.join(_folder(lake_dir), _name(number)),
                                 _record(held, released=False)):
                _forget_old(lake_dir, number)
                return held
            pause = 0.02  # another writer won this number: look again at once
        if time.monotonic() > deadline:
            raise CommitContention(
                f"the lake {lake_dir} is busy: another writer held its commit lease "
                f"({blocker or 'several writers in turn'}) for the {wait:g} s this writer "
                f"waits ({LEASE_WAIT_ENV}); nothing of {what} was committed, run it again")
        time.sleep(pause)
        pause = min(pause * 1.5, 1.0)


def _heartbeat(held: HeldLease, stop: threading.Event) -> None:
    while not stop.wait(lease_seconds() / 3):
        newest = _newest(held.lake_dir)
        if newest is None or newest[0] != held.number:
            held.lost = True
            return
        with contextlib.suppress(OSError):
            _write(held, released=False)


def _write(held: HeldLease, *, released: bool) -> None:
    """Rewrite the holder's own lease file (only its holder ever writes it after creation)."""
    location = storage.join(_folder(held.lake_dir), _name(held.number))
    data = _record(held, released=released)
    if storage.is_local(location):
        path = storage.local_path(location)
        temporary = f"{path}.{held.holder}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
        return
    filesystem, inner = storage.resolve(location)
    with filesystem.open_output_stream(inner) as out:
        out.write(data)


def _create_exclusive(location: str, data: bytes) -> bool:
    """Create ``location`` holding ``data`` only if it does not exist; True when created."""
    if storage.is_local(location):
        path = storage.local_path(location)
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)  # fails when the name exists: atomic create-if-absent
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(temporary)
    scheme, rest = storage.split_scheme(location)
    if scheme in storage.S3_SCHEMES:
        return _s3_put_if_absent(rest, data)
    raise LakeError(
        f"concurrent writers need an atomic create-if-absent on the lake's store; "
        f"{scheme}:// is not supported for the commit lease (local folders and S3 are)")


def _s3_put_if_absent(rest: str, data: bytes) -> bool:
    """A conditional put on S3 (``If-None-Match: *``), with the endpoint and region the
    lake's other S3 calls use (:class:`snap_spark.files.storage.S3Settings`)."""
    try:
        import boto3  # type: ignore[import-untyped]
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]
    except ImportError:
        raise LakeError(EXTRAS["s3"].message()) from None
    bucket, _, key = rest.partition("/")
    settings = storage.S3Settings.from_env()
    client = boto3.client("s3", endpoint_url=settings.endpoint,
                          region_name=storage.s3_region(settings, bucket))
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            return False
        raise


def _forget_old(lake_dir: str, number: int) -> None:
    for old in _numbers(lake_dir):
        if old < number - KEEP_FILES:
            with contextlib.suppress(OSError):
                storage.delete_file(storage.join(_folder(lake_dir), _name(old)))
