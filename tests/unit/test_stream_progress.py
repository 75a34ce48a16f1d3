"""What a re-run pass reports: the figures its ``messages`` commit recorded, found in the
table's history by app transaction; and the progress line's wording for it and for files
that changed in the landing folder. (The whole path, kill and restart included, is
tests/stream/test_stream_kill.py and tests/stream/test_stream_landing.py.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from snap_spark.lake import committed_info
from snap_spark.lake.common import write_marker
from snap_spark.pipeline.commit import read_figures, verdict_figures
from snap_spark.stream.progress import format_line


def _commit(table: Path, app_id: str, version: int, info: dict[str, object] | None) -> None:
    marker = write_marker("w", app_id, version, info)
    write_deltalake(str(table), pa.table({"x": [version]}), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": marker}))


def test_figures_round_trip_with_every_code() -> None:
    counts: dict[int | None, int] = {None: 7, 1001: 1, 2001: 2, 2006: 3}
    shift: dict[int | None, int] = {None: -2, 2006: 2}
    figures = verdict_figures(13, counts, 2, shift)
    assert figures["counts"] == {"valid": 7, "1001": 1, "2001": 2, "2006": 3}
    assert figures["redecided_codes"] == {"valid": -2, "2006": 2}
    assert read_figures(figures) == (13, counts, 2, shift)
    assert verdict_figures(0, {None: 0}, 0)["counts"] == {}
    # a commit recorded before redecided_codes existed: none
    recorded = {"lines": 3, "counts": {"valid": 3}, "rows_redecided": 1}
    assert read_figures(recorded) == (3, {None: 3}, 1, {})


def test_re_decided_codes_are_summed_and_shown() -> None:
    from snap_spark.pipeline.commit import JobResult
    from snap_spark.pipeline.replay_store import code_changes

    # an accepted row made a replay, a replay accepted again, and a detail-only change
    first = JobResult(rows_redecided=3, redecided_codes=code_changes([
        {"prior_code": None, "code": 2006}, {"prior_code": 2006, "code": None},
        {"prior_code": 2006, "code": 2006}]))
    assert first.redecided_codes == {}
    second = JobResult(rows_redecided=2, redecided_codes=code_changes([
        {"prior_code": None, "code": 2006}, {"prior_code": 2004, "code": 2006}]))
    assert second.redecided_codes == {None: -1, 2004: -1, 2006: 2}
    total = JobResult()
    for one in (first, second, JobResult(redecided_codes={None: 1, 2006: -1})):
        total.add(one)
    assert total.rows_redecided == 5
    assert total.redecided_codes == {2004: -1, 2006: 1}
    line = format_line({"batch_id": 4, "rows_in": 2, "valid": 2, "rejected": 0, "codes": {},
                        "rows_redecided": 2, "redecided_codes": {"valid": -1, "2006": 1}})
    assert line.endswith("2 earlier rows re-decided (valid -1 2006 +1)")


def test_committed_info_finds_the_commit_of_an_app_transaction(tmp_path: Path) -> None:
    table = tmp_path / "messages"
    for version in range(40):  # more than one page of history
        _commit(table, "snap-spark/stream/q1", version, {"batch_id": version})
    _commit(table, "snap-spark/stream/q2", 0, None)
    assert committed_info(str(table), "snap-spark/stream/q1", 3) == {"batch_id": 3}
    assert committed_info(str(table), "snap-spark/stream/q1", 39) == {"batch_id": 39}
    assert committed_info(str(table), "snap-spark/stream/q2", 0) == {}
    assert committed_info(str(table), "snap-spark/stream/q1", 40) is None
    assert committed_info(str(table), "snap-spark/stream/other", 0) is None


def test_progress_line_says_a_batch_was_committed_before_a_restart() -> None:
    fields = {"batch_id": 1, "rows_in": 10, "valid": 9, "rejected": 1, "codes": {"2001": 1},
              "already_committed": True, "rows_written": 0}
    line = format_line(fields)
    assert line.startswith("batch 1: 10 in, valid 9, rejected 1 (2001:1)")
    assert "committed before a restart" in line
    assert "committed before" not in format_line({**fields, "already_committed": False})


def test_progress_line_names_landing_changes() -> None:
    line = format_line({"batch_id": None, "landing_watch": "start", "rows_in": 5, "valid": 5,
                        "rejected": 0, "files_grown": 1, "files_changed": 0,
                        "files_vanished": 2})
    assert line.startswith("landing folder at start: 5 in")
    assert "1 grown and 0 changed file(s)" in line
    assert "2 file(s) vanished" in line


def test_a_batch_s_latencies_end_when_its_rows_were_committed() -> None:
    from snap_spark.pipeline.commit import JobResult
    from snap_spark.stream.progress import BatchProgress

    progress = BatchProgress()
    outcome = JobResult()
    # committed at 1000.0; the landing watch that runs after the commit does not count
    progress.record(4, outcome, 1.5, [997.5, 999.0, 1000.25], committed_at=1000.0)
    entry = progress.pop(4)
    assert entry is not None
    assert entry["latencies"] == [0.0, 1.0, 2.5]  # a clock step back counts as 0
    assert entry["committed_at"] == 1000.0 and entry["latency_max"] == 2.5
    # without it, now
    progress.record(5, outcome, 1.5, [1.0])
    later = progress.pop(5)
    assert later is not None and later["latency_max"] > 1e9
