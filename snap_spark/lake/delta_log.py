"""Open Delta tables with delta-rs and commit data files to their log (driver side).

What the delta-rs backend (:mod:`snap_spark.lake.delta_rs`) and the in-place commits of the
delta-spark backend need. Every call into ``deltalake`` passes the table's location through
:func:`snap_spark.files.storage.delta_table_uri` and
:func:`snap_spark.files.storage.delta_storage_options`, so tables on S3-compatible stores
open with the same settings the data files are written with.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from snap_spark.files import storage
from snap_spark.lake.api import DamagedTable, LakeError, LakeSchemaError, VersionConflict
from snap_spark.lake.common import marker_of, marker_write_id, write_marker
from snap_spark.lake.schema import describe_mismatch, from_delta_json, nullable_schema, same_columns

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction
    from pyspark.sql.types import StructType

    from snap_spark.lake.files import DataFile

@dataclass(frozen=True)
class RemovedFile:
    """A data file a commit removes: its path and partition values as the log holds them."""

    path: str
    size: int | None
    partition_values: Mapping[str, str | None]


#: Commit attempts when concurrent writers keep winning the race for the next version.
MAX_COMMIT_ATTEMPTS = 10

#: A commit of :func:`commit_files` that makes a version divisible by this writes a log
#: checkpoint. delta-rs's own interval is 100 versions, and bringing a table object up to
#: date (:func:`latest_table`) replays every commit since the last checkpoint, at a cost
#: that grows with their number. A live stream commits each table about once a second and
#: looks at it ten times a micro-batch, so at 100 its micro-batches grew steadily longer
#: before each checkpoint; at 10 (delta-spark's default) they stay flat (docs/speed.md,
#: *Figures behind the code*).
CHECKPOINT_EVERY = 10


def delta_location(uri: str) -> tuple[str, dict[str, str]]:
    """The URI and ``storage_options`` to hand delta-rs for the table at ``uri``.

    Examples:
        >>> delta_location("/lake/t")
        ('/lake/t', {})
    """
    return storage.delta_table_uri(uri), storage.delta_storage_options(uri)


def table_exists(uri: str) -> bool:
    """True when ``uri`` holds a Delta table.

    Examples:
        >>> table_exists("/nowhere/at/all")
        False
    """
    from deltalake import DeltaTable

    location, options = delta_location(uri)
    return bool(DeltaTable.is_deltatable(location, storage_options=options))


def open_table(uri: str, version: int | None = None) -> DeltaTable | None:
    """The Delta table at ``uri`` (at ``version``), or ``None`` when there is no table.

    Examples:
        >>> open_table("/nowhere/at/all") is None
        True
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    location, options = delta_location(uri)
    if not DeltaTable.is_deltatable(location, storage_options=options):
        return None
    try:
        return DeltaTable(location, version=version, storage_options=options)
    except DeltaError as exc:
        if version is not None and "version" in str(exc).lower() and (
                "not found" in str(exc).lower() or "invalid" in str(exc).lower()):
            raise  # a version that is not there: the caller's question, not damage
        raise damaged_table(uri, exc) from None


#: Per thread: the tables :func:`latest_table` opened, by location (most recent last), each
#: with the stamp of the commit file of the version it holds.
_LATEST = threading.local()
#: The most tables :func:`latest_table` keeps per thread.
LATEST_TABLES = 16


def latest_table(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri`` at its latest version, as :func:`open_table` gives it, but
    kept per thread and brought up to date by reading only the commits written since the
    thread's last call for it; ``None`` when there is no table.

    A fresh open reads the log from its last checkpoint on: up to 100 commit files, each a
    read of its own (docs/speed.md, *Figures behind the code*). A stream's micro-batch opens
    the same few tables several times (``messages`` four times), so that cost grew with
    every micro-batch until the next checkpoint. Commits by other writers and processes are
    seen as a fresh open sees them: the log is listed from the version held on.

    The object is shared by the calls of one thread (another thread gets its own): use it
    before the next call of this function on that thread, and do not move it to another
    version. A table deleted and created again at its location is told apart by the commit
    file of the version held (its size and modification time), and opened afresh.

    Examples:
        >>> import pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = str(tmp / "t")
        >>> latest_table(path) is None
        True
        >>> write_deltalake(path, pa.table({"n": [1]}))
        >>> first = latest_table(path)
        >>> write_deltalake(path, pa.table({"n": [2]}), mode="append")
        >>> latest_table(path) is first, first.version()
        (True, 1)
    """
    location, options = delta_location(uri)
    key = (location, tuple(sorted(options.items())))
    held: OrderedDict[tuple[Any, ...], tuple[DeltaTable, int, Any]] = (
        _LATEST.__dict__.setdefault("tables", OrderedDict()))
    kept = held.pop(key, None)
    table: DeltaTable | None = None
    if kept is not None:
        # the version it was stamped at (a commit made through the object moves it on)
        cached, version, stamp = kept
        try:
            if _commit_stamp(uri, version) == stamp:
                cached.update_incremental()
                table = cached
        except Exception:  # whatever went wrong, a fresh open decides
            table = None
    if table is None:
        table = open_table(uri)
        if table is None:
            return None
    version = int(table.version())
    stamp = (kept[2] if kept is not None and table is kept[0] and version == kept[1]
             else _commit_stamp(uri, version))
    if stamp is not None:
        held[key] = (table, version, stamp)
        while len(held) > LATEST_TABLES:
            held.popitem(last=False)
    return table


def table_at(uri: str, version: int | None = None) -> DeltaTable | None:
    """The Delta table at ``uri`` at ``version`` (the latest when ``None``): the thread's
    :func:`latest_table` when it is at that version, as it usually is for a reader that
    just looked the version up, else a fresh :func:`open_table` at it. The same rules of
    use as :func:`latest_table`.

    Examples:
        >>> import pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = str(tmp / "at")
        >>> write_deltalake(path, pa.table({"n": [1]}))
        >>> write_deltalake(path, pa.table({"n": [2]}), mode="append")
        >>> table_at(path, 1) is latest_table(path), table_at(path, 0).version()
        (True, 0)
    """
    table = latest_table(uri)
    if version is None or (table is not None and table.version() == version):
        return table
    return open_table(uri, version)


def _commit_stamp(uri: str, version: int) -> tuple[int, int] | None:
    """Size and modification time (ns) of the commit file of ``version`` of the table at
    ``uri``; ``None`` when it cannot be read (gone, or cleaned up with old log entries)."""
    try:
        stat = storage.file_stat(storage.join(uri, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return None
    return None if stat.mtime_ns is None else (stat.size, stat.mtime_ns)


def damaged_table(uri: str, exc: BaseException) -> DamagedTable:
    """The one-line error for a table whose log cannot be read, naming the damaged log
    file (the newest ``_delta_log/*.json`` that is not JSON) and what to do."""
    reason = (str(exc).strip().splitlines() or ["unreadable"])[0]
    log_dir = storage.join(uri, "_delta_log")
    bad: str | None = None
    try:
        commits = sorted(f for f in storage.list_files(log_dir, (".json",))
                         if f.rsplit("/", 1)[-1][:-5].isdigit())
        for path in reversed(commits[-50:]):
            with storage.open_input(path) as handle:
                text = handle.read()
            try:
                for line in text.splitlines():
                    if line.strip():
                        json.loads(line)
            except ValueError:
                bad = path
                break
    except OSError:
        pass
    if bad is None:
        return DamagedTable(f"the Delta table {uri} cannot be read ({reason}); run "
                           f"`snap-spark lake check --lake <lake>` to find the damaged file")
    version = int(bad.rsplit("/", 1)[-1][:-5])
    earlier = (f"; version {version - 1} is the last before it (time travel: "
               f"versionAsOf={version - 1})" if version > 0 else "")
    return DamagedTable(
        f"the Delta table {uri} cannot be read: its log file {bad} (version {version}) is "
        f"damaged ({reason}); restore that file from a backup{earlier}")


def table_schema(table: DeltaTable) -> StructType:
    """The Spark schema of a delta-rs table snapshot."""
    return from_delta_json(table.schema().to_json())


def read_txn_version(uri: str, app_id: str) -> int | None:
    """Latest app transaction version of ``app_id`` in the table at ``uri`` (any writer).

    Examples:
        >>> read_txn_version("/nowhere/at/all", "ingest") is None
        True
    """
    table = latest_table(uri)
    if table is None:
        return None
    done = table.transaction_version(app_id)
    return None if done is None else int(done)


def write_committed(uri: str, write_id: str, start_version: int) -> bool:
    """True when a commit after ``start_version`` carries the marker of ``write_id``.

    Examples:
        >>> write_committed("/nowhere/at/all", "w1", -1)
        False
    """
    table = latest_table(uri)
    if table is None:
        return False
    newer = table.version() - start_version
    if newer <= 0:
        return False
    return any(
        marker_write_id(entry.get("userMetadata")) == write_id
        for entry in table.history(limit=newer)
    )


def _markers(uri: str, first: int) -> Iterator[dict[str, Any]]:
    """The markers of the commits this package made to the table at ``uri``, newest first,
    the history read in growing windows (``first`` commits, then eight times as many, ...)
    of the version opened (later commits do not shift it); nothing when there is no
    table."""
    table = open_table(uri)
    if table is None:
        return
    seen, limit = 0, first
    while True:
        entries = table.history(limit=limit)
        for entry in entries[seen:]:
            marker = marker_of(entry.get("userMetadata"))
            if marker is not None:
                yield marker
        if len(entries) < limit:  # the whole history was read
            return
        seen, limit = len(entries), limit * 8


def committed_info(uri: str, app_id: str, version: int) -> dict[str, Any] | None:
    """The ``info`` of the commit that carries the app transaction ``(app_id, version)``
    (made through this package), newest commits first; ``None`` when no such commit is in
    the table's history (or the table is absent).

    Examples:
        >>> committed_info("/nowhere/at/all", "ingest", 1) is None
        True
    """
    for marker in _markers(uri, first=32):
        if marker.get("appId") == app_id and marker.get("txnVersion") == version:
            info = marker.get("info")
            return info if isinstance(info, dict) else {}
    return None


def newest_info_with(uri: str, key: str) -> dict[str, Any] | None:
    """The ``info`` of the newest commit (made through this package) whose info holds
    ``key``; ``None`` when no commit of the table's history has one (or no table).

    Examples:
        >>> newest_info_with("/nowhere/at/all", "tasks_through") is None
        True
    """
    for marker in _markers(uri, first=8):
        info = marker.get("info")
        if isinstance(info, dict) and key in info:
            return info
    return None


def table_row_count(uri: str, version: int | None = None) -> int | None:
    """The rows the table holds (at ``version``), from the record counts of its log;
    ``None`` when there is no table or a file's count is not recorded.

    Examples:
        >>> table_row_count("/nowhere/at/all") is None
        True
    """
    import pyarrow as pa

    table = table_at(uri, version)
    if table is None:
        return None
    # (unflattened: the per-column statistics stay structs, much faster to hand over;
    # docs/speed.md, *Figures behind the code*)
    counts = pa.table(table.get_add_actions(flatten=False)).column("num_records")
    if counts.null_count:
        return None
    return int(sum(counts.to_pylist()))


def rows_at_most(uri: str, limit: int, version: int | None = None) -> bool:
    """Whether the table at ``uri`` (at ``version``) holds at most ``limit`` rows, by the
    record counts of its log: what decides that a small table is read on the driver
    rather than by Spark. ``False`` when there is no table or a count is not recorded.

    Examples:
        >>> rows_at_most("/nowhere/at/all", 10)
        False
    """
    counted = table_row_count(uri, version)
    return counted is not None and counted <= limit


def check_same_table(uri: str, existing: StructType, partitions: Sequence[str],
                     schema: StructType, partition_by: Sequence[str]) -> None:
    """Refuse files of ``schema``/``partition_by`` for a table that has other columns or
    another partitioning (it changed while they were written).

    Raises:
        LakeSchemaError: columns or partitioning differ.
    """
    wanted = nullable_schema(schema)
    if not same_columns(existing, wanted):
        raise LakeSchemaError(
            f"table at {uri} changed while writing: {describe_mismatch(existing, wanted)}"
        )
    if list(partitions) != list(partition_by):
        raise LakeSchemaError(
            f"table at {uri} is partitioned by {list(partitions)}, "
            f"the files by {list(partition_by)}"
        )


def commit_files(
    uri: str,
    files: Sequence[DataFile],
    schema: StructType,
    partition_by: Sequence[str],
    *,
    app_id: str,
    version: int,
    write_id: str,
    info: Mapping[str, Any] | None = None,
    replace: bool = False,
    removes: Sequence[RemovedFile] = (),
    read_version: int | None = None,
) -> bool:
    """Commit already-written data files as one Delta transaction with ``(app_id, version)``
    (and ``info`` in its ``userMetadata``: :func:`snap_spark.lake.common.write_marker`);
    with ``replace`` the commit also removes every file the table held, with ``removes``
    the files named. Removing a file the table no longer holds (another writer removed it
    meanwhile) raises :class:`LakeError` instead of committing.

    Creates the table (schema ``schema`` made nullable, partitioned by ``partition_by``) when
    absent. Returns ``False`` without committing when the table already has a transaction
    ``>= version`` for ``app_id``. An empty ``files`` still commits the app transaction.
    delta-rs does not itself refuse an app transaction version it has seen, so the version
    is re-checked on a fresh snapshot right before each commit attempt, and a lost race for
    the next log version (a commit conflict) is retried.

    With ``read_version`` the commit must be version ``read_version + 1`` exactly (the
    version after the one its content was decided against; ``-1``: the table must not
    exist yet): a lost race is not retried but raises :class:`VersionConflict`, and so does
    a table already past ``read_version``. delta-rs writes each log entry with a
    create-if-absent (a hard link locally, ``If-None-Match: *`` on S3), so of two writers
    decided against one version exactly one commits.

    Example (with staged files)::

        commit_files("s3://bkt/lake/t", files, schema, ["day"], app_id="q", version=7,
                     write_id="w")   # True: committed by this call
    """
    from deltalake.transaction import CommitProperties, Transaction

    adds, actions = _file_actions(files, removes)
    properties = CommitProperties(
        custom_metadata={"userMetadata": write_marker(write_id, app_id, version, info)},
        app_transactions=[Transaction(app_id, version)],
        # decided against one version: the next one or none (the caller decides again)
        max_commit_retries=0 if read_version is not None else None,
    )
    commit = _FileCommit(uri, app_id, version, adds, actions, properties, schema, partition_by,
                         replace, read_version, nullable_schema(schema), *delta_location(uri))
    last_error: Exception | None = None
    for _attempt in range(MAX_COMMIT_ATTEMPTS):
        table = latest_table(uri)
        if read_version is not None and _committed_since_read_version(commit, table):
            return False
        if table is None:
            last_error = _create_table(commit)
            if last_error is None:
                return True
            continue
        done = table.transaction_version(app_id)
        if done is not None and done >= version:
            return False
        if removes:
            _check_still_held(uri, table, removes)
        last_error = _commit_to_table(commit, table)
        if last_error is None:
            checkpoint_on_interval(uri)
            return True
    raise LakeError(f"could not commit to {uri} in {MAX_COMMIT_ATTEMPTS} attempts") from last_error


@dataclass(frozen=True)
class _FileCommit:
    """One :func:`commit_files` call, fixed before its first attempt: the app transaction,
    the actions and commit properties it commits, the files' schema and partitioning, and
    where and with what schema it creates the table when there is none."""

    uri: str
    app_id: str
    version: int
    adds: list[AddAction]
    #: the adds, then a remove action for each file removed
    actions: list[AddAction | RemoveAction]
    properties: CommitProperties
    schema: StructType
    partition_by: Sequence[str]
    replace: bool
    read_version: int | None
    #: ``schema`` made nullable: the schema of a table the commit creates
    wanted: StructType
    location: str
    options: dict[str, str]


def _file_actions(files: Sequence[DataFile], removes: Sequence[RemovedFile]
                  ) -> tuple[list[AddAction], list[AddAction | RemoveAction]]:
    """The add actions of ``files``, and those followed by a remove action (stamped now)
    for each of ``removes``."""
    from deltalake.transaction import AddAction, RemoveAction

    adds = [
        AddAction(
            path=f.path,
            size=f.size,
            partition_values=f.partition_values,
            modification_time=f.modification_time,
            data_change=True,
            stats=f.stats,
        )
        for f in files
    ]
    file_actions: list[AddAction | RemoveAction] = list(adds)
    now_ms = int(time.time() * 1000)
    file_actions.extend(
        RemoveAction(path=r.path, data_change=True, deletion_timestamp=now_ms, size=r.size,
                     partition_values=dict(r.partition_values))
        for r in removes
    )
    return adds, file_actions


def _committed_since_read_version(commit: _FileCommit, table: DeltaTable | None) -> bool:
    """For a commit decided against ``commit.read_version`` (``table``: the latest snapshot,
    ``None`` when there is no table): ``False`` when the table is still at that version,
    ``True`` when it moved on and holds the commit's app transaction version (or a later
    one) already.

    Raises:
        VersionConflict: the table moved on without the commit's app transaction.
    """
    current = -1 if table is None else table.version()
    if current == commit.read_version:
        return False
    done = None if table is None else table.transaction_version(commit.app_id)
    if done is not None and done >= commit.version:
        return True
    raise VersionConflict(f"table at {commit.uri} is at version {current}, this commit "
                          f"was decided against version {commit.read_version}")


def _create_table(commit: _FileCommit) -> Exception | None:
    """Create the table with the commit's added files in its first version; ``None`` when
    created, else the error to retry after (another writer created the table meanwhile).

    Raises:
        VersionConflict: the table could not be created and the commit was decided against
            a version.
    """
    from deltalake import Schema as DeltaSchema
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import create_table_with_add_actions

    try:
        create_table_with_add_actions(
            commit.location,
            DeltaSchema.from_json(commit.wanted.json()),
            commit.adds,
            mode="error",
            partition_by=list(commit.partition_by),
            storage_options=commit.options,
            commit_properties=commit.properties,
        )
    except DeltaError as error:  # another writer created the table meanwhile
        if commit.read_version is not None:
            raise VersionConflict(f"table at {commit.uri} was created by another writer "
                                  "meanwhile") from error
        return error
    return None


def _check_still_held(uri: str, table: DeltaTable, removes: Sequence[RemovedFile]) -> None:
    """Refuse to remove files the snapshot ``table`` no longer holds.

    Raises:
        LakeError: a file of ``removes`` is gone (another writer removed it meanwhile).
    """
    held = {unquote(p) for p in
            table.get_add_actions(flatten=False).column("path").to_pylist()}
    gone = [r.path for r in removes if r.path not in held]
    if gone:
        raise LakeError(f"table at {uri} no longer holds {gone[0]} (changed by "
                        "another writer meanwhile); nothing was committed")


def _commit_to_table(commit: _FileCommit, table: DeltaTable) -> Exception | None:
    """Commit the commit's actions to the existing table on top of the snapshot ``table``,
    after checking that the table still has the files' columns and partitioning; ``None``
    when committed, else the lost race to retry after (a commit conflict).

    Raises:
        LakeSchemaError: the table's columns or partitioning differ from the files'.
        VersionConflict: another writer committed first and the commit was decided against
            a version.
    """
    from deltalake.exceptions import CommitFailedError, DeltaError

    table_partitions = list(table.metadata().partition_columns)
    check_same_table(commit.uri, table_schema(table), table_partitions, commit.schema,
                     commit.partition_by)
    read_version = commit.read_version
    try:
        table.create_write_transaction(
            commit.actions,
            mode="overwrite" if commit.replace else "append",
            schema=table.schema(),
            partition_by=table_partitions,
            commit_properties=commit.properties,
        )
    except CommitFailedError as error:  # lost a race: re-read the snapshot and retry
        if read_version is not None:
            raise _lost_race(commit.uri, read_version) from error
        return error
    except DeltaError as error:
        # with no retry allowed, delta-rs may report the lost race as a plain error
        latest = open_table(commit.uri)
        if read_version is not None and latest is not None and \
                latest.version() > read_version:
            raise _lost_race(commit.uri, read_version) from error
        raise
    return None


def _lost_race(uri: str, read_version: int) -> VersionConflict:
    """The error of a commit decided against ``read_version`` whose next version another
    writer committed first."""
    return VersionConflict(f"another writer committed version {read_version + 1} "
                           f"of {uri} first")


def checkpoint_on_interval(uri: str) -> None:
    """Write a log checkpoint when the table's latest version is a multiple of
    :data:`CHECKPOINT_EVERY` (the commit just made, unless another writer's came after
    it). A checkpoint only summarises the log: one that fails is left to the next."""
    from deltalake.exceptions import DeltaError

    table = latest_table(uri)  # brought up to date: includes the commit just made
    if table is None or table.version() <= 0 or table.version() % CHECKPOINT_EVERY:
        return
    with contextlib.suppress(DeltaError, OSError):
        table.create_checkpoint()


def table_version(uri: str) -> int:
    """The latest version of the Delta table at ``uri``; ``-1`` when there is none.

    Examples:
        >>> table_version("/nowhere/at/all")
        -1
    """
    table = latest_table(uri)
    return -1 if table is None else int(table.version())


def files_added_since(uri: str, version: int) -> tuple[int, list[str]]:
    """The table's latest version, and the log paths of the data files it holds that
    version ``version`` did not (added since, by appends or by rewrites of rows); every
    file when ``version`` is -1.

    Examples:
        >>> files_added_since("/nowhere/at/all", -1)
        (-1, [])
    """
    table = latest_table(uri)
    if table is None:
        return -1, []
    latest = int(table.version())
    if latest == version:
        return latest, []
    before: set[str] = set()
    if version >= 0:
        old = open_table(uri, version=version)
        assert old is not None
        before = set(old.get_add_actions(flatten=True).column("path").to_pylist())
    paths = table.get_add_actions(flatten=True).column("path").to_pylist()
    return latest, [path for path in paths if path not in before]
