"""Input files on S3 split exactly like the same files on local disk (snap_spark.files.lines)."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from snap_spark.files import storage
from snap_spark.files.lines import iter_file_lines, list_input_files, plan_line_ranges
from tests.s3server import S3Server
from tests.storage.conftest import BUCKET


def _padded(count: int) -> bytes:
    """Poorly compressible lines, so gzip damage lands mid-stream."""
    return b"".join(
        b'{"n":%d,"pad":"%s"}\n' % (i, hashlib.sha256(b"%d" % i).hexdigest().encode())
        for i in range(count)
    )


def _corrupt_crc(blob: bytes) -> bytes:
    return blob[:-8] + bytes([blob[-8] ^ 0xFF]) + blob[-7:]


PADDED = _padded(4000)
GZ = gzip.compress(PADDED)

#: name -> bytes: every line rule and every kind of gzip damage, plain and compressed.
FILES: dict[str, bytes] = {
    "plain.jsonl": b'{"a":1}\n{"b":2}\n',
    "crlf.jsonl": b'{"a":1}\r\n{"b":2}\r\n\r\n',
    "empty-lines.ndjson": b"\n\n{}\n\n\nlast\n",
    "no-final-newline.json": b"one\ntwo\nthree",
    "empty.jsonl": b"",
    "big.jsonl": PADDED,
    "nested/deeper/b.NDJSON.GZ": gzip.compress(b"x\r\n\ny"),
    "multi-member.jsonl.gz": gzip.compress(b"a\nb") + gzip.compress(b"c\n"),
    "big.jsonl.gz": GZ,
    "truncated.jsonl.gz": GZ[: len(GZ) // 2],
    "bad-crc.jsonl.gz": _corrupt_crc(GZ),
    "not-gzip.jsonl.gz": b"this is not gzip\n",
    # ignored by listings:
    "notes.txt": b"x\n",
    "_SUCCESS.json": b"x\n",
    ".hidden.jsonl": b"x\n",
    "_delta_log/0.json": b"{}\n",
    ".git/x.json": b"x\n",
}
LISTED = sorted(
    name for name in FILES if not name.startswith((".", "_")) and not name.endswith(".txt")
)


@pytest.fixture(scope="module")
def twins(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The same files under a local folder and under an ``s3a://`` prefix."""
    local = tmp_path_factory.mktemp("twins")
    remote = f"s3a://{BUCKET}/lines-twins"
    filesystem, root = storage.resolve(remote)
    for name, data in FILES.items():
        path = local / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        with filesystem.open_output_stream(f"{root}/{name}", compression=None) as out:
            out.write(data)
    return str(local), remote


def _relative(locations: list[str], root: str) -> list[str]:
    assert all(loc.startswith(root + "/") for loc in locations), locations
    return [loc[len(root) + 1 :] for loc in locations]


def test_listing_matches_local(twins: tuple[str, str]) -> None:
    local, remote = twins
    local_files = list_input_files([local])
    remote_files = list_input_files([remote])
    assert _relative(local_files, local) == LISTED
    assert _relative(remote_files, remote) == LISTED
    # the scheme given is kept; duplicates collapse; explicit files are kept as named
    assert all(f.startswith("s3a://") for f in remote_files)
    explicit = f"{remote}/.hidden.jsonl"
    assert list_input_files([remote + "/", remote_files[0], explicit]) == sorted(
        [*remote_files, explicit]
    )
    assert list_input_files([remote.replace("s3a://", "s3://") + "/nested"]) == [
        f"s3://{BUCKET}/lines-twins/nested/deeper/b.NDJSON.GZ"
    ]


def test_listing_errors_match_local(twins: tuple[str, str]) -> None:
    for root in twins:
        with pytest.raises(FileNotFoundError, match="does not exist"):
            list_input_files([f"{root}/missing.jsonl"])
        with pytest.raises(FileNotFoundError, match="does not exist"):
            list_input_files([f"{root}/missing-folder/"])
        with pytest.raises(ValueError, match="does not end in"):
            list_input_files([f"{root}/notes.txt"])
    with pytest.raises(FileNotFoundError):
        list_input_files(["s3://no-such-bucket-anywhere/in"])


def _same_records(local_path: str, remote_path: str) -> list[tuple[int, bytes | None, str | None]]:
    """Records of the remote file, checked equal to the local file's (error text names the
    file, so it is compared with the path swapped)."""
    local = list(iter_file_lines(local_path))
    remote = list(iter_file_lines(remote_path))
    assert [r[:2] for r in remote] == [r[:2] for r in local]
    assert [r[2] for r in remote] == [
        None if r[2] is None else r[2].replace(local_path, remote_path) for r in local
    ]
    return remote


def test_lines_match_local(twins: tuple[str, str]) -> None:
    local, remote = twins
    for name in LISTED:
        records = _same_records(f"{local}/{name}", f"{remote}/{name}")
        if name in ("truncated.jsonl.gz", "bad-crc.jsonl.gz", "not-gzip.jsonl.gz"):
            *good, last = records
            assert last[1] is None and last[2] is not None
            assert "corrupt or truncated gzip file" in last[2] and remote in last[2]
            assert all(error is None for _n, _raw, error in good)
        else:
            assert all(error is None for _n, _raw, error in records), name
    assert list(iter_file_lines(f"{remote}/crlf.jsonl")) == [
        (1, b'{"a":1}\r', None), (2, b'{"b":2}\r', None), (3, b"\r", None)
    ]
    assert len(list(iter_file_lines(f"{remote}/big.jsonl.gz"))) == 4000


SMALL = ("empty-lines.ndjson", "no-final-newline.json", "crlf.jsonl", "empty.jsonl")


@pytest.mark.parametrize(
    ("split", "names"),
    [(1, SMALL), (7, SMALL), (4096, ("big.jsonl", "big.jsonl.gz")), (50_000, ("big.jsonl",))],
)
def test_ranges_match_local(twins: tuple[str, str], split: int, names: tuple[str, ...]) -> None:
    local, remote = twins
    for name in names:
        local_ranges = plan_line_ranges(f"{local}/{name}", split, chunk_bytes=4096)
        remote_ranges = plan_line_ranges(f"{remote}/{name}", split, chunk_bytes=4096)
        assert [(r.start, r.end, r.first_line) for r in remote_ranges] == [
            (r.start, r.end, r.first_line) for r in local_ranges
        ]
        assert all(r.path == f"{remote}/{name}" for r in remote_ranges)
        pieces = [
            record
            for r in remote_ranges
            for record in iter_file_lines(r.path, r.start, r.end, r.first_line)
        ]
        assert pieces == list(iter_file_lines(f"{local}/{name}"))
    if split == 4096:
        assert len(plan_line_ranges(f"{remote}/big.jsonl", split)) > 10


def test_missing_remote_file_raises(s3: S3Server) -> None:
    with pytest.raises(FileNotFoundError):
        list(iter_file_lines(f"s3://{BUCKET}/nowhere/a.jsonl"))
    with pytest.raises(FileNotFoundError):
        plan_line_ranges(f"s3://{BUCKET}/nowhere/a.jsonl", 10)


def test_file_uris_read_like_paths(tmp_path: Path) -> None:
    path = tmp_path / "a b.jsonl"
    path.write_bytes(b"1\n2")
    uri = path.as_uri()  # file:///.../a%20b.jsonl
    assert list(iter_file_lines(uri)) == list(iter_file_lines(str(path)))
    assert list_input_files([uri]) == [str(path)]
