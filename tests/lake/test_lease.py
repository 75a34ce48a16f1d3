"""The lake's commit lease: one holder at a time, dead holders taken over, a clear give-up.

Real files on the local file system (the conditional put on S3: tests/storage/test_lease_s3.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from snap_spark.lake import CommitContention
from snap_spark.lake.lease import (
    LEASE_FOLDER,
    LEASE_SECONDS_ENV,
    _name,
    check_held,
    commit_lease,
)


def _plant(lake: Path, number: int, **record: object) -> None:
    """A lease file as another writer would have left it."""
    folder = lake / LEASE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    base = {"holder": "someone", "what": "messages", "host": socket.gethostname(),
            "pid": os.getpid(), "expires": time.time() + 600, "released": False}
    (folder / _name(number)).write_text(json.dumps({**base, **record}))


def test_one_holder_at_a_time_among_racing_threads(tmp_path: Path) -> None:
    inside = 0
    most = 0
    entered = 0
    guard = threading.Lock()

    def writer() -> None:
        nonlocal inside, most, entered
        for _ in range(5):
            with commit_lease(str(tmp_path), "messages"):
                with guard:
                    inside += 1
                    entered += 1
                    most = max(most, inside)
                time.sleep(0.005)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert entered == 20 and most == 1
    # every taking is a new number; the newest is released, old files are forgotten
    files = sorted((tmp_path / LEASE_FOLDER).glob("*.json"))
    newest = json.loads(files[-1].read_text())
    assert files[-1].name == _name(19) and newest["released"] is True
    assert len(files) <= 9


def test_the_holder_may_enter_again_without_waiting(tmp_path: Path) -> None:
    with commit_lease(str(tmp_path), "messages") as outer, \
            commit_lease(str(tmp_path), "tasks", wait=0.5) as inner:
        assert inner is outer


def test_a_live_holder_makes_a_writer_give_up_with_one_line(tmp_path: Path) -> None:
    _plant(tmp_path, 4, host="elsewhere", pid=1, what="refresh_tasks")
    started = time.monotonic()
    with pytest.raises(CommitContention) as refused, commit_lease(str(tmp_path), "messages",
                                                                  wait=1.0):
        pytest.fail("the lease was taken from a live holder")
    assert 1.0 <= time.monotonic() - started < 10
    message = str(refused.value)
    assert "\n" not in message
    assert str(tmp_path) in message and "busy" in message
    assert "refresh_tasks of pid 1 on elsewhere" in message


def test_an_expired_lease_of_another_host_is_taken_over(tmp_path: Path) -> None:
    _plant(tmp_path, 7, host="elsewhere", pid=1, expires=time.time() - 1)
    with commit_lease(str(tmp_path), "messages", wait=5) as held:
        assert held.number == 8


def test_a_lease_of_a_dead_process_of_this_host_is_taken_over_at_once(tmp_path: Path
                                                                       ) -> None:
    # A writer that took the lease and was SIGKILLed: its file says "held" for ten minutes.
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from snap_spark.lake.lease import commit_lease\n"
         "with commit_lease(sys.argv[1], 'messages'):\n"
         "    print('held', flush=True); time.sleep(600)\n", str(tmp_path)],
        stdout=subprocess.PIPE, env={**os.environ, LEASE_SECONDS_ENV: "600"})
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"held"
    with pytest.raises(CommitContention), commit_lease(str(tmp_path), "messages", wait=0.5):
        pytest.fail("taken while its holder lives")
    child.kill()
    child.wait(30)
    started = time.monotonic()
    with commit_lease(str(tmp_path), "messages", wait=30) as held:
        assert held.number == 1
    assert time.monotonic() - started < 5  # not the ten minutes of its record


def test_a_holder_renews_its_lease_while_it_works(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEASE_SECONDS_ENV, "0.6")
    with commit_lease(str(tmp_path), "messages") as held:
        record = tmp_path / LEASE_FOLDER / _name(held.number)
        first = json.loads(record.read_text())["expires"]
        time.sleep(1.2)  # two lease lengths: without a heartbeat it would have expired
        renewed = json.loads(record.read_text())["expires"]
        assert renewed > first and renewed > time.time()
        with pytest.raises(CommitContention):
            # another thread is another writer: it must not get in
            threading_result: list[BaseException] = []

            def other() -> None:
                try:
                    with commit_lease(str(tmp_path), "messages", wait=0.5):
                        pass
                except BaseException as error:
                    threading_result.append(error)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join(30)
            raise threading_result[0]


def test_a_store_without_create_if_absent_takes_no_lease(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with commit_lease("gs://bucket/lake", "messages") as held:
        assert held.number == -1
        check_held(held)  # nothing to lose
    assert "one writer at a time" in capsys.readouterr().err


def test_lease_files_deleted_while_listed_do_not_fail_the_listing(tmp_path: Path) -> None:
    """A holder deletes old lease files (``_forget_old``) while another writer lists the
    folder: the listing must list again, not raise (seen once, under load, as a
    FileNotFoundError out of ``commit_lease``). A thread creates and deletes files as fast
    as it can while this one lists, so the race is hit many times a second."""
    from snap_spark.lake.lease import _numbers

    folder = tmp_path / LEASE_FOLDER
    folder.mkdir()
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            for k in range(n, n + 20):
                (folder / _name(k)).write_text("{}")
            for k in range(n, n + 20):
                (folder / _name(k)).unlink()
            n += 20

    thread = threading.Thread(target=churn)
    thread.start()
    listed = 0
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            numbers = _numbers(str(tmp_path))
            assert numbers == sorted(numbers)
            listed += 1
    finally:
        stop.set()
        thread.join(10)
    assert listed > 100
