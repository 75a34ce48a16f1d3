"""spark-submit entry point: verify SNAP message archives into Delta tables.

    spark-submit jobs/verify_messages.py --input data/sample --lake data/lake

All logic lives in :mod:`snap_spark.pipeline.job`; see ``--help``.
"""

import sys

from snap_spark.pipeline.job import main

if __name__ == "__main__":
    sys.exit(main())
