"""The landing task without Spark: what it writes, what it reports, what it cleans up.

The job tests (tests/integration) run the same code inside Spark; here each piece is checked
against independently computed expectations (the pure-Python checker, hand-built rows).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snap_spark.pipeline.checked import (
    apply_duplicates,
    table_arrow_schema,
)
from snap_spark.pipeline.checked import (
    seconds_to_timestamps as _seconds_to_ts,
)
from snap_spark.pipeline.land import (
    LANDED_SCHEMA,
    LandSpec,
    data_file,
    fold_landed,
    land_range,
    write_messages,
)
from snap_spark.protocol.checker import check_lines
from snap_spark.protocol.errors import ERROR_NAMES
from snap_spark.protocol.replay import line_name, resolve
from snap_spark.protocol.validate import Checked, ReceiptClock
from snap_spark.settings import VerifySettings
from tests.unit.helpers import ADDR_A, T0, envelope, signed

LINES = [
    envelope(signed(id="m1")),
    envelope(signed(id="m1"), received_at=T0 + 5),  # replay of an accepted message: 2006
    envelope(signed(id="m2", timestamp=T0 - 3600)),  # drift: 2004
    b'{"received_at": 1, "message": ',  # truncated: 1003
    b"\xff\xfe not utf-8",  # 1003, raw bytes kept
    b"",  # empty line: 1003
    envelope({**signed(id="m3"), "sig": "0" * 128}),  # bad signature: 2001
    envelope(signed(id="m4"), received_at=1e20),  # 2004; no timestamp holds its receipt time
]


def _spec(tmp_path: Path, path: Path, clock: str = "", raw: bool = True,
          msg: bool = True) -> LandSpec:
    key = "k-" + path.name
    return LandSpec(
        ingest_id="i" * 32, ingest_time_us=T0 * 1_000_000, file_keys={str(path): key},
        raw_keys=frozenset([key] if raw else []), msg_keys=frozenset([key] if msg else []),
        raw_root=str(tmp_path / "raw"), staging=str(tmp_path / "staging"),
        # several batches even for a few lines
        settings=VerifySettings(bare_clock=clock, batch_rows=3, verify_threads=1),
    )


def _land(spec: LandSpec, path: Path) -> list[dict[str, Any]]:
    return pa.Table.from_batches(list(land_range(spec, 0, str(path))),
                                 schema=LANDED_SCHEMA).to_pylist()


def _files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_seconds_to_timestamps_truncate_and_refuse_what_no_timestamp_holds() -> None:
    values = pa.array([0.0, 1.9999999, -1.0, 1e20, None, 253_402_300_799.0], pa.float64())
    got = _seconds_to_ts(values).to_pylist()
    utc = dt.UTC
    assert got == [
        dt.datetime(1970, 1, 1, tzinfo=utc),
        dt.datetime(1970, 1, 1, 0, 0, 1, 999_999, tzinfo=utc),
        None,
        None,
        None,
        dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=utc),
    ]


def test_a_range_lands_every_line_once(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    spec = _spec(tmp_path, path)
    rows = _land(spec, path)
    kinds = Counter(r["kind"] for r in rows)
    reference = check_lines(LINES, ReceiptClock.refuse())
    counts = Counter({r["code"]: r["lines"] for r in rows if r["kind"] == "count"})
    # Counts are the stateless codes: the replay (line 2) is still "valid" here.
    expected = Counter(v.error_code for v in reference)
    expected[2006] -= 1
    expected[None] += 1
    assert +counts == +expected
    assert sum(counts.values()) == len(LINES)

    candidates = [r for r in rows if r["kind"] == "candidate"]
    passed = [v.line_no for v in reference if v.error_code in (None, 2006, 2001, 2002)]
    assert [c["line_no"] for c in candidates] == passed
    assert {c["code"] for c in candidates if c["line_no"] == 7} == {2001}

    (raw_info,) = [json.loads(r["info"]) for r in rows if r["kind"] == "raw_file"]
    raw = pq.read_table(tmp_path / "raw" / raw_info["path"]).to_pylist()
    assert [r["line_no"] for r in raw] == list(range(1, len(LINES) + 1))
    assert raw[4]["raw_bytes"] == LINES[4] and raw[4]["raw_text"] == LINES[4].decode(
        "utf-8", "replace")
    assert all(r["raw_bytes"] is None for i, r in enumerate(raw) if i != 4)
    assert [r["byte_len"] for r in raw] == [len(line) for line in LINES]
    assert raw[0]["received_at"] == T0 and raw[0]["is_envelope"] is True

    (staged_info,) = [json.loads(r["info"]) for r in rows if r["kind"] == "staged"]
    with pa.memory_map(staged_info["path"]) as source:
        staged = pa.ipc.open_file(source).read_all()
    assert staged.schema == table_arrow_schema("messages")
    messages = staged.to_pylist()
    assert [m["error_code"] for m in messages] == [
        None if v.error_code == 2006 else v.error_code for v in reference]
    assert messages[0]["sender"] == ADDR_A and messages[0]["event_date"] == dt.date(2026, 2, 4)
    assert messages[3]["event_date"] == dt.date(2026, 2, 4)  # no times: the ingest date
    assert messages[7]["received_time"] is None and messages[7]["error_code"] == 2004
    assert messages[7]["event_date"] == dt.date(2026, 2, 4)  # from the message timestamp
    assert kinds["raw_file"] == 1 and kinds["staged"] == 1


def test_tables_already_holding_a_file_get_nothing_from_it(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    rows = _land(_spec(tmp_path, path, raw=False, msg=False), path)
    assert {r["kind"] for r in rows} == {"candidate", "count"}
    assert _files_under(tmp_path / "raw") == [] and _files_under(tmp_path / "staging") == []


def test_a_bare_line_without_a_clock_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    bare = json.dumps(signed(id="b1")).encode()
    path.write_bytes(b"\n".join([*LINES, bare, *LINES]) + b"\n")
    rows = _land(_spec(tmp_path, path), path)
    assert [r["kind"] for r in rows if r["kind"] != "candidate"] == ["bare"]
    assert _files_under(tmp_path / "raw") == [] and _files_under(tmp_path / "staging") == []
    with_clock = _land(_spec(tmp_path, path, clock="message"), path)
    assert sum(r["lines"] for r in with_clock if r["kind"] == "count") == 2 * len(LINES) + 1


def test_a_failing_read_deletes_what_the_task_wrote(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    spec = _spec(tmp_path, path)
    rows = land_range(spec, 0, str(path))
    next(rows)  # writers are open, the first batch is written
    assert _files_under(tmp_path / "staging")
    with pytest.raises(RuntimeError):
        rows.throw(RuntimeError("task killed"))  # a failure while the task is mid-range
    assert _files_under(tmp_path / "raw") == [] and _files_under(tmp_path / "staging") == []


def _landed(rows: list[dict[str, Any]]) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_pylist(rows, schema=LANDED_SCHEMA)]


def test_fold_passes_reports_through_and_emits_only_replays() -> None:
    def cand(line: int, sender: str, at: float, code: int | None = None) -> dict[str, Any]:
        return {"kind": "candidate", "source_file": "f", "line_no": line, "sender": sender,
                "msg_id": "m", "received_at": at, "code": code}

    rows = [cand(1, "a", 10.0, 2001), cand(2, "a", 11.0), cand(3, "a", 12.0, 2001),
            cand(4, "a", 500.0), cand(5, "b", 12.0)]
    info = {"kind": "count", "file_key": "k", "code": None, "lines": 5}
    out = pa.Table.from_batches(list(fold_landed(120.0, _landed([info, *rows])))).to_pylist()
    expected = resolve([Checked(sender=r["sender"], msg_id="m", received_at=r["received_at"],
                                auth_code=r["code"]) for r in rows], 120.0,
                       [line_name("f", r["line_no"]) for r in rows])
    dups = [(i + 1, d) for i, (code, d) in enumerate(expected) if code == 2006]
    assert dups and [(r["line_no"], r["info"]) for r in out if r["kind"] == "duplicate"] == dups
    assert next(r for r in out if r["kind"] == "duplicate")["prior_code"] == 2001
    assert [r for r in out if r["kind"] == "count"] == [
        {**{f.name: None for f in LANDED_SCHEMA}, **info}]


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["m1", "m2"]),
                               st.sampled_from([10.0, 10.0, 50.0, 200.0]),
                               st.sampled_from([None, None, 2001]),
                               st.sampled_from([None, "f", "g"])),
                     min_size=1, max_size=14),
       data=st.data())
def test_the_fold_decides_rows_given_in_any_order_as_the_rule_in_receipt_order(
        rows: list[tuple[str, str, float, int | None, str | None]], data: st.DataObject
        ) -> None:
    """A shuffle hands the fold a key's candidates in no particular order, in several
    batches: it decides them as the rule does over the candidates in receipt order, copies
    received together taken by file (a file without a name first), then line."""
    cands = [{"kind": "candidate", "source_file": f, "line_no": i + 1, "sender": sender,
              "msg_id": msg_id, "received_at": at, "code": code}
             for i, (sender, msg_id, at, code, f) in enumerate(rows)]
    ordered = sorted(cands, key=lambda r: (r["received_at"], r["source_file"] is not None,
                                           r["source_file"] or "", r["line_no"]))
    expected = resolve([Checked(sender=r["sender"], msg_id=r["msg_id"],
                                received_at=r["received_at"], auth_code=r["code"])
                        for r in ordered], 120.0,
                       [line_name(r["source_file"], r["line_no"]) for r in ordered])
    want = sorted((r["source_file"] or "", r["line_no"], detail)
                  for r, (code, detail) in zip(ordered, expected, strict=True) if code == 2006)
    given_order = data.draw(st.permutations(cands))
    cut = data.draw(st.integers(0, len(given_order)))
    batches = [pa.RecordBatch.from_pylist(part, schema=LANDED_SCHEMA)
               for part in (given_order[:cut], given_order[cut:]) if part]
    out = pa.Table.from_batches(list(fold_landed(120.0, batches)),
                                schema=LANDED_SCHEMA).to_pylist()
    assert sorted((r["source_file"] or "", r["line_no"], r["info"])
                  for r in out if r["kind"] == "duplicate") == want


def test_apply_duplicates_rewrites_only_the_named_lines() -> None:
    schema = table_arrow_schema("messages")
    base = {f.name: None for f in schema}
    rows = pa.Table.from_pylist([
        {**base, "line_no": n, "verdict": "valid" if n != 3 else "rejected",
         "error_code": None if n != 3 else 2001, "error_detail": None if n != 3 else "bad"}
        for n in (1, 2, 3)
    ], schema=schema)
    out = apply_duplicates(rows, {2: "dup of 1", 3: "dup of 1 too"}).to_pylist()
    assert [(r["verdict"], r["error_code"], r["error_name"], r["error_detail"]) for r in out] == [
        ("valid", None, None, None),
        ("rejected", 2006, ERROR_NAMES[2006], "dup of 1"),
        ("rejected", 2006, ERROR_NAMES[2006], "dup of 1 too"),
    ]
    assert apply_duplicates(rows, {}) is rows


def test_write_messages_turns_staged_rows_into_partitioned_files(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    rows = _land(_spec(tmp_path, path), path)
    staged = [{"source_file": r["source_file"], "file_key": r["file_key"], "info": r["info"]}
              for r in rows if r["kind"] == "staged"]
    batch = pa.RecordBatch.from_pylist(staged)
    duplicates = {"k-" + path.name: {2: "replayed"}}  # by file key
    written = write_messages(str(tmp_path / "messages"), duplicates, "i" * 32, [batch])
    out = pa.Table.from_batches(list(written)).to_pylist()
    files = [data_file(r["info"]) for r in out]
    assert sum(f.num_records for f in files) == len(LINES)
    assert {f.partition_values["event_date"] for f in files} == {"2026-02-04"}
    read = [r for f in files for r in pq.read_table(tmp_path / "messages" / f.path).to_pylist()]
    reference = check_lines(LINES, ReceiptClock.refuse())
    assert sorted((r["line_no"], r["error_code"]) for r in read) == [
        (v.line_no, v.error_code) for v in reference]
    assert next(r for r in read if r["line_no"] == 2)["error_detail"] == "replayed"
