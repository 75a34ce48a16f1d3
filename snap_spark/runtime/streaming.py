"""What the runtime gives a stream's session: checkpoint files written the fast way on a
local disk, and one Python worker daemon for all of a query's functions.

Both only change speed, never what a query computes, and both follow the runtime's switch
(:data:`snap_spark.runtime.scope.RUNTIME_ENV`). The daemon setting changes the SparkContext,
so it is made only on a context snap-spark started
(:func:`snap_spark.runtime.session.built_here`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from snap_spark.files import storage
from snap_spark.runtime.scope import runtime_on

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark setting: the class that writes a query's checkpoint files (offsets, commits, the
#: state's schema and changelogs), and the one that writes them through Hadoop's
#: ``FileSystem`` API (Spark's default goes through ``FileContext``).
CHECKPOINT_MANAGER_CONF: Final = "spark.sql.streaming.checkpointFileManagerClass"


def checkpoint_manager_class(name: str, spark_version: str | None = None) -> str:
    """The full name of Spark's checkpoint file manager class ``name`` on the installed
    Spark (or ``spark_version``): Spark 4.1 moved the classes into a ``checkpointing``
    package, and Spark fails a query's start on a name it cannot load.

    Examples:
        >>> checkpoint_manager_class("FileSystemBasedCheckpointFileManager", "4.0.1")
        'org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager'
        >>> checkpoint_manager_class("FileContextBasedCheckpointFileManager", "4.2.0")
        'org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager'
    """
    if spark_version is None:
        from pyspark.version import __version__ as installed

        spark_version = str(installed)
    major, minor = (int(part) for part in spark_version.split(".")[:2])
    package = "org.apache.spark.sql.execution.streaming"
    if (major, minor) >= (4, 1):
        package += ".checkpointing"
    return f"{package}.{name}"


FILE_SYSTEM_CHECKPOINTS: Final = checkpoint_manager_class("FileSystemBasedCheckpointFileManager")


def configure_checkpoint_files(spark: SparkSession, checkpoint: str) -> None:
    """For a checkpoint on the local file system, have Spark write its files through
    Hadoop's ``FileSystem`` API (:data:`FILE_SYSTEM_CHECKPOINTS`), unless the session
    already names a class or the runtime is off. Through Spark's default (``FileContext``),
    each atomic write of a small checkpoint file is an order of magnitude slower
    (docs/speed.md, *Figures behind the code*), and a query's start and its first
    micro-batch write about eight. On the local file system both write a temporary file
    and rename it after checking that the destination is absent, so neither is more atomic
    than the other. Other checkpoints keep Spark's choice. The setting is the session's
    own.

    Example::

        configure_checkpoint_files(spark, "/var/lib/snap/ckpt")
        assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == FILE_SYSTEM_CHECKPOINTS
    """
    if runtime_on() and storage.is_local(checkpoint) \
            and spark.conf.get(CHECKPOINT_MANAGER_CONF, None) is None:
        spark.conf.set(CHECKPOINT_MANAGER_CONF, FILE_SYSTEM_CHECKPOINTS)


def same_worker_environment(spark: SparkSession) -> bool:
    """Give the replay state's Python workers the environment Spark gives the landing's,
    so that one Python worker daemon serves both; whether it did. Spark keys its daemons
    by interpreter and environment, and adds ``SPARK_SIMPLIFIED_TRACEBACK`` (when
    ``spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled``, the default) to the
    environment of Arrow functions but not to that of ``transformWithStateInPandas``; the
    state's stage then starts a second daemon on a stream's first micro-batch, which makes a
    small cold stream take noticeably longer (docs/speed.md, *Figures behind the code*).
    Setting the variable on the context's functions makes both the same. A context
    snap-spark did not start, or the runtime off: nothing changes.

    Example::

        same_worker_environment(spark)
        assert spark.sparkContext.environment["SPARK_SIMPLIFIED_TRACEBACK"] == "1"
    """
    from snap_spark.runtime.session import built_here

    if not runtime_on() or not built_here(spark):
        return False
    key = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"
    if str(spark.conf.get(key, "true")).lower() == "true":
        spark.sparkContext.environment["SPARK_SIMPLIFIED_TRACEBACK"] = "1"
    else:
        spark.sparkContext.environment.pop("SPARK_SIMPLIFIED_TRACEBACK", None)
    return True
