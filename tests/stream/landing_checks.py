"""What the landing-folder stream tests check after a run: every line once in both tables,
with the verdicts the pure-Python checker gives over all lines, and the progress lines
(``--progress-json`` in ``<tmp_path>/progress.jsonl``) adding up to the table."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.replay import line_name
from snap_spark.protocol.validate import ReceiptClock
from tests.lake.helpers import delta_rows


def progress_lines(tmp_path: Path) -> list[dict[str, Any]]:
    """The progress JSON lines written so far (none before the first)."""
    path = tmp_path / "progress.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def wait_for(tmp_path: Path, test: Any, what: str, timeout: float = 180.0) -> float:
    """Wait until ``test(progress lines)`` holds; the seconds it took."""
    started = time.monotonic()
    while not test(progress_lines(tmp_path)):
        assert time.monotonic() - started < timeout, \
            f"no progress line {what}: {progress_lines(tmp_path)}"
        time.sleep(0.1)
    return time.monotonic() - started


def check_each_line_once(tmp_path: Path, lines: list[bytes], where: list[tuple[str, int]]
                         ) -> None:
    """``lines`` (at ``where``: file and line number) each once in ``raw_messages`` and
    ``messages`` of ``<tmp_path>/lake``, with the checker's verdicts, and the progress
    lines' counts (re-decided rows and replaced unfinished lines included) adding up to
    the table's."""
    lake = tmp_path / "lake"
    names = [line_name(src, n) for src, n in where]
    reference = {key: (v.error_code, v.error_detail or None) for key, v in zip(
        where, check_lines(lines, ReceiptClock.refuse(), names=names), strict=True)}
    for table in ("raw_messages", "messages"):
        counted = Counter((r["source_file"], r["line_no"]) for r in delta_rows(
            lake / table, "select source_file, line_no from t"))
        assert set(counted) == set(reference), table
        assert max(counted.values()) == 1, f"{table}: a line landed twice"
    rows = delta_rows(lake / "messages")
    assert {(m["source_file"], m["line_no"]): (m["error_code"], m["error_detail"])
            for m in rows} == reference
    table = Counter("valid" if m["error_code"] is None else str(m["error_code"]) for m in rows)
    summed: Counter[str] = Counter()
    progress = progress_lines(tmp_path)
    for fields in progress:
        summed["valid"] += fields["valid"]
        summed.update(fields["codes"])
        # a late, earlier-received copy re-decides rows an earlier line counted
        summed.update(fields["redecided_codes"])
        assert sum(fields["redecided_codes"].values()) == 0
        assert sum(abs(n) for n in fields["redecided_codes"].values()) <= (
            2 * fields["rows_redecided"])
        # rows of unfinished last lines removed: their lines were landed again completed
        summed.update(fields["replaced_codes"])
        assert -sum(fields["replaced_codes"].values()) == fields["rows_replaced"]
    assert sum(f["lines"] - f["rows_replaced"] for f in progress) == len(rows)
    assert +summed == +table
