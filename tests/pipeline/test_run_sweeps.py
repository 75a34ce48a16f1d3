"""Sweeps of crash leftovers (:func:`snap_spark.pipeline.runs.clean_leftovers`) while other
runs start, end and sweep the same lake: real files, real threads.

Seen in the suite (2026-11-29): of four batch jobs started at once on one lake, one exited
2 with ``[Errno 2] No such file or directory: '<lake>/_snap_runs/<id>.json'``. Its sweep
had listed the markers, and a run that ended meanwhile removed its own before the sweep
read it. Two runs sweeping one dead run's leftovers at once failed likewise: both deleted
its staging folder, and the slower one's walk met entries the other had removed."""

from __future__ import annotations

import threading
from pathlib import Path

from snap_spark.pipeline.runs import (
    RUNS_FOLDER,
    STAGING_FOLDER,
    RunMarker,
    clean_leftovers,
    file_prefix,
)

#: A process id no process has here (above Linux's largest, 2**22): a run that is over.
GONE_PID = 2**22 + 17


def dead_run(lake: Path, ingest_id: str, files: int = 5) -> list[Path]:
    """A killed run's marker, staging files and an uncommitted ``tasks`` file; the files."""
    runs = lake / RUNS_FOLDER
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{ingest_id}.json").write_bytes(RunMarker(ingest_id, pid=GONE_PID).to_json())
    staging = lake / STAGING_FOLDER / ingest_id / "messages"
    staging.mkdir(parents=True)
    left = [staging / f"part-{i}.parquet" for i in range(files)]
    (lake / "tasks").mkdir(exist_ok=True)
    left.append(lake / "tasks" / f"{file_prefix(ingest_id, 't-0')}-x.parquet")
    for path in left:
        path.write_bytes(b"PAR1")  # no footer: killed while writing it
    return left


def test_a_sweep_passes_over_markers_their_runs_remove_while_it_reads(tmp_path: Path) -> None:
    """Runs of this process start and end (marker written, then removed) all the while
    sweeps run: no sweep fails, each leaves the live runs alone, and the first one still
    removes a dead run's leftovers."""
    lake = tmp_path / "lake"
    left = dead_run(lake, "d" * 32)
    runs = lake / RUNS_FOLDER
    stop = threading.Event()
    cycles = [0]

    def runs_come_and_go() -> None:
        while not stop.is_set():
            ingest_id = f"{cycles[0] % 40:032x}"
            marker = runs / f"{ingest_id}.json"
            marker.write_bytes(RunMarker(ingest_id).to_json())  # this process: running
            marker.unlink()
            cycles[0] += 1

    churn = threading.Thread(target=runs_come_and_go)
    churn.start()
    try:
        first = clean_leftovers(str(lake))
        for _ in range(1500):
            later = clean_leftovers(str(lake))
            assert later.runs == [] and later.files == []
            assert all(int(i, 16) < 40 for i in later.running)  # only the live ones
    finally:
        stop.set()
        churn.join()
    assert cycles[0] > 100  # the runs did come and go during the sweeps
    assert first.runs == ["d" * 32]
    assert first.files == [str(left[-1])]
    assert not any(path.exists() for path in left)


def test_two_sweeps_at_once_remove_a_dead_runs_leftovers_and_neither_fails(
        tmp_path: Path) -> None:
    """Two runs start on a lake where 40 killed runs left files, and sweep at the same
    moment: both complete, and nothing of the dead runs is left."""
    for attempt in range(8):
        lake = tmp_path / f"lake-{attempt}"
        left = [path for i in range(40) for path in dead_run(lake, f"{i:032x}")]
        failures, cleaned = sweep_twice_at_once(lake)
        assert not failures, failures
        assert set.union(*cleaned) == {f"{i:032x}" for i in range(40)}
        assert not any(path.exists() for path in left)
        assert list((lake / RUNS_FOLDER).iterdir()) == []
        assert list((lake / STAGING_FOLDER).iterdir()) == []


def sweep_twice_at_once(lake: Path) -> tuple[list[BaseException], list[set[str]]]:
    """Two threads sweep ``lake`` from the same moment; what failed, what each cleaned."""
    start = threading.Barrier(2)
    failures: list[BaseException] = []
    cleaned: list[set[str]] = []

    def sweep() -> None:
        start.wait()
        try:
            cleaned.append(set(clean_leftovers(str(lake)).runs))
        except BaseException as exc:  # the test's finding: reported by the caller
            failures.append(exc)

    sweeps = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in sweeps:
        thread.start()
    for thread in sweeps:
        thread.join()
    return failures, cleaned
