"""The second host's reruns (tests/data/realbroker-reruns/second_host): ``gc_copy.py`` reads what the
driver's G1 copied and the CPU its workers took from a JDK 17 log of ``-Xlog:gc*=info,gc+phases=debug``
(``G1GCPhaseTimes``' ``Copied Bytes`` and ``GC Worker Total``, ``GCTraceCPUTime``'s ``User``/``Sys``/``Real``)
and the run's per-thread samples."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "data" / "realbroker-reruns" / "second_host"


def _gc_copy():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gc_copy", HERE / "gc_copy.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["gc_copy"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_collections_read_as_the_log_states_them() -> None:
    rows = _gc_copy().collections(str(HERE / "gc" / "st43j.gcd.log.gz"))
    # GC(6): "Pause Young (Normal) (G1 Evacuation Pause) 201M->189M(1024M) 226.936ms", its two workers'
    # "Copied Bytes ... Sum: 40590824" and "GC Worker Total (ms): ... Sum: 442.97", "User=0.23s Sys=0.00s"
    six = rows[6]
    assert (six["kind"], six["before"], six["after"], six["pause_ms"]) == ("Young", 201, 189, 226.936)
    assert six["copied_kib"] == pytest.approx(40_590_824 / 1024)
    assert six["workers_ms"] == 442.97 and six["cpu_ms"] == pytest.approx(230.0)
    assert any(
        r["kind"] == "Full" for r in rows.values()
    )  # its backlog (the broker cold) filled the 1 GiB heap


def test_the_collector_copies_at_three_to_four_us_a_kib(capsys: pytest.CaptureFixture[str]) -> None:
    gc_copy = _gc_copy()
    gc_copy.main([str(HERE / "gc" / "ov52p.gcd.log.gz"), str(HERE / "threads" / "ov52p.samples.csv.gz"),
                  "--from", "4", "--to", "20"])  # fmt: skip
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("GC(4..20) ['Young']: 1,531 ms paused") and "544 MiB copied" in last
    per_kib = float(last.split("copied: ")[1].split(" us")[0])
    cores = float(last.split(", ")[-1].split(" cores")[0])
    assert 3.0 < per_kib < 4.0 and 1.0 < cores < 1.4  # the model's calibrated 0.53 us a KiB is far below
