"""What makes Spark start and run fast on one machine, and the session builder it serves.

- :mod:`~snap_spark.runtime.session`: the SparkSession snap-spark's jobs run on (Delta's
  and the Kafka connector's JARs, the short-job settings of a local master), started when
  a job first needs it.
- :mod:`~snap_spark.runtime.maven_jars`: the JAR cache ``make setup`` fills from Maven
  Central (Delta, the Kafka connector).
- :mod:`~snap_spark.runtime.jvm_archive`: the driver JVM's class archive and the short-job
  JVM flags.
- :mod:`~snap_spark.runtime.worker_daemon`: Spark's Python worker daemon, importing PySpark
  from its installed folder.
- :mod:`~snap_spark.runtime.preinit`: a warm interpreter for the replay state's
  driver-side step at each stream start, and the launcher script Spark's workers run.
- :mod:`~snap_spark.runtime.spark_path`: PySpark from its installed folder rather than
  Spark's bundled zips.
- :mod:`~snap_spark.runtime.submit`: ``snap-spark submit``, a job under ``spark-submit``
  with the right interpreter and flags.

docs/architecture.md (*The runtime*) says what each piece saves and what it risks. This
package's ``__init__`` imports nothing.
"""
