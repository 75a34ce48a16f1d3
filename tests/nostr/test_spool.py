"""The live stream's spool: whole lines by position, however writes and reads are cut, across
segments, a killed writer's partial line, and one writer at a time."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snap_spark.nostr.live import check_spool_lines
from snap_spark.nostr.spool import (
    SpoolBusy,
    SpoolWriter,
    read_lines,
    remove_before,
    segment_name,
    segments,
)
from snap_spark.nostr.tap import envelope_line
from snap_spark.protocol.nostr import sign_event


def all_lines(folder: Path) -> list[bytes]:
    return [line for _, line in read_lines(str(folder), 0, max_bytes=1 << 30).lines]


def test_positions_are_byte_offsets_and_reads_resume_exactly(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path)) as spool:
        assert spool.append([b"a", b"bb"]) == 5
        assert spool.append([b"ccc"]) == 9
    first = read_lines(str(tmp_path), 0, max_bytes=5)
    assert read_lines(str(tmp_path), 0, max_bytes=4).lines == [(0, b"a")]
    assert first.lines == [(0, b"a"), (2, b"bb")] and first.end == 5
    rest = read_lines(str(tmp_path), first.end)
    assert rest.lines == [(5, b"ccc")] and rest.end == 9
    assert read_lines(str(tmp_path), 9).lines == [] and read_lines(str(tmp_path), 9).end == 9
    # a re-read between two offsets gives exactly the same lines
    assert read_lines(str(tmp_path), 0, 5).lines == first.lines


def test_a_line_longer_than_the_budget_is_read_whole(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path)) as spool:
        spool.append([b"x" * 1000, b"y"])
    found = read_lines(str(tmp_path), 0, max_bytes=10)
    assert found.lines == [(0, b"x" * 1000)] and found.end == 1001


def test_an_incomplete_last_line_is_not_read_and_a_new_writer_cuts_it(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path)) as spool:
        spool.append([b"one", b"two"])
    segment = segments(str(tmp_path))[-1][1]
    with open(segment, "ab") as handle:  # a writer killed in the middle of a write
        handle.write(b'{"half')
    assert read_lines(str(tmp_path), 0).end == 8
    with SpoolWriter(str(tmp_path)) as spool:
        assert spool.end == 8
        spool.append([b"three"])
    assert all_lines(tmp_path) == [b"one", b"two", b"three"]


def test_segments_roll_over_and_positions_go_on(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path), segment_bytes=10) as spool:
        for n in range(6):
            spool.append([b"line-%d" % n])
        end = spool.end
    names = [os.path.basename(p) for _, p in segments(str(tmp_path))]
    assert len(names) > 2 and names[0] == segment_name(0)
    got = read_lines(str(tmp_path), 0, max_bytes=1 << 20)
    assert [line for _, line in got.lines] == [b"line-%d" % n for n in range(6)]
    assert got.end == end == sum(len(b"line-%d\n" % n) for n in range(6))
    # reads started at any line start give the rest, across segments
    for position, _ in got.lines:
        assert read_lines(str(tmp_path), position, max_bytes=1 << 20).end == end
    # segments passed by a committed position go; the spool still reads from there on
    middle = got.lines[3][0]
    assert remove_before(str(tmp_path), middle) >= 1
    assert [line for _, line in read_lines(str(tmp_path), middle).lines] == [
        b"line-3", b"line-4", b"line-5"]


def test_a_re_read_that_the_spool_cannot_give_exactly_fails(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path)) as spool:
        spool.append([b"abc"])
    with pytest.raises(ValueError, match="complete lines up to 4"):
        read_lines(str(tmp_path), 0, 9)


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path)), pytest.raises(SpoolBusy):
        SpoolWriter(str(tmp_path))
    with SpoolWriter(str(tmp_path)) as again:  # released on close
        assert again.end == 0


def test_a_line_with_a_newline_is_refused(tmp_path: Path) -> None:
    with SpoolWriter(str(tmp_path)) as spool:
        with pytest.raises(ValueError):
            spool.append([b"a\nb"])
        assert spool.end == 0


def test_spool_lines_are_archive_envelopes() -> None:
    from snap_spark.nostr.lines import event_from_line

    line = envelope_line('{"id":"ab","kind":21339}', "wss://r.example", 1700000000.25)
    found = event_from_line(line)
    assert found.relay == "wss://r.example" and found.received_at == 1700000000.25
    assert found.event == {"id": "ab", "kind": 21339}


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=40),
       writes=st.lists(st.integers(1, 5), min_size=1, max_size=40),
       budgets=st.lists(st.integers(1, 120), min_size=1, max_size=20),
       segment_bytes=st.integers(8, 200))
def test_reads_cut_anywhere_give_every_line_once_in_order(
        tmp_path_factory: pytest.TempPathFactory, sizes: list[int], writes: list[int],
        budgets: list[int], segment_bytes: int) -> None:
    folder = str(tmp_path_factory.mktemp("spool"))
    lines = [(b"%d:" % n) + b"z" * size for n, size in enumerate(sizes)]
    with SpoolWriter(folder, segment_bytes=segment_bytes) as spool:
        at, w = 0, 0
        while at < len(lines):
            count = writes[w % len(writes)]
            spool.append(lines[at:at + count])
            at, w = at + count, w + 1
        end = spool.end
    got: list[bytes] = []
    position, b = 0, 0
    while position < end:
        found = read_lines(folder, position, max_bytes=budgets[b % len(budgets)])
        assert found.lines and found.lines[0][0] == position
        # the same range read again between its offsets is the same
        assert read_lines(folder, position, found.end).lines == found.lines
        got += [line for _, line in found.lines]
        position, b = found.end, b + 1
    assert got == lines


def test_garbage_in_a_spool_becomes_rows_with_a_reason_never_a_crash() -> None:
    """What the live stream's micro-batch does with each spool line (no Spark needed: the
    same generator runs in its mapInArrow): a line that is no verified event keeps a row,
    keyed by its bytes, with the reason; a good envelope next to them still verifies."""
    good = sign_event({"created_at": 1700000000, "kind": 31337, "tags": [],
                       "content": "{}"}, bytes.fromhex("0a" * 32), aux=bytes(32))
    lines = [
        b"not json",
        b"\xff\xfe invalid utf-8 \xc3",
        b"[" * 10_000 + b"]" * 10_000,
        b'{"received_at": "yesterday", "relay": 7, "event": {"kind": "x"}}',
        b'{"received_at": 1, "relay": "ws://r", "event": ' + b'"' + b"x" * 1_000_000 + b'"}',
        b"",
        envelope_line(json.dumps(good), "ws://r", 1700000001.5),
    ]
    batch = pa.RecordBatch.from_pydict({"position": list(range(len(lines))), "line": lines})
    rows = [row for out in check_spool_lines([batch]) for row in out.to_pylist()]
    assert len(rows) == len(lines)
    for row, raw in zip(rows[:-1], lines[:-1], strict=True):
        assert row["verdict"] == "malformed" and row["detail"], row
        assert row["line_key"] == "line:" + hashlib.sha256(raw).hexdigest()
    assert [r["origin"] for r in rows[:3]] == ["spool:0", "spool:1", "spool:2"]
    last = rows[-1]
    assert (last["verdict"], last["origin"], last["received_at"]) == ("ok", "ws://r",
                                                                      1700000001.5)
