"""What the commands print, where a new user read it wrong: ``rocketsim validate``'s per-run line wrote a
5 s p99 as ``4.76e+03``; ``rocketsim report`` on an empty warehouse told a user of the command to run
``jobs/pipeline.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketsim.command import main, validate


@pytest.mark.parametrize(
    ("ms", "shown"),
    [(0.2934, "0.293"), (28.84, "28.8"), (143.2, "143"), (4760.4, "4,760"), (2393.0, "2,393")],
)
def test_validate_writes_latencies_as_the_readme_does(ms: float, shown: str) -> None:
    assert validate._ms(ms) == shown


def test_report_of_an_empty_warehouse_says_how_to_make_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--warehouse", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"no run in {tmp_path.resolve()}/run_summary" in line and "`rocketsim run --scenario FILE`" in line
    assert list(tmp_path.iterdir()) == []
