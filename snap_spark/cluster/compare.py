"""The batch job (``jobs/verify_messages.py``) through ``spark-submit`` on a given master,
and the lakes of two runs compared row for row: how the demo and the cluster test tell
that a cluster run landed what a ``local[*]`` run landed.

:func:`submit` here runs one application for such a comparison and collects its summary;
it is not :mod:`snap_spark.runtime.submit` (the ``snap-spark submit`` command, which hands the
process over to spark-submit for any job of ``jobs/``).

Examples:
    Two runs of one sample, then their tables::

        local = submit("local", "local[*]", [], driver_python=python,
                       executor_python=str(python), lake=Path("lakes/local"),
                       inputs=[sample], log_dir=Path("logs"))
        ...  # the same on spark://127.0.0.1:41235 into lakes/cluster
        compare_lakes(Path("lakes/local"), Path("lakes/cluster"))
        # {'raw_messages': 'equal (3000 rows)', 'messages': 'equal (3000 rows)'}
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snap_spark.cluster.common import PACKAGE_DIR, VERIFY_JOB, spark_home
from snap_spark.cluster.standalone import end_groups

#: The tables the demo compares (per-run columns dropped).
COMPARED_TABLES = ("raw_messages", "messages")
PER_RUN_COLUMNS = ("ingest_id", "ingest_time")


@dataclass
class Submitted:
    """One ``spark-submit`` of the batch job: exit status, times and its summary."""

    name: str
    returncode: int
    #: wall time of spark-submit (JVM, executors, Python workers, the job)
    seconds: float
    #: the job's own time, from its summary line (``None`` when it printed none)
    job_seconds: float | None
    lines_read: int | None
    summary: list[str]
    lake: str
    log: str
    #: the driver's progress lines (spark-submit prints them before the summary)
    progress: list[str] = field(default_factory=list)

    def normalized_summary(self) -> list[str]:
        """The summary without its timing: equal for equal runs.

        Examples:
            >>> Submitted("x", 0, 1.0, 1.0, 3, ["rows written: +3   (1.0s, 3 lines/s)"],
            ...           "", "").normalized_summary()
            ['rows written: +3']
        """
        return [re.sub(r"\s*\([\d.]+s, [\d,]+ lines/s\)", "", line) for line in self.summary]


def submit(name: str, master: str, args: Sequence[str], *, driver_python: Path,
           executor_python: str, lake: Path, inputs: Sequence[Path], log_dir: Path,
           env: dict[str, str] | None = None, timeout: float = 600.0) -> Submitted:
    """``spark-submit --master master [args] jobs/verify_messages.py --input ... --lake``,
    in its own process group (stopped if the caller is interrupted). Its stderr goes to
    ``log_dir/<name>.log``; stdout is the job's summary.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` (it was stopped).
    """
    conf = PACKAGE_DIR / "conf"
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master,
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", f"spark.pyspark.driver.python={driver_python}",
           "--conf", f"spark.pyspark.python={executor_python}"]
    if (conf / "spark-defaults.conf").exists():
        cmd += ["--properties-file", str(conf / "spark-defaults.conf")]
    if (conf / "log4j2.properties").exists():
        cmd += ["--driver-java-options",
                f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}"]
    cmd += [*args, str(VERIFY_JOB), *(a for i in inputs for a in ("--input", str(i))),
            "--lake", str(lake)]
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    run_env = dict(env if env is not None else os.environ)
    run_env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.perf_counter()
    with log_path.open("w") as err:
        err.write(" ".join(cmd) + "\n\n")
        err.flush()
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=err, text=True, env=run_env, cwd=log_dir,
                                   start_new_session=True)
        try:
            out, _ = process.communicate(timeout=timeout)
        except BaseException:
            end_groups([process.pid], 10)
            process.wait()
            raise
    seconds = time.perf_counter() - started
    # spark-submit merges the driver's stderr (progress lines) into its stdout: the summary
    # is what follows the progress, from its first line ("files: ...") on
    lines_out = [line for line in out.splitlines() if line.strip()]
    first = next((i for i, line in enumerate(lines_out) if line.startswith("files: ")),
                 len(lines_out))
    summary = lines_out[first:]
    job_seconds = lines = None
    for line in summary:
        timing = re.search(r"\(([\d.]+)s, [\d,]+ lines/s\)", line)
        if timing:
            job_seconds = float(timing.group(1))
        read = re.match(r"lines read: (\d+)", line)
        if read:
            lines = int(read.group(1))
    progress = [line for line in lines_out[:first] if line.startswith("[snap-spark ")]
    return Submitted(name, process.returncode, seconds, job_seconds, lines, summary,
                     str(lake), str(log_path), progress)


def table_rows(path: Path) -> list[dict[str, Any]]:
    """A Delta table's rows read with delta-rs, per-run columns dropped, in input order
    (``source_file``, ``line_no``).

    Example::

        table_rows(Path("data/lake/messages"))[0]["verdict"]     # 'valid'
    """
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(path))
    rows: list[dict[str, Any]] = pa.table(
        QueryBuilder().register("t", table).execute("select * from t").read_all()).to_pylist()
    for row in rows:
        for column in PER_RUN_COLUMNS:
            row.pop(column, None)
    return sorted(rows, key=lambda r: (r["source_file"], r["line_no"]))


def committed_by(lake: Path, tables: Sequence[str] = COMPARED_TABLES) -> dict[str, str]:
    """Per table, the engine of its latest commit (delta-rs's or Spark's Delta writer).

    Example::

        committed_by(Path("data/lake"))
        # {'raw_messages': 'delta-rs:py-1.6.6', 'messages': 'delta-rs:py-1.6.6'}
    """
    from deltalake import DeltaTable

    return {table: str(DeltaTable(str(lake / table)).history(1)[0].get("engineInfo"))
            for table in tables}


def compare_lakes(expected: Path, got: Path,
                  tables: Sequence[str] = COMPARED_TABLES) -> dict[str, str]:
    """Per table, ``"equal (N rows)"`` or what differs, comparing every row and column but
    the per-run ones.

    Example::

        compare_lakes(Path("lake-a"), Path("lake-b"))
        # {'raw_messages': 'equal (3000 rows)', 'messages': 'equal (3000 rows)'}
    """
    outcome: dict[str, str] = {}
    for table in tables:
        want, have = table_rows(expected / table), table_rows(got / table)
        if want == have:
            outcome[table] = f"equal ({len(want)} rows)"
            continue
        if len(want) != len(have):
            outcome[table] = f"{len(have)} rows, expected {len(want)}"
            continue
        first = next(i for i, (a, b) in enumerate(zip(want, have, strict=True)) if a != b)
        columns = sorted(k for k in want[first] if want[first][k] != have[first].get(k))
        outcome[table] = (f"rows differ from row {first} (line {want[first]['line_no']}), "
                          f"columns {columns}")
    return outcome

