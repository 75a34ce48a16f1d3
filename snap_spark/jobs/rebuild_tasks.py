"""spark-submit entry point: rebuild the task tables from the lake's messages.

    spark-submit jobs/rebuild_tasks.py --lake data/lake

All logic lives in :mod:`snap_spark.pipeline.task_tables`; see ``--help``.
"""

import sys

from snap_spark.runtime.spark_path import fix_paths

fix_paths()  # PySpark from its installed folder, not spark-submit's zips: before it loads

from snap_spark.pipeline.rebuild_job import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
