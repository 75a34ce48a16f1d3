"""The notebook API used from a Spark Connect session: run in a child process by
``tests/operate/test_notebooks.py`` (a process that made a remote session is a Connect
process for good, see ``tests/connect_server.py``).

    python -m tests.operate.connect_client URL INPUTS.json OUT.json

``INPUTS.json`` names the lines, payloads and addresses to judge, the traffic file, the lake
and a scratch folder; everything the session answered goes to ``OUT.json``, and the test
compares it with the protocol's checker and with the tables read by delta-rs.
"""

from __future__ import annotations

import base64
import datetime
import json
import sys
import time
from typing import Any

# Imported before the remote session exists: the SNAP functions must still be built for it.
from snap_spark import api
from snap_spark.udfs import sql as udfs


def _b(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _jsonable(value: Any) -> Any:
    """``value`` as JSON: bytes as base64, and a timestamp as UTC ISO text (Spark gives the
    session's time zone, UTC, without an offset; delta-rs gives UTC with one)."""
    if isinstance(value, datetime.datetime):
        utc = value.replace(tzinfo=datetime.UTC) if value.tzinfo is None else value
        return utc.astimezone(datetime.UTC).isoformat()
    if isinstance(value, bytes | bytearray):
        return {"b64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _functions(spark: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The three SQL functions, and the DataFrame ones, over the given values."""
    from pyspark.sql import functions as F

    out: dict[str, Any] = {"registered": api.register_udfs(spark)}
    lines = [(i, _b(raw), received) for i, (raw, received) in enumerate(given["lines"])]
    spark.createDataFrame(lines, "i BIGINT, raw BINARY, received_at DOUBLE"
                          ).createOrReplaceTempView("lines")
    rows = spark.sql("SELECT i, snap_verify(raw, received_at) AS v FROM lines ORDER BY i")
    out["verify_sql"] = [row.v.asDict() for row in rows.collect()]
    frame = spark.table("lines").orderBy("i")
    out["verify_df"] = [row.v.asDict() for row in frame.select(
        api.snap_verify("raw", "received_at").alias("v")).collect()]
    payloads = [(i, p) for i, p in enumerate(given["payloads"])]
    spark.createDataFrame(payloads, "i BIGINT, p STRING").createOrReplaceTempView("payloads")
    out["canonical_sql"] = [r.c for r in spark.sql(
        "SELECT i, snap_canonicalize(p) AS c FROM payloads ORDER BY i").collect()]
    out["canonical_df"] = [r.c for r in spark.table("payloads").orderBy("i").select(
        api.snap_canonicalize(F.col("p")).alias("c")).collect()]
    addresses = [(i, a) for i, a in enumerate(given["addresses"])]
    spark.createDataFrame(addresses, "i BIGINT, a STRING").createOrReplaceTempView("addresses")
    out["p2tr_sql"] = [None if r.k is None else r.k.asDict() for r in spark.sql(
        "SELECT i, snap_p2tr_key(a) AS k FROM addresses ORDER BY i").collect()]
    out["p2tr_df"] = [None if r.k is None else r.k.asDict() for r in spark.table(
        "addresses").orderBy("i").select(api.snap_p2tr_key("a").alias("k")).collect()]
    return out


def _transforms(spark: Any, given: dict[str, Any]) -> dict[str, Any]:
    settings = api.VerifySettings(bare_clock="message")
    columns = ["line_no", "verdict", "error_code", "error_detail"]
    stepwise = (api.read_lines(spark, [given["traffic"]])
                .transform(api.check(settings)).transform(api.resolve_replay(settings)))
    at_once = api.read_messages(spark, [given["traffic"]], settings)
    return {name: sorted(([r[c] for c in columns] for r in frame.select(*columns).collect()),
                         key=lambda r: r[0])
            for name, frame in (("stepwise", stepwise), ("read_messages", at_once))}


#: Tables read back through the server's own Delta read as well: the directory, whose
#: skills are arrays of structs (each table's first read costs the server 4-10 s, and the
#: path is the same for every table; every table is read back the small lake's way).
SPARK_READ = ("agent_cards",)


def _tables(spark: Any, given: dict[str, Any]) -> dict[str, Any]:
    """Every table of the lake as ``register_views`` gives a small lake (read by delta-rs
    here, sent as Arrow), and :data:`SPARK_READ` as it gives a large one (Spark's read)."""
    out: dict[str, Any] = {"present": api.lake_tables(given["lake"])}
    for prefix, local_rows in (("", None), ("spark_", 0)):
        views = api.register_views(spark, given["lake"], prefix, local_rows=local_rows)
        out[prefix or "local"] = {view[len(prefix):]: _jsonable(
            [row.asDict(recursive=True) for row in spark.table(view).collect()])
            for view in views if not prefix or view[len(prefix):] in SPARK_READ}
    return out


def _refusals(spark: Any, given: dict[str, Any]) -> dict[str, str]:
    """What the jobs that write the lake from the driver say when given this session."""
    from snap_spark.pipeline.batch_job import run
    from snap_spark.pipeline.task_tables import rebuild_tasks

    said = {}
    for name, call in (("batch", lambda: run(spark, [given["traffic"]], given["scratch"])),
                       ("tasks", lambda: rebuild_tasks(spark, given["lake"]))):
        try:
            call()
            said[name] = "ran"
        except api.RemoteSessionError as error:
            said[name] = str(error)
    return said


def main(url: str, inputs: str, output: str) -> None:
    with open(inputs, encoding="utf-8") as given_file:
        given = json.load(given_file)
    spark = api.session(app_name="connect-client", remote=url)
    timings: dict[str, float] = {}

    def timed(name: str, step: Any) -> Any:
        start = time.monotonic()
        out = step(spark, given)
        timings[name] = round(time.monotonic() - start, 2)
        return out

    result = {
        "connect": api.is_connect(spark),
        # the columns the SNAP functions make: Connect ones, though imported before
        "column_kinds": sorted({type(udfs.snap_verify("raw", "t")).__module__,
                                type(api.snap_canonicalize("p")).__module__,
                                type(api.snap_p2tr_key("a")).__module__}),
        "functions": timed("functions", _functions),
        "transforms": timed("transforms", _transforms),
        "tables": timed("tables", _tables),
        "refusals": timed("refusals", _refusals),
        "params": api.sql(spark, "SELECT p.n + 1 AS n, size(p.names) AS k FROM {params} p",
                          n=41, names=["a", "b"]).first().asDict(),
        "timings": timings,  # seconds per step, for a reader of a slow or failed run
    }
    with open(output, "w", encoding="utf-8") as out:
        json.dump(_jsonable(result), out)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
