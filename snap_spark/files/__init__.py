"""Where snap-spark's input and lake files live (local paths, ``file://``, S3 and other pyarrow
file systems: :mod:`~snap_spark.files.storage`) and how a file splits into lines
(:mod:`~snap_spark.files.lines`).
"""
