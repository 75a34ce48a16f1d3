"""One filesystem layer for inputs and lakes: a location string -> pyarrow filesystem + path.

Every file snap-spark reads or writes outside Delta's own log goes through here, so local
paths and object stores work alike (docs/architecture.md, *Storage*). A *location* is one of:

- a local path (``data/in``, ``~/in``, ``/abs``) or ``file:`` URI: pyarrow's
  ``LocalFileSystem``, the absolute path (``~`` expanded);
- ``s3://bkt/key`` (also ``s3a://``, ``s3n://``): ``S3FileSystem`` with the settings of
  :class:`S3Settings`, path ``bkt/key``;
- ``gs://bkt/key``: ``GcsFileSystem``, path ``bkt/key``;
- ``abfs[s]://container@account.dfs.core.windows.net/key``: ``AzureFileSystem``, path
  ``container/key``;
- ``hdfs://host:port/p``: ``HadoopFileSystem`` (needs a JVM and libhdfs), path ``/p``.

Remote locations keep the scheme the caller gave (``s3a://`` stays ``s3a://``, so the
``source_file`` column shows what the user typed and a cluster's Hadoop S3A connector
resolves the same string); the three S3 schemes name the same object and share one
client. Keys are taken as written: nothing is percent-decoded, so ``s3://b/a b.jsonl`` is
the key ``a b.jsonl``. Filesystems are cached per process and per (kind, endpoint, region /
authority), so Spark tasks do not build a client per call.

Credentials are never read here: pyarrow's AWS SDK chain finds them (``AWS_ACCESS_KEY_ID``
/ ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and the shared files,
web identity, instance metadata), and delta-rs reads the same variables. On a cluster the
executors need them too (``spark.executorEnv.*`` or an instance role): Spark's Python
workers get the environment of the JVM that started them, not the driver's later changes.

This module imports no Spark.
"""

from __future__ import annotations

import atexit
import errno
import functools
import io
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from stat import S_ISDIR, S_ISREG
from typing import BinaryIO, Literal, cast
from urllib.parse import unquote

from pyarrow import fs as pafs

#: Schemes naming S3 objects (Hadoop's ``s3a``/``s3n`` spellings included).
S3_SCHEMES: tuple[str, ...] = ("s3", "s3a", "s3n")
#: Schemes naming Google Cloud Storage objects.
GCS_SCHEMES: tuple[str, ...] = ("gs", "gcs")
#: Schemes naming Azure Data Lake Storage Gen2 paths.
AZURE_SCHEMES: tuple[str, ...] = ("abfs", "abfss")
#: Schemes naming HDFS paths.
HDFS_SCHEMES: tuple[str, ...] = ("hdfs",)
#: Every remote scheme this layer opens.
REMOTE_SCHEMES: tuple[str, ...] = S3_SCHEMES + GCS_SCHEMES + AZURE_SCHEMES + HDFS_SCHEMES

#: Buffer for streaming remote objects: each refill is one ranged GET, so it is large.
REMOTE_BUFFER_BYTES = 8 * 1024 * 1024

#: Region used with a custom endpoint when none is configured (S3-compatible servers accept
#: any; the AWS SDK wants one with an endpoint override).
DEFAULT_ENDPOINT_REGION = "us-east-1"

PathKind = Literal["file", "dir", "other", "missing"]


class UnsupportedLocation(ValueError):
    """A location whose scheme this layer does not open (``http://``, ``az://``, ...)."""


# --------------------------------------------------------------------------------------
# Locations
# --------------------------------------------------------------------------------------


def split_scheme(location: str) -> tuple[str, str]:
    """``(scheme, rest)`` of a location; the scheme is ``""`` for a plain local path.

    A one-letter "scheme" is a Windows drive, not a scheme.

    Examples:
        >>> split_scheme("s3a://bkt/a/b.jsonl")
        ('s3a', 'bkt/a/b.jsonl')
        >>> split_scheme("/data/in"), split_scheme("file:///data/in")
        (('', '/data/in'), ('file', '///data/in'))
    """
    if location[:5].lower() == "file:":  # file:///x, file://localhost/x and file:/x
        return "file", location[5:]
    scheme, sep, rest = location.partition("://")
    if sep and len(scheme) > 1 and scheme.replace("+", "").replace("-", "").isalnum():
        return scheme.lower(), rest
    return "", location


def is_local(location: str) -> bool:
    """True for local paths and ``file:`` URIs.

    Examples:
        >>> is_local("data/in"), is_local("file:///data"), is_local("s3://bkt/in")
        (True, True, False)
    """
    return split_scheme(location)[0] in ("", "file")


def local_path(location: str) -> str:
    """The absolute local path of a local path or ``file:`` URI (``~`` expanded).

    Examples:
        >>> local_path("file:///data/a%20b.jsonl")
        '/data/a b.jsonl'
        >>> local_path("/data/in/") == "/data/in"
        True
    """
    scheme, rest = split_scheme(location)
    if scheme == "file":
        # file:///abs, file://localhost/abs and file:/abs all name /abs; URIs are %-encoded.
        if rest.startswith("//"):  # an authority follows: empty or localhost
            rest = rest[2:]
            host, slash, after = rest.partition("/")
            if host not in ("", "localhost"):
                raise UnsupportedLocation(f"file URI with a remote host: {location!r}")
            rest = slash + after
        return os.path.abspath(unquote(rest))
    if scheme:
        raise UnsupportedLocation(f"not a local location: {location!r}")
    return os.path.abspath(os.path.expanduser(location))


def normalize(location: str | os.PathLike[str]) -> str:
    """A location in canonical form: an absolute local path, or a remote URI as given with
    its scheme lower-cased and trailing ``/`` removed.

    Examples:
        >>> normalize("file:///lake/messages/")
        '/lake/messages'
        >>> normalize("S3A://bkt/lake/t/")
        's3a://bkt/lake/t'
    """
    text = os.fspath(location)
    scheme, rest = split_scheme(text)
    if scheme in ("", "file"):
        return local_path(text)
    if scheme not in REMOTE_SCHEMES:
        raise UnsupportedLocation(_unsupported_message(text, scheme))
    return f"{scheme}://{rest.rstrip('/')}"


def join(base: str, *parts: str) -> str:
    """``base`` with ``/``-separated ``parts`` appended (``os.path.join`` for local paths).

    Examples:
        >>> join("s3://bkt/lake/", "messages", "part-0.parquet")
        's3://bkt/lake/messages/part-0.parquet'
        >>> join("/lake", "messages")
        '/lake/messages'
    """
    if is_local(base):
        return os.path.join(local_path(base), *parts)
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}" if part else out
    return out


def delta_table_uri(location: str) -> str:
    """The URI delta-rs opens for a table location: local paths made absolute, ``s3n://``
    spelled ``s3://`` (delta-rs knows ``s3`` and ``s3a`` only); other schemes are passed
    on as they are, for delta-rs knows some pyarrow does not.

    Examples:
        >>> delta_table_uri("s3n://bkt/lake/t/"), delta_table_uri("s3a://bkt/t")
        ('s3://bkt/lake/t', 's3a://bkt/t')
    """
    scheme, rest = split_scheme(location)
    if scheme in ("", "file"):
        return local_path(location)
    if scheme == "s3n":
        return f"s3://{rest.rstrip('/')}"
    return f"{scheme}://{rest.rstrip('/')}"


def _unsupported_message(location: str, scheme: str) -> str:
    return (
        f"unsupported location scheme {scheme!r} in {location!r}: use a local path, file://, "
        f"{', '.join(s + '://' for s in REMOTE_SCHEMES)}"
    )


# --------------------------------------------------------------------------------------
# S3 settings from the environment
# --------------------------------------------------------------------------------------


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class S3Settings:
    """S3 connection settings taken from the standard AWS environment variables.

    pyarrow's ``S3FileSystem(...)`` constructor ignores ``AWS_ENDPOINT_URL*`` (only
    ``FileSystem.from_uri`` reads them) and delta-rs does not know ``AWS_ENDPOINT_URL_S3``,
    so both get these settings explicitly:

    - ``endpoint``: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (none when
      ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is true). Without a scheme, ``https://``.
    - ``region``: ``AWS_REGION``, else ``AWS_DEFAULT_REGION``; with an endpoint and no region,
      :data:`DEFAULT_ENDPOINT_REGION`; with neither, the bucket's region is looked up once.
    - ``virtual_addressing``: ``AWS_S3_ADDRESSING_STYLE=virtual`` (path style is the default
      with an endpoint, which S3-compatible servers expect).

    Examples:
        >>> S3Settings.from_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
        S3Settings(endpoint='http://127.0.0.1:9000', region='us-east-1', virtual_addressing=False)
        >>> S3Settings.from_env({"AWS_ENDPOINT_URL": "minio:9000", "AWS_REGION": "eu-west-1",
        ...                      "AWS_ENDPOINT_URL_S3": "https://s3.example"}).endpoint
        'https://s3.example'
    """

    endpoint: str | None
    region: str | None
    virtual_addressing: bool

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> S3Settings:
        """Read the settings from ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        endpoint: str | None = None
        if not _truthy(env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")):
            endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        if endpoint is not None:
            endpoint = endpoint.strip().rstrip("/")
            if "://" not in endpoint:
                endpoint = f"https://{endpoint}"
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None
        if region is None and endpoint is not None:
            region = DEFAULT_ENDPOINT_REGION
        virtual = env.get("AWS_S3_ADDRESSING_STYLE", "").strip().lower() == "virtual"
        return cls(endpoint=endpoint, region=region, virtual_addressing=virtual)

    @property
    def allow_http(self) -> bool:
        """True when the endpoint is plain ``http://`` (local test servers, MinIO)."""
        return self.endpoint is not None and self.endpoint.lower().startswith("http://")


@functools.lru_cache(maxsize=256)
def _bucket_region(bucket: str) -> str | None:
    """The region of an AWS bucket (one HEAD request), ``None`` if it cannot be found."""
    try:
        return str(pafs.resolve_s3_region(bucket))
    except (OSError, ValueError):  # no network, no such bucket, no permission: SDK default
        return None


def s3_region(settings: S3Settings, bucket: str) -> str | None:
    """The region to sign requests to ``bucket`` with: the configured one, else the
    bucket's own (one request), else ``None`` (the SDK's default)."""
    if settings.region is not None:
        return settings.region
    # What FileSystem.from_uri does too: a bucket outside the default region would
    # otherwise answer every request with a redirect pyarrow does not follow.
    return _bucket_region(bucket) if bucket else None


@functools.lru_cache(maxsize=64)
def _s3_filesystem(endpoint: str | None, region: str | None, virtual: bool) -> pafs.FileSystem:
    return pafs.S3FileSystem(
        region=region,
        endpoint_override=endpoint,
        scheme="http" if endpoint and endpoint.lower().startswith("http://") else "https",
        force_virtual_addressing=virtual,
    )


# --------------------------------------------------------------------------------------
# Resolving a location
# --------------------------------------------------------------------------------------

_LOCAL = pafs.LocalFileSystem()


@functools.lru_cache(maxsize=64)
def _uri_filesystem(scheme: str, authority: str) -> pafs.FileSystem:
    """GCS, Azure and HDFS clients, built by pyarrow from the URI's scheme and authority."""
    family = "gs" if scheme in GCS_SCHEMES else scheme
    try:
        filesystem, _ = pafs.FileSystem.from_uri(
            f"{family}://{authority}/" if authority else f"{family}://"
        )
    except OSError as error:
        hint = ""
        if scheme in HDFS_SCHEMES:
            hint = " (HDFS needs a JVM and libhdfs: set JAVA_HOME, HADOOP_HOME and CLASSPATH)"
        raise OSError(f"cannot open {scheme}://{authority}: {error}{hint}") from error
    except Exception as error:  # pyarrow raises ArrowInvalid for malformed authorities
        raise UnsupportedLocation(f"cannot open {scheme}://{authority}: {error}") from error
    return filesystem


def resolve(location: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem holding ``location`` and the path inside it.

    Examples:
        >>> filesystem, path = resolve("file:///data/in/")
        >>> type(filesystem).__name__, path
        ('LocalFileSystem', '/data/in')
        >>> resolve("ftp://host/x")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        snap_spark.files.storage.UnsupportedLocation: unsupported location scheme 'ftp' in ...
    """
    text = os.fspath(location)
    scheme, rest = split_scheme(text)
    if scheme in ("", "file"):
        return _LOCAL, local_path(text)
    if scheme in S3_SCHEMES:
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise UnsupportedLocation(f"S3 location without a bucket: {text!r}")
        settings = S3Settings.from_env()
        filesystem = _s3_filesystem(
            settings.endpoint, s3_region(settings, bucket), settings.virtual_addressing
        )
        return filesystem, f"{bucket}/{key}".rstrip("/")
    if scheme in GCS_SCHEMES:
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise UnsupportedLocation(f"GCS location without a bucket: {text!r}")
        return _uri_filesystem(scheme, ""), f"{bucket}/{key}".rstrip("/")
    if scheme in AZURE_SCHEMES:
        authority, _, key = rest.partition("/")
        container, at, account_host = authority.rpartition("@")
        if not at:  # abfss://account.dfs.core.windows.net/container/key
            account_host = authority
            container, _, key = key.partition("/")
        if not container or not account_host:
            raise UnsupportedLocation(
                f"Azure location must be abfs[s]://container@account.dfs.core.windows.net/path,"
                f" got {text!r}"
            )
        return _uri_filesystem(scheme, account_host), f"{container}/{key}".rstrip("/")
    if scheme in HDFS_SCHEMES:
        authority, _, key = rest.partition("/")
        return _uri_filesystem(scheme, authority), "/" + key.rstrip("/")
    raise UnsupportedLocation(_unsupported_message(text, scheme))


def _clear_cache() -> None:
    """Drop cached clients before pyarrow finalizes its S3 subsystem at exit.

    Registered after ``pyarrow.fs`` is imported, so it runs before pyarrow's own handler
    (``atexit`` runs last-registered first); an S3 client destroyed after finalization
    aborts the interpreter.
    """
    _s3_filesystem.cache_clear()
    _uri_filesystem.cache_clear()


atexit.register(_clear_cache)


# --------------------------------------------------------------------------------------
# Questions about a location
# --------------------------------------------------------------------------------------


def path_kind(location: str) -> PathKind:
    """``"file"``, ``"dir"``, ``"other"`` (a socket, a broken link) or ``"missing"``.

    Local symbolic links are followed. On object stores a "folder" is a key prefix that
    holds at least one object (or a bucket).

    Examples:
        >>> path_kind("/"), path_kind("/no/such/place")
        ('dir', 'missing')
    """
    if is_local(location):
        # one look (a link followed, else the link itself): separate isdir/isfile/lexists
        # calls could each see a different moment, and call a folder another writer is
        # creating "other"
        path = local_path(location)
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError):  # a broken link, a parent that is a file, no access
            try:
                mode = os.lstat(path).st_mode  # the link itself, or what appeared meanwhile
            except (OSError, ValueError):
                return "missing"
        if S_ISDIR(mode):
            return "dir"
        return "file" if S_ISREG(mode) else "other"
    filesystem, path = resolve(location)
    kind = filesystem.get_file_info(path).type
    if kind == pafs.FileType.File:
        return "file"
    if kind == pafs.FileType.Directory:
        return "dir"
    return "missing" if kind == pafs.FileType.NotFound else "other"


def exists(location: str) -> bool:
    """True when ``location`` is a file or a folder.

    Examples:
        >>> exists("/"), exists("/no/such/place")
        (True, False)
    """
    return path_kind(location) in ("file", "dir")


def is_file(location: str) -> bool:
    """True when ``location`` is a regular file (local links followed).

    Examples:
        >>> is_file("/")
        False
    """
    return path_kind(location) == "file"


def is_dir(location: str) -> bool:
    """True when ``location`` is a folder (on object stores: a non-empty prefix or a bucket).

    Examples:
        >>> is_dir("/")
        True
    """
    return path_kind(location) == "dir"


def file_size(location: str) -> int:
    """Size in bytes of a file.

    Raises:
        FileNotFoundError: there is no file at ``location`` (or it is a folder).

    Examples:
        >>> file_size("/no/such/file.jsonl")
        Traceback (most recent call last):
        ...
        FileNotFoundError: [Errno 2] No such file or directory: '/no/such/file.jsonl'
    """
    return file_stat(location).size


@dataclass(frozen=True)
class FileStat:
    """Size and modification time of a file (what an ingest key is made of)."""

    size: int
    #: Nanoseconds since the epoch; ``None`` when the store reports none.
    mtime_ns: int | None


def file_stat(location: str) -> FileStat:
    """Size and modification time of a file (``os.stat``'s values for local files).

    Raises:
        FileNotFoundError: there is no file at ``location``.

    Examples:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        ...     _ = f.write(b"{}"); f.flush()
        ...     file_stat(f.name).size
        2
    """
    if is_local(location):
        path = local_path(location)
        result = os.stat(path)
        if not S_ISREG(result.st_mode):  # as on object stores: a folder is not a file
            raise FileNotFoundError(errno.ENOENT, "not a regular file", location)
        return FileStat(result.st_size, result.st_mtime_ns)
    filesystem, path = resolve(location)
    info = filesystem.get_file_info(path)
    if info.type != pafs.FileType.File or info.size is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", location)
    return FileStat(int(info.size), None if info.mtime_ns is None else int(info.mtime_ns))


# --------------------------------------------------------------------------------------
# Listing
# --------------------------------------------------------------------------------------


def is_hidden_name(name: str) -> bool:
    """Hidden by the Hadoop/Spark convention: ``.git``, ``_SUCCESS``, ``_delta_log``.

    Examples:
        >>> is_hidden_name("_delta_log"), is_hidden_name("a.jsonl")
        (True, False)
    """
    return name.startswith((".", "_"))


def _raise_walk_error(error: OSError) -> None:
    """``os.walk`` ignores unreadable folders by default; a file must never vanish so."""
    raise error


def _walk_local(folder: str, suffixes: tuple[str, ...] | None) -> Iterator[str]:
    """Files under a local folder, recursively, skipping hidden files and folders.

    Symbolic links to folders are followed, each real folder visited once (no cycles); a
    broken link with a wanted name raises. A file gone between reading its folder and
    looking at it is not listed: the listing is of a moment after it went.
    """
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(
        folder, followlinks=True, onerror=_raise_walk_error
    ):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames[:] = [name for name in dirnames if not is_hidden_name(name)]
        for name in filenames:
            if is_hidden_name(name) or (suffixes and not name.lower().endswith(suffixes)):
                continue
            path = os.path.join(dirpath, name)
            if not os.path.isfile(path):
                if not os.path.lexists(path):
                    continue  # removed since the folder was read (another run's sweep)
                raise FileNotFoundError(
                    errno.ENOENT, "input file is a broken link or not a regular file", path
                )
            yield path


def list_files(location: str, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """Files under the folder ``location``, recursively, sorted, as locations.

    Names starting with ``.`` or ``_`` are skipped, folders included (``_delta_log``,
    ``.git``, ``_SUCCESS``); with ``suffixes``, only names ending in one of them
    (case-insensitive) are listed. Local results are absolute paths (symbolic links to
    folders followed once, broken links raise); remote ones are URIs with the caller's
    scheme, e.g. ``s3a://bkt/in/a.jsonl``.

    Raises:
        FileNotFoundError: ``location`` does not exist (or a local link is broken).

    Examples:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("a.jsonl", "_SUCCESS", "sub/b.JSONL", ".git/c.jsonl", "d.txt"):
        ...     (root / name).parent.mkdir(exist_ok=True)
        ...     _ = (root / name).write_bytes(b"")
        >>> [p[len(str(root)) + 1:] for p in list_files(str(root), (".jsonl",))]
        ['a.jsonl', 'sub/b.JSONL']
        >>> import shutil; shutil.rmtree(root)
    """
    wanted = tuple(s.lower() for s in suffixes) if suffixes else None
    if is_local(location):
        root = local_path(location)
        if not os.path.isdir(root):
            raise FileNotFoundError(errno.ENOENT, "no such folder", location)
        return sorted(_walk_local(root, wanted))
    base = normalize(location)
    filesystem, root = resolve(base)
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=False)
    found: list[str] = []
    for info in filesystem.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        relative = info.path[len(root) :].lstrip("/")
        if any(is_hidden_name(part) for part in relative.split("/")):
            continue
        if wanted and not info.base_name.lower().endswith(wanted):
            continue
        found.append(join(base, relative))
    return sorted(found)


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def open_input(location: str, buffer_size: int = REMOTE_BUFFER_BYTES) -> BinaryIO:
    """Open a file for streaming its raw bytes from the start (no decompression).

    Local files are opened unbuffered (callers read large chunks); remote objects through
    a ``buffer_size`` read-ahead, so small reads (``gzip`` asks for 128 KiB) do not each
    cost a request. Close it (it is a context manager).

    Examples:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        ...     _ = f.write(b'{"a": 1}\\n'); f.flush()
        ...     with open_input(f.name) as stream:
        ...         stream.read(4)
        b'{"a"'

    """
    if is_local(location):
        return io.FileIO(local_path(location), "rb")
    filesystem, path = resolve(location)
    # compression=None: pyarrow would otherwise gunzip ".gz" names behind our back.
    return cast(
        BinaryIO,
        filesystem.open_input_stream(path, compression=None, buffer_size=buffer_size or None),
    )


def open_range(location: str, start: int = 0) -> BinaryIO:
    """Open a file for reading from byte ``start`` (seekable; each remote ``read(n)`` is
    one ranged request, so read in large chunks). Close it (it is a context manager).

    Examples:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        ...     _ = f.write(b"aa\\nbb\\n"); f.flush()
        ...     with open_range(f.name, 3) as stream:
        ...         stream.read(8)
        b'bb\\n'

    """
    if is_local(location):
        stream: BinaryIO = io.FileIO(local_path(location), "rb")
    else:
        filesystem, path = resolve(location)
        stream = cast(BinaryIO, filesystem.open_input_file(path))
    if start:
        stream.seek(start)
    return stream


# --------------------------------------------------------------------------------------
# Writing and deleting
# --------------------------------------------------------------------------------------


def has_directories(filesystem: pafs.FileSystem) -> bool:
    """False for flat object stores (S3, GCS), where "folders" are only key prefixes and
    creating one writes an empty marker object per call.

    Examples:
        >>> has_directories(pafs.LocalFileSystem())
        True
    """
    return not isinstance(filesystem, pafs.S3FileSystem | pafs.GcsFileSystem)


def make_dirs(location: str) -> None:
    """Create a folder and its parents (a no-op on object stores; see
    :func:`has_directories`).

    Examples:
        >>> import tempfile
        >>> scratch = tempfile.mkdtemp()
        >>> make_dirs(scratch + "/a/b")
        >>> import shutil; shutil.rmtree(scratch)
    """
    filesystem, path = resolve(location)
    if has_directories(filesystem):
        filesystem.create_dir(path, recursive=True)


def delete_file(location: str, missing_ok: bool = True) -> None:
    """Delete one file; a missing file is fine unless ``missing_ok`` is false.

    Examples:
        >>> delete_file("/no/such/file.jsonl")
    """
    filesystem, path = resolve(location)
    try:
        filesystem.delete_file(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


#: How many times :func:`delete_tree` starts again when entries vanish under it.
DELETE_TREE_TRIES = 5


def delete_tree(location: str, missing_ok: bool = True) -> None:
    """Delete a folder and everything under it (on object stores: every key under the
    prefix); a missing folder is fine unless ``missing_ok`` is false.

    Another process deleting the same folder at the same time is fine: two runs sweeping
    one dead run's leftovers both delete its staging folder, and an entry one of them finds
    gone mid-walk (pyarrow's ``FileNotFoundError``) is one the other already deleted. The
    walk starts again, :data:`DELETE_TREE_TRIES` times at most, until the folder is gone.

    Examples:
        >>> delete_tree("/no/such/folder")
    """
    filesystem, path = resolve(location)
    if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
        if missing_ok:
            return
        raise FileNotFoundError(errno.ENOENT, "no such folder", location)
    for attempt in range(DELETE_TREE_TRIES):
        try:
            filesystem.delete_dir(path)
            return
        except FileNotFoundError:
            if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
                return  # the other deleter finished it
            if attempt == DELETE_TREE_TRIES - 1:
                raise


# --------------------------------------------------------------------------------------
# delta-rs
# --------------------------------------------------------------------------------------


def delta_storage_options(location: str) -> dict[str, str]:
    """The ``storage_options`` delta-rs needs for a table at ``location``.

    Local, GCS, Azure and HDFS tables need none (delta-rs reads ``GOOGLE_*`` / ``AZURE_*``
    credentials from the environment itself), nor do schemes only delta-rs knows. For S3
    the endpoint, region and addressing style of :class:`S3Settings` are passed explicitly,
    plus ``AWS_ALLOW_HTTP`` for an ``http://`` endpoint; credentials stay in the
    environment, where delta-rs reads them.

    Commits need no lock and no ``AWS_S3_ALLOW_UNSAFE_RENAME``: delta-rs 1.x writes each
    ``_delta_log`` entry with a conditional put (``If-None-Match: *``), which S3 (since
    2024) and S3-compatible servers refuse when the version exists, so two writers never
    overwrite each other's commit. ``AWS_S3_ALLOW_UNSAFE_RENAME=true`` would switch it to
    an unprotected copy-and-rename, so it is deliberately not set.

    Examples:
        >>> delta_storage_options("/lake/messages")
        {}
        >>> getfixture("monkeypatch").setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
        >>> sorted(delta_storage_options("s3://bkt/t"))  # a local S3-compatible server
        ['AWS_ALLOW_HTTP', 'AWS_ENDPOINT_URL', 'AWS_REGION']
    """
    scheme, rest = split_scheme(os.fspath(location))
    if scheme not in S3_SCHEMES:
        return {}
    settings = S3Settings.from_env()
    options: dict[str, str] = {}
    if settings.endpoint is not None:
        options["AWS_ENDPOINT_URL"] = settings.endpoint
        if settings.allow_http:
            options["AWS_ALLOW_HTTP"] = "true"
    region = s3_region(settings, rest.partition("/")[0])
    if region is not None:
        options["AWS_REGION"] = region
    if settings.virtual_addressing:
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true"
    return options
