"""Declared schemas of snap-spark's tables, one per table (see :mod:`snap_spark.schemas.tables`)."""
