"""Verify SNAP traffic as it arrives (landing folder or Kafka) into the lake's Delta tables."""

import sys

from snap_spark.stream.job import main

if __name__ == "__main__":
    sys.exit(main())
