"""The batch job end to end: real Spark, real Delta tables, opened independently with
``deltalake``, verdicts compared with the pure-Python checker and the generator's labels."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from snap_spark.common.placement import DriverLimits
from snap_spark.pipeline.batch_job import run
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import MissingReceiptTime, ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate
from snap_spark.settings import VerifySettings
from tests.driver_limits import set_limits
from tests.jobs import files_under
from tests.lake.helpers import delta_rows
from tests.unit.helpers import T0, envelope, message, signed

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def table(lake: Path, name: str) -> list[dict[str, Any]]:
    """Rows of a Delta table read with delta-rs's own engine (independent of the writer)."""
    return delta_rows(lake / name)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """12k labelled lines with every attack kind, split over a plain and a .gz file."""
    folder = tmp_path_factory.mktemp("sample")
    pairs = list(generate(SampleConfig(agents=8, messages=12_000, seed=11, attack_share=0.25)))
    lines = [line for line, _ in pairs]
    labels = [label for _, label in pairs]
    half = len(lines) // 2
    (folder / "a.jsonl").write_bytes(b"\n".join(lines[:half]) + b"\n")
    with gzip.open(folder / "b.jsonl.gz", "wb") as f:
        f.write(b"\n".join(lines[half:]) + b"\n")
    (folder / "notes.txt").write_text("not an input file")
    return {"folder": folder, "lines": lines, "labels": labels, "half": half}


@pytest.fixture(scope="module")
def landed(spark: Any, sample: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
           ) -> dict[str, Any]:
    lake = tmp_path_factory.mktemp("lake")
    result = run(spark, [str(sample["folder"])], str(lake))
    return {"lake": lake, "result": result}


def _global_line(sample: dict[str, Any], row: dict[str, Any]) -> int:
    offset = 0 if row["source_file"].endswith("a.jsonl") else sample["half"]
    return int(row["line_no"]) + offset


def test_conservation(sample: dict[str, Any], landed: dict[str, Any]) -> None:
    n = len(sample["lines"])
    raw = table(landed["lake"], "raw_messages")
    messages = table(landed["lake"], "messages")
    assert len(raw) == n and len(messages) == n
    assert {(r["source_file"], r["line_no"]) for r in raw} == {
        (m["source_file"], m["line_no"]) for m in messages
    }
    verdicts = Counter(m["verdict"] for m in messages)
    assert verdicts["valid"] + verdicts["rejected"] == n
    result = landed["result"]
    assert result.lines_read == n and result.valid + result.rejected == n
    assert result.raw_rows_written == n and result.message_rows_written == n


def test_verdicts_equal_the_checker_and_the_labels(
    sample: dict[str, Any], landed: dict[str, Any]
) -> None:
    messages = sorted(table(landed["lake"], "messages"), key=lambda r: _global_line(sample, r))
    # 2006 details name the accepted line by its file and line number in that file
    names = [line_name(m["source_file"], m["line_no"]) for m in messages]
    reference = check_lines(sample["lines"], ReceiptClock.refuse(), names=names)
    assert [_global_line(sample, m) for m in messages] == list(range(1, len(reference) + 1))
    for row, ref, label in zip(messages, reference, sample["labels"], strict=True):
        assert (row["error_code"], row["error_detail"] or "") == (
            ref.error_code, ref.error_detail), (row["line_no"], label)
        assert row["error_code"] == label.expected_code, label
        assert row["verdict"] == ref.verdict
    codes = {m["error_code"] for m in messages}
    assert {None, 1003, 1004, 2001, 2002, 2004, 2005, 2006} <= codes


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_a_small_input_lands_on_the_driver_as_spark_tasks_land_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str,
) -> None:
    """A small input is landed in the driver process, a larger one by Spark tasks: the same
    rows in every table, the same figures, and the checker's verdicts either way. The input
    holds replays within the run, attacks of every kind, and lines that are not JSON or
    not UTF-8."""
    from snap_spark.pipeline import batch_job as job_module
    from tests.lake.helpers import use_backend

    pairs = list(generate(SampleConfig(agents=6, messages=1_200, seed=29,
                                       attack_share=0.3)))
    garbage = [
        b'{"received_at": 1770163200, "mess',  # truncated JSON
        b"\xff\xfe",  # not UTF-8
        b"[]",  # not an object
        b"",  # empty
        b'{"received_at": "soon", "message": 5}',  # wrong types
        b'{"received_at": 1770163200, "message": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
        # huge, and tampered with after signing: its signature no longer holds
        envelope({**signed(id="big", timestamp=T0, payload={"blob": "x"}),
                  "payload": {"blob": "x" * 150_000}}),
    ]
    lines = [line for line, _ in pairs] + garbage
    folder = tmp_path / "in"
    folder.mkdir()
    cut = len(lines) // 2
    (folder / "a.jsonl").write_bytes(b"\n".join(lines[:cut]) + b"\n")
    (folder / "b.jsonl").write_bytes(b"\n".join(lines[cut:]) + b"\n")
    assert sum(p.stat().st_size for p in folder.iterdir()) <= DriverLimits().land_bytes
    set_limits(monkeypatch, land_bytes=DriverLimits().land_bytes)
    took: list[str] = []
    real = job_module.land_on_driver

    def spy(*args: Any, **kwargs: Any) -> Any:
        took.append("driver")
        return real(*args, **kwargs)

    monkeypatch.setattr(job_module, "land_on_driver", spy)
    with use_backend(spark, backend):
        on_driver = run(spark, [str(folder)], str(tmp_path / "driver"))
        assert took == ["driver"]
        set_limits(monkeypatch, land_bytes="spark")
        # the tasks send their replay candidates to the fold in blocks (one per fold
        # partition), or with SNAP_SPARK_FOLD_BLOCKS=0 as a row per line
        from snap_spark.pipeline.land import fold_blocks

        assert len(fold_blocks(spark)) > 1
        in_tasks = run(spark, [str(folder)], str(tmp_path / "tasks"))
        monkeypatch.setenv("SNAP_SPARK_FOLD_BLOCKS", "0")
        assert fold_blocks(spark) == ()
        in_rows = run(spark, [str(folder)], str(tmp_path / "rows"))
        assert took == ["driver"]
    assert on_driver.lines_read == in_tasks.lines_read == in_rows.lines_read == len(lines)
    assert on_driver.counts == in_tasks.counts == in_rows.counts
    assert on_driver.counts.get(2006) and on_driver.counts.get(1003)
    # every garbage line is a rejected row with a code and a reason
    tail = {m["line_no"]: m for m in table(tmp_path / "driver", "messages")
            if m["source_file"].endswith("b.jsonl") and m["line_no"] > len(lines) - cut
            - len(garbage)}
    assert len(tail) == len(garbage)
    assert all(m["error_code"] and m["error_detail"] for m in tail.values()), [
        (n, m["error_code"], m["error_detail"]) for n, m in sorted(tail.items())]

    def rows(lake: Path, name: str) -> list[tuple[Any, ...]]:
        skip = {"ingest_id", "ingest_time"}  # of the run
        return sorted(tuple(str(v) for k, v in sorted(r.items()) if k not in skip)
                      for r in table(lake, name))

    for name in ("raw_messages", "messages", "task_events", "tasks"):
        assert rows(tmp_path / "driver", name) == rows(tmp_path / "tasks", name), name
        assert rows(tmp_path / "driver", name) == rows(tmp_path / "rows", name), name
    where = [(str(folder / "a.jsonl"), n) for n in range(1, cut + 1)] + [
        (str(folder / "b.jsonl"), n) for n in range(1, len(lines) - cut + 1)]
    reference = check_lines(lines, ReceiptClock.refuse(),
                            names=[line_name(src, n) for src, n in where])
    got = {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
           for m in table(tmp_path / "driver", "messages")}
    assert got == {key: (v.error_code, v.error_detail or None)
                   for key, v in zip(where, reference, strict=True)}


def test_messages_written_in_a_spark_stage_equal_those_written_on_the_driver(
    spark: Any, sample: dict[str, Any], landed: dict[str, Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small pass writes its ``messages`` files on the driver, a large one in a Spark
    stage: the same rows either way (the sample's run took the driver)."""

    assert len(sample["lines"]) <= DriverLimits().pass_lines
    set_limits(monkeypatch, pass_lines="spark")
    lake = tmp_path / "lake"
    assert run(spark, [str(sample["folder"])], str(lake)).lines_read == len(sample["lines"])

    def rows(folder: Path) -> list[tuple[Any, ...]]:
        skip = {"ingest_id", "ingest_time"}  # of the run
        return sorted(tuple(str(v) for k, v in sorted(r.items()) if k not in skip)
                      for r in table(folder, "messages"))

    staged, local = rows(lake), rows(landed["lake"])
    assert len(staged) == len(sample["lines"])
    assert staged == local


def test_message_columns_for_notebooks(landed: dict[str, Any]) -> None:
    messages = table(landed["lake"], "messages")
    valid = [m for m in messages if m["verdict"] == "valid"]
    assert valid and all(m["sender"] and m["msg_id"] and m["method"] for m in valid)
    assert all(m["event_time"] is not None and m["event_date"] is not None for m in valid)
    assert any(m["task_id"] for m in valid) and any(m["context_id"] for m in valid)
    assert any(m["recipient"] is None and m["method"] == "service/call" for m in valid)
    rejected = [m for m in messages if m["verdict"] == "rejected"]
    assert all(m["error_code"] and m["error_name"] and m["error_detail"] for m in rejected)
    assert DeltaTable(str(landed["lake"] / "messages")).metadata().partition_columns == [
        "event_date"
    ]
    protocol = DeltaTable(str(landed["lake"] / "messages")).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)


def test_raw_text_is_kept(sample: dict[str, Any], landed: dict[str, Any]) -> None:
    raw = table(landed["lake"], "raw_messages")
    by_line = {_global_line(sample, r): r for r in raw}
    for n, line in enumerate(sample["lines"], start=1):
        row = by_line[n]
        if row["raw_bytes"] is not None:
            assert row["raw_bytes"] == line
        else:
            assert row["raw_text"].encode("utf-8") == line
        assert row["byte_len"] == len(line)


def test_rerun_adds_nothing(spark: Any, sample: dict[str, Any], landed: dict[str, Any]) -> None:
    lake = landed["lake"]
    before = {name: DeltaTable(str(lake / name)).version() for name in ("raw_messages",
                                                                         "messages")}
    again = run(spark, [str(sample["folder"])], str(lake))
    assert again.files_processed == 0 and again.message_rows_written == 0
    after = {name: DeltaTable(str(lake / name)).version() for name in before}
    assert after == before
    assert len(table(lake, "messages")) == len(sample["lines"])


def test_new_file_in_folder_is_the_only_one_ingested(
    spark: Any, tmp_path: Path
) -> None:
    folder, lake = tmp_path / "in", tmp_path / "lake"
    folder.mkdir()
    (folder / "one.jsonl").write_bytes(envelope(signed()) + b"\n")
    first = run(spark, [str(folder)], str(lake))
    assert first.lines_read == 1
    (folder / "two.ndjson").write_bytes(envelope(signed(id="m-2")) + b"\n" + b"junk\n")
    second = run(spark, [str(folder)], str(lake))
    assert (second.files_processed, second.lines_read, second.message_rows_written) == (1, 2, 2)
    rows = table(lake, "messages")
    assert sorted((Path(r["source_file"]).name, r["line_no"], r["error_code"]) for r in rows) == [
        ("one.jsonl", 1, None), ("two.ndjson", 1, None), ("two.ndjson", 2, 1003)]


def test_a_run_that_dies_between_the_commits_is_completed_by_the_next(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snap_spark.lake import DataCommit, LakeError
    from snap_spark.lake.delta_rs import DeltaRsLake

    path = tmp_path / "in.jsonl"
    lines = [envelope(signed(id=f"m{i}")) for i in range(5)] + [envelope(signed(id="m0"))]
    path.write_bytes(b"\n".join(lines) + b"\n")
    lake = tmp_path / "lake"
    real_commit = DeltaRsLake.commit

    def failing_commit(self: Any, spark_: Any, change: DataCommit) -> bool:
        if (change.mode == "add" and change.path.endswith("messages")
                and "raw_" not in change.path):
            raise LakeError("disk full")  # the driver dies before the second commit
        return real_commit(self, spark_, change)

    monkeypatch.setattr(DeltaRsLake, "commit", failing_commit)
    with pytest.raises(LakeError):
        run(spark, [str(path)], str(lake))
    assert len(table(lake, "raw_messages")) == len(lines)
    assert not (lake / "messages").exists()  # its written files were deleted
    assert not files_under(lake / "_staging")

    monkeypatch.setattr(DeltaRsLake, "commit", real_commit)
    healed = run(spark, [str(path)], str(lake))
    assert (healed.raw_rows_written, healed.message_rows_written) == (0, len(lines))
    assert healed.counts == {None: 5, 2006: 1}
    assert len(table(lake, "raw_messages")) == len(table(lake, "messages")) == len(lines)
    # the folder of run markers stays, empty: a run ending removed it, and another run
    # that had just made it lost it before its marker was written (exit 2, "No such file")
    assert (lake / "_snap_runs").is_dir() and not files_under(lake / "_snap_runs")
    assert not files_under(lake / "_staging")


def test_bad_input_is_rejected_never_lost(spark: Any, tmp_path: Path) -> None:
    deep = b"[" * 10_000 + b"]" * 10_000
    big = envelope(message(payload={"t": "x" * (12 * 1024 * 1024)}))
    bad = [b"", b"{truncated", b"\xff\xfe\x00 invalid utf-8", deep, big, b"[1,2]",
           envelope(message(timestamp="soon")), json.dumps({"received_at": 1}).encode()]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(bad) + b"\n")
    lake = tmp_path / "lake"
    result = run(spark, [str(path)], str(lake))
    assert result.lines_read == len(bad)
    rows = sorted(table(lake, "messages"), key=lambda r: r["line_no"])
    assert [r["error_code"] for r in rows] == [1003, 1003, 1003, 1003, 1004, 1003, 1004, 1003]
    assert all(r["error_detail"] for r in rows)
    raw = {r["line_no"]: r for r in table(lake, "raw_messages")}
    assert raw[3]["raw_bytes"] == bad[2]
    assert raw[5]["byte_len"] == len(big)


def test_truncated_gzip_keeps_what_it_read(spark: Any, tmp_path: Path) -> None:
    data = gzip.compress(b"\n".join(envelope(signed(id=f"m{i}")) for i in range(200)) + b"\n")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    lake = tmp_path / "lake"
    result = run(spark, [str(path)], str(lake))
    rows = sorted(table(lake, "messages"), key=lambda r: r["line_no"])
    assert result.lines_read == len(rows) >= 2
    assert rows[-1]["error_code"] == 1003 and "could not be read" in rows[-1]["error_detail"]
    assert all(r["error_code"] is None for r in rows[:-1])


def test_bare_lines_need_a_clock_and_nothing_is_written(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bare.jsonl"
    path.write_bytes(json.dumps(signed()).encode() + b"\n")
    (tmp_path / "other.jsonl").write_bytes(envelope(signed()) + b"\n")  # lands, then goes
    lake = tmp_path / "lake"
    with pytest.raises(MissingReceiptTime):
        run(spark, [str(path), str(tmp_path / "other.jsonl")], str(lake))
    said = capsys.readouterr().err
    assert "stage 1/4" in said and "stage 2/4" not in said  # no "wrote N lines" first
    assert not (lake / "messages").exists() and not (lake / "raw_messages").exists()
    ok = run(spark, [str(path)], str(lake), VerifySettings(bare_clock="message"))
    assert ok.valid == 1
    stale = run(spark, [str(path)], str(tmp_path / "lake2"),
                VerifySettings(bare_clock=str(T0 + 600)))
    assert stale.counts == {2004: 1}


def test_drift_reads_the_receipt_clock_in_whole_seconds(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 2004 check compares the timestamp with the whole receipt second (the spec's
    ``Math.floor(Date.now() / 1000)``): 60.999 s late is valid, 61 s late and 60.001 s early
    are 2004, on the driver and in Spark tasks; ``received_at`` keeps its fraction."""

    offsets = {"late-60-999": (60.999, None), "late-61": (61.0, 2004),
               "early-60": (-60.0, None), "early-60-001": (-60.001, 2004)}
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(envelope(signed(id=name, timestamp=T0), received_at=T0 + at)
                              + b"\n" for name, (at, _) in offsets.items()))
    for where in ("driver", "tasks"):
        if where == "tasks":
            set_limits(monkeypatch, land_bytes="spark")
        else:
            set_limits(monkeypatch, land_bytes=DriverLimits().land_bytes)
        run(spark, [str(path)], str(tmp_path / where))
        got = {m["msg_id"]: (m["received_at"], m["error_code"])
               for m in table(tmp_path / where, "messages")}
        assert got == {name: (T0 + at, code) for name, (at, code) in offsets.items()}, where


def test_spark_submit_runs_the_job(tmp_path: Path) -> None:
    """The job as a user launches it, as ``make run`` does: ``spark-submit --jars <the Delta
    JARs make setup cached> jobs/verify_messages.py`` (the driver JVM starts before Python,
    so only spark-submit can put the JARs on its classpath). The backend is then delta-spark;
    the job commits its files in place (no copy by Delta's writer, no staging left); its
    summary line counts what the checker decides; ``--help`` answers through spark-submit."""
    from snap_spark.runtime.maven_jars import DELTA

    jars = DELTA.available()
    assert jars is not None, "Delta's JARs are not cached: run `make setup`"
    lines = [line for line, _ in generate(SampleConfig(agents=3, messages=20, seed=1))]
    lines.append(b"oops")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    verdicts = check_lines(lines, ReceiptClock.refuse(),
                           names=[line_name(str(path), n) for n in range(1, len(lines) + 1)])
    valid = sum(1 for v in verdicts if v.error_code is None)
    assert 0 < valid < len(lines)
    submit = Path(sys.executable).parent / "spark-submit"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    root = Path(__file__).resolve().parents[2]
    lake = tmp_path / "lake"
    proc = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--jars", ",".join(jars), str(root / "jobs" / "verify_messages.py"),
         "--input", str(path), "--lake", str(lake)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr  # spark-submit merges them
    assert (f"lines read: {len(lines)}   valid: {valid}   rejected: {len(lines) - valid}   "
            "balance: OK") in proc.stdout
    assert "stage 4/4" in said
    assert any("backend=delta-spark" in line for line in said.splitlines()
               if "snap-spark" in line), said[-3000:]
    assert len(table(lake, "messages")) == len(lines)
    info = DeltaTable(str(lake / "messages")).history(1)[0]
    assert str(info.get("engineInfo")).startswith("delta-rs")
    assert not files_under(lake / "_staging")
    helped = subprocess.run([str(submit), str(root / "jobs" / "verify_messages.py"), "--help"],
                            capture_output=True, text=True, timeout=300, env=env, check=False)
    assert helped.returncode == 0 and "--bare-clock" in helped.stdout


def test_job_errors_are_clear_and_write_nothing(spark: Any, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from snap_spark.pipeline.batch_job import main

    lake = tmp_path / "lake"
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "ok.jsonl").write_bytes(envelope(signed()) + b"\n")
    (tmp_path / "empty").mkdir()
    cases = [
        (["--input", str(tmp_path / "missing.jsonl")], "does not exist"),
        (["--input", str(tmp_path / "notes.txt")], "does not end in"),
        (["--input", str(tmp_path / "empty")], "no .jsonl"),
        (["--input", str(tmp_path / "empty"), "--bare-clock", "soon"], "bad receipt clock"),
        (["--input", str(tmp_path / "ok.jsonl"), "--conf", "novalue"], "KEY=VALUE"),
    ]
    for argv, expected in cases:
        assert main([*argv, "--lake", str(lake)]) == 2, argv
        assert expected in capsys.readouterr().err, argv
    assert not lake.exists()


def test_a_wrong_input_is_refused_before_spark_starts(tmp_path: Path) -> None:
    """No JVM is started for a path that cannot be read: the one line comes at once."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    for wrong, expected in ((tmp_path / "missing.jsonl", "does not exist"),
                            (tmp_path, "no .jsonl")):
        proc = subprocess.run(
            [sys.executable, str(root / "jobs" / "verify_messages.py"), "--input", str(wrong),
             "--lake", str(tmp_path / "lake")],
            capture_output=True, text=True, timeout=120, env=env, check=False)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], proc.stderr
        assert "log4j" not in proc.stderr and "SparkContext" not in proc.stderr
    assert not (tmp_path / "lake").exists()


def test_a_damaged_table_log_is_one_line(spark: Any, tmp_path: Path) -> None:
    """A truncated ``_delta_log`` file: exit 1 with one line naming the table and the file
    (no traceback, no Rust backtrace); ``--debug`` shows the traceback. (The lake is landed
    in this process; the job runs that meet the damage are separate processes.)"""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    lake = tmp_path / "lake"
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(envelope(signed()) + b"\n")
    second.write_bytes(envelope(signed(id="m-2")) + b"\n")

    def job(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(root / "jobs" / "verify_messages.py"), "--master", "local[1]",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.snap.lake.backend=delta-rs",
             "--input", str(path), "--lake", str(lake), *extra],
            capture_output=True, text=True, timeout=300, env=env, check=False)

    run(spark, [str(first)], str(lake))
    log = sorted((lake / "messages" / "_delta_log").glob("*.json"))[-1]
    log.write_bytes(log.read_bytes()[: len(log.read_bytes()) // 2])
    proc = job(second)
    assert proc.returncode == 1, proc.stderr[-2000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("verify_messages:")]
    assert len(ours) == 1 and str(log) in ours[0] and "messages" in ours[0], proc.stderr
    assert "Traceback" not in proc.stderr and "pthread" not in proc.stderr
    debug = job(second, "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_a_file_starting_with_a_byte_order_mark(spark: Any, tmp_path: Path) -> None:
    """Issue 47: a file that starts with a UTF-8 BOM (many Windows exports) had its first
    line rejected as not JSON. The BOM is ignored for parsing (by both cores:
    tests/unit/test_native_differential.py compares them on lines led by one);
    raw_messages keeps the line's bytes as they were."""
    bom = b"\xef\xbb\xbf"
    first, second = envelope(signed(id="b1")), envelope(signed(id="b2"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "win.jsonl").write_bytes(bom + first + b"\r\n" + second + b"\r\n")
    lake = tmp_path / "lake"
    result = run(spark, [str(tmp_path / "in")], str(lake))
    assert (result.lines_read, result.valid) == (2, 2)
    raw = sorted(table(lake, "raw_messages"), key=lambda r: r["line_no"])
    assert raw[0]["raw_text"].startswith("\ufeff")
    # (the line's bytes up to its newline: the \r of a Windows line end is kept too)
    assert raw[0]["raw_text"].encode() == bom + first + b"\r"
    assert raw[0]["byte_len"] == len(bom + first + b"\r")
    msgs = sorted(table(lake, "messages"), key=lambda r: r["line_no"])
    assert [(m["msg_id"], m["error_code"]) for m in msgs] == [("b1", None), ("b2", None)]
