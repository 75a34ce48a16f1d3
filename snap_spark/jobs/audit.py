"""spark-submit entry point: audit a lake into a report.

    spark-submit jobs/audit.py --lake data/lake --out data/audit [--reverify-sample 0.05]

All logic lives in :mod:`snap_spark.audit`; see ``--help``.
"""

import sys

from snap_spark.runtime.spark_path import fix_paths

fix_paths()  # PySpark from its installed folder, not spark-submit's zips: before it loads

from snap_spark.audit import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
