"""The warehouse layer: files and the Delta log, with pyarrow and deltalake (no pyspark).

* :mod:`~rocketsim.warehouse.paths`: table paths and file systems (local paths or URIs), run partitions,
  staging folders, write ids;
* :mod:`~rocketsim.warehouse.files`: Parquet, Arrow IPC and byte files written atomically;
* :mod:`~rocketsim.warehouse.stage_files`: the files a run's stage tasks write (over :mod:`rocketsim.stage`)
  and the driver's merge of their aggregates;
* :mod:`~rocketsim.warehouse.delta`: staged files -> one ``deltalake`` commit per table and job (a
  write of the table, in its own ``write_id`` partition);
* :mod:`~rocketsim.warehouse.run_commit`: the run-level commit (``run_commits``): a job's writes become
  the run's at once, and readers select complete runs only;
* :mod:`~rocketsim.warehouse.claims`: one writer per run id;
* :mod:`~rocketsim.warehouse.vacuum`: what killed jobs leave (files, staging folders, unpublished writes,
  stale claims), and only that;
* :mod:`~rocketsim.warehouse.read`: the rows of complete runs as Arrow or pandas (several tables of a run
  as one version of ``run_commits`` names them), checked against what ``run_commits`` recorded; a run's
  files and row counts from the Delta log.

The readers are reachable from here too (``from rocketsim.warehouse import read_pandas``), imported on
first use: a stage task imports this package and needs neither deltalake nor pandas.
"""

from __future__ import annotations

__all__ = ["list_runs", "list_tables", "read_arrow", "read_pandas", "read_run"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from rocketsim.warehouse import read

        return getattr(read, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
