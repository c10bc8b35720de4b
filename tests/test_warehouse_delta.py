"""The deltalake half of the sink and the Arrow readers, without Spark (:mod:`rocketsim.warehouse`): files
a task wrote with pyarrow into staging are committed as one write and published as the run's, a rerun
replaces exactly that run, a failed commit leaves nothing behind, orphans are vacuumed, the log's
statistics tell which files may hold a producer, and a file that breaks the declared schema (nulls in a
non-nullable column included) is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rocketsim.tables import schemas
from rocketsim.warehouse import list_runs, list_tables, read_arrow
from rocketsim.warehouse.delta import WriteReport, commit_written, stage_written
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import DeltaSinkError, check_run_id, new_write_id, partition_dir, staging_path
from rocketsim.warehouse.read import run_file_ranges
from rocketsim.warehouse.run_commit import TableWrite, publish_writes, remove_superseded
from rocketsim.warehouse.vacuum import vacuum

SCHEMA = schemas.ISOLATION_INTERVALS
DATA = schemas.data_schema(SCHEMA)


def _rows(producers: list[int], start: int = 0) -> pa.Table:
    n = len(producers)
    return pa.table(
        {
            "producer": pa.array(producers, pa.int32()),
            "broker": [f"broker-{i % 3}" for i in range(n)],
            "start_ms": pa.array(range(start, start + n), pa.int64()),
            "end_ms": pa.array(range(start + 10, start + 10 + n), pa.int64()),
        },
        schema=DATA,
    )


def _stage(warehouse: str, parts: list[pa.Table], table: str = "isolation_intervals") -> str:
    write_id = new_write_id()
    staging = staging_path(warehouse, table, write_id)
    Path(staging).mkdir(parents=True)
    for i, part in enumerate(parts):
        write_parquet(part, f"{staging}/part-p{i:06d}.parquet")
    return write_id


def commit_and_publish(
    warehouse: str, table: str, run_id: str, schema: pa.Schema, write_id: str
) -> tuple[WriteReport, int]:
    """A table's write committed, published as the run's; the report and the superseded files removed."""
    report = commit_written(warehouse, table, run_id, schema, write_id)
    publish_writes(warehouse, run_id, "test", [TableWrite(table, report.write_id, report.rows)])
    return report, remove_superseded(warehouse, run_id, [table]).get(table, 0)


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("run_id", "ascending"), ("start_ms", "ascending")])


def test_task_files_commit_as_one_run_and_a_rerun_replaces_it(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    first = [_rows([0, 0, 0]), _rows([1, 1], 100), _rows([], 200)]
    report, removed = commit_and_publish(wh, "isolation_intervals", "r1", SCHEMA, _stage(wh, first))
    assert (report.rows, report.files, report.version, removed) == (5, 2, 1, 0)  # empty: no file
    commit_and_publish(wh, "isolation_intervals", "r2", SCHEMA, _stage(wh, [_rows([7])]))
    got = read_arrow(wh, "isolation_intervals", "r1")
    assert got.schema.equals(SCHEMA)
    assert _sorted(got).drop_columns(["run_id"]).equals(pa.concat_tables(first).cast(DATA))
    assert set(got.column("run_id").to_pylist()) == {"r1"}

    again, removed = commit_and_publish(
        wh, "isolation_intervals", "r1", SCHEMA, _stage(wh, [_rows([4], 500)])
    )
    assert (again.rows, removed) == (1, 2)
    assert read_arrow(wh, "isolation_intervals", "r1").column("producer").to_pylist() == [4]
    assert read_arrow(wh, "isolation_intervals", "r2").num_rows == 1
    assert list_runs(wh) == ["r1", "r2"] and list_tables(wh) == ["isolation_intervals", "run_commits"]
    assert not list((tmp_path / "wh" / "isolation_intervals" / "_staging").iterdir())  # moved


def test_footer_statistics_tell_which_files_hold_a_producer(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    commit_and_publish(wh, "isolation_intervals", "r1", SCHEMA, _stage(wh, [_rows([0, 2]), _rows([3, 3])]))
    commit_and_publish(wh, "isolation_intervals", "r-2 b", SCHEMA, _stage(wh, [_rows([9])]))
    ranges = sorted((f.low, f.high) for f in run_file_ranges(wh, "isolation_intervals", "r1", "producer"))
    assert ranges == [(0, 2), (3, 3)]
    files = run_file_ranges(wh, "isolation_intervals", "r1", "producer")
    assert [f.may_hold(1) for f in sorted(files, key=lambda f: f.low)] == [True, False]
    (other,) = run_file_ranges(wh, "isolation_intervals", "r-2 b", "producer")
    assert (other.low, other.high) == (9, 9) and Path(other.uri).exists()
    log = Path(wh, "isolation_intervals", "_delta_log", "00000000000000000001.json").read_text()
    stats = [json.loads(a["add"]["stats"]) for a in map(json.loads, log.splitlines()) if "add" in a]
    assert sorted(s["minValues"]["producer"] for s in stats) == [0, 3]


def test_a_failed_commit_deletes_its_moved_files(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    other = pa.schema([pa.field("run_id", pa.string()), pa.field("x", pa.int64())])
    DeltaTable.create(str(tmp_path / "wh" / "isolation_intervals"), other, partition_by=["run_id"])
    with pytest.raises(DeltaSinkError, match="has schema"):
        commit_written(wh, "isolation_intervals", "r1", SCHEMA, _stage(wh, [_rows([1])]))
    left = [
        p for p in (tmp_path / "wh" / "isolation_intervals").rglob("*.parquet") if "_delta_log" not in p.parts
    ]
    assert left == []


def test_orphans_of_a_crash_before_the_commit_are_vacuumed(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    commit_and_publish(wh, "isolation_intervals", "r1", SCHEMA, _stage(wh, [_rows([1])]))
    staged = stage_written(wh, "isolation_intervals", "r1", SCHEMA, _stage(wh, [_rows([2])]))  # no commit
    abandoned = _stage(wh, [_rows([3])])  # a write that never got as far as moving its files
    orphans = {f.path for f in staged.files}
    assert read_arrow(wh, "isolation_intervals", "r1").column("producer").to_pylist() == [1]
    assert vacuum(wh, ["isolation_intervals"]).tables[0].files == []  # too young
    removed = vacuum(wh, ["isolation_intervals"], min_age_s=0).tables[0].files
    assert set(removed) == orphans | {f"_staging/{abandoned}"}
    assert read_arrow(wh, "isolation_intervals", "r1").column("producer").to_pylist() == [1]


def test_run_ids_and_partitions() -> None:
    assert partition_dir("a b+c") == "run_id=a b+c" and partition_dir("a=b%c") == "run_id=a%3Db%25c"
    assert check_run_id("ok-1") == "ok-1"
    for bad in ("", "it's", "a/b", "x" * 201, "tab\there"):
        with pytest.raises(DeltaSinkError, match="run_id must be"):
            check_run_id(bad)


def test_a_file_with_nulls_in_a_non_nullable_column_is_refused_and_nothing_moves(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    loose = pa.schema([f.with_nullable(True) for f in DATA])  # a writer that did not declare not-null
    bad = pa.table(
        {"producer": [1, None], "broker": ["a", "b"], "start_ms": [1, 2], "end_ms": [3, None]}, schema=loose
    )
    write_id = new_write_id()
    staging = staging_path(wh, "isolation_intervals", write_id)
    Path(staging).mkdir(parents=True)
    write_parquet(_rows([5]), f"{staging}/part-p000000.parquet")  # a good file beside it
    write_parquet(bad, f"{staging}/part-p000001.parquet")
    with pytest.raises(
        DeltaSinkError, match=r"nulls in non-nullable column\(s\) producer \(1 null\(s\)\), end_ms"
    ):
        commit_written(wh, "isolation_intervals", "r1", SCHEMA, write_id)
    assert not (tmp_path / "wh" / "isolation_intervals" / partition_dir("r1")).exists()  # nothing moved
    assert not (tmp_path / "wh" / "isolation_intervals" / "_delta_log").exists()  # nor committed
    # the same rows without nulls, in a file that does not declare not-null, pass (footer null counts)
    write_id = new_write_id()
    staging = staging_path(wh, "isolation_intervals", write_id)
    Path(staging).mkdir(parents=True)
    write_parquet(
        bad.fill_null(0) if hasattr(bad, "fill_null") else _rows([1, 0]).cast(loose),
        f"{staging}/part-p0.parquet",
    )
    assert commit_written(wh, "isolation_intervals", "r1", SCHEMA, write_id).rows == 2
