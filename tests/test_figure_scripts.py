"""The modules that re-make the docs' figures (``python -m rocketsim.present.grpc_compare docs``, ...) take
``--help`` before they simulate for minutes: it said nothing and simulated, then wrote into a folder named
``--help``."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

MODULES = ("grpc_compare", "autobatch_compare", "closed_loop")


@pytest.mark.parametrize("name", MODULES)
def test_help_says_what_it_makes_and_runs_nothing(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = importlib.import_module(f"rocketsim.present.{name}")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert f"python -m rocketsim.present.{name} [-h] [OUT_DIR]" in text and module.__doc__.split()[0] in text
    with pytest.raises(SystemExit) as bad:
        module.main(["docs", "more"])
    assert bad.value.code == 2
    assert list(tmp_path.iterdir()) == []
