"""Lakes that cannot take the tables are refused before anything is written (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from snap_spark.pipeline.batch_job import main
from snap_spark.samples.messages import SampleConfig, generate

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("in")
    lines = [line for line, _ in generate(SampleConfig(agents=3, messages=200, seed=2))]
    (folder / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder


def _tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size)
                  for p in root.rglob("*") if p.is_file())


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("verify_messages: "), err
    assert "Traceback" not in err[0]
    return err[0]


def test_a_lake_that_is_a_file_is_refused(spark: Any, sample: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    lake.write_text("not a folder")
    line = _refused(["--input", str(sample), "--lake", str(lake)], capsys)
    assert "not a folder" in line and "nothing was written" in line
    assert lake.read_text() == "not a folder"


def test_a_plain_parquet_folder_is_never_converted(spark: Any, sample: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    (lake / "raw_messages").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1, 2]}), lake / "raw_messages" / "part-0.parquet")
    before = _tree(lake)
    line = _refused(["--input", str(sample), "--lake", str(lake)], capsys)
    assert "no Delta table" in line and "part-0.parquet" in line
    assert _tree(lake) == before
    assert not (lake / "raw_messages" / "_delta_log").exists()


def test_a_foreign_delta_table_is_refused(spark: Any, sample: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    write_deltalake(str(lake / "messages"), pa.table({"id": [1], "note": ["theirs"]}))
    before = _tree(lake)
    line = _refused(["--input", str(sample), "--lake", str(lake)], capsys)
    assert "other columns" in line and str(lake / "messages") in line
    assert _tree(lake) == before and not (lake / "raw_messages").exists()


def test_bad_batch_rows_is_refused_before_spark(sample: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["--input", str(sample), "--lake", str(tmp_path / "lake"),
                     "--batch-rows", "0"], capsys)
    assert "--batch-rows" in line
    assert not os.path.exists(tmp_path / "lake")


def test_an_empty_table_folder_is_fine(spark: Any, sample: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    (lake / "messages").mkdir(parents=True)
    assert main(["--input", str(sample), "--lake", str(lake)]) == 0
    assert (lake / "messages" / "_delta_log").is_dir()
