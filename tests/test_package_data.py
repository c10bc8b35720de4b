"""What an installed package has: every data file the product reads is declared as package data
(pyproject.toml), and what the validation's ``--thread-split`` reads comes from the package, not from a
checkout's tests/data (``rocketsim.warehouse.thread_runs``)."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rocketsim"


def declared_data() -> dict[str, list[str]]:
    """pyproject.toml's package data: package name to its globs."""
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return doc["tool"]["setuptools"].get("package-data", {})


def is_declared(rel: Path, declared: dict[str, list[str]]) -> bool:
    package = ".".join(("rocketsim", *rel.parent.parts))
    return any(fnmatch.fnmatch(rel.name, glob) for glob in declared.get(package, ()))


def package_files() -> list[Path]:
    """The package's files as a checkout has them, relative to ``rocketsim/``, less compiled ones."""
    return sorted(
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def test_every_data_file_of_the_package_is_declared() -> None:
    declared = declared_data()
    data = [p for p in package_files() if p.suffix != ".py"]
    assert data, "the package ships its measured constants (rocketsim/calibration/thread_split.json)"
    assert [p for p in data if not is_declared(p, declared)] == []


def test_the_thread_split_is_read_from_the_package_alone(tmp_path: Path) -> None:
    # the package as a wheel installs it (its modules and declared data, nothing of the checkout) run from
    # another folder: the split --thread-split sets is there, the same as the checkout's
    declared = declared_data()
    site = tmp_path / "site"
    for rel in package_files():
        if rel.suffix == ".py" or is_declared(rel, declared):
            (site / "rocketsim" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(PACKAGE / rel, site / "rocketsim" / rel)
    code = (
        "import rocketsim.warehouse.thread_runs as t; s = t.read_thread_split(); "
        "print(t.THREAD_RUNS.exists(), s.other_threads, repr(s.other_share))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    from rocketsim.warehouse.thread_runs import derive_thread_split

    split = derive_thread_split()
    assert out.stdout.split() == ["False", str(split.other_threads), repr(split.other_share)]
