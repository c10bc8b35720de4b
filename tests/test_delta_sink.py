"""The Delta sink's contract (docs/design.md §6) for DataFrames (:mod:`rocketsim.spark.delta_sink`) on the
embedded deltalake engine, plus the session helpers."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from rocketsim.spark.delta_sink import stage_run, write_run
from rocketsim.spark.read import read_spark
from rocketsim.spark.session import delta_enabled, read_conf_file, spark_schema
from rocketsim.tables.schemas import SEND_RESULTS, data_schema
from rocketsim.warehouse.delta import WriteReport, commit_run
from rocketsim.warehouse.paths import DeltaSinkError, table_path
from rocketsim.warehouse.read import list_runs, read_arrow
from rocketsim.warehouse.run_commit import TableWrite, publish_writes
from rocketsim.warehouse.vacuum import vacuum

pytestmark = pytest.mark.spark

TABLE = "send_results"
SCHEMA = SEND_RESULTS


def rows(n: int, start: int = 0, schema: pa.Schema = SCHEMA) -> pa.Table:
    """n deterministic rows of every column but run_id; int64 columns are unique (start + i)."""
    ids = range(start, start + n)
    cols: dict[str, list[object]] = {}
    for field in data_schema(schema):
        t, name = field.type, field.name
        if pa.types.is_int32(t):
            values: list[object] = [i % 1000 - 7 for i in ids]
        elif pa.types.is_integer(t):
            values = list(ids)
        elif pa.types.is_floating(t):
            values = [i / 8 for i in ids]
        elif pa.types.is_boolean(t):
            values = [i % 2 == 0 for i in ids]
        elif pa.types.is_string(t):
            values = [f"{name}-{i % 13}" for i in ids]
        elif pa.types.is_list(t):
            values = [[f"b-{i % 3}", f"b-{(i + 1) % 3}"][: 1 + i % 2] for i in ids]
        else:
            raise AssertionError(f"no generator for {name}: {t}")
        if field.nullable:
            values = [None if i % 10 == 0 else v for i, v in zip(ids, values, strict=True)]
        cols[name] = values
    return pa.table(cols, schema=data_schema(schema))


def with_run(table: pa.Table, run_id: str) -> pa.Table:
    return table.add_column(0, SCHEMA.field("run_id"), pa.array([run_id] * table.num_rows, pa.string()))


def frame(spark: SparkSession, table: pa.Table, partitions: int = 3) -> DataFrame:
    return spark.createDataFrame(table).repartition(partitions)


def sort(table: pa.Table) -> pa.Table:
    return table.sort_by([("run_id", "ascending"), ("seq", "ascending")])


@pytest.fixture()
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


def test_write_then_read_back_by_deltalake_and_spark(spark: SparkSession, warehouse: str) -> None:
    data = rows(500)
    report = write_run(frame(spark, data), warehouse, TABLE, "r1", SCHEMA)
    assert (report.engine, report.rows, report.version) == ("deltalake", 500, 1)
    assert report.files >= 1 and report.bytes > 0

    got = read_arrow(warehouse, TABLE, "r1")
    assert got.schema.equals(SCHEMA)
    assert sort(got).equals(sort(with_run(data, "r1")))

    back = read_spark(spark, warehouse, TABLE, "r1")
    assert [f.dataType for f in back.schema.fields] == [f.dataType for f in spark_schema(SCHEMA).fields]
    expected = spark.createDataFrame(with_run(data, "r1"))
    assert_df_equality(back, expected, ignore_row_order=True, ignore_nullable=True)

    # The data files themselves carry the declared physical types (int32 stays int32).
    declared = data_schema(SCHEMA)
    for uri in DeltaTable(table_path(warehouse, TABLE)).file_uris():
        file_schema = pq.read_schema(uri)
        assert file_schema.names == declared.names
        for field in declared:
            found = file_schema.field(field.name).type
            if pa.types.is_list(field.type):
                assert pa.types.is_list(found) and found.value_type == field.type.value_type
            else:
                assert found == field.type, field.name


def test_rerun_replaces_exactly_that_run(spark: SparkSession, warehouse: str) -> None:
    write_run(frame(spark, rows(400)), warehouse, TABLE, "r1", SCHEMA)
    write_run(frame(spark, rows(50, start=10_000)), warehouse, TABLE, "r2", SCHEMA)
    first_files = set(DeltaTable(table_path(warehouse, TABLE)).file_uris())

    again = rows(120, start=5_000)
    report = write_run(frame(spark, again, partitions=2), warehouse, TABLE, "r1", SCHEMA)
    assert report.rows == 120 and report.removed_files == 3

    assert sort(read_arrow(warehouse, TABLE, "r1")).equals(sort(with_run(again, "r1")))
    assert sort(read_arrow(warehouse, TABLE, "r2")).equals(sort(with_run(rows(50, start=10_000), "r2")))
    assert read_arrow(warehouse, TABLE).num_rows == 170  # no duplicates of the replaced run
    assert list_runs(warehouse) == ["r1", "r2"]
    assert_df_equality(
        read_spark(spark, warehouse, TABLE),
        spark.createDataFrame(
            pa.concat_tables([with_run(again, "r1"), with_run(rows(50, start=10_000), "r2")])
        ),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # The replaced files stay on disk (time travel) but are no longer part of the table.
    remaining = set(DeltaTable(table_path(warehouse, TABLE)).file_uris())
    assert len(first_files - remaining) == 3 and all(Path(p).exists() for p in first_files)
    old = DeltaTable(table_path(warehouse, TABLE), version=2).to_pyarrow_table()
    assert old.num_rows == 450


def test_empty_rerun_empties_the_run(spark: SparkSession, warehouse: str) -> None:
    write_run(frame(spark, rows(30)), warehouse, TABLE, "r1", SCHEMA)
    report = write_run(frame(spark, rows(0)), warehouse, TABLE, "r1", SCHEMA)
    assert (report.files, report.rows) == (0, 0)
    assert read_arrow(warehouse, TABLE).num_rows == 0
    assert read_spark(spark, warehouse, TABLE).count() == 0


def test_racing_commits_of_different_runs_both_land(spark: SparkSession, warehouse: str) -> None:
    write_run(frame(spark, rows(10)), warehouse, TABLE, "base", SCHEMA)
    staged = {
        rid: stage_run(frame(spark, rows(40, start=i * 1000)), warehouse, TABLE, rid, SCHEMA)
        for i, rid in enumerate(["a", "b", "c", "d"], start=1)
    }

    def publish(rid: str, report: WriteReport) -> None:
        publish_writes(warehouse, rid, "test", [TableWrite(TABLE, report.write_id, report.rows)])

    # Two threads commit (the table's write, then the run-level commit) at the same moment.
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def commit(rid: str) -> None:
        barrier.wait()
        try:
            publish(rid, commit_run(staged[rid]))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(rid,)) for rid in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    # Deterministic conflict: "d" commits from a snapshot taken before "c" committed.
    stale = DeltaTable(table_path(warehouse, TABLE))
    publish("c", commit_run(staged["c"]))
    report = commit_run(staged["d"], table=stale)
    assert report.version == stale.version() + 2
    publish("d", report)

    assert list_runs(warehouse, TABLE) == ["a", "b", "base", "c", "d"]
    counts = read_arrow(warehouse, TABLE).group_by("run_id").aggregate([("seq", "count")])
    assert dict(zip(counts["run_id"].to_pylist(), counts["seq_count"].to_pylist(), strict=True)) == {
        "base": 10,
        "a": 40,
        "b": 40,
        "c": 40,
        "d": 40,
    }


def test_crash_before_commit_leaves_table_unchanged_then_vacuum(spark: SparkSession, warehouse: str) -> None:
    write_run(frame(spark, rows(60)), warehouse, TABLE, "r1", SCHEMA)
    write_run(frame(spark, rows(60, start=100)), warehouse, TABLE, "r1", SCHEMA)  # commits, removes 3 files
    uri = table_path(warehouse, TABLE)
    version, before = DeltaTable(uri).version(), sort(read_arrow(warehouse, TABLE))

    # The job "dies" after its files are written and moved, before the commit.
    crashed = [
        stage_run(frame(spark, rows(25, start=7_000)), warehouse, TABLE, "r1", SCHEMA),
        stage_run(frame(spark, rows(25, start=8_000)), warehouse, TABLE, "r9", SCHEMA),
    ]
    orphans = {f.path for s in crashed for f in s.files}
    assert orphans and all((Path(uri) / p).exists() for p in orphans)

    assert DeltaTable(uri).version() == version
    assert sort(read_arrow(warehouse, TABLE)).equals(before)
    assert list_runs(warehouse, TABLE) == ["r1"]
    assert_df_equality(
        read_spark(spark, warehouse, TABLE),
        spark.createDataFrame(before),
        ignore_row_order=True,
        ignore_nullable=True,
    )

    assert _orphans_vacuumed(warehouse) == []  # younger than the safety age: kept
    assert set(_orphans_vacuumed(warehouse, min_age_s=0, dry_run=True)) == orphans
    assert set(_orphans_vacuumed(warehouse, min_age_s=0)) == orphans
    assert not any((Path(uri) / p).exists() for p in orphans)
    assert DeltaTable(uri).version() == version
    assert sort(read_arrow(warehouse, TABLE)).equals(before)
    assert DeltaTable(uri, version=version - 2).to_pyarrow_table().num_rows == 60  # tombstones kept
    assert _orphans_vacuumed(warehouse, min_age_s=0) == []


def _orphans_vacuumed(warehouse: str, **options: object) -> list[str]:
    return vacuum(warehouse, [TABLE], **options).tables[0].files  # type: ignore[arg-type]


def test_log_stats_match_the_data(spark: SparkSession, warehouse: str) -> None:
    report = write_run(frame(spark, rows(300)), warehouse, TABLE, "r1", SCHEMA)
    root = Path(table_path(warehouse, TABLE))
    commit = root / "_delta_log" / f"{report.version:020d}.json"
    adds = [a["add"] for a in map(json.loads, commit.read_text().splitlines()) if "add" in a]
    assert len(adds) == report.files
    total = 0
    for add in adds:
        stats = json.loads(add["stats"])
        data = pq.read_table(root / unquote(add["path"]))
        assert stats["numRecords"] == data.num_rows
        assert add["size"] == (root / unquote(add["path"])).stat().st_size
        total += data.num_rows
        for col in ("producer", "seq", "status", "queue_id", "compressed"):
            values = [v for v in data[col].to_pylist() if v is not None]
            assert (stats["minValues"][col], stats["maxValues"][col]) == (min(values), max(values)), col
        for col in ("error", "queue_id", "seq"):
            assert stats["nullCount"][col] == data[col].null_count, col
        assert "brokers_sent" not in stats["minValues"]  # no min/max for nested columns
    assert total == 300
    # deltalake sees the same numbers (its data skipping relies on them).
    flat = pa.table(DeltaTable(str(root)).get_add_actions(flatten=True))
    assert sum(flat["num_records"].to_pylist()) == 300


def test_refuses_bad_input(spark: SparkSession, warehouse: str) -> None:
    df = frame(spark, rows(5))
    with pytest.raises(DeltaSinkError, match="missing \\['status'\\]"):
        write_run(df.drop("status"), warehouse, TABLE, "r1", SCHEMA)
    with pytest.raises(DeltaSinkError, match="run_id must be"):
        write_run(df, warehouse, TABLE, "it's", SCHEMA)
    write_run(df, warehouse, TABLE, "r1", SCHEMA)
    narrower = pa.schema([f for f in SCHEMA if f.name != "error"])
    with pytest.raises(DeltaSinkError, match="has schema"):
        write_run(df.drop("error"), warehouse, TABLE, "r2", narrower)
    assert list_runs(warehouse) == ["r1"]


def test_session_settings(spark: SparkSession, tmp_path: Path) -> None:
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert not delta_enabled(spark)  # no Delta jars here: the deltalake engine is the default
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# comment\nspark.driver.memory   2g\nspark.a=b\n\nspark.c  x y\n")
    assert read_conf_file(conf) == {"spark.driver.memory": "2g", "spark.a": "b", "spark.c": "x y"}
