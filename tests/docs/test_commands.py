"""The shell commands of the README and of ``docs/`` are run, as a reader would run them.

Every fenced ``bash`` block of ``README.md`` and ``docs/*.md`` carries, on the line right
before its opening fence, one of two marks:

- ``<!-- runnable -->``: :func:`test_a_page_s_runnable_blocks_run` runs the block with
  ``bash -e -o pipefail`` in a scratch workspace of that page (:func:`workspace`). The blocks
  of one page run in order in one workspace, so a later block may use what an earlier one
  wrote (``make run`` then ``make audit``). A page whose first block begins with the whole
  text of a first block run before, from an empty workspace, in the same run (``make run``
  opens the README's tour, the audit page and the task page) starts from what that block
  left and runs the rest: the commands are the same, on the same sample, so running them
  again would only land the same lake again (:func:`replayed_start`).
- ``<!-- not runnable: REASON -->``: a synopsis with placeholders, a command that needs a
  YARN or Kubernetes cluster, one that waits for a person; the reason is said.

A block with neither mark fails :func:`test_every_shell_block_says_whether_it_runs`, so no
command enters the docs without someone deciding that it is run or saying why not.
"""

from __future__ import annotations

import os
import re
import shutil
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


def _copy(source: Path, target: Path) -> None:
    """A file or a folder (its links kept as links)."""
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


@dataclass
class FirstBlocks:
    """What each page's first runnable block left in the workspace, kept for the pages run
    later in the same test run: the block's text and a copy of what it wrote."""

    root: Path
    left: dict[str, Path]

    def keep(self, text: str, ws: Path) -> None:
        """Copy what ``text``, run in the empty workspace ``ws``, wrote there."""
        kept = self.root / f"left-{len(self.left)}"
        kept.mkdir(parents=True)
        for entry in ws.iterdir():
            if entry.name not in LINKED:
                _copy(entry, kept / entry.name)
        self.left[text] = kept


def replayed_start(first: Block, kept: FirstBlocks, ws: Path) -> str | None:
    """When ``first`` begins with the whole text of a first block kept before, put what that
    block left into the empty workspace ``ws`` and return the rest of ``first`` to run
    (``""`` when nothing is left); ``None`` when no kept block begins it."""
    for text, left in kept.left.items():
        if first.text == text or first.text.startswith(text + "\n"):
            shutil.rmtree(ws / "data")
            for entry in left.iterdir():
                _copy(entry, ws / entry.name)
            return first.text[len(text):].lstrip("\n")
    return None


@pytest.fixture(scope="module")
def first_blocks(tmp_path_factory: pytest.TempPathFactory) -> FirstBlocks:
    return FirstBlocks(tmp_path_factory.mktemp("first-blocks"), {})


@pytest.fixture(scope="module")
def workspace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One path for every page's workspace (emptied in between): the lake's rows name the
    files they came from by absolute path, so a kept lake is used at the path it was
    landed at."""
    return tmp_path_factory.mktemp("docs") / "ws"


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[p.name for p in RUN_PAGES])
def test_a_page_s_runnable_blocks_run(page: Path, workspace_path: Path,
                                      first_blocks: FirstBlocks) -> None:
    """The page's runnable blocks, in order, in one workspace: each exits 0."""
    stale = setup_is_current()
    assert stale is None, stale
    if workspace_path.exists():
        shutil.rmtree(workspace_path)
    ws = workspace(workspace_path)
    env = run_environment()
    blocks = [b for b in shell_blocks(page) if b.runnable]
    rest = replayed_start(blocks[0], first_blocks, ws)
    for i, block in enumerate(blocks):
        text = rest if i == 0 and rest is not None else block.text
        if not text.strip():
            continue
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=ws,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (
            f"{block.where()} exited {done.returncode}\n--- block\n{text}\n"
            f"--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}")
        if i == 0 and rest is None:
            first_blocks.keep(block.text, ws)


def test_a_page_starts_from_a_kept_first_block_only_when_it_begins_with_it(
        tmp_path: Path) -> None:
    """:func:`replayed_start` takes a kept block's result only for a first block that begins
    with the kept block's whole lines, and leaves the rest of the block to run."""
    ws = workspace(tmp_path / "ws")
    (ws / "data" / "lake").mkdir()
    kept = FirstBlocks(tmp_path / "kept", {})
    kept.keep("make run", ws)
    shutil.rmtree(ws / "data")
    (ws / "data").mkdir()
    page = tmp_path / "page.md"

    def block(text: str) -> Block:
        return Block(page, 1, RUNNABLE, text)

    assert replayed_start(block("make run-nostr"), kept, ws) is None
    assert replayed_start(block("make runner\nmake run"), kept, ws) is None
    assert not (ws / "data" / "lake").exists()
    assert replayed_start(block("make run\nmake tasks"), kept, ws) == "make tasks"
    assert (ws / "data" / "lake").is_dir() and (ws / "Makefile").is_symlink()
    assert replayed_start(block("make run"), kept, ws) == ""
