"""spark-submit entry point: verify SNAP traffic as it arrives (a landing folder or Kafka).

    spark-submit jobs/stream_verify.py --landing data/landing --lake data/lake \\
        --checkpoint data/checkpoints/stream --trigger available-now

All logic lives in :mod:`snap_spark.stream.stream_job`; see ``--help``.
"""

import sys

from snap_spark.runtime.spark_path import fix_paths

fix_paths()  # PySpark from its installed folder, not spark-submit's zips: before it loads

from snap_spark.stream.stream_job import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
