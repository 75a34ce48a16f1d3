"""Spark's Python worker daemon, importing PySpark from its installed folder.

``build_session`` names this module as ``spark.python.daemon.module`` for a local session
whose workers run this interpreter. Spark starts it as
``python -m snap_spark.worker_daemon pyspark.worker`` instead of ``-m pyspark.daemon``;
``import snap_spark`` takes Spark's bundled zips off ``sys.path``
(:func:`snap_spark.spark_path.drop_bundled_zips`), then PySpark's own daemon runs unchanged,
with the same arguments. Its workers (forked from it) then neither compile PySpark at start
nor re-read the zips' indexes before every task.
"""

from __future__ import annotations

import runpy

import snap_spark  # noqa: F401  (takes the bundled zips off sys.path)

if __name__ == "__main__":
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
