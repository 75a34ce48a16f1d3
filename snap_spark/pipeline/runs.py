"""Run markers and crash leftovers: what a killed run left in the lake, found and removed.

A landing run writes data files into the table folders (delta-rs adopts them in place) and
scratch files under ``<lake>/_staging/<ingest id>/`` before it commits. Killed before its
commits (``kill -9``, a lost driver), those files stay: Delta ignores them, but a plain
Parquet reader of the folder would count them, and they take space forever.

So every run first writes a marker ``<lake>/_snap_runs/<ingest id>.json`` (host, process id
and its start time), names every data file it writes ``part-<run tag>-...`` and deletes the
marker when it ends, committed or failed. The task tables' catch-up after a landing
(:func:`snap_spark.pipeline.task_tables.catch_up_tasks`), a task rebuild and each Nostr commit
are runs of their own, with their own marker and tag. :func:`clean_leftovers` (run at the
start and end of every landing run, and by ``snap-spark lake clean``) looks at the markers
of runs that are over (their process is gone on this host, or the marker is older than
``stale_after`` seconds for runs of other hosts) and deletes, for each: the data files in
the folder of every table a job writes (:func:`swept_tables`) whose names carry that
run's tag and that no commit of the Delta log references, and its staging folder. It
never deletes a file the log references, nor a file a running run, another run or another
program wrote.

Examples:
    >>> run_tag("0123456789abcdef0123456789abcdef")
    '0123456789abcdef'
    >>> swept_tables()[:3]
    ['raw_messages', 'messages', 'ingested_files']
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from snap_spark.common.processes import process_alive, process_start
from snap_spark.files import storage

#: Folder of run markers and of staging files, under the lake.
RUNS_FOLDER = "_snap_runs"
STAGING_FOLDER = "_staging"
#: A marker of another host older than this is a run that is over (seconds).
DEFAULT_STALE_AFTER = 24 * 3600.0


def run_tag(ingest_id: str) -> str:
    """The part of every data file name that names the run which wrote it."""
    return ingest_id[:16]


def file_prefix(ingest_id: str, part: str) -> str:
    """File name prefix of the data files one task of a run writes."""
    return f"part-{run_tag(ingest_id)}-{part}"


def swept_tables(tables: Sequence[str] = ()) -> list[str]:
    """The table folders (names under the lake) a sweep looks in: every table a job writes
    (:data:`snap_spark.schemas.tables.TABLES`), then ``tables`` not among them.

    Every sweep looks in all of them, whatever the caller writes: a run may have written
    into several tables (the Nostr ingestion lands messages and refreshes tasks too), and
    a sweep that removed a marker after looking in some tables only would leave that
    run's files in the others for good.
    """
    from snap_spark.schemas.tables import TABLES

    return list(dict.fromkeys([*TABLES, *tables]))


@dataclass
class RunMarker:
    """Who is writing into a lake: one JSON file per run under ``_snap_runs``."""

    ingest_id: str
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    process_start: str | None = None
    created: float = field(default_factory=time.time)

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RunMarker:
        values = json.loads(data)
        return cls(**{k: values[k] for k in ("ingest_id", "host", "pid", "process_start",
                                               "created") if k in values})

    def is_over(self, stale_after: float = DEFAULT_STALE_AFTER) -> bool:
        """True when the run cannot be writing any more."""
        if self.host == socket.gethostname():
            return not process_alive(self.pid, self.process_start)
        return time.time() - self.created > stale_after


def _write(location: str, data: bytes) -> None:
    filesystem, path = storage.resolve(location)
    storage.make_dirs(location.rsplit("/", 1)[0])
    with filesystem.open_output_stream(path) as out:
        out.write(data)


def _read(location: str) -> bytes:
    with storage.open_input(location) as stream:
        return stream.read()


@contextmanager
def run_marker(lake: str, ingest_id: str) -> Iterator[RunMarker]:
    """Mark a run as writing into ``lake`` for the duration of the block."""
    marker = RunMarker(ingest_id, process_start=process_start(os.getpid()))
    location = storage.join(lake, RUNS_FOLDER, f"{ingest_id}.json")
    _write(location, marker.to_json())
    try:
        yield marker
    finally:
        storage.delete_file(location)


def running_runs(lake: str, stale_after: float = DEFAULT_STALE_AFTER) -> set[str]:
    """The ingest ids of runs writing into ``lake`` now (their marker is there and their
    process is not known to be over): what they committed so far is theirs to complete.

    Examples:
        >>> running_runs("/nowhere/lake")
        set()
    """
    runs_dir = storage.join(lake, RUNS_FOLDER)
    if storage.path_kind(runs_dir) != "dir":
        return set()
    found: set[str] = set()
    for location in storage.list_files(runs_dir, (".json",)):
        try:
            marker = RunMarker.from_json(_read(location))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # gone meanwhile, not ours, or half written
        if not marker.is_over(stale_after):
            found.add(marker.ingest_id)
    return found


def _referenced(table: str) -> set[str]:
    """Every data file path (relative to the table) any commit of the log still names."""
    paths: set[str] = set()
    log = storage.join(table, "_delta_log")
    if storage.path_kind(log) != "dir":
        return paths
    filesystem, root = storage.resolve(log)
    from pyarrow import fs as pafs

    for info in filesystem.get_file_info(pafs.FileSelector(root)):
        if not info.path.endswith(".json"):
            continue
        with filesystem.open_input_stream(info.path) as stream:
            for line in stream.read().splitlines():
                action = json.loads(line) if line.strip() else {}
                for kind in ("add", "remove"):
                    if kind in action:
                        paths.add(_unquote(action[kind]["path"]))
    from snap_spark.lake import table_file_uris

    # current files a checkpoint names, its JSON commits gone
    paths.update(_relative(table, uri) for uri in table_file_uris(table))
    return paths


def _unquote(path: str) -> str:
    from urllib.parse import unquote

    return unquote(path)


def _relative(table: str, uri: str) -> str:
    """A data file URI of the table as a path relative to the table folder."""
    _, table_path = storage.resolve(table)
    _, file_path = storage.resolve(uri)
    return file_path[len(table_path):].lstrip("/")


@dataclass
class Cleaned:
    """What :func:`clean_leftovers` removed (or would remove, with ``dry_run``)."""

    runs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.runs)} finished run(s) left {len(self.files)} uncommitted data "
                f"file(s) and {len(self.staging)} staging folder(s); "
                f"{len(self.running)} run(s) still writing")


def clean_leftovers(lake: str, tables: Sequence[str] = (), *, dry_run: bool = False,
                    stale_after: float = DEFAULT_STALE_AFTER, skip: Sequence[str] = (),
                    forget: bool = True) -> Cleaned:
    """Remove what runs that are over left uncommitted in ``lake`` (see the module doc).

    The folders of every table a job writes are looked in, and ``tables`` (folder names
    under the lake) besides (:func:`swept_tables`); ``skip`` run ids to leave alone (the
    caller's own run). With ``forget=False`` the markers of the runs cleaned stay, so a
    later sweep (a run sweeps when it starts and again when it ends) also removes what their
    last workers finished writing after the first one.

    Examples:
        A killed run's marker, and a file it wrote into ``tasks`` that no commit names:

        >>> lake = tmp / "lake"
        >>> (lake / "_snap_runs").mkdir(parents=True)
        >>> dead = RunMarker("d" * 32, pid=2**22 + 17)  # no such process
        >>> _ = (lake / "_snap_runs" / f"{dead.ingest_id}.json").write_bytes(dead.to_json())
        >>> (lake / "tasks").mkdir()
        >>> left = lake / "tasks" / f"{file_prefix(dead.ingest_id, 't-0')}-x.parquet"
        >>> _ = left.write_bytes(b"PAR1")  # no footer: killed while writing it
        >>> cleaned = clean_leftovers(str(lake))  # looks in tasks unasked
        >>> cleaned.runs == [dead.ingest_id], cleaned.files == [str(left)], left.exists()
        (True, True, False)
        >>> list((lake / "_snap_runs").iterdir())  # the marker of the run cleaned: gone
        []
    """
    cleaned = Cleaned()
    runs_dir = storage.join(lake, RUNS_FOLDER)
    if storage.path_kind(runs_dir) != "dir":
        return cleaned
    markers: list[tuple[str, RunMarker]] = []
    filesystem, root = storage.resolve(runs_dir)
    from pyarrow import fs as pafs

    for info in filesystem.get_file_info(pafs.FileSelector(root)):
        if info.type != pafs.FileType.File or not info.path.endswith(".json"):
            continue
        location = storage.join(runs_dir, info.path.rsplit("/", 1)[1])
        try:
            marker = RunMarker.from_json(_read(location))
        except FileNotFoundError:
            continue  # listed, then removed by its run as it ended (or by another sweep)
        except (ValueError, KeyError, TypeError):
            continue  # not ours, or half written: leave it
        if marker.ingest_id in skip:
            continue
        if not marker.is_over(stale_after):
            cleaned.running.append(marker.ingest_id)
            continue
        markers.append((location, marker))
    if not markers:
        return cleaned
    tags = {run_tag(m.ingest_id) for _, m in markers}
    for name in swept_tables(tables):
        table = storage.join(lake, name)
        if storage.path_kind(table) != "dir":
            continue
        referenced = _referenced(table)
        for path in _data_files(table):
            relative = _relative(table, path)
            base = relative.rsplit("/", 1)[-1]
            if not any(base.startswith(f"part-{tag}-") for tag in tags):
                continue  # another run's or another program's file
            if relative in referenced:
                continue  # committed: part of the table (or of its history)
            cleaned.files.append(path)
            if not dry_run:
                storage.delete_file(path)
    for location, marker in markers:
        staging = storage.join(lake, STAGING_FOLDER, marker.ingest_id)
        if storage.exists(staging):
            cleaned.staging.append(staging)
            if not dry_run:
                storage.delete_tree(staging)
        cleaned.runs.append(marker.ingest_id)
        if forget and not dry_run:
            storage.delete_file(location)
    return cleaned


def _data_files(table: str) -> list[str]:
    """Every Parquet file under a table folder (partition folders included, the log not)."""
    return storage.list_files(table, (".parquet",))
