"""spark-submit entry point: verify SNAP message archives into Delta tables.

    spark-submit jobs/verify_messages.py --input data/sample --lake data/lake

All logic lives in :mod:`snap_spark.pipeline.batch_job`; see ``--help``.
"""

import sys

from snap_spark.runtime.spark_path import fix_paths

fix_paths()  # PySpark from its installed folder, not spark-submit's zips: before it loads

from snap_spark.pipeline.batch_job import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
