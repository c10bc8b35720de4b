"""A run's sends read for its OpenMessaging Benchmark export, and the export's files written.

The figures are computed by :mod:`rocketsim.omb.result`; this module feeds it. A run's ``send_results``
is read lazily: a batch of the four columns the export needs (:data:`rocketsim.omb.result.RESULT_COLUMNS`)
at a time, file by file as the Delta log lists the run's complete write, so memory stays flat at any size.
A comparison keeps no per-message rows: each variant is simulated again from the ``runs`` row's scenario
and the variant's overrides (:mod:`rocketsim.omb.rerun`). Either way the sends are checked against the
run's own summary (``run_summary``, or the comparison's ``comparisons`` rows) before anything is written:
messages, statuses and the exact send-latency and queue-wait percentiles must agree to the last bit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rocketsim.errors import RocketSimError
from rocketsim.omb import DEFAULT_DRIVER
from rocketsim.omb.result import (
    RESULT_COLUMNS,
    PublishFold,
    file_name,
    fold_results,
    meta_of,
    omb_result,
    result_json,
)
from rocketsim.scenario.variants import scenario_of_run
from rocketsim.tables.schemas import SEND_RESULTS
from rocketsim.warehouse.files import write_bytes
from rocketsim.warehouse.paths import filesystem, make_dir
from rocketsim.warehouse.read import MissingRunError, is_table, list_runs, read_arrow, run_file_uris

BATCH_ROWS = 1 << 20


class ExportMismatchError(RocketSimError):
    """The sends read (or simulated again) do not give the run's own summary: nothing is written."""


@dataclass(frozen=True)
class OmbExport:
    """One exported result: the variant it is of (None for a plain run), its file name and its fields."""

    variant: str | None
    name: str
    result: dict


def result_batches(warehouse: str | os.PathLike[str], run_id: str) -> Iterator[pa.RecordBatch]:
    """The run's ``send_results``, the export's columns only, a batch at a time."""
    schema = pa.schema([SEND_RESULTS.field(n) for n in RESULT_COLUMNS])
    for uri in run_file_uris(warehouse, "send_results", run_id):
        fs, path = filesystem(uri)
        with fs.open_input_file(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(BATCH_ROWS, columns=list(RESULT_COLUMNS)):
                yield pa.RecordBatch.from_arrays(
                    [batch.column(n).cast(schema.field(n).type) for n in RESULT_COLUMNS], schema=schema
                )


def runs_row(warehouse: str | os.PathLike[str], run_id: str) -> dict:
    """The run's ``runs`` row (its scenario, overrides, start); :class:`MissingRunError` if it has none."""
    rows = read_arrow(warehouse, "runs", run_id).to_pylist() if is_table(warehouse, "runs") else []
    if not rows:
        raise MissingRunError(
            f"run {run_id!r} has no runs row in {os.fspath(warehouse)} (the export needs its scenario)"
        )
    return rows[0]


def comparison_variants(warehouse: str | os.PathLike[str], run_id: str) -> dict[str, dict[str, float]] | None:
    """A comparison's variants: name -> its ``comparisons`` values of scope "all" (with its overrides
    under ``"overrides"``); None when ``run_id`` is not a comparison."""
    if not is_table(warehouse, "comparisons") or run_id not in list_runs(warehouse, "comparisons"):
        return None
    out: dict[str, dict] = {}
    for r in read_arrow(warehouse, "comparisons", run_id).to_pylist():
        if r["scope"] == "all":
            out.setdefault(r["variant"], {"overrides": r["overrides"]})[r["metric"]] = r["value"]
    return out


def _check(fold: PublishFold, expected: Mapping[str, object], what: str) -> None:
    """Every figure the fold gives must equal the run's own (``==``, floats too; both null)."""
    wrong = []
    for name, got in fold.summary().items():
        want = expected.get(name)
        if (got is None) != (want is None) or (got is not None and float(got) != float(want)):  # type: ignore[arg-type]
            wrong.append(f"{name} {got} vs {want}")
    if wrong:
        raise ExportMismatchError(f"{what}: the sends disagree with it ({'; '.join(wrong)}): nothing written")


def run_exports(
    warehouse: str | os.PathLike[str],
    run_id: str,
    *,
    driver: str = DEFAULT_DRIVER,
    workload: str | None = None,
    skip_windows: int = 0,
) -> list[OmbExport]:
    """The OMB results of a run (one), or of a comparison (one per variant, driver ``<driver>-<variant>``),
    each checked against the run's own summary."""
    row = runs_row(warehouse, run_id)
    started = datetime.fromisoformat(row["started_at"])
    variants = comparison_variants(warehouse, run_id)
    made: list[tuple[str | None, PublishFold, object]] = []
    if variants is None:
        sc = scenario_of_run(row)
        summary = read_arrow(warehouse, "run_summary", run_id).to_pylist()
        expected = next((r for r in summary if r["scope"] == "all"), None)
        if expected is None:
            raise MissingRunError(f"run {run_id!r} has no run_summary row of scope all in {warehouse}")
        fold = fold_results(result_batches(warehouse, run_id))
        _check(fold, expected, f"run {run_id}'s run_summary")
        made.append((None, fold, sc))
    else:
        from rocketsim.omb import rerun  # the engine (numba): only a comparison needs it

        for name, values in sorted(variants.items()):
            sc = scenario_of_run(row, values["overrides"])
            fold = rerun.variant_fold(sc)
            _check(fold, values, f"comparison {run_id}, variant {name} (simulated again)")
            made.append((name, fold, sc))
    out = []
    for name, fold, sc in made:
        meta = meta_of(sc, driver if name is None else f"{driver}-{name}", workload)  # type: ignore[arg-type]
        out.append(OmbExport(name, file_name(meta, started), omb_result(fold, meta, skip_windows)))
    return out


def write_exports(exports: list[OmbExport], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Each result as ``<out_dir>/<its OMB file name>`` (written whole or not at all)."""
    make_dir(os.fspath(out_dir))
    paths = []
    for e in exports:
        path = Path(out_dir) / e.name
        write_bytes(result_json(e.result).encode("utf-8"), os.fspath(path))
        paths.append(path)
    return paths
