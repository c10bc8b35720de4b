"""Delete uncommitted files (orphans of killed jobs) from the warehouse's Delta tables, and remove the
committed writes no complete run names (of jobs killed before their run-level commit, or superseded).

Needs no Spark: ``python jobs/vacuum.py --warehouse DIR`` (or through ./spark-submit.sh).
Files and writes younger than ``--min-age-s`` are kept, and so are the writes of a run a live job
claims, so a job still writing is never harmed.
"""

from __future__ import annotations

import argparse
import os
import sys

from rocketsim.warehouse.claims import live_claims
from rocketsim.warehouse.read import list_tables
from rocketsim.warehouse.vacuum import retire_orphan_writes, vacuum_orphans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default="warehouse")
    parser.add_argument("--table", action="append", help="a table name (repeatable); default: all")
    parser.add_argument("--min-age-s", type=float, default=3600.0)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if "://" not in args.warehouse and not os.path.isdir(args.warehouse):
        what = "is not a folder" if os.path.exists(args.warehouse) else "does not exist"
        print(f"error: --warehouse {args.warehouse!r} {what}: nothing to vacuum", file=sys.stderr)
        return 2

    tables = args.table or list_tables(args.warehouse)
    busy = live_claims(args.warehouse)
    verb = "would delete" if args.dry_run else "deleted"
    for run_id, claim in sorted(busy.items()):
        print(f"run {run_id}: left alone, being written by {claim.describe()}")
    for table in tables:
        writes = retire_orphan_writes(
            args.warehouse, table, min_age_s=args.min_age_s, dry_run=args.dry_run, busy_runs=set(busy)
        )
        for write in writes:
            print(f"{table}: {'would remove' if args.dry_run else 'removed'} unpublished write {write}")
        removed = vacuum_orphans(args.warehouse, table, min_age_s=args.min_age_s, dry_run=args.dry_run)
        for path in removed:
            print(f"{table}: {verb} {path}")
        print(f"{table}: {len(removed)} orphan(s) {verb}, {len(writes)} unpublished write(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
