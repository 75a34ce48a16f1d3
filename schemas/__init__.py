"""Declared schemas of snap-spark's tables, one per table (see :mod:`schemas.tables`)."""
