"""The Delta sink under concurrent readers (docs/design.md §6, §8): a reader that polls a run while reruns
of it commit sees the old or the new content, never a mix; and the fault-injection hook that the crash tests
use fires at exactly the documented points of a write."""

from __future__ import annotations

import hashlib
import signal
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from rocketsim.spark.delta_sink import write_run
from rocketsim.tables.schemas import SEND_RESULTS
from rocketsim.warehouse import delta
from rocketsim.warehouse.delta import CRASH_AT_ENV
from rocketsim.warehouse.read import read_arrow

pytestmark = pytest.mark.spark

TABLE = "send_results"
DATA_SCHEMA = pa.schema([f for f in SEND_RESULTS if f.name != "run_id"])  # every written column


def _rows(n: int, start: int) -> pa.Table:
    """n rows of send_results (without run_id), seq = start..start+n-1, other columns derived from it."""
    seq = pa.array(range(start, start + n), pa.int64())
    cols: dict[str, pa.Array] = {}
    for field in DATA_SCHEMA:
        t = field.type
        if field.name == "seq":
            cols[field.name] = seq
        elif pa.types.is_integer(t):
            cols[field.name] = pc.cast(pc.bit_wise_and(seq, 0x3FF), t)
        elif pa.types.is_floating(t):
            cols[field.name] = pc.cast(seq, t)
        elif pa.types.is_boolean(t):
            cols[field.name] = pc.equal(pc.bit_wise_and(seq, 1), 0)
        elif pa.types.is_string(t):
            cols[field.name] = pc.cast(seq, pa.string())
        elif pa.types.is_list(t):
            cols[field.name] = pa.array([["b"]] * n, t)
        else:
            raise AssertionError(f"no generator for {field.name}: {t}")
    return pa.table(cols, schema=DATA_SCHEMA)


def _digest(t: pa.Table) -> tuple[int, str]:
    """Row count and an order-independent checksum of the seq values (unique per row)."""
    seqs = sorted(t.column("seq").to_pylist())
    return t.num_rows, hashlib.sha256(repr(seqs).encode()).hexdigest()[:16]


def test_reader_during_rerun_commits_sees_old_or_new_never_a_mix(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    old, new = _rows(1500, 0), _rows(900, 100_000)
    expected = {_digest(old): "old", _digest(new): "new"}

    def frame(t: pa.Table) -> object:
        return spark.createDataFrame(t).repartition(3)

    # Many files per commit (maxRecordsPerFile): a reader that listed files mid-commit would see a mix.
    write_run(frame(old), warehouse, TABLE, "r1", SEND_RESULTS, max_records_per_file=100)
    write_run(frame(_rows(40, 900_000)), warehouse, TABLE, "other", SEND_RESULTS)

    seen: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append(_digest(read_arrow(warehouse, TABLE, "r1", columns=["seq"])))
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for data in (new, old):  # two rerun commits of r1 while the reader polls
            write_run(frame(data), warehouse, TABLE, "r1", SEND_RESULTS, max_records_per_file=100)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    mixed = [d for d in seen if d not in expected]
    assert not mixed, f"{len(mixed)} of {len(seen)} reads saw neither the old nor the new run: {mixed[:3]}"
    assert len(seen) >= 10 and {expected[d] for d in seen} == {"old", "new"}
    assert _digest(read_arrow(warehouse, TABLE, "r1")) == _digest(old)
    assert read_arrow(warehouse, TABLE, "other").num_rows == 40  # the other run is untouched


def test_crash_hook_fires_at_the_documented_points_only(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kills: list[str] = []

    def fake_kill(pid: int, sig: int) -> None:
        assert sig == signal.SIGKILL
        kills.append(next(s for s in delta.CRASH_STAGES if f"{TABLE}:{s}" in pending))

    monkeypatch.setattr(delta.os, "kill", fake_kill)
    warehouse = str(tmp_path / "wh")
    df = spark.createDataFrame(_rows(20, 0))
    for stage in delta.CRASH_STAGES:
        pending = {f"{TABLE}:{stage}"}
        monkeypatch.setenv(CRASH_AT_ENV, f"messages:written, {TABLE}:{stage}")
        write_run(df, warehouse, TABLE, "r1", SEND_RESULTS)
    assert kills == list(delta.CRASH_STAGES)
    monkeypatch.setenv(CRASH_AT_ENV, "messages:staged")
    pending = set()
    write_run(df, warehouse, TABLE, "r1", SEND_RESULTS)
    assert len(kills) == len(delta.CRASH_STAGES)  # another table's point does not fire here
