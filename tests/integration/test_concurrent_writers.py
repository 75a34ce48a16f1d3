"""Several writers on one lake at once: replay verdicts and task tables stay those of one
sequential run.

The races here are forced, in one process: writer A runs in a thread and is held at a chosen
moment (a test wrapper around one of the job's own functions), writer B runs to the end
meanwhile, then A goes on. The reference is the pure-Python checker over every line at once,
in receipt order (``tests.integration.test_replay_store``), and a full task rebuild.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from snap_spark import lake as lake_api
from snap_spark.pipeline import job
from snap_spark.pipeline.job import JobResult, run
from snap_spark.pipeline.tasks import rebuild_tasks
from tests.integration.test_replay_store import WIDE, _copy, _reference, _verdicts, archive
from tests.integration.test_task_refresh import table_content
from tests.lake.helpers import use_backend

__all__ = ["archive"]  # the module fixture, shared


@contextmanager
def held_writer(hold: Callable[[threading.Event, threading.Event], None],
                target: Callable[[], JobResult]) -> Iterator[dict[str, Any]]:
    """Start ``target`` in thread ``writer-a``; yield once ``hold`` signalled that A
    reached its moment; when the block ends, let A go on and wait for it."""
    reached, go = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}
    hold(reached, go)

    def body() -> None:
        try:
            outcome["result"] = target()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error
            reached.set()

    thread = threading.Thread(target=body, name="writer-a")
    thread.start()
    try:
        assert reached.wait(300), "writer A never reached its moment"
        assert "error" not in outcome, outcome.get("error")
        yield outcome
    finally:
        go.set()
        thread.join(600)
    assert not thread.is_alive()
    if "error" in outcome:
        raise outcome["error"]


def _hold_first_call(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                     when: Callable[..., bool] = lambda *a, **k: True
                     ) -> Callable[[threading.Event, threading.Event], None]:
    """A ``hold`` for :func:`held_writer`: writer A's first call of ``owner.name`` (that
    ``when`` accepts) waits for the test, after signalling."""
    real = getattr(owner, name)

    def install(reached: threading.Event, go: threading.Event) -> None:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if (threading.current_thread().name == "writer-a" and not reached.is_set()
                    and when(*args, **kwargs)):
                reached.set()
                assert go.wait(600)
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    return install


@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_a_replay_committed_between_read_and_commit_is_decided_again(
        spark: Any, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A holds the copy received first, B its replay 100 s later. A reads the lake (no
    # copy yet), decides "accepted" and writes its files; B lands and commits its copy as
    # accepted (the lake had none); then A commits. One sequential run rejects B's copy.
    first = tmp_path / "first.jsonl"
    first.write_bytes(_copy(0) + b"\n")
    second = tmp_path / "second.jsonl"
    second.write_bytes(_copy(100) + b"\n")
    lake = tmp_path / "lake"
    hold = _hold_first_call(monkeypatch, job, "_write_messages")
    with use_backend(spark, backend):
        with held_writer(hold, lambda: run(spark, [str(first)], str(lake), WIDE)) as a:
            b = run(spark, [str(second)], str(lake), WIDE)
            assert b.counts == {None: 1}  # alone, B's copy is the first one
    reference = _reference([[_copy(0)], [_copy(100)]], [str(first), str(second)],
                           max_drift=WIDE.max_drift)
    assert [code for code, _ in reference.values()] == [None, 2006]
    assert _verdicts(lake) == reference
    assert a["result"].keys_redecided == 1
    assert a["result"].rows_redecided == 1  # B's row, in A's commit
    assert "keys decided again at commit" in job.format_summary(a["result"])


def test_an_unrelated_commit_meanwhile_decides_nothing_again(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # B commits between A's read and A's commit, but shares no message with A: A commits
    # its files as written, after one look at what B added.
    from tests.unit.helpers import PRIV_A, T0, envelope, signed

    first = tmp_path / "first.jsonl"
    first.write_bytes(_copy(0) + b"\n")
    other = tmp_path / "other.jsonl"
    other.write_bytes(envelope(signed(PRIV_A, id="other-1", timestamp=T0 + 75),
                               received_at=T0 + 10) + b"\n")
    lake = tmp_path / "lake"
    rewrites: list[int] = []
    real_write = job._write_messages

    def counting(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "writer-a":
            rewrites.append(1)
        return real_write(*args, **kwargs)

    hold = _hold_first_call(monkeypatch, job, "_write_messages")
    with held_writer(hold, lambda: run(spark, [str(first)], str(lake), WIDE)) as a:
        monkeypatch.setattr(job, "_write_messages", counting)
        run(spark, [str(other)], str(lake), WIDE)
    assert a["result"].keys_redecided == 0
    assert rewrites == []  # the held call was the only write of A's messages files
    assert {code for code, _ in _verdicts(lake).values()} == {None}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["delta-rs", "delta-spark"])
def test_two_writers_refreshing_the_same_tasks_leave_one_rebuild(
        spark: Any, archive: dict[str, Any], tmp_path: Path, backend: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A commits its messages and folds its tasks, then is held before it commits the fold;
    # B (whose reports continue A's tasks) lands and refreshes to the end; then A goes on.
    lake = tmp_path / "lake"
    paths = [str(p) for p in archive["paths"]]
    hold = _hold_first_call(monkeypatch, lake_api, "commit_lease",
                            when=lambda _lake, what, **_: what == "refresh_tasks")
    with use_backend(spark, backend):
        run(spark, [paths[0]], str(lake))
        with held_writer(hold, lambda: run(spark, [paths[1]], str(lake))):
            run(spark, [paths[2]], str(lake))
        refreshed = table_content(lake)
        rebuild_tasks(spark, str(lake))
    assert refreshed == table_content(lake)
    assert len(refreshed["tasks"]) > 100
