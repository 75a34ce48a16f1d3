"""Helpers both backends share: locations, argument checks, and the commit marker.

Every commit made through :mod:`snap_spark.lake` carries ``userMetadata`` naming the write
(:func:`write_marker`), so the caller can tell "my commit landed" from "another writer
committed this app transaction first" by looking at the commits made since it started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from snap_spark.lake.api import LakeSchemaError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: ``writer`` value of the ``userMetadata`` marker on commits made by this package.
WRITER_NAME = "snap-spark"

#: Spark setting choosing the Delta backend :func:`snap_spark.lake.get_lake` returns:
#: ``auto`` (default: delta-spark when its extension is loaded, else delta-rs), ``delta-rs``
#: or ``delta-spark`` (an error when the session has no Delta extension).
LAKE_BACKEND_CONF = "spark.snap.lake.backend"
#: Values :data:`LAKE_BACKEND_CONF` accepts.
LAKE_BACKENDS = ("auto", "delta-rs", "delta-spark")

#: Delta Lake's session extension and catalog (what ``configure_spark_with_delta_pip`` and
#: Delta's docs set), loaded together with its JARs.
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def has_delta_spark(spark: Any) -> bool:
    """True when Delta Lake's session extension is loaded in ``spark`` (its JARs from the
    cache, or a cluster's).

    Examples:
        >>> has_delta_spark(spark)  # the tests' session loads it
        True
    """
    extensions = spark.conf.get("spark.sql.extensions", None) or ""
    return DELTA_EXTENSION in [item.strip() for item in extensions.split(",")]


def table_uri(path: str) -> str:
    """Normalise a table location: an absolute local path, or a remote URI as given.

    Examples:
        >>> table_uri("file:///lake/messages/")
        '/lake/messages'
        >>> table_uri("s3://bucket/lake/messages/")
        's3://bucket/lake/messages'
    """
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return os.path.abspath(unquote(parsed.path))
    if len(parsed.scheme) > 1:  # one letter is a Windows drive, not a scheme
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def write_marker(write_id: str, app_id: str, version: int,
                 info: Mapping[str, Any] | None = None) -> str:
    """The ``userMetadata`` string of a commit made through this package; ``info``
    (JSON-able: e.g. the settings that decided the verdicts) rides along.

    Examples:
        >>> write_marker("w1", "ingest", 3)
        '{"writer":"snap-spark","writeId":"w1","appId":"ingest","txnVersion":3}'
        >>> write_marker("w1", "ingest", 3, {"max_drift": 60.0}).endswith(
        ...     '"info":{"max_drift":60.0}}')
        True
    """
    marker: dict[str, Any] = {"writer": WRITER_NAME, "writeId": write_id, "appId": app_id,
                              "txnVersion": version}
    if info:
        marker["info"] = dict(info)
    return json.dumps(marker, separators=(",", ":"), sort_keys=False, allow_nan=False)


def marker_info(user_metadata: Any) -> dict[str, Any] | None:
    """The ``info`` a commit made through this package carries (``None`` for others).

    Examples:
        >>> marker_info(write_marker("w1", "ingest", 3, {"job": "verify"}))
        {'job': 'verify'}
        >>> marker_info("a note someone wrote") is None
        True
    """
    marker = marker_of(user_metadata)
    if marker is None:
        return None
    info = marker.get("info")
    return info if isinstance(info, dict) else {}


def marker_write_id(user_metadata: Any) -> str | None:
    """The write id in a commit's ``userMetadata`` when this package made the commit.

    Examples:
        >>> marker_write_id(write_marker("w1", "ingest", 3))
        'w1'
        >>> marker_write_id("a note someone wrote") is None
        True
    """
    marker = marker_of(user_metadata)
    write_id = None if marker is None else marker.get("writeId")
    return write_id if isinstance(write_id, str) else None


def marker_of(user_metadata: Any) -> dict[str, Any] | None:
    """A commit's ``userMetadata`` parsed, when this package wrote it (``None`` otherwise).

    Examples:
        >>> marker_of(write_marker("w1", "ingest", 3))["appId"]
        'ingest'
        >>> marker_of("a note someone wrote") is None
        True
    """
    if not isinstance(user_metadata, str):
        return None
    try:
        parsed = json.loads(user_metadata)
    except ValueError:
        return None
    if isinstance(parsed, dict) and parsed.get("writer") == WRITER_NAME:
        return parsed
    return None


def check_txn(app_id: str, version: int) -> None:
    """Raise ``ValueError`` unless ``app_id`` is a non-empty string and ``version`` an int >= 0.

    Examples:
        >>> check_txn("ingest", -1)
        Traceback (most recent call last):
        ...
        ValueError: version must be a non-negative int, got -1
    """
    if not isinstance(app_id, str) or not app_id:
        raise ValueError("app_id must be a non-empty string")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"version must be a non-negative int, got {version!r}")


def quote_identifier(name: str) -> str:
    """Backtick-quote a column name for a SQL predicate (Spark and delta-rs both read it).

    Examples:
        >>> quote_identifier("taskId")
        '`taskId`'
    """
    return "`" + name.replace("`", "``") + "`"


def merge_condition(keys: Sequence[str], target: str = "t", source: str = "s") -> str:
    """The ``AND`` of key equalities between target and source aliases.

    Examples:
        >>> merge_condition(["task_id", "context_id"])
        't.`task_id` = s.`task_id` AND t.`context_id` = s.`context_id`'
    """
    return " AND ".join(
        f"{target}.{quote_identifier(k)} = {source}.{quote_identifier(k)}" for k in keys
    )


#: Column of the merge source that replaces the rows of keys
#: (:meth:`~snap_spark.lake.Lake.commit` of a :class:`~snap_spark.lake.DataCommit` with
#: ``keys``): true on a key row (it deletes the target's rows of its key), false on a row to
#: insert.
DELETE_FLAG = "_snap_replace_key"


def key_schema(keys: Any) -> StructType:
    """The Spark schema of a commit's ``keys``: a DataFrame's own, or a ``pyarrow.Table``'s
    converted.

    Examples:
        >>> import pyarrow as pa
        >>> key_schema(pa.table({"task_id": ["t1"]})).simpleString()
        'struct<task_id:string>'
    """
    import pyarrow as pa

    if isinstance(keys, pa.Table):
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(keys.schema)
    schema: StructType = keys.schema
    return schema


def check_key_columns(keys: StructType, schema: StructType) -> list[str]:
    """The key columns of a commit that replaces the rows of ``keys``
    (:attr:`~snap_spark.lake.DataCommit.keys`): every column of ``keys``, each a column of
    the table ``schema`` with the same type.

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, StringType, LongType
        >>> table = StructType([StructField("task_id", StringType()),
        ...                     StructField("seq", LongType())])
        >>> check_key_columns(StructType([StructField("task_id", StringType())]), table)
        ['task_id']
    """
    names = keys.names
    if not names:
        raise LakeSchemaError("replacing the rows of keys needs a keys frame with at least one "
                              "column")
    types = {field.name: field.dataType for field in schema.fields}
    wrong = [f"{f.name} {f.dataType.simpleString()}" for f in keys.fields
             if types.get(f.name) != f.dataType]
    if wrong:
        raise LakeSchemaError(f"key columns {wrong} are not columns of the table, or not of "
                              "its types")
    if DELETE_FLAG in types:
        raise LakeSchemaError(f"the table has a column {DELETE_FLAG}, which replacing keys "
                              "uses")
    return list(names)


def replace_keys_merge(keys: Sequence[str], columns: Sequence[str]
                       ) -> tuple[str, str, dict[str, str]]:
    """The merge that replaces the rows of keys (:meth:`~snap_spark.lake.Lake.commit`) on a
    source of key rows (:data:`DELETE_FLAG` true) and new rows: its match condition (a target
    row matching a key row is deleted), the condition of the insert clause and its values.

    Examples:
        >>> on, insert, values = replace_keys_merge(["task_id"], ["task_id", "state"])
        >>> on
        's.`_snap_replace_key` AND t.`task_id` = s.`task_id`'
        >>> insert, values["state"]
        ('NOT s.`_snap_replace_key`', 's.`state`')
    """
    flag = f"s.{quote_identifier(DELETE_FLAG)}"
    values = {name: f"s.{quote_identifier(name)}" for name in columns}
    return f"{flag} AND {merge_condition(keys)}", f"NOT {flag}", values
