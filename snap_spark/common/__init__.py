"""Small helpers every layer shares: what a job prints (:mod:`~snap_spark.common.console`),
where a step runs (:mod:`~snap_spark.common.placement`), optional parts
(:mod:`~snap_spark.common.extras`), live processes (:mod:`~snap_spark.common.processes`),
memory (:mod:`~snap_spark.common.memory`) and pyarrow's differences
(:mod:`~snap_spark.common.pyarrow_compat`). None of them imports Spark.
"""
