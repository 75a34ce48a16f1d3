"""spark-submit entry point: audit a lake into a report.

    spark-submit jobs/audit.py --lake data/lake --out data/audit [--reverify-sample 0.05]

All logic lives in :mod:`snap_spark.audit`; see ``--help``.
"""

import sys

from snap_spark.audit import main

if __name__ == "__main__":
    sys.exit(main())
