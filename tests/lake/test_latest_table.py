"""``latest_table``: a table kept per thread and brought up to date, never a stale one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from snap_spark.lake.delta_log import latest_table, open_table, table_version


def _values(path: str) -> list[int]:
    table = latest_table(path)
    assert table is not None
    return sorted(table.to_pyarrow_table().column("n").to_pylist())


def test_it_sees_every_commit_a_fresh_open_sees(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"n": [0]}))
    assert _values(path) == [0]
    for n in range(1, 4):
        write_deltalake(path, pa.table({"n": [n]}), mode="append")
        fresh = open_table(path)
        assert fresh is not None
        assert table_version(path) == fresh.version() == n
        assert _values(path) == sorted(fresh.to_pyarrow_table().column("n").to_pylist())


def test_a_commit_by_another_process_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"n": [1]}))
    assert table_version(path) == 0
    subprocess.run([sys.executable, "-c",
                    "import pyarrow as pa, sys; from deltalake import write_deltalake; "
                    "write_deltalake(sys.argv[1], pa.table({'n': [2]}), mode='append')", path],
                   check=True)
    assert table_version(path) == 1
    assert _values(path) == [1, 2]


def test_a_table_deleted_and_created_again_is_opened_afresh(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for n in range(3):
        write_deltalake(path, pa.table({"n": [n]}), mode="append")
    assert _values(path) == [0, 1, 2]
    shutil.rmtree(path)
    assert latest_table(path) is None and table_version(path) == -1
    # created again, and brought past the version held before: its rows, not the old ones
    for n in range(10, 15):
        write_deltalake(path, pa.table({"n": [n]}), mode="append")
    assert table_version(path) == 4
    assert _values(path) == [10, 11, 12, 13, 14]


def test_a_table_replaced_at_the_version_held_is_opened_afresh(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"n": [1]}))
    assert _values(path) == [1]
    shutil.rmtree(path)
    write_deltalake(path, pa.table({"n": [7, 8]}))  # version 0 again, other rows
    assert _values(path) == [7, 8]


def test_each_thread_gets_its_own_object(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"n": [1]}))
    mine = latest_table(path)
    assert latest_table(path) is mine
    theirs: list[object] = []
    worker = threading.Thread(target=lambda: theirs.append(latest_table(path)))
    worker.start()
    worker.join()
    assert theirs[0] is not None and theirs[0] is not mine
