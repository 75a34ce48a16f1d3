"""Rough rate of ``snap_verify`` in Spark SQL against the batch job's check path.

Both run on the same in-memory lines (cached, so reading is not timed) and write to the
``noop`` sink (every output column computed, nothing stored):

- ``sql``: ``SELECT snap_verify(raw, received_at) FROM lines`` (pandas UDF behind a SQL UDF);
- ``job_check``: :func:`snap_spark.pipeline.verify.check` (``mapInArrow`` over
  :mod:`snap_spark.udfs.verify`), the stateless step of the batch job.

Usage: ``python bench/sql_udfs.py [--lines 20000] [--runs 3] [--partitions 2]``
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from snap_spark.pipeline.transforms import check
from snap_spark.runtime.session import build_session
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from snap_spark.udfs.sql import register_udfs


def best(runs: int, fn: Any) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()
    spark = build_session(master="local[2]", extra_conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2"})
    register_udfs(spark)
    lines = [line for line, _ in generate(SampleConfig(messages=args.lines, seed=42))]
    rows = [("bench", i + 1, raw, None) for i, raw in enumerate(lines)]
    df = spark.createDataFrame(
        rows, "source_file STRING, line_no BIGINT, raw BINARY, received_at DOUBLE"
    ).repartition(args.partitions).cache()
    df.count()
    df.createOrReplaceTempView("bench_lines")
    sql = spark.sql("SELECT line_no, snap_verify(raw, received_at) AS v FROM bench_lines")
    job = df.select("source_file", "line_no", "raw").transform(check(VerifySettings()))

    def run(frame: Any) -> None:
        frame.write.format("noop").mode("overwrite").save()

    for name, frame in (("sql", sql), ("job_check", job)):
        run(frame)  # warm: Python workers started, code imported
        fastest, times = best(args.runs, lambda f=frame: run(f))
        print(f"{name:10s} {args.lines / fastest:9,.0f} lines/s  "
              f"(runs: {', '.join(f'{t:.2f}s' for t in times)})")
    spark.stop()


if __name__ == "__main__":
    main()
