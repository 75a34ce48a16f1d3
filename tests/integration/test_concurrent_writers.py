"""Several writers on one lake at once: replay verdicts and task tables stay those of one
sequential run.

The races here are forced, in one process: writer A runs in a thread and is held at a chosen
moment (a test wrapper around one of the job's own functions), writer B runs to the end
meanwhile, then A goes on. The reference is the pure-Python checker over every line at once,
in receipt order (``tests.integration.test_replay_store``), and a full task rebuild.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from snap_spark import lake as lake_api
from snap_spark.pipeline import commit as commit_path
from snap_spark.pipeline.batch_job import run
from snap_spark.pipeline.commit import JobResult, format_summary
from snap_spark.pipeline.task_tables import rebuild_tasks
from snap_spark.samples.nostr import NostrSampleConfig, output_paths, write_nostr_sample
from tests.integration.test_replay_store import WIDE, _copy, _reference, _verdicts, archive
from tests.integration.test_task_refresh import check_expectation, table_content
from tests.jobs import finish, kill_when, logged_files, parquet_files, start_job
from tests.lake.helpers import delta_rows, use_backend

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
    hold = _hold_first_call(monkeypatch, commit_path, "_write_messages")
    with use_backend(spark, backend), held_writer(
            hold, lambda: run(spark, [str(first)], str(lake), WIDE)) as a:
        b = run(spark, [str(second)], str(lake), WIDE)
        assert b.counts == {None: 1}  # alone, B's copy is the first one
    reference = _reference([[_copy(0)], [_copy(100)]], [str(first), str(second)],
                           max_drift=WIDE.max_drift)
    assert [code for code, _ in reference.values()] == [None, 2006]
    assert _verdicts(lake) == reference
    assert a["result"].keys_redecided == 1
    assert a["result"].rows_redecided == 1  # B's row, in A's commit
    assert "keys decided again at commit" in format_summary(a["result"])


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
    real_write = commit_path._write_messages

    def counting(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "writer-a":
            rewrites.append(1)
        return real_write(*args, **kwargs)

    hold = _hold_first_call(monkeypatch, commit_path, "_write_messages")
    with held_writer(hold, lambda: run(spark, [str(first)], str(lake), WIDE)) as a:
        monkeypatch.setattr(commit_path, "_write_messages", counting)
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


# ---- separate processes: jobs started at the same moment on one lake ------------------


def _lines_once(lake: Path, total: int) -> None:
    """Every line is in raw_messages and messages exactly once."""
    for table in ("raw_messages", "messages"):
        keys = [(r["source_file"], r["line_no"]) for r in delta_rows(lake / table)]
        assert len(keys) == len(set(keys)) == total, table


def _tasks_equal_a_rebuild(spark: Any, lake: Path) -> None:
    incremental = table_content(lake)
    assert len(incremental["tasks"]) > 50
    rebuild_tasks(spark, str(lake))
    assert table_content(lake) == incremental


def _redecided(outputs: list[str]) -> int:
    """Keys the runs decided again because of each other (their summary lines)."""
    found = 0
    for out in outputs:
        for line in out.splitlines():
            if line.startswith("message keys decided again at commit"):
                found += int(line.rsplit(":", 1)[1])
    return found


@pytest.mark.slow
def test_four_batch_jobs_and_a_stream_at_once_one_killed_equal_one_sequential_run(
        spark: Any, archive: dict[str, Any], tmp_path: Path) -> None:
    """The archive is cut in receipt order into five files, so copies of one message fall
    into different files (the replay pairs straddle the cuts): four go to batch jobs, the
    last to an available-now stream, all started at once as job processes. One batch job
    is killed (its whole process group, SIGKILL) just after its raw_messages commit, while
    it decides and commits its messages and the others go on: the lease it may hold is
    taken over at once (its process is gone). Run again (in this process, the job's own
    ``run``), it completes: the verdicts are the checker's over all lines at once, each
    line once, the task tables the expectation and a rebuild, every file one a commit
    added."""
    lake = tmp_path / "lake"
    landing = tmp_path / "landing"
    landing.mkdir()
    streamed = landing / archive["paths"][4].name
    shutil.copyfile(archive["paths"][4], streamed)
    sources = [str(p) for p in archive["paths"][:4]] + [str(streamed)]
    reference = _reference(archive["parts"], sources)
    straddling = sum(1 for (src, _), (code, detail) in reference.items()
                     if code == 2006 and not detail.endswith(f" of {src}"))
    assert straddling >= 5
    procs = [start_job("verify_messages.py", ["--input", path, "--lake", str(lake)])
             for path in sources[:4]]
    procs.append(start_job("stream_verify.py", [
        "--trigger", "available-now", "--landing", str(landing), "--lake", str(lake),
        "--checkpoint", str(tmp_path / "checkpoint")]))
    victim = procs.pop(1)
    kill_when(victim, "stage 3/4 raw_messages", delay=0.3)
    outputs = [finish(proc) for proc in procs]
    print("keys decided again because of another writer:", _redecided(outputs))
    run(spark, [sources[1]], str(lake))
    assert _verdicts(lake) == reference
    _lines_once(lake, len(reference))
    check_expectation(archive["tasks"], lake)
    _tasks_equal_a_rebuild(spark, lake)
    for table in ("raw_messages", "messages"):
        # every file is one a commit added (rows another writer re-decided were rewritten
        # into new files: the old ones stay for time travel)
        assert parquet_files(lake / table) == _files_ever_added(lake / table), table


def _files_ever_added(table: Path) -> set[str]:
    """Every data file any commit of the table's log added (relative paths)."""
    added: set[str] = set()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    assert added >= logged_files(table)
    return added


@pytest.mark.slow
def test_nostr_ingestion_and_a_batch_job_landing_the_same_stored_messages_at_once(
        spark: Any, tmp_path: Path) -> None:
    # The messages (kinds 4339, 21339) of a Nostr sample, decrypted, also reach the lake as
    # an archive through the batch job, at the same moment: each message is accepted once
    # (the other copy is its 2006), exactly as when the two run one after the other (that
    # sequential reference is landed in this process; the two at once are job processes).
    from snap_spark.nostr.ingest import ingest
    from snap_spark.nostr.stored import Keyring

    stem = str(tmp_path / "s")
    write_nostr_sample(NostrSampleConfig(cards=8, messages=60, well_known=4, seed=4), stem)
    paths = output_paths(stem)
    nostr_args = ["--input", paths["events"], "--keyring", paths["keyring"],
                  "--well-known", paths["well_known"]]
    first = tmp_path / "sequential"
    ingest(spark, str(first), inputs=[paths["events"]], keyring=Keyring.load(paths["keyring"]),
           well_known=[paths["well_known"]])
    stored = sorted(delta_rows(first / "raw_messages"), key=lambda r: r["line_no"])
    assert len(stored) >= 30
    archive_file = tmp_path / "stored-copies.jsonl"
    # the same signed messages, received a second later by another path
    copies = []
    for row in stored:
        envelope = json.loads(row["raw_text"])
        envelope["received_at"] += 1.0
        envelope["source"] = "archive"
        copies.append(json.dumps(envelope).encode() + b"\n")
    archive_file.write_bytes(b"".join(copies))
    run(spark, [str(archive_file)], str(first))

    together = tmp_path / "concurrent"
    procs = [start_job("ingest_nostr.py", [*nostr_args, "--lake", str(together)]),
             start_job("verify_messages.py",
                       ["--input", str(archive_file), "--lake", str(together)])]
    for proc in procs:
        finish(proc)

    def verdicts(lake: Path) -> dict[tuple[str, int], Any]:
        return {(Path(m["source_file"]).name, m["line_no"]): (m["error_code"],
                str(m["error_detail"]).replace(str(lake), "LAKE"))
                for m in delta_rows(lake / "messages")}

    expected = verdicts(first)
    assert sum(1 for code, _ in expected.values() if code == 2006) >= len(stored) // 2
    assert verdicts(together) == expected
    _lines_once(together, len(expected))


@pytest.mark.slow
def test_a_writer_that_cannot_get_the_lease_exits_1_and_a_rerun_completes_it(
        spark: Any, archive: dict[str, Any], tmp_path: Path) -> None:
    """Another writer (on another host: it cannot be seen dead) holds the lease for the
    whole run: the job process gives up after the wait (1 s here), exit 1, one line
    naming the lake, the holder's host and "busy", nothing of messages written. Once the
    lease is given back the same run completes it with the checker's verdicts."""
    from snap_spark.lake.lease import LEASE_FOLDER, LEASE_WAIT_ENV, _name

    lake = tmp_path / "lake"
    path = str(archive["paths"][0])
    (lake / LEASE_FOLDER).mkdir(parents=True)
    held = lake / LEASE_FOLDER / _name(0)
    held.write_text(json.dumps({"holder": "x", "what": "messages", "host": "other-host",
                                "pid": 1, "expires": time.time() + 3600, "released": False}))
    proc = start_job("verify_messages.py", ["--input", path, "--lake", str(lake)],
                     {LEASE_WAIT_ENV: "1"})
    _out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err.decode()[-3000:]
    said = [line for line in err.decode().splitlines() if line.startswith("verify_messages:")]
    assert len(said) == 1 and str(lake) in said[0] and "busy" in said[0], said
    assert "other-host" in said[0]
    assert not (lake / "messages" / "_delta_log").exists()  # nothing of messages written
    assert not list((lake / "messages").rglob("*.parquet"))
    # The holder gives the lease back: the same run, here in this process, completes it.
    held.write_text(json.dumps({"holder": "x", "what": "messages", "host": "other-host",
                                "pid": 1, "expires": time.time() + 3600, "released": True}))
    run(spark, [path], str(lake))
    reference = _reference(archive["parts"][:1], [path])
    assert _verdicts(lake) == reference
    _lines_once(lake, len(reference))
