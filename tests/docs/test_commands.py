"""The shell commands of the README and of ``docs/`` are run, as a reader would run them.

Every fenced ``bash`` block of ``README.md`` and ``docs/*.md`` carries, on the line right
before its opening fence, one of two marks:

- ``<!-- runnable -->``: :func:`test_a_page_s_runnable_blocks_run` runs the block with
  ``bash -e -o pipefail`` in a scratch workspace of that page (:func:`workspace`). The blocks
  of one page run in order in one workspace, so a later block may use what an earlier one
  wrote (``make run`` then ``make audit``).
- ``<!-- not runnable: REASON -->``: a synopsis with placeholders, a command that needs a
  YARN or Kubernetes cluster, one that waits for a person; the reason is said.

A block with neither mark fails :func:`test_every_shell_block_says_whether_it_runs`, so no
command enters the docs without someone deciding that it is run or saying why not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

RUNNABLE = "<!-- runnable -->"
NOT_RUNNABLE = re.compile(r"<!-- not runnable: (?P<reason>.+?) -->")
SHELL_FENCE = re.compile(r"^```(bash|sh|shell|console)\s*$")

#: What a workspace links from the checkout (everything `make` and the jobs read).
LINKED = ("Makefile", "pyproject.toml", "uv.lock", "jobs", "conf", "snap_spark", "native",
          "notebooks", "bench", ".venv", "LICENSE", "README.md")

#: ``make run``'s sample in the docs test: 3,000 messages instead of 100,000 (the same
#: Makefile variable a reader can set; the pages' commands do not name the sample's file).
MESSAGES = "3000"


@dataclass(frozen=True)
class Block:
    """One fenced shell block of a page: where it starts, its mark, its text."""

    page: Path
    line: int  # 1-based line of the opening fence
    mark: str | None  # the comment line before the fence, if it is one of the two marks
    text: str

    @property
    def runnable(self) -> bool:
        return self.mark == RUNNABLE

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def shell_blocks(page: Path) -> list[Block]:
    """The fenced shell blocks of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if SHELL_FENCE.match(lines[i]):
            before = lines[i - 1].strip() if i > 0 else ""
            mark = before if before == RUNNABLE or NOT_RUNNABLE.fullmatch(before) else None
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append(Block(page, i + 1, mark, "\n".join(lines[i + 1:end])))
            i = end + 1
        else:
            i += 1
    return blocks


def test_every_shell_block_says_whether_it_runs() -> None:
    """Each shell block is marked runnable or not runnable with a reason of some words."""
    unmarked = [b.where() for page in PAGES for b in shell_blocks(page) if b.mark is None]
    assert not unmarked, f"shell blocks without <!-- runnable --> or a reason: {unmarked}"
    for page in PAGES:
        for block in shell_blocks(page):
            match = NOT_RUNNABLE.fullmatch(block.mark or "")
            if match:
                assert len(match["reason"].split()) >= 2, f"say why: {block.where()}"
    assert any(b.runnable for b in shell_blocks(ROOT / "README.md")), "the README's tour runs"


def test_the_readme_starts_with_the_two_commands_and_stays_short() -> None:
    """The README's first block is ``make run`` and ``make test``; it is at most 250 lines."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = shell_blocks(ROOT / "README.md")[0]
    assert first.line <= 5, "the two set-up commands come first"
    assert [line.split("#")[0].strip() for line in first.text.splitlines()] == ["make run",
                                                                               "make test"]
    assert len(text.splitlines()) <= 250


LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def test_relative_links_of_the_pages_lead_to_files() -> None:
    """Every relative link of the README and ``docs/`` names a file or folder that exists
    (anchors aside); web links are not followed here."""
    broken = []
    for page in PAGES:
        for match in LINK.finditer(page.read_text(encoding="utf-8")):
            target = match["target"].split("#")[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {match['target']}")
    assert not broken, broken


def setup_is_current() -> str | None:
    """Why ``make setup`` would run again in a workspace, or ``None`` when it would not.

    A workspace links the checkout's ``.venv``: a ``make`` target there that found setup
    out of date would ``pip install -e`` the workspace into that environment, pointing its
    scripts at a folder the test then deletes. So the docs test runs only on a current
    setup (the stamp the Makefile writes for this ``pyproject.toml``, not older than it)."""
    venv = ROOT / ".venv"
    if not venv.is_dir():
        return f"no {venv}: run make setup first"
    with (ROOT / "pyproject.toml").open("rb") as handle:
        digest = subprocess.run(["cksum"], stdin=handle, capture_output=True, text=True,
                                check=True).stdout.split()[0]
    stamp = venv / f".installed-{digest}"
    if not stamp.exists():
        return f"{stamp.name} is missing (pyproject.toml changed): run make setup first"
    for name in ("pyproject.toml", "uv.lock"):
        if stamp.stat().st_mtime < (ROOT / name).stat().st_mtime:
            return f"{name} is newer than the last make setup: run make setup first"
    return None


def workspace(tmp: Path) -> Path:
    """A scratch checkout: the project's files linked in, an empty ``data/``."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if (ROOT / name).exists():
            (tmp / name).symlink_to(ROOT / name)
    (tmp / "data").mkdir()
    return tmp


def run_environment() -> dict[str, str]:
    """The reader's shell after ``. .venv/bin/activate``, with a smaller ``make run``."""
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({
        "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv_bin.parent),
        "MESSAGES": MESSAGES,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    env.pop("PYTHONPATH", None)
    return env


RUN_PAGES = [page for page in PAGES if any(b.runnable for b in shell_blocks(page))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[p.name for p in RUN_PAGES])
def test_a_page_s_runnable_blocks_run(page: Path, tmp_path: Path) -> None:
    """The page's runnable blocks, in order, in one workspace: each exits 0."""
    stale = setup_is_current()
    assert stale is None, stale
    ws = workspace(tmp_path / "ws")
    env = run_environment()
    for block in (b for b in shell_blocks(page) if b.runnable):
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=ws,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (
            f"{block.where()} exited {done.returncode}\n--- block\n{block.text}\n"
            f"--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}")
