"""Spark's Python worker daemon, importing PySpark from its installed folder, with the
workers' modules loaded once and kept out of the workers' garbage collections.

``build_session`` names this module as ``spark.python.daemon.module`` for a local session
whose workers run this interpreter. Spark starts it as
``python -m snap_spark.runtime.worker_daemon pyspark.worker`` instead of ``-m pyspark.daemon``;
it takes Spark's bundled zips off ``sys.path`` first
(:func:`snap_spark.runtime.spark_path.fix_paths`), then PySpark's own daemon runs unchanged,
with the same arguments. Its workers (forked from it) then neither compile PySpark at start
nor re-read the zips' indexes before every task.

Before PySpark's daemon starts, this module imports what snap-spark's workers import
(:data:`WORKER_MODULES`: PyArrow, pandas, PySpark's worker and Arrow serializers, the
checking core, the landing and replay-state code) and freezes the objects they made
(:func:`gc.freeze`). Every worker forked from the daemon then has them without importing
them again, and the full collection PySpark's daemon runs in a reused worker after each task
(``gc.collect()`` in ``pyspark/daemon.py``) no longer walks them, so that collection goes
from a real CPU cost on every task to almost none (docs/speed.md, *Figures behind the
code*). A module that cannot be imported here (an extra that is not installed) is left to
the worker, as before.
"""

from __future__ import annotations

import gc
import importlib
import runpy

from snap_spark.runtime.spark_path import fix_paths

#: What the workers of snap-spark's jobs import, loaded in the daemon before it forks them.
WORKER_MODULES = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.pandas.types",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pandas",
    "snap_spark.udfs.verify",
    "snap_spark.pipeline.land",
    "snap_spark.stream.replay_state",
    "pyspark.sql.streaming.proto.StateMessage_pb2",  # the replay state's talk to the JVM
)


def preload(modules: tuple[str, ...] = WORKER_MODULES) -> list[str]:
    """Import ``modules`` (those that import; the others are left to the workers), then
    collect once and freeze every object left, so that collections in processes forked
    from here skip them. Returns the names that imported.

    Example::

        preload(("json",))   # ['json']; gc.get_freeze_count() is now > 0
    """
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        loaded.append(name)
    gc.collect()
    gc.freeze()
    return loaded


if __name__ == "__main__":
    fix_paths()  # before PySpark is imported
    preload()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
