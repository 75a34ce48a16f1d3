"""Message samples on disk: :func:`write_sample`, its expected-tasks file, and the command.

:func:`write_sample` writes the lines (gzip when the name ends in ``.gz``, with a fixed
header so the same config gives the same compressed bytes), optionally their labels as
JSONL, and the expected ``tasks`` table beside them (:func:`expected_tasks_path`).
``python -m snap_spark.samples.messages OUT ...`` runs :func:`main`.
"""

from __future__ import annotations

import argparse
import gzip
import time
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any, Final

import orjson

from snap_spark.samples.messages.config import KIND_CODES, SampleConfig
from snap_spark.samples.messages.simulation import generate

__all__ = ["expected_tasks_path", "main", "read_expected_tasks", "write_sample"]

#: Endings of sample files that :func:`expected_tasks_path` takes off the traffic's name.
_TRAFFIC_ENDINGS: Final = (".jsonl", ".ndjson", ".json")


def expected_tasks_path(out_path: str) -> str:
    """Where :func:`write_sample` puts the expected tasks of a sample written to ``out_path``
    by default: beside it, named ``<stem>.expected-tasks.txt``.

    The file holds JSON lines, but its name does not end like an input file, so landing
    or checking the sample's folder never reads it as traffic.

    Examples:
        >>> expected_tasks_path("data/sample/traffic-100000-7.jsonl")
        'data/sample/traffic-100000-7.expected-tasks.txt'
        >>> expected_tasks_path("t.ndjson.gz")
        't.expected-tasks.txt'
    """
    stem = out_path[:-3] if out_path.lower().endswith(".gz") else out_path
    for ending in _TRAFFIC_ENDINGS:
        if stem.lower().endswith(ending):
            stem = stem[: -len(ending)]
            break
    return f"{stem}.expected-tasks.txt"


def read_expected_tasks(path: str) -> list[dict[str, Any]]:
    """The rows of an expected-tasks file (see :func:`write_sample`).

    Examples:
        >>> import tempfile, os
        >>> out = os.path.join(tempfile.mkdtemp(), "s.jsonl")
        >>> _ = write_sample(SampleConfig(agents=3, messages=300, seed=4), out)
        >>> sorted(read_expected_tasks(expected_tasks_path(out))[0])[:3]
        ['context_id', 'foreign_reports', 'illegal_transitions']
    """
    with open(path, "rb") as handle:
        return [orjson.loads(line) for line in handle if line.strip()]


def _open(path: str) -> IO[bytes] | gzip.GzipFile:
    """A file to write, gzip-compressed when ``path`` ends in ``.gz``."""
    if path.endswith(".gz"):
        # mtime=0 and no file name in the header: same config, same compressed bytes
        raw = open(path, "wb")  # noqa: SIM115 - closed with the GzipFile below
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
    return open(path, "wb")


def write_sample(
    config: SampleConfig,
    out_path: str,
    labels_path: str | None = None,
    tasks_path: str | None = "",
) -> Counter[str]:
    """Write a sample as NDJSON (gzip if ``out_path`` ends in ``.gz``); return lines per kind.

    ``labels_path``, when given, receives one JSON object per line:
    ``{"line_no": 1, "kind": "request", "expected_code": null}``.

    ``tasks_path`` receives the expected ``tasks`` table (:class:`ExpectedTask`), one JSON
    object per task in order of its first report, e.g. ``{"task_id": "task-…",
    "context_id": "ctx-…", "owner": "bc1p…", "state": "completed", "state_timestamp":
    1770163212, "last_message_id": "…", "reports": 3, "transitions": 2,
    "illegal_transitions": 0, "foreign_reports": 0}``; by default (``""``) it goes beside
    the traffic (:func:`expected_tasks_path`), ``None`` writes none.

    Examples:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> counts = write_sample(SampleConfig(agents=3, messages=10, attack_share=0),
        ...                       os.path.join(folder, "s.ndjson"))
        >>> sum(counts.values())
        10
    """
    counts: Counter[str] = Counter()
    out = _open(out_path)
    labels = _open(labels_path) if labels_path else None
    sample = generate(config)
    try:
        lines: list[bytes] = []
        label_lines: list[bytes] = []
        for line, label in sample:
            counts[label.kind] += 1
            lines.append(line)
            if labels is not None:
                label_lines.append(
                    orjson.dumps(
                        {
                            "line_no": label.line_no,
                            "kind": label.kind,
                            "expected_code": label.expected_code,
                        }
                    )
                )
            if len(lines) >= 4096:
                out.write(b"\n".join(lines) + b"\n")
                lines.clear()
                if labels is not None:
                    labels.write(b"\n".join(label_lines) + b"\n")
                    label_lines.clear()
        if lines:
            out.write(b"\n".join(lines) + b"\n")
        if labels is not None and label_lines:
            labels.write(b"\n".join(label_lines) + b"\n")
    finally:
        _close(out)
        if labels is not None:
            _close(labels)
    if tasks_path is not None:
        with open(tasks_path or expected_tasks_path(out_path), "wb") as handle:
            for task in sample.expected_tasks():
                handle.write(orjson.dumps(task.to_plain()) + b"\n")
    return counts


def _close(handle: IO[bytes] | gzip.GzipFile) -> None:
    """Close a file of :func:`_open` and, for gzip, the file under it."""
    handle.close()
    inner = getattr(handle, "fileobj", None)  # GzipFile leaves the file it was given open
    if inner is not None:
        inner.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snap_spark.samples.messages OUT [--labels L] [--messages N] ...``: write
    a sample."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("out")
    parser.add_argument("--labels")
    parser.add_argument("--tasks", default="",
                        help="expected tasks table (default: <stem>.expected-tasks.txt "
                             "beside OUT)")
    defaults = SampleConfig()
    for name in ("agents", "messages", "seed", "start_time"):
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name)
        )
    for name in ("attack_share", "bare_share", "testnet_share"):
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=float, default=getattr(defaults, name)
        )
    args = parser.parse_args(argv)
    config = SampleConfig(
        agents=args.agents,
        messages=args.messages,
        seed=args.seed,
        attack_share=args.attack_share,
        bare_share=args.bare_share,
        start_time=args.start_time,
        testnet_share=args.testnet_share,
    )
    started = time.perf_counter()
    counts = write_sample(config, args.out, args.labels, args.tasks)
    elapsed = time.perf_counter() - started
    total = sum(counts.values())
    print(f"{total} lines in {elapsed:.1f} s ({total / max(elapsed, 1e-9):,.0f} lines/s)")
    for kind, count in sorted(counts.items()):
        print(f"  {kind:28s} {count:8d}  code={KIND_CODES[kind]}")
    return 0
