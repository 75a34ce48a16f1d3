"""The batch job on object storage: input read from a bucket, lake written to a bucket."""

from __future__ import annotations

import gzip
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from snap_spark.files import storage
from snap_spark.pipeline.batch_job import run
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from tests.s3server import S3Server
from tests.storage.conftest import BUCKET

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _rows(uri: str, sql: str) -> list[dict[str, Any]]:
    table = DeltaTable(storage.delta_table_uri(uri),
                       storage_options=storage.delta_storage_options(uri))
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_job_reads_a_bucket_and_lands_into_a_bucket(
        s3_spark: Any, s3: S3Server, s3_prefix: str, scheme: str) -> None:
    prefix = s3_prefix.replace("s3://", f"{scheme}://", 1)
    lines = [line for line, _ in generate(SampleConfig(agents=5, messages=3000, seed=21,
                                                       attack_share=0.3))]
    half = len(lines) // 2
    key = prefix.split(f"{BUCKET}/", 1)[1]
    client = s3.client()
    client.put_object(Bucket=BUCKET, Key=f"{key}/in/a.jsonl", Body=b"\n".join(lines[:half]))
    client.put_object(Bucket=BUCKET, Key=f"{key}/in/day/b.jsonl.gz",
                      Body=gzip.compress(b"\n".join(lines[half:]) + b"\n"))
    client.put_object(Bucket=BUCKET, Key=f"{key}/in/_SUCCESS", Body=b"")
    lake = f"{prefix}/lake"

    result = run(s3_spark, [f"{prefix}/in"], lake)
    assert result.lines_read == len(lines) == result.valid + result.rejected
    assert result.raw_rows_written == result.message_rows_written == len(lines)

    got = _rows(f"{lake}/messages", "select source_file, line_no, error_code, error_detail "
                "from t order by source_file, line_no")
    names = [line_name(r["source_file"], r["line_no"]) for r in got]
    expected = check_lines(lines, ReceiptClock.refuse(), names=names)
    assert [r["source_file"] for r in got] == [f"{prefix}/in/a.jsonl"] * half + [
        f"{prefix}/in/day/b.jsonl.gz"] * (len(lines) - half)
    assert [(r["error_code"], r["error_detail"] or "") for r in got] == [
        (v.error_code, v.error_detail) for v in expected]
    raw = _rows(f"{lake}/raw_messages", "select count(*) as n, count(distinct raw_text) as d "
                "from t")
    assert raw[0]["n"] == len(lines)

    again = run(s3_spark, [f"{prefix}/in"], lake)  # idempotent on object storage too
    assert again.files_processed == 0 and again.raw_rows_written == 0
    # no staged data is left (pyarrow keeps an empty folder marker of a deleted folder's
    # parent on S3: an object ending in "/", no data)
    assert not [k for k in s3.keys(BUCKET, f"{key}/lake/_staging/") if not k.endswith("/")]
