"""A file that grows while its last line is unfinished (issue 47, item 1).

A writer appending in place leaves the file, at any moment, ending in the middle of a line.
A run then lands that line as it stands (a one-off run must land every line); when a later
run finds the line completed, it lands the file from that line's start and the rows of the
unfinished line are removed in the same run's commits. So every line is in
``raw_messages`` and ``messages`` exactly once, and the verdicts are those of one run over
the finished file, however often it was cut mid-line: the reference is the checker over
every line at once.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snap_spark.pipeline.batch_job import run
from snap_spark.pipeline.ledger import LandedPiece, replaced_lines
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from snap_spark.samples.messages import SampleConfig, generate, write_sample
from tests.hold import HOLDING
from tests.jobs import kill_when, logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows, use_backend

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = ("raw_messages", "messages")


def ever_added(table: Path) -> set[str]:
    """Every data file a commit of the table's log added (relative paths), removed since or
    not: a file that is in none was never committed."""
    from urllib.parse import unquote

    added = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    return added


def _reference(files: list[tuple[Path, bytes]]) -> dict[tuple[str, int], tuple[Any, Any]]:
    """The checker's verdict of every line of the finished files, over all at once."""
    where = [(str(path), n) for path, data in files
             for n in range(1, len(data.splitlines()) + 1)]
    lines = [line for _, data in files for line in data.splitlines()]
    names = [line_name(src, n) for src, n in where]
    return {key: (v.error_code, v.error_detail or None) for key, v in zip(
        where, check_lines(lines, ReceiptClock.refuse(), names=names), strict=True)}


def _assert_once_as_checker(lake: Path, files: list[tuple[Path, bytes]]) -> None:
    """Each line once in both tables, each row holding the finished line, and the verdicts
    of one run over the finished files."""
    reference = _reference(files)
    lines = {(str(path), n): line for path, data in files
             for n, line in enumerate(data.splitlines(), 1)}
    for table in TABLES:
        rows = delta_rows(lake / table)
        counted = Counter((r["source_file"], r["line_no"]) for r in rows)
        assert set(counted) == set(reference), table
        assert max(counted.values()) == 1, f"{table}: a line landed twice"
    raw = {(r["source_file"], r["line_no"]): (
        r["raw_bytes"] if r["raw_bytes"] is not None else r["raw_text"].encode())
           for r in delta_rows(lake / "raw_messages")}
    assert raw == lines
    assert {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in delta_rows(lake / "messages")} == reference
    # the ledger's pieces, less the lines later pieces replaced, are the tables' rows
    ledger = [LandedPiece.from_row(r) for r in delta_rows(lake / "ingested_files")]
    assert sum(p.lines for p in ledger) - sum(replaced_lines(ledger).values()) == len(lines)


def test_the_issues_repro_lands_8000_lines_once_with_one_runs_verdicts(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 47: the first 174,470 bytes of an 8,000-line sample end in line 277; landed,
    then the rest appended and landed: 8,277 rows before, 8,000 now."""
    whole = tmp_path / "whole.jsonl"
    write_sample(SampleConfig(messages=8000), str(whole), tasks_path=None)
    data = whole.read_bytes()
    cut = 174_470
    assert data[:cut].count(b"\n") == 276 and data[cut - 1:cut] != b"\n"
    path, lake = tmp_path / "in" / "traffic.jsonl", tmp_path / "lake"
    path.parent.mkdir()
    path.write_bytes(data[:cut])
    first = run(spark, [str(path)], str(lake))
    assert first.lines_read == 277  # the unfinished line 277 too: a run lands every line
    with path.open("ab") as out:
        out.write(data[cut:])
    capsys.readouterr()
    second = run(spark, [str(path)], str(lake))
    assert "line 277 replacing the row landed before" in capsys.readouterr().err
    assert (second.lines_read, second.rows_replaced) == (8000 - 276, 1)
    assert second.replaced_codes == {1003: -1}
    # every verdict the checker's over the whole file: line 277 is no replay of itself
    _assert_once_as_checker(lake, [(path, data)])
    assert run(spark, [str(path)], str(lake)).files_processed == 0


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_a_file_grown_three_times_mid_line_lands_each_line_once(
        spark: Any, tmp_path: Path, backend: str) -> None:
    """Cut mid-line three times: once just before a newline (the unfinished line is a
    whole valid message then: completed, it must not be a replay of itself), once in the
    middle of a line, once inside the line the cut before left unfinished. On both
    backends."""
    lines = [line for line, _ in generate(SampleConfig(agents=4, messages=600, seed=7))]
    data = b"\n".join(lines) + b"\n"
    codes = [v.error_code for v in check_lines(lines, ReceiptClock.refuse())]
    valid = next(n for n in range(100, 200) if codes[n - 1] is None)  # a valid line
    ends = [i for i, byte in enumerate(data) if byte == 10]
    cuts = [ends[valid - 1],  # line `valid` whole, but its newline not yet written
            ends[299] - 40,  # in the middle of line 300
            ends[299] - 20,  # line 300 still unfinished, a little longer
            len(data)]
    path, lake = tmp_path / "grow.jsonl", tmp_path / "lake"
    landed = []
    for at in cuts:
        with path.open("ab") as out:
            out.write(data[path.stat().st_size if path.exists() else 0:at])
        with use_backend(spark, backend):
            landed.append(run(spark, [str(path)], str(lake)))
    assert [r.lines_read for r in landed] == [valid, 301 - valid, 1, 301]
    assert [r.rows_replaced for r in landed] == [0, 1, 1, 1]
    assert landed[1].replaced_codes == {None: -1}  # it was valid unfinished
    _assert_once_as_checker(lake, [(path, data)])
    ledger = [LandedPiece.from_row(r) for r in delta_rows(lake / "ingested_files")]
    # each continuation starts at the unfinished line of the piece before, with its number
    assert sorted((p.start_byte, p.first_line, p.lines) for p in ledger) == [
        (0, 1, valid), (ends[valid - 2] + 1, valid, 301 - valid), (ends[298] + 1, 300, 1),
        (ends[298] + 1, 300, 301)]
    assert replaced_lines(ledger) == {p.file_key: 1 for p in ledger if p.end_byte < len(data)}


def test_a_valid_unfinished_line_completed_as_garbage_gives_its_copy_back(
        spark: Any, tmp_path: Path) -> None:
    """The unfinished line was a whole valid message, and made a later copy of it in
    another file a 2006; the writer then finished that line with more bytes, which make it
    no message (1003): the copy is valid again, as one run over the finished files says."""
    from tests.unit.helpers import PRIV_A, T0, envelope, signed

    message = signed(PRIV_A, id="m-1", timestamp=T0)
    a, b, lake = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "lake"
    a.write_bytes(envelope(message, received_at=T0))
    b.write_bytes(envelope(message, received_at=T0 + 10) + b"\n")
    run(spark, [str(a)], str(lake))
    run(spark, [str(b)], str(lake))
    assert {Path(m["source_file"]).name: m["error_code"]
            for m in delta_rows(lake / "messages")} == {"a.jsonl": None, "b.jsonl": 2006}
    with a.open("ab") as out:
        out.write(b" trailing words\n")
    again = run(spark, [str(a)], str(lake))
    assert (again.rows_replaced, again.rows_redecided) == (1, 1)
    _assert_once_as_checker(lake, [(a, a.read_bytes()), (b, b.read_bytes())])


def test_a_file_without_a_final_newline_that_never_grows_lands_its_last_line(
        spark: Any, tmp_path: Path) -> None:
    lines = [line for line, _ in generate(SampleConfig(agents=3, messages=50, seed=8))]
    path, lake = tmp_path / "end.jsonl", tmp_path / "lake"
    path.write_bytes(b"\n".join(lines))
    assert run(spark, [str(path)], str(lake)).lines_read == 50
    assert run(spark, [str(path)], str(lake)).files_processed == 0
    _assert_once_as_checker(lake, [(path, path.read_bytes())])


@pytest.mark.parametrize(("hold", "nth"), [
    ("stage 3/4", 1),  # its rows in raw_messages, the unfinished line's not yet removed
    ("messages: removed the rows", 1),  # removed from raw_messages, not from messages
    ("messages: removed the rows", 2),  # removed from both, its messages rows not in
    ("stage 4/4", 1),  # messages committed, the ledger not
], ids=["raw committed", "raw removed", "both removed", "messages committed"])
def test_a_continuation_killed_between_its_commits_then_run_again_lands_each_line_once(
        spark: Any, tmp_path: Path, hold: str, nth: int) -> None:
    """The run that completes an unfinished line is held still at a moment between its
    commits and its process group killed (SIGKILL); the run again (the file unchanged, or
    grown further) leaves each line once with one run's verdicts."""
    path, lake = tmp_path / "live.jsonl", tmp_path / "lake"
    write_sample(SampleConfig(agents=4, messages=800, seed=17), str(tmp_path / "all.jsonl"),
                 tasks_path=None)
    data = (tmp_path / "all.jsonl").read_bytes()
    ends = [i for i, byte in enumerate(data) if byte == 10]
    path.write_bytes(data[:ends[299] - 30])  # line 300 unfinished
    run(spark, [str(path)], str(lake))
    with path.open("ab") as out:
        out.write(data[ends[299] - 30:ends[599] - 30])  # completes it; line 600 unfinished
    said = kill_when(start_job("verify_messages.py", ["--input", str(path), "--lake",
                                                      str(lake)], hold_at=hold, hold_nth=nth),
                     HOLDING)
    assert "line 300 replacing the row landed before" in said
    rerun = run(spark, [str(path)], str(lake))
    assert rerun.files_processed == 1
    for table in TABLES:  # no stray file: each was committed (a copy replaced some since)
        assert logged_files(lake / table) <= parquet_files(lake / table) <= ever_added(
            lake / table), table
    _assert_once_as_checker(lake, [(path, path.read_bytes())])
    with path.open("ab") as out:
        out.write(data[ends[599] - 30:])
    run(spark, [str(path)], str(lake))
    _assert_once_as_checker(lake, [(path, data)])
    assert os.path.getsize(path) == len(data)
