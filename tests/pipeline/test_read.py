"""Tests for snap_spark.pipeline.read: one row per input line, exact bytes, exact numbers."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snap_spark.files.lines import _LineSplitter
from snap_spark.pipeline import read as source
from snap_spark.pipeline.read import (
    LINES_SCHEMA,
    iter_file_lines,
    iter_line_batches,
    list_input_files,
    read_lines,
)


def reference_lines(data: bytes) -> list[bytes]:
    """Independent split: lines end at b"\\n"; a final b"\\n" adds no empty line."""
    if not data:
        return []
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()
    return parts


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def rows_of(spark: Any, paths: list[str], **kwargs: Any) -> list[tuple[Any, ...]]:
    """Collect (source_file, line_no, raw bytes, byte_len, read_error) in DataFrame order."""
    rows = read_lines(spark, paths, **kwargs).collect()
    return [
        (r.source_file, r.line_no, None if r.raw is None else bytes(r.raw), *r[3:]) for r in rows
    ]


def padded_lines(count: int) -> list[bytes]:
    """Deterministic, poorly compressible JSON lines (so gzip damage lands mid-file)."""
    return [
        b'{"n":%d,"pad":"%s"}' % (i, hashlib.sha256(b"%d" % i).hexdigest().encode())
        for i in range(count)
    ]


def expected_rows(path: Path, lines: list[bytes]) -> list[tuple[Any, ...]]:
    name = os.path.abspath(path)
    return [(name, i, line, len(line), None) for i, line in enumerate(lines, start=1)]


# --------------------------------------------------------------------------------------
# Pure-Python splitting
# --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b"", b"a", b"\xff", b"\x00", b"{}"])).map(
        b"".join
    ),
    chunk=st.integers(min_value=1, max_value=7),
)
def test_splitter_matches_reference_for_any_chunking(data: bytes, chunk: int) -> None:
    reads = iter([data[i : i + chunk] for i in range(0, len(data), chunk)])
    splitter = _LineSplitter(lambda _n: next(reads, b""), chunk_bytes=chunk)
    assert list(splitter) == reference_lines(data)


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"", []),
        (b"\n", [b""]),
        (b"\n\n", [b"", b""]),
        (b"a", [b"a"]),
        (b"a\n", [b"a"]),
        (b"a\n\nb\n", [b"a", b"", b"b"]),
        (b"a\r\nb\r\n", [b"a\r", b"b\r"]),
        (b"a\rb", [b"a\rb"]),
        (b"a\nb", [b"a", b"b"]),
    ],
)
def test_iter_file_lines_rules(tmp_path: Path, data: bytes, lines: list[bytes]) -> None:
    path = write(tmp_path / "f.jsonl", data)
    assert list(iter_file_lines(str(path))) == [
        (i, line, None) for i, line in enumerate(lines, start=1)
    ]
    gz = write(tmp_path / "f.jsonl.gz", gzip.compress(data))
    assert list(iter_file_lines(str(gz))) == list(iter_file_lines(str(path)))


def test_iter_line_batches_caps_rows_and_bytes(tmp_path: Path) -> None:
    lines = [bytes([65 + i % 26]) * (i % 50) for i in range(1000)]
    path = write(tmp_path / "f.jsonl", b"\n".join(lines) + b"\n")
    batches = list(iter_line_batches(str(path), batch_rows=64, max_batch_bytes=500))
    assert all(b.num_rows <= 64 for b in batches)
    # a batch closes at the first line that reaches the byte cap, never later
    assert all(sum(b.column("byte_len").to_pylist()[:-1]) < 500 for b in batches)
    assert [n for b in batches for n in b.column("line_no").to_pylist()] == list(range(1, 1001))
    assert [v for b in batches for v in b.column("raw").to_pylist()] == lines


RefBatch = tuple[list[int], list[bytes | None], list[Any] | None]


def reference_batches(path: str, lines: list[bytes], batch_rows: int, max_batch_bytes: int,
                      max_line: int) -> list[RefBatch]:
    """The batching rule written line by line, on its own: a line over ``max_line`` bytes
    is a ``None`` with an error naming its size; a batch closes at its ``batch_rows``-th
    line or at the first line that brings its bytes to ``max_batch_bytes``."""
    out: list[RefBatch] = []
    nos: list[int] = []
    raws: list[bytes | None] = []
    errors: list[Any] = []
    size = 0
    for no, line in enumerate(lines, start=1):
        if len(line) > max_line:
            raws.append(None)
            errors.append(f"line {no} of {path} has {len(line)} bytes")
        else:
            raws.append(line)
            errors.append(None)
            size += len(line)
        nos.append(no)
        if len(raws) >= batch_rows or size >= max_batch_bytes:
            out.append((nos, raws, errors if any(errors) else None))
            nos, raws, errors, size = [], [], [], 0
    if raws:
        out.append((nos, raws, errors if any(errors) else None))
    return out


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=60),
    chunk=st.integers(min_value=1, max_value=40),
    batch_rows=st.integers(min_value=1, max_value=9),
    max_batch_bytes=st.integers(min_value=1, max_value=60),
    max_line=st.integers(min_value=4, max_value=20),
)
def test_batches_close_where_the_line_by_line_rule_closes_them(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], chunk: int, batch_rows: int,
    max_batch_bytes: int, max_line: int,
) -> None:
    """The reader takes a read chunk's lines into a batch by slices; its batches, numbers
    and error rows equal the rule applied one line at a time, for any chunk size (lines
    spanning chunks), caps met mid-chunk, and lines too long for Spark among them."""
    from snap_spark.files import lines as splitter_module

    path = write(tmp_path_factory.mktemp("batches") / "f.jsonl", b"\n".join(lines))
    lines = reference_lines(b"\n".join(lines))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(splitter_module, "READ_CHUNK_BYTES", chunk)
        patch.setattr(source, "MAX_SPARK_BINARY_BYTES", max_line)
        got = list(source.iter_line_lists(str(path), batch_rows, max_batch_bytes))
    expected = reference_batches(str(path), lines, batch_rows, max_batch_bytes, max_line)
    assert [(nos, raws) for nos, raws, _ in got] == [(nos, raws) for nos, raws, _ in expected]
    for (_, _, errors), (_, _, wanted) in zip(got, expected, strict=True):
        assert (errors is None) == (wanted is None)
        if errors is not None and wanted is not None:
            assert [e is None for e in errors] == [w is None for w in wanted]
            assert all(e.startswith(w) for e, w in zip(errors, wanted, strict=True) if w)


def test_a_damaged_gzip_stream_ends_the_last_batch_with_its_error_row(tmp_path: Path) -> None:
    lines = padded_lines(5000)
    blob = gzip.compress(b"\n".join(lines) + b"\n")
    path = write(tmp_path / "t.jsonl.gz", blob[: len(blob) // 2])
    batches = list(source.iter_line_lists(str(path), batch_rows=1000))
    nos = [n for b in batches for n in b[0]]
    raws = [r for b in batches for r in b[1]]
    assert nos == list(range(1, len(nos) + 1)) and raws[:-1] == lines[: len(raws) - 1]
    assert raws[-1] is None and all(b[2] is None for b in batches[:-1])
    *fine, last_error = batches[-1][2] or [None]
    assert all(e is None for e in fine) and last_error is not None and "EOFError" in last_error


def test_line_too_long_for_spark_becomes_error_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real limit is 2 GiB per value, which no test can write: lower the limit instead
    # of faking a file (the reader, the splitter and the file are real).
    monkeypatch.setattr(source, "MAX_SPARK_BINARY_BYTES", 10)
    path = write(tmp_path / "f.jsonl", b"short\n" + b"x" * 11 + b"\nafter\n")
    (batch,) = iter_line_batches(str(path))
    assert batch.column("line_no").to_pylist() == [1, 2, 3]
    assert batch.column("raw").to_pylist() == [b"short", None, b"after"]
    errors = batch.column("read_error").to_pylist()
    assert errors[0] is None and errors[2] is None
    assert "11 bytes" in errors[1]


def test_list_input_files(tmp_path: Path) -> None:
    a = write(tmp_path / "d" / "a.jsonl", b"1\n")
    b = write(tmp_path / "d" / "sub" / "deeper" / "b.NDJSON.GZ", gzip.compress(b"1\n"))
    write(tmp_path / "d" / "notes.txt", b"x\n")
    write(tmp_path / "d" / "data.jsonl.bak", b"x\n")
    hidden = write(tmp_path / "d" / ".hidden.jsonl", b"x\n")
    write(tmp_path / "d" / "_SUCCESS.json", b"x\n")
    write(tmp_path / "d" / "_delta_log" / "0.json", b"x\n")
    write(tmp_path / "d" / ".git" / "x.json", b"x\n")

    expected = sorted([str(a), str(b)])
    assert list_input_files([str(tmp_path / "d")]) == expected
    # duplicates collapse, a bare string is one path, hidden files are allowed by name
    assert list_input_files([str(a), str(tmp_path / "d"), str(a)]) == expected
    assert list_input_files(str(a)) == [str(a)]  # type: ignore[arg-type]
    assert list_input_files([str(hidden)]) == [str(hidden)]
    # relative paths become absolute
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert list_input_files(["d/a.jsonl"]) == [str(a)]
    finally:
        os.chdir(cwd)


def test_list_input_files_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list_input_files([str(tmp_path / "missing.jsonl")])
    txt = write(tmp_path / "notes.txt", b"x\n")
    with pytest.raises(ValueError, match="does not end in"):
        list_input_files([str(txt)])


def test_truncated_gzip_pure_python(tmp_path: Path) -> None:
    lines = padded_lines(5000)
    blob = gzip.compress(b"\n".join(lines) + b"\n")
    path = write(tmp_path / "t.jsonl.gz", blob[: len(blob) // 2])
    records = list(iter_file_lines(str(path)))
    *good, last = records
    assert 0 < len(good) < len(lines)
    assert good == [(i, line, None) for i, line in enumerate(lines[: len(good)], start=1)]
    assert last[0] == len(good) + 1 and last[1] is None
    assert last[2] is not None and "EOFError" in last[2] and str(path) in last[2]


# --------------------------------------------------------------------------------------
# Through Spark
# --------------------------------------------------------------------------------------


@pytest.mark.spark
def test_schema_of_read_lines(spark: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", b"x\n")
    df = read_lines(spark, [str(path)])
    assert df.schema == LINES_SCHEMA
    assert df.count() == 1


@pytest.mark.spark
def test_line_numbers_exact_across_many_batches(spark: Any, tmp_path: Path) -> None:
    lines = [b"" if i % 97 == 0 else b'{"i":%d}' % i for i in range(20_001)]
    path = write(tmp_path / "many.jsonl", b"\n".join(lines) + b"\n")
    rows = rows_of(spark, [str(path)], batch_rows=1000)
    assert rows == expected_rows(path, reference_lines(path.read_bytes()))
    assert len(rows) == 20_001


@pytest.mark.spark
def test_line_rules_through_spark(spark: Any, tmp_path: Path) -> None:
    cases = {
        "middle_empty.jsonl": (b"a\n\n\nb\n", [b"a", b"", b"", b"b"]),
        "no_trailing_newline.jsonl": (b"a\nlast", [b"a", b"last"]),
        "crlf.jsonl": (b'{"a":1}\r\n{"b":2}\r\n\r\n', [b'{"a":1}\r', b'{"b":2}\r', b"\r"]),
        "empty.jsonl": (b"", []),
        "only_newline.jsonl": (b"\n", [b""]),
    }
    want: list[tuple[Any, ...]] = []
    for name, (data, lines) in sorted(cases.items()):
        want += expected_rows(write(tmp_path / name, data), lines)
    assert rows_of(spark, [str(tmp_path)]) == want  # one query, one partition per file


@pytest.mark.spark
def test_invalid_utf8_round_trips_exactly(spark: Any, tmp_path: Path) -> None:
    lines = [
        bytes(b for b in range(256) if b != 0x0A),  # every byte value but the newline
        b"\xc3\x28 \xa0\xa1 \xe2\x82 \xf0\x28\x8c\xbc",  # invalid sequences
        b"\xed\xa0\x80",  # an encoded lone surrogate
        b"\xc0\xaf",  # overlong "/"
        b"\x00\x00\x00",  # NUL bytes
        b"\xef\xbb\xbf{}",  # a BOM
        '{"é":"\U0001f600"}'.encode(),
    ]
    path = write(tmp_path / "bytes.jsonl", b"\n".join(lines))
    assert rows_of(spark, [str(path)]) == expected_rows(path, lines)


@pytest.mark.spark
def test_twelve_megabyte_line(spark: Any, tmp_path: Path) -> None:
    big = os.urandom(6 * 1024 * 1024).hex().encode()  # 12 MiB, spans many read chunks
    lines = [b"first", big, b"", b"last"]
    path = write(tmp_path / "big.jsonl", b"\n".join(lines) + b"\n")
    rows = rows_of(spark, [str(path)], batch_rows=2)
    assert [r[1] for r in rows] == [1, 2, 3, 4]
    assert [r[3] for r in rows] == [5, 12 * 1024 * 1024, 0, 4]
    assert rows[1][2] == big
    assert rows == expected_rows(path, lines)


@pytest.mark.spark
def test_gzip_equals_plain_file(spark: Any, tmp_path: Path) -> None:
    data = b"".join(b'{"i":%d}\r\n' % i if i % 5 else b"\n" for i in range(3000)) + b"tail"
    plain = write(tmp_path / "p.jsonl", data)
    single = write(tmp_path / "g.jsonl.gz", gzip.compress(data))
    half = len(data) // 2  # a multi-member stream, split inside a line
    multi = write(tmp_path / "m.ndjson.gz", gzip.compress(data[:half]) + gzip.compress(data[half:]))

    def without_file(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return [r[1:] for r in rows]

    expected = without_file(rows_of(spark, [str(plain)], batch_rows=700))
    assert len(expected) == 3001
    assert without_file(rows_of(spark, [str(single)], batch_rows=700)) == expected
    assert without_file(rows_of(spark, [str(multi)], batch_rows=700)) == expected


@pytest.mark.spark
def test_folder_of_many_files(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "landing"
    expected: dict[str, list[bytes]] = {}
    for i in range(30):
        folder = root if i < 10 else root / "2025" / f"part{i % 3}"
        suffix = [".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz"][i % 6]
        data = b"".join(b'{"file":%d,"line":%d}\n' % (i, j) for j in range(i * 7))
        path = folder / f"f{i:02d}{suffix}"
        write(path, gzip.compress(data) if suffix.endswith(".gz") else data)
        expected[str(path)] = reference_lines(data)
    write(root / "readme.txt", b"not input\n")
    write(root / "2025" / "x.csv", b"a,b\n")
    write(root / "2025" / "_tmp" / "f.jsonl", b"hidden folder\n")
    write(root / ".partial.jsonl", b"hidden file\n")

    rows = rows_of(spark, [str(root)])
    want: list[tuple[Any, ...]] = []
    for name in sorted(expected):
        want += expected_rows(Path(name), expected[name])
    assert rows == want
    assert {r[0] for r in rows} == {n for n, lines in expected.items() if lines}


@pytest.mark.spark
def test_missing_path_raises(spark: Any, tmp_path: Path) -> None:
    present = write(tmp_path / "a.jsonl", b"x\n")
    with pytest.raises(FileNotFoundError, match="nope"):
        read_lines(spark, [str(present), str(tmp_path / "nope")])


@pytest.mark.spark
def test_no_input_files_gives_empty_frame(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    df = read_lines(spark, [str(tmp_path / "empty")])
    assert df.schema == LINES_SCHEMA
    assert df.count() == 0


@pytest.mark.spark
def test_corrupt_gzip_yields_lines_then_one_error_row(spark: Any, tmp_path: Path) -> None:
    lines = padded_lines(5000)
    blob = gzip.compress(b"\n".join(lines) + b"\n")
    truncated = write(tmp_path / "truncated.jsonl.gz", blob[: len(blob) // 2])
    damaged = bytearray(blob)
    for k in range(len(blob) // 2, len(blob) // 2 + 64):  # scribble over the deflate data
        damaged[k] ^= 0x5A
    corrupt = write(tmp_path / "corrupt.jsonl.gz", bytes(damaged))
    not_gzip = write(tmp_path / "plain-named.json.gz", b'{"a":1}\n')
    healthy = write(tmp_path / "healthy.jsonl", b"ok\n")

    rows = rows_of(spark, [str(tmp_path)], batch_rows=512)  # no exception: the job survives
    by_file: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_file.setdefault(row[0], []).append(row)

    for path in (truncated, corrupt):
        *good, error_row = by_file[str(path)]
        assert 0 < len(good) < len(lines)
        assert [r[1] for r in good] == list(range(1, len(good) + 1))
        assert error_row[1] == len(good) + 1
        assert error_row[2] is None and error_row[3] is None
        assert error_row[4] is not None and "corrupt or truncated gzip" in error_row[4]
    # a truncated stream decodes exactly up to the cut; damaged deflate data may decode to
    # some garbage before zlib notices, but everything before the damage is intact
    truncated_good = by_file[str(truncated)][:-1]
    assert truncated_good == expected_rows(truncated, lines[: len(truncated_good)])
    assert "EOFError" in by_file[str(truncated)][-1][4]
    assert by_file[str(corrupt)][:1000] == expected_rows(corrupt, lines[:1000])

    assert len(by_file[str(not_gzip)]) == 1
    assert by_file[str(not_gzip)][0][1:4] == (1, None, None)
    assert "BadGzipFile" in by_file[str(not_gzip)][0][4]
    assert by_file[str(healthy)] == expected_rows(healthy, [b"ok"])


@pytest.mark.spark
def test_conservation_rows_equal_independent_line_counts(spark: Any, tmp_path: Path) -> None:
    sizes = [0, 1, 2, 999, 1000, 1001, 4321]
    counts: dict[str, int] = {}
    for i, size in enumerate(sizes):
        data = b"".join(b"line %d\n" % j for j in range(size))
        if i % 2:
            data = data.rstrip(b"\n")  # some files without a final newline
        path = write(tmp_path / f"s{i}.jsonl", data)
        counts[str(path)] = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)

    from pyspark.sql import functions as F

    df = read_lines(spark, [str(tmp_path)], batch_rows=1000)
    assert df.count() == sum(counts.values())
    per_file = {
        r.source_file: (r.n, r.first, r.last, r.errors)
        for r in df.groupBy("source_file")
        .agg(
            F.count("*").alias("n"),
            F.min("line_no").alias("first"),
            F.max("line_no").alias("last"),
            F.count("read_error").alias("errors"),
        )
        .collect()
    }
    assert per_file == {name: (n, 1, n, 0) for name, n in counts.items() if n}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=40),
    st.booleans(),
    st.integers(min_value=1, max_value=120),
    st.integers(min_value=1, max_value=64),
)
def test_line_ranges_read_like_the_whole_file(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], final_newline: bool,
    split: int, chunk: int,
) -> None:
    """Cutting a file into ranges (any split size, any read chunk) changes nothing."""
    from snap_spark.files.lines import plan_line_ranges

    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    path = write(tmp_path_factory.mktemp("ranges") / "f.jsonl", data)
    whole = list(iter_file_lines(str(path)))
    ranges = plan_line_ranges(str(path), split, chunk_bytes=chunk)
    pieces = [rec for r in ranges for rec in iter_file_lines(str(path), r.start, r.end,
                                                              r.first_line)]
    assert pieces == whole
    assert all(r.end is None or r.end > r.start for r in ranges)


def test_big_file_is_split_across_tasks_with_exact_numbers(spark: Any, tmp_path: Path) -> None:
    lines = [f'{{"n": {i}, "pad": "{"x" * (i % 50)}"}}'.encode() for i in range(30_000)]
    path = write(tmp_path / "big.jsonl", b"\n".join(lines))
    df = read_lines(spark, [str(path)], batch_rows=999, split_bytes=64 * 1024)
    assert df.rdd.getNumPartitions() > 4
    rows = df.select("line_no", "raw").collect()
    assert [r.line_no for r in rows] == list(range(1, len(lines) + 1))
    assert [bytes(r.raw) for r in rows] == lines



@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(st.binary(min_size=1, max_size=20).map(lambda b: b.replace(b"\n", b"x")),
                      min_size=1, max_size=30), min_size=1, max_size=4),
    st.lists(st.sampled_from(["whole", "grown", "piece", "skipped"]), min_size=4, max_size=4),
    st.integers(min_value=1, max_value=80),
    st.sampled_from([0, 0, 1, 7]),
)
def test_ranges_planned_ahead_are_the_ranges_planned_then(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[bytes]], fates: list[str],
    split: int, split_change: int,
) -> None:
    """Ranges planned on a thread before the job knows what it lands (RangesAhead) give
    exactly what planning afterwards gives, whatever became of each file meanwhile: landed
    whole; grown after it was planned ahead; landed from its second line on (a file that
    grew since an earlier run); not landed at all. The split size at the end may differ
    from the one planned ahead, as it does when files are not landed (it is worked out
    from the bytes landed)."""
    folder = tmp_path_factory.mktemp("ahead")
    paths = [str(write(folder / f"{n}.jsonl", b"\n".join(lines) + b"\n"))
             for n, lines in enumerate(files)]
    ahead = source.RangesAhead(paths, parallelism=2, split_bytes=split)
    ahead.result(0)  # waits for the thread: every file below changes after it planned
    todo: list[str] = []
    pieces: dict[str, tuple[int, int | None, int]] = {}
    for path, fate in zip(paths, fates, strict=False):
        if fate == "skipped":
            continue
        if fate == "grown":
            with open(path, "ab") as handle:
                handle.write(b"grown\nmore\n")
        size = os.path.getsize(path)
        start = Path(path).read_bytes().index(b"\n") + 1 if fate == "piece" else 0
        pieces[path] = (start, size, 2 if fate == "piece" else 1)
        todo.append(path)
    at = split + split_change
    expected = source.plan_ranges(None, todo, at, pieces=pieces)  # type: ignore[arg-type]
    assert source.plan_ranges(None, todo, at, pieces=pieces,  # type: ignore[arg-type]
                              ahead=ahead) == expected
