"""The notebooks under ``notebooks/`` run end to end on a real lake and show true numbers,
on a classic session and through Spark Connect; the notebook API (:mod:`snap_spark.api`)
gives the same answers on a Connect session as the checker and the tables.

Each notebook runs in a Jupyter kernel of this interpreter (nbclient, ipykernel), twice in
the same kernel so Spark starts once: on the ``full_lake`` fixture's lake (every table,
written by the real jobs), then on a copy of its batch tables only (what ``make run`` alone
leaves), where the Nostr sections must say what to run instead of failing. The figures the
notebook prints in its ``figures`` cell are checked against counts read here from the Delta
tables with delta-rs. It then runs once more, unchanged, in a kernel whose ``SPARK_REMOTE``
points at a real Spark Connect server (``tests/connect_server.py``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import nbformat
import pytest

import snap_spark
from tests.connect_server import ConnectServer

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NOSTR_TABLES = ("nostr_events", "agent_card_history", "agent_cards")
#: Figures that come from the batch tables alone (equal on both lakes).
BATCH_FIGURES = ("messages_by_verdict", "rejections_by_code", "tasks_by_state", "stuck_tasks",
                 "lake_clock", "illegal_transitions", "tasks_with_illegal_transitions",
                 "most_rejected_sender", "most_rejected_sender_rejections",
                 "most_rejected_sender_messages", "time_in_state")
NOSTR_FIGURES = ("standing_cards", "skill_offers", "impersonated_identities",
                 "impersonation_attempts")

# Switches a kernel that ran a notebook to another lake, as a fresh kernel would see it: the
# environment variable the notebook reads, and none of the previous lake's views left over.
SWITCH_LAKE = """
import os
from pyspark.sql import SparkSession
os.environ["SNAP_SPARK_LAKE"] = {lake!r}
_active = SparkSession.getActiveSession()
if _active is not None:
    for _view in _active.catalog.listTables():
        if _view.isTemporary:
            _active.catalog.dropTempView(_view.name)
"""


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _text(cell: Any) -> str:
    """Everything a cell printed or displayed as text."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


def _has_png(cell: Any) -> bool:
    return any("image/png" in output.get("data", {}) for output in cell.get("outputs", []))


def _figures(nb: Any) -> dict[str, Any]:
    cells = [cell for cell in nb.cells if "figures" in _tags(cell)]
    assert len(cells) == 1, "a notebook shows its key figures in one cell tagged 'figures'"
    streams = [o["text"] for o in cells[0].outputs
               if o.get("output_type") == "stream" and o.get("name") == "stdout"]
    figures: dict[str, Any] = json.loads("".join(streams))
    return figures


def _kernel_manager() -> Any:
    """A kernel manager whose ``python3`` kernel is ipykernel on this interpreter (the venv's,
    with this checkout's packages), whatever kernel specs the machine has installed."""
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class ThisInterpreter(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())

    manager = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=ThisInterpreter())
    assert manager.kernel_spec.argv[0] == sys.executable
    return manager


def _kernel_env(lake: Path, **extra: str) -> dict[str, str]:
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, SNAP_SPARK_LAKE=str(lake), PYTHONPATH=python_path,
                PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"), **extra)


def _run(path: Path, env: dict[str, str], *notebooks: Any) -> None:
    """Run ``notebooks`` (read from ``path``) one after the other in one kernel started with
    ``env`` (a cell error raises ``CellExecutionError`` with its traceback)."""
    from nbclient import NotebookClient

    client = NotebookClient(notebooks[0], km=_kernel_manager(), timeout=300,
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel(env=env):
        for notebook in notebooks:
            client.nb = notebook
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)


def _run_twice(path: Path, full: Path, batch_only: Path) -> tuple[Any, Any]:
    """Run the notebook on ``full``, then on ``batch_only`` in the same kernel; return both
    executed notebooks."""
    on_full = nbformat.read(path, as_version=4)
    on_batch = nbformat.read(path, as_version=4)
    on_batch.cells.insert(0, nbformat.v4.new_code_cell(SWITCH_LAKE.format(lake=str(batch_only))))
    _run(path, _kernel_env(full), on_full, on_batch)
    return on_full, on_batch


def _count(rows: list[Any]) -> dict[str, int]:
    return {str(key): n for key, n in sorted(Counter(rows).items())}


def _expected(lake: Path, stuck_after: int) -> dict[str, Any]:
    """The notebook's figures, computed here from the tables with delta-rs and Python."""
    from deltalake import DeltaTable

    from snap_spark.protocol.tasks import TERMINAL

    def rows(name: str, *columns: str) -> list[dict[str, Any]]:
        table = DeltaTable(str(lake / name)).to_pyarrow_table(columns=list(columns))
        listed: list[dict[str, Any]] = table.to_pylist()
        return listed

    messages = rows("messages", "verdict", "error_code", "sender", "timestamp")
    rejected = [m for m in messages if m["verdict"] == "rejected"]
    by_sender = Counter(m["sender"] for m in rejected if m["sender"] is not None)
    sender = min(by_sender, key=lambda s: (-by_sender[s], s))
    clock = max(m["timestamp"] for m in messages if m["verdict"] == "valid")

    events = rows("task_events", "task_id", "seq", "new_state", "applied", "anomaly",
                  "timestamp")
    illegal = [e for e in events if e["anomaly"] == "illegal_transition"]
    moves: dict[str, list[dict[str, Any]]] = {}
    for event in sorted(events, key=lambda e: (e["task_id"], e["seq"])):
        if event["applied"]:
            moves.setdefault(event["task_id"], []).append(event)
    stays: dict[str, dict[str, int]] = {}
    for task_moves in moves.values():
        for entered, left in pairwise(task_moves):
            stay = stays.setdefault(entered["new_state"], {"stays": 0, "total_seconds": 0})
            stay["stays"] += 1
            stay["total_seconds"] += left["timestamp"] - entered["timestamp"]
    last_report: dict[str, int] = {}
    for event in events:
        last_report[event["task_id"]] = max(event["timestamp"],
                                            last_report.get(event["task_id"], event["timestamp"]))
    tasks = rows("tasks", "task_id", "state")

    history = rows("agent_card_history", "verdict", "identity")
    attempts = [h["identity"] for h in history if h["verdict"] == "identity_mismatch"]
    cards = rows("agent_cards", "skills")
    return {
        "messages_by_verdict": _count([m["verdict"] for m in messages]),
        "rejections_by_code": _count([m["error_code"] for m in rejected]),
        "most_rejected_sender": sender,
        "most_rejected_sender_rejections": by_sender[sender],
        "most_rejected_sender_messages": sum(m["sender"] == sender for m in messages),
        "lake_clock": clock,
        "tasks_by_state": _count([t["state"] for t in tasks]),
        "stuck_tasks": sum(t["state"] not in TERMINAL
                           and clock - last_report[t["task_id"]] > stuck_after for t in tasks),
        "time_in_state": dict(sorted(stays.items())),
        "illegal_transitions": len(illegal),
        "tasks_with_illegal_transitions": len({e["task_id"] for e in illegal}),
        "impersonated_identities": len(set(attempts)),
        "impersonation_attempts": len(attempts),
        "standing_cards": len(cards),
        "skill_offers": sum(len(c["skills"] or []) for c in cards),
    }


def test_notebooks_are_stored_without_outputs() -> None:
    assert NOTEBOOKS, "notebooks/ holds no notebook"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_shows_the_tables_figures(path: Path, full_lake: Any,
                                                     tmp_path: Path) -> None:
    batch_only = tmp_path / "lake"
    shutil.copytree(full_lake.lake, batch_only, ignore=lambda _dir, names: [
        n for n in names if _dir == str(full_lake.lake) and n in NOSTR_TABLES])

    on_full, on_batch = _run_twice(path, full_lake.lake, batch_only)

    charts = [cell for cell in on_full.cells if "chart" in _tags(cell)]
    assert charts, "chart cells are tagged 'chart'"
    for cell in charts:
        assert _has_png(cell), f"chart cell drew nothing:\n{cell.source}\n{_text(cell)}"

    if not any("figures" in _tags(cell) for cell in on_full.cells):
        return  # a notebook without key figures: running cleanly with its charts is the test
    figures = _figures(on_full)
    expected = _expected(full_lake.lake, figures["stuck_after_seconds"])
    assert {key: figures.get(key) for key in expected} == expected
    assert figures["pandas_matches_spark"] is True
    # the sample holds every kind of trouble, so none of these checks passes on zeros
    assert len(expected["rejections_by_code"]) >= 5
    assert expected["impersonated_identities"] > 0 and expected["illegal_transitions"] > 0
    assert expected["stuck_tasks"] > 0

    # only the batch tables: the Nostr sections say what to run, the others are unchanged
    printed = "".join(_text(cell) for cell in on_batch.cells)
    assert "make run-nostr" in printed
    figures_batch = _figures(on_batch)
    assert not set(NOSTR_FIGURES) & set(figures_batch)
    assert {k: figures_batch.get(k) for k in BATCH_FIGURES} == {
        k: figures[k] for k in BATCH_FIGURES}
    drawn = sum(_has_png(cell) for cell in on_batch.cells if "chart" in _tags(cell))
    assert 0 < drawn < len(charts)


# ------------------------------------------------------------------ through Spark Connect


@pytest.fixture(scope="module")
def connect_server() -> Iterator[ConnectServer]:
    """A real Spark Connect server (with Delta) for this file's Connect tests."""
    with ConnectServer() as server:
        yield server


@pytest.mark.spark
@pytest.mark.slow
def test_lake_notebook_runs_unchanged_through_spark_connect(
        connect_server: ConnectServer, full_lake: Any) -> None:
    path = ROOT / "notebooks" / "explore_lake.ipynb"
    notebook = nbformat.read(path, as_version=4)
    _run(path, _kernel_env(full_lake.lake, SPARK_REMOTE=connect_server.url), notebook)

    printed = "".join(_text(cell) for cell in notebook.cells)
    assert "views: agent_card_history, agent_cards" in printed, printed[:2000]
    assert all(_has_png(cell) for cell in notebook.cells if "chart" in _tags(cell))
    figures = _figures(notebook)
    expected = _expected(full_lake.lake, figures["stuck_after_seconds"])
    assert {key: figures.get(key) for key in expected} == expected
    assert figures["pandas_matches_spark"] is True
    assert f"session: Spark Connect at {connect_server.url}" in printed


def _api_inputs(full_lake: Any, scratch: Path) -> dict[str, Any]:
    from snap_spark.samples.messages import SampleConfig, generate
    from tests.udf.test_sql_udfs import _bare_clock, _invalid_addresses
    from tests.unit.helpers import ADDR_C_TEST

    sample = [line for line, _ in generate(SampleConfig(
        agents=4, messages=300, seed=31, attack_share=0.4, bare_share=0.15,
        testnet_share=0.3))]
    garbage: list[bytes | None] = [None, b"", b"\xff\xfe{not utf-8", b'{"id": ', b"[" * 5000,
                                   b'{"version": 1, "id": []}']
    lines = sample + garbage
    received = [None if raw is None else _bare_clock(raw) for raw in lines]
    vectors = json.loads((ROOT / "tests" / "vectors" / "jcs-payloads.json").read_text())
    keys = json.loads((ROOT / "tests" / "vectors" / "key-encoding.json").read_text())
    return {
        "lines": [[None if raw is None else base64.b64encode(raw).decode(), r]
                  for raw, r in zip(lines, received, strict=True)],
        "payloads": [json.dumps(v["input"], indent=2, ensure_ascii=False)
                     for v in vectors["vectors"]] + ["{", "[" * 300 + "]" * 300, None],
        "addresses": [v["p2trAddress"] for v in keys["vectors"]] + _invalid_addresses()
        + [ADDR_C_TEST, None],
        "traffic": str(full_lake.traffic), "lake": str(full_lake.lake),
        "scratch": str(scratch / "not-written"),
    }


def _table_rows(lake: Path, name: str) -> list[str]:
    """A table's rows read by delta-rs, each as sorted JSON (bytes as base64), sorted."""
    from deltalake import DeltaTable

    from tests.operate.connect_client import _jsonable

    rows = DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist()
    return sorted(json.dumps(_jsonable(row), sort_keys=True) for row in rows)


@pytest.mark.spark
@pytest.mark.slow
def test_notebook_api_on_spark_connect(connect_server: ConnectServer, full_lake: Any,
                                       spark: Any, tmp_path: Path) -> None:
    """Every entry point of snap_spark.api from a child process's Connect session, against
    the checker, the spec's vectors, the classic session and the tables read by delta-rs."""
    from snap_spark.protocol.checker import check_lines
    from snap_spark.protocol.validate import ReceiptClock
    from snap_spark.udfs.sql import UDF_NAMES
    from tests.operate.connect_client import SPARK_READ
    from tests.udf.test_sql_udfs import _assert_matches, reference

    given = _api_inputs(full_lake, tmp_path)
    (tmp_path / "in.json").write_text(json.dumps(given))
    done = subprocess.run(
        [sys.executable, "-m", "tests.operate.connect_client", connect_server.url,
         str(tmp_path / "in.json"), str(tmp_path / "out.json")],
        # TZ: PySpark gives timestamps as naive datetimes of the client's local time zone
        cwd=ROOT, env=_kernel_env(full_lake.lake, TZ="UTC"), capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-6000:] + connect_server.log()
    got = json.loads((tmp_path / "out.json").read_text())
    print("Connect client steps (s):", got["timings"])
    assert got["connect"] is True
    assert got["column_kinds"] == ["pyspark.sql.connect.column"]  # not classic, JVM columns

    functions = got["functions"]
    assert functions["registered"] == list(UDF_NAMES)
    lines = [(None if raw is None else base64.b64decode(raw), r) for raw, r in given["lines"]]
    assert len(functions["verify_sql"]) == len(lines)
    for row, other, (raw, received) in zip(functions["verify_sql"], functions["verify_df"],
                                           lines, strict=True):
        if raw is None:  # SQL NULL, not a line: documented apart from the checker's cases
            assert (row["verdict"], row["error_code"], row["error_detail"]) == (
                "rejected", 1003, "raw_line is NULL")
        else:
            _assert_matches(row, reference(raw, received), raw)
        assert other == row
    codes = {row["error_code"] for row in functions["verify_sql"]}
    assert {None, 1003, 2001, 2004, 2005} <= codes, codes
    vectors = json.loads((ROOT / "tests" / "vectors" / "jcs-payloads.json").read_text())
    expected_jcs = [v["expected"] for v in vectors["vectors"]] + [None, None, None]
    assert functions["canonical_sql"] == functions["canonical_df"] == expected_jcs
    # the P2TR decodes equal the classic session's (tests/udf checks those against the spec)
    snap_spark.register_udfs(spark)
    classic = spark.createDataFrame(list(enumerate(given["addresses"])), "i BIGINT, a STRING")
    classic_keys = [None if r.k is None else r.k.asDict() for r in classic.orderBy("i")
                    .selectExpr("snap_p2tr_key(a) AS k").collect()]
    assert functions["p2tr_sql"] == functions["p2tr_df"] == classic_keys
    assert sum(1 for k in classic_keys if k and k["valid"]) >= 5

    # the transforms: the checker's final verdicts of the traffic file, line by line
    raws = Path(full_lake.traffic).read_bytes().split(b"\n")[:-1]
    verdicts = check_lines(raws, ReceiptClock("message"))
    want = [[v.line_no, v.verdict, v.error_code] for v in verdicts]
    for name in ("stepwise", "read_messages"):
        assert [row[:3] for row in got["transforms"][name]] == want, name
    assert any(row[2] == 2006 for row in got["transforms"]["read_messages"])

    # every table of the lake, and the directory through the server's Delta read, equal to
    # delta-rs's
    tables = got["tables"]
    assert all(tables["present"].values()), tables["present"]
    assert sorted(tables["local"]) == sorted(tables["present"])
    assert sorted(tables["spark_"]) == sorted(SPARK_READ)
    for way, names in (("local", tables["present"]), ("spark_", SPARK_READ)):
        for name in names:
            rows = sorted(json.dumps(row, sort_keys=True) for row in tables[way][name])
            assert rows == _table_rows(full_lake.lake, name), (way, name)

    for name, said in got["refusals"].items():
        assert said.startswith(("the batch job", "the task rebuild")), (name, said)
        assert "spark-submit jobs/" in said and "\n" not in said
    assert not Path(given["scratch"]).exists()  # nothing was written
    assert got["params"] == {"n": 42, "k": 2}

