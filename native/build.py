"""Build the native checking core (``snap_spark._native``) and put it beside the package.

maturin builds ``native/`` as an abi3 wheel; the extension module inside it is copied to
``snap_spark/`` so that the checkout (and every Spark worker started from it) imports it.
Without cargo it says so in one line and exits 0: snap-spark then checks with its Python
core (the reference), only slower.

Usage: python native/build.py [--debug]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    if shutil.which("cargo") is None:
        print("native: cargo not found; snap-spark will check with its Python core "
              "(install Rust from https://rustup.rs and run `make native` for the native core)")
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "maturin", "build", "--quiet",
                   "--manifest-path", str(ROOT / "native" / "Cargo.toml"), "--out", out]
        if "--debug" not in argv:
            command.append("--release")
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            print("native: the build failed (above); snap-spark will check with its Python core")
            return 1
        wheels = list(Path(out).glob("*.whl"))
        if len(wheels) != 1:
            print(f"native: expected one wheel from maturin, found {len(wheels)}")
            return 1
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = [n for n in wheel.namelist()
                     if Path(n).name.startswith("_native.") and n.endswith(".so")]
            if len(names) != 1:
                print(f"native: no extension module in {wheels[0].name}")
                return 1
            for old in (ROOT / "snap_spark").glob("_native*.so"):
                old.unlink()
            target = ROOT / "snap_spark" / Path(names[0]).name
            target.write_bytes(wheel.read(names[0]))
    print(f"native: built {target.relative_to(ROOT)} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
