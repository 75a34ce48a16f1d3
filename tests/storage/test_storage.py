"""snap_spark.files.storage on local disk and on a real S3-compatible server (moto)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from snap_spark.files import storage
from snap_spark.files.storage import S3Settings, UnsupportedLocation
from tests.s3server import S3Server
from tests.storage.conftest import BUCKET

# -- locations (no I/O) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("s3://b/k/", "s3://b/k"),
        ("S3A://b/k", "s3a://b/k"),
        ("s3n://b", "s3n://b"),
        ("gs://b/a b/c", "gs://b/a b/c"),
        ("abfss://c@acct.dfs.core.windows.net/x/", "abfss://c@acct.dfs.core.windows.net/x"),
        ("hdfs://nn:8020/data/", "hdfs://nn:8020/data"),
        ("file:///data/a%20b/", "/data/a b"),
        ("file://localhost/data", "/data"),
        ("file:/data", "/data"),
        ("/data/in/", "/data/in"),
    ],
)
def test_normalize(given: str, expected: str) -> None:
    assert storage.normalize(given) == expected


def test_normalize_local_is_absolute_and_expands_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/someone")
    assert storage.normalize("in/a.jsonl") == str(tmp_path / "in" / "a.jsonl")
    assert storage.normalize("~/in") == "/home/someone/in"
    assert storage.normalize(tmp_path / "x") == str(tmp_path / "x")  # PathLike


@pytest.mark.parametrize("bad", ["http://host/x", "az://c/x", "ftp://h/x", "memory://x"])
def test_unsupported_schemes_are_refused_clearly(bad: str) -> None:
    with pytest.raises(UnsupportedLocation, match="unsupported location scheme"):
        storage.resolve(bad)
    with pytest.raises(UnsupportedLocation):
        storage.normalize(bad)


def test_file_uri_with_remote_host_is_refused() -> None:
    with pytest.raises(UnsupportedLocation, match="remote host"):
        storage.resolve("file://otherhost/data")


def test_join_and_delta_uri() -> None:
    assert storage.join("s3a://b/lake/", "t", "day=1/") == "s3a://b/lake/t/day=1"
    assert storage.join("/lake", "t", "x") == "/lake/t/x"
    assert storage.delta_table_uri("s3n://b/t/") == "s3://b/t"
    assert storage.delta_table_uri("s3a://b/t") == "s3a://b/t"
    assert storage.delta_table_uri("file:///lake/t") == "/lake/t"


@pytest.mark.parametrize(
    ("uri", "kind", "path"),
    [
        ("gs://bkt/a/b.jsonl", pafs.GcsFileSystem, "bkt/a/b.jsonl"),
        ("gcs://bkt/a", pafs.GcsFileSystem, "bkt/a"),
        ("abfss://c@acct.dfs.core.windows.net/a/b", pafs.AzureFileSystem, "c/a/b"),
        ("abfs://acct.dfs.core.windows.net/c/a", pafs.AzureFileSystem, "c/a"),
    ],
)
def test_gcs_and_azure_map_to_pyarrow(uri: str, kind: type, path: str) -> None:
    """No such service here: only the mapping (client type, path) is checked."""
    filesystem, resolved = storage.resolve(uri)
    assert isinstance(filesystem, kind)
    assert resolved == path


def test_hdfs_maps_to_pyarrow_or_says_what_is_missing() -> None:
    try:
        filesystem, path = storage.resolve("hdfs://127.0.0.1:1/data/in")
    except OSError as error:  # no JVM/libhdfs on this machine: the message must say so
        assert "HDFS needs a JVM and libhdfs" in str(error)
        assert "hdfs://127.0.0.1:1" in str(error)
    else:
        assert isinstance(filesystem, pafs.HadoopFileSystem)
        assert path == "/data/in"


def test_bucketless_s3_location_is_refused() -> None:
    with pytest.raises(UnsupportedLocation, match="without a bucket"):
        storage.resolve("s3:///key")


# -- S3 settings ----------------------------------------------------------------------------


def test_s3_settings_from_environment() -> None:
    assert S3Settings.from_env({}) == S3Settings(None, None, False)
    plain = S3Settings.from_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000/"})
    assert plain == S3Settings("http://127.0.0.1:9000", "us-east-1", False)
    assert plain.allow_http
    specific = S3Settings.from_env({
        "AWS_ENDPOINT_URL": "http://generic:1", "AWS_ENDPOINT_URL_S3": "minio.local:9000",
        "AWS_DEFAULT_REGION": "eu-west-3", "AWS_S3_ADDRESSING_STYLE": "virtual",
    })
    assert specific == S3Settings("https://minio.local:9000", "eu-west-3", True)
    assert not specific.allow_http
    assert S3Settings.from_env({"AWS_REGION": "a", "AWS_DEFAULT_REGION": "b"}).region == "a"
    ignored = S3Settings.from_env({"AWS_ENDPOINT_URL": "http://x:1",
                                   "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
                                   "AWS_REGION": "us-west-2"})
    assert ignored == S3Settings(None, "us-west-2", False)


def test_delta_storage_options(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_S3_ADDRESSING_STYLE",
                 "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert storage.delta_storage_options("/lake/t") == {}
    assert storage.delta_storage_options("gs://b/t") == {}
    assert storage.delta_storage_options("s3://b/t") == {"AWS_REGION": "eu-central-1"}
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9/")
    monkeypatch.setenv("AWS_S3_ADDRESSING_STYLE", "virtual")
    options = storage.delta_storage_options("s3a://b/t")
    assert options == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "eu-central-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true",
    }
    # commits rely on conditional put: the unsafe-rename mode is never switched on
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in options


def test_s3_clients_are_cached_per_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    first, path = storage.resolve("s3://b1/k")
    assert path == "b1/k"
    assert storage.resolve("s3a://b2/other")[0] is first  # same endpoint: one client
    assert storage.resolve("s3n://b1")[0] is first
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:10")
    assert storage.resolve("s3://b1/k")[0] is not first


# -- the same helpers on local disk and on S3 ------------------------------------------------


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh folder: a local path, or an ``s3://`` prefix on the moto server."""
    if request.param == "local":
        return str(tmp_path / "root")
    prefix: str = request.getfixturevalue("s3_prefix")
    return prefix


def _write(location: str, data: bytes) -> None:
    filesystem, path = storage.resolve(location)
    parent = path.rsplit("/", 1)[0]
    if storage.has_directories(filesystem):
        filesystem.create_dir(parent)
    with filesystem.open_output_stream(path, compression=None) as out:
        out.write(data)


def test_helpers_behave_alike_locally_and_on_s3(root: str) -> None:
    a = storage.join(root, "a.jsonl")
    nested = storage.join(root, "sub", "deeper", "b.NDJSON.gz")
    for location, data in [(a, b"0123456789"), (nested, b"gz"),
                           (storage.join(root, "notes.txt"), b"x"),
                           (storage.join(root, "_SUCCESS"), b""),
                           (storage.join(root, "_delta_log", "0.json"), b"{}"),
                           (storage.join(root, ".hidden", "c.jsonl"), b"x"),
                           (storage.join(root, "sub", ".d.jsonl"), b"x")]:
        _write(location, data)

    assert storage.path_kind(root) == "dir" and storage.is_dir(root)
    assert storage.path_kind(a) == "file" and storage.is_file(a) and storage.exists(a)
    assert storage.path_kind(storage.join(root, "sub")) == "dir"
    assert storage.path_kind(storage.join(root, "nope.jsonl")) == "missing"
    assert not storage.exists(storage.join(root, "nope"))
    assert storage.file_size(a) == 10
    with pytest.raises(FileNotFoundError):
        storage.file_size(storage.join(root, "nope.jsonl"))
    stat = storage.file_stat(a)
    assert stat.size == 10 and stat.mtime_ns is not None
    assert abs(stat.mtime_ns / 1e9 - time.time()) < 600
    with pytest.raises(FileNotFoundError):
        storage.file_stat(storage.join(root, "sub"))  # a folder is not a file
    with pytest.raises(FileNotFoundError):
        storage.file_size(storage.join(root, "sub"))

    everything = storage.list_files(root)
    assert everything == sorted([a, nested, storage.join(root, "notes.txt")])
    assert storage.list_files(root, (".jsonl", ".ndjson.gz")) == [a, nested]
    with pytest.raises(FileNotFoundError):
        storage.list_files(storage.join(root, "nope"))

    with storage.open_input(a) as stream:
        assert stream.read() == b"0123456789"
    with storage.open_range(a, 3) as stream:
        assert stream.read(4) == b"3456"
    with storage.open_input(nested) as stream:  # no decompression behind our back
        assert stream.read() == b"gz"

    storage.make_dirs(storage.join(root, "made", "here"))
    storage.delete_file(a)
    assert not storage.exists(a)
    storage.delete_file(a)  # already gone: fine
    with pytest.raises(FileNotFoundError):
        storage.delete_file(a, missing_ok=False)
    storage.delete_tree(storage.join(root, "sub"))
    assert not storage.exists(nested)
    assert storage.list_files(root) == [storage.join(root, "notes.txt")]
    storage.delete_tree(storage.join(root, "gone"))
    with pytest.raises(FileNotFoundError):
        storage.delete_tree(storage.join(root, "gone"), missing_ok=False)


def test_s3_objects_really_are_on_the_server(s3: S3Server, s3_prefix: str) -> None:
    """The helpers talk to the server (checked with boto3), and leave no local ``s3:`` folder."""
    _write(storage.join(s3_prefix, "in", "a.jsonl"), b"{}\n")
    key = s3_prefix.removeprefix(f"s3://{BUCKET}/") + "/in/a.jsonl"
    assert s3.keys(BUCKET, key) == [key]
    assert storage.list_files(s3_prefix.replace("s3://", "s3a://")) == [
        f"s3a://{BUCKET}/{key}"
    ]
    storage.make_dirs(storage.join(s3_prefix, "empty"))  # no marker object on a flat store
    assert s3.keys(BUCKET, key.rsplit("/", 2)[0] + "/empty") == []
    assert not os.path.exists("s3:")


def test_missing_bucket_is_missing(s3: S3Server) -> None:
    assert storage.path_kind("s3://no-such-bucket-here/x") == "missing"


def test_path_kind_of_local_paths_that_are_neither_file_nor_folder(tmp_path: Path) -> None:
    """A broken link and a FIFO are "other"; a link to a folder is a folder; a path under a
    file is missing (each is looked at once: ``os.stat``, else ``os.lstat``)."""
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "to-d").symlink_to(tmp_path / "d")
    kinds = {name: storage.path_kind(str(tmp_path / name))
             for name in ("broken", "fifo", "f", "d", "to-d", "f/under", "absent")}
    assert kinds == {"broken": "other", "fifo": "other", "f": "file", "d": "dir",
                     "to-d": "dir", "f/under": "missing", "absent": "missing"}
