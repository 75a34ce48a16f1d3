"""``python -m snap_spark.cluster demo|stop``: :func:`snap_spark.cluster.demo.main`."""

from __future__ import annotations

import sys

from snap_spark.cluster.demo import main

if __name__ == "__main__":
    sys.exit(main())
