"""rocketsim.engine.numba_cache: one cache of the compiled engine, whatever path the package is imported
from (a Spark worker imports it from the zip spark-submit.sh ships into a new directory per run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from rocketsim.engine import numba_cache

ROOT = Path(__file__).resolve().parents[1]

# In a fresh process importing rocketsim from ``sys.argv[1]`` only: where numba keeps the engine, the
# stamp, and whether a small simulation loaded the send loop from the cache (no compilation).
_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from rocketsim.scenario import workload
from rocketsim.engine import compiled, numba_cache
from rocketsim.scenario import load_scenario
sc = load_scenario(sys.argv[2], ["workload.messages=200", "producers.count=1"])
list(compiled.simulate_chunks([workload.generate(sc)], sc))
print(json.dumps({
    "file": compiled.__file__,
    "stamp": numba_cache.core_sources_stamp(),
    "path": compiled.run_loop._cache._cache_path,
    "hits": sum(compiled.run_loop.stats.cache_hits.values()),
    "misses": sum(compiled.run_loop.stats.cache_misses.values()),
}))
"""


def _zipped_package(out: Path) -> Path:
    """The package zipped as spark-submit.sh ships it to the executors."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((ROOT / "rocketsim").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                zf.write(path, path.relative_to(ROOT).as_posix())
    return out


def _probe(source: Path, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": ""}
    scenario = str(ROOT / "conf" / "scenarios" / "steady.toml")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(source), scenario],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_engine_loads_from_the_cache_when_imported_from_a_zip_anywhere(tmp_path: Path) -> None:
    # numba's own zip locator keys the cache by the zip's path (a new temporary directory per Spark
    # application), so every run compiled the engine again in every worker
    checkout = _probe(ROOT, tmp_path)
    zipped = _probe(_zipped_package(tmp_path / "a" / "rocketsim.zip"), tmp_path)
    assert ".zip" in zipped["file"] and ".zip" not in checkout["file"]
    assert zipped["stamp"] == checkout["stamp"] == numba_cache.core_sources_stamp()
    assert zipped["path"] == checkout["path"] == str(Path(os.environ["NUMBA_CACHE_DIR"]) / "rocketsim-engine")
    assert zipped["hits"] >= 1 and zipped["misses"] == 0


def test_the_stamp_covers_every_core_source(tmp_path: Path) -> None:
    # a compiled function inlines its callees and freezes the constants it reads from other modules:
    # a change to any core source makes every entry stale
    package = ROOT / "rocketsim"
    names = {name for name, _ in numba_cache.core_sources(package)}
    outside = {f"{d}/" for d in numba_cache.OUTSIDE_CORE}
    expected = {
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if not any(str(p.relative_to(package)).startswith(o) for o in outside)
    }
    assert names == expected
    assert {"engine/compiled.py", "client/outcomes.py", "broker/latency.py", "errors.py"} <= names
    stamp = numba_cache.core_sources_stamp()
    assert len(stamp) == 64 and stamp == numba_cache.sources_stamp(package)
    copy = tmp_path / "rocketsim"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert numba_cache.sources_stamp(copy) == stamp
    (copy / "spark" / "session.py").write_text("# not core\n")
    assert numba_cache.sources_stamp(copy) == stamp
    (copy / "client" / "versions.py").write_text("# a constant changed\n")
    assert numba_cache.sources_stamp(copy) != stamp
