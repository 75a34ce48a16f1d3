"""The spark-submit entry points of snap-spark, shipped inside the package.

Each job is one small file here (``verify_messages.py``, ``stream_verify.py``, …) whose
logic lives in the package; spark-submit needs the file itself. An installed package
prints where its jobs are, so a cluster image or a scheduler needs no checkout::

    python -m snap_spark.jobs list                    # the jobs and what each does
    python -m snap_spark.jobs path verify_messages    # the file to hand to spark-submit
    spark-submit "$(python -m snap_spark.jobs path verify_messages)" --input … --lake …

In a checkout, ``jobs/`` is this folder under its short name (a link), so
``spark-submit jobs/verify_messages.py`` runs the same file.

Examples:
    >>> names()  # doctest: +NORMALIZE_WHITESPACE
    ['audit', 'ingest_nostr', 'rebuild_tasks', 'stream_nostr', 'stream_verify',
     'verify_messages']
    >>> job_path("audit.py").name, job_path("audit").parent == JOBS_DIR
    ('audit.py', True)
    >>> summary("rebuild_tasks")
    "rebuild the task tables from the lake's messages"
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["JOBS_DIR", "UnknownJob", "choices", "job_path", "names", "summary"]

#: This folder: one ``<name>.py`` per job.
JOBS_DIR = Path(__file__).resolve().parent


class UnknownJob(LookupError):
    """No job of that name (the message lists the known ones)."""


def names(folder: Path = JOBS_DIR) -> list[str]:
    """The jobs of ``folder`` (the ones shipped here by default): every ``*.py`` not
    starting with ``_``, sorted; none when the folder cannot be read."""
    try:
        return sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))
    except OSError:
        return []


def choices(folder: Path = JOBS_DIR) -> str:
    """`` (one of: a, b)`` for the jobs of ``folder``, or a note that there are none."""
    found = names(folder)
    if not found:
        return f" (no jobs found: no {folder}/*.py)"
    return f" (one of: {', '.join(found)})"


def job_path(name: str, folder: Path = JOBS_DIR) -> Path:
    """The path of job ``name`` (with or without ``.py``) in ``folder``.

    Raises:
        UnknownJob: there is no such job (the message lists the known ones).
    """
    stem = name.removesuffix(".py")
    if stem not in names(folder):
        raise UnknownJob(f"unknown job {name!r}" + choices(folder))
    return folder / f"{stem}.py"


def summary(name: str) -> str:
    """What job ``name`` does: its docstring's first line, after ``spark-submit entry
    point:`` when it says so, without the final full stop."""
    doc = ast.get_docstring(ast.parse(job_path(name).read_text(encoding="utf-8"))) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    return first.removeprefix("spark-submit entry point:").strip().rstrip(".")
