"""A Spark standalone cluster on this machine, and snap-spark shipped to its executors.

``make cluster-demo`` (``python -m snap_spark.cluster demo``) and the cluster test use
this package; it is also the quickest way to try a change on a real cluster manager by
hand. One module per concern, none importing another's private names:

- :mod:`~snap_spark.cluster.standalone`: :class:`~snap_spark.cluster.standalone.StandaloneCluster`,
  a master and N workers started from the installed PySpark
  (``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master`` / ``...Worker``,
  with ``SPARK_HOME`` the ``pyspark`` package folder) on free ports of 127.0.0.1, each in
  its own process group, with its work and log folders under one directory. A context
  manager: the master and workers — and the executors and Python workers they started —
  are stopped when the block ends, whether it ends normally, by an exception, Ctrl-C or
  SIGTERM. Also the process-group handling behind that, and
  :func:`~snap_spark.cluster.standalone.stop_recorded` for what a killed owner left.
- :mod:`~snap_spark.cluster.shipping`: two ways to ship the project to executors, as on a
  real cluster: :func:`~snap_spark.cluster.shipping.package_zip` (a zip of the
  ``snap_spark`` package for ``--py-files``, with the dependencies installed on the
  workers beforehand: :func:`~snap_spark.cluster.shipping.deps_env` makes such an
  environment here, one that cannot import ``snap_spark`` by itself) and
  :func:`~snap_spark.cluster.shipping.packed_env` (a wheel of the project installed into a
  fresh virtualenv, packed with venv-pack for ``--archives env.tar.gz#environment``).
- :mod:`~snap_spark.cluster.compare`: the batch job through ``spark-submit`` on a given
  master (:func:`~snap_spark.cluster.compare.submit`), and two lakes compared row for row
  (:func:`~snap_spark.cluster.compare.compare_lakes`). Not to be confused with
  :mod:`snap_spark.runtime.submit`, the ``snap-spark submit`` command.
- :mod:`~snap_spark.cluster.demo`: :func:`~snap_spark.cluster.demo.run_demo`, one generated
  sample through ``spark-submit jobs/verify_messages.py`` on ``local[*]`` and on the
  cluster, and the two lakes compared; its command line is ``python -m snap_spark.cluster``.
- :mod:`~snap_spark.cluster.common`: what they share (the checkout's paths, the installed
  Spark's home, :class:`~snap_spark.cluster.common.ClusterError`).

Importing the package imports none of its modules.

Examples:
    A cluster for a block::

        from snap_spark.cluster.standalone import StandaloneCluster

        with StandaloneCluster(Path("/tmp/c"), workers=2) as cluster:
            print(cluster.master_url)      # spark://127.0.0.1:41235
            print(cluster.alive_workers()) # 2
        # master, workers, executors: all gone here

    The demo, as ``make cluster-demo`` runs it::

        python -m snap_spark.cluster demo --workdir data/cluster-demo --messages 3000
        python -m snap_spark.cluster demo --ship archives   # a venv-pack'ed environment
        python -m snap_spark.cluster stop --workdir data/cluster-demo  # leftovers, if any
"""
