"""The shipped pipeline benchmark runs end to end as a command and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_bench_pipeline_command_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "rocketsim.bench", "pipeline", "--sizes", "2000,4000", "--repeat", "1"]
    done = subprocess.run(
        [*cmd, "--json", str(out)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [(r["workload"], r["messages"]) for r in rows] == [
        ("even", 2000),
        ("even", 4000),
        ("hot 0.5", 4000),
    ]
    for r in rows:
        assert r["floor_s"] > 0 and r["rocketsim_s"] > 0
        assert r["ratio"] == pytest.approx(r["rocketsim_s"] / r["floor_s"], rel=0.02)
        assert r["attempts"] >= r["messages"]
        assert r["driver_peak_mib"] > 100 and r["workers_peak_mib"] > 10
    assert set(report["targets"]) == {
        "ratio at 4,000",
        "time x from 2,000 to 4,000",
        "driver RSS x from 2,000 to 4,000",
    }
    assert "ratio at 4,000" in done.stdout and "workers MiB" in done.stdout
