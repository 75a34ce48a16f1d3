"""A SparkContext snap-spark did not start (a notebook's, a shared cluster's) is left as it
was: snap-spark's session builder gives its jobs a session of their own on it, with UTC and
snap-spark's runtime settings, and none of the runtime's machinery (launcher, worker
daemon, JVM flags) reaches the context. Run in a fresh interpreter: this process's own
SparkContext is snap-spark's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
from pyspark.sql import SparkSession
from snap_spark.runtime import preinit
from snap_spark.runtime.session import built_here, build_session, deferred_session

user = (SparkSession.builder.master("local[1]").appName("a notebook")
        .config("spark.sql.session.timeZone", "America/New_York")
        .config("spark.sql.shuffle.partitions", "3").config("spark.ui.enabled", "false")
        .getOrCreate())
sc = user.sparkContext
python_before = sc.pythonExec
ours = build_session("snap-spark job", master="local[2]")
job = deferred_session("snap-spark job", master="local[2]")
print(json.dumps({
    "same_context": ours.sparkContext is sc and job.sparkContext is sc,
    "own_sessions": ours is not user and job is not user and job is not ours,
    "built_here": [built_here(user), built_here(ours)],
    "user_zone": user.conf.get("spark.sql.session.timeZone"),
    "user_partitions": user.conf.get("spark.sql.shuffle.partitions"),
    "ours_zone": [ours.conf.get("spark.sql.session.timeZone"),
                  job.conf.get("spark.sql.session.timeZone")],
    "ours_partitions": ours.conf.get("spark.sql.shuffle.partitions"),
    "python_kept": sc.pythonExec == python_before != preinit.LAUNCHER,
    "socket": preinit.SOCKET_ENV in sc.environment,
    "daemon": sc.getConf().get("spark.python.daemon.module", "unset"),
    "app": sc.appName,
    "utc_now": ours.sql("SELECT hour(timestamp_seconds(0)) AS h").first().h,
    # parameters bound by the analyzer (conf/spark-defaults.conf: Delta's parser drops them
    # on Spark 4.1 and later), in the notebook's shape of query: over an aggregate subquery
    "parameters": ours.conf.get("spark.sql.legacy.parameterSubstitution.constantsOnly"),
    "bound": ours.sql(
        "SELECT k, :now - m AS silent FROM (SELECT id % 2 AS k, max(id) AS m FROM range(6)"
        " GROUP BY id % 2) WHERE NOT array_contains(:skip, k) AND :now - m > :after"
        " ORDER BY k", args={"now": 10, "skip": [0], "after": 1}).collect(),
}, default=list))
"""


def test_a_context_snap_spark_did_not_start_is_left_as_it_was() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "same_context": True, "own_sessions": True, "built_here": [False, False],
        # the notebook's session keeps its settings ...
        "user_zone": "America/New_York", "user_partitions": "3",
        # ... while the job's session has snap-spark's (conf/spark-defaults.conf: 8)
        "ours_zone": ["UTC", "UTC"], "ours_partitions": "8",
        # and nothing of the runtime reached the context
        "python_kept": True, "socket": False, "daemon": "unset", "app": "a notebook",
        "utc_now": 0, "parameters": "true", "bound": [[1, 5]],
    }
