"""spark-submit entry point: rebuild the task tables from the lake's messages.

    spark-submit jobs/rebuild_tasks.py --lake data/lake

All logic lives in :mod:`snap_spark.pipeline.tasks`; see ``--help``.
"""

import sys

from snap_spark.pipeline.tasks import main

if __name__ == "__main__":
    sys.exit(main())
