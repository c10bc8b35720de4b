"""Delete uncommitted files (orphans of killed jobs) from the warehouse's Delta tables.

Needs no Spark: ``python jobs/vacuum.py --warehouse DIR`` (or through ./spark-submit.sh).
Files younger than ``--min-age-s`` are kept, so a job still writing is never harmed.
"""

from __future__ import annotations

import argparse
import sys

from rocketsim.warehouse.read import list_tables
from rocketsim.warehouse.vacuum import vacuum_orphans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default="warehouse")
    parser.add_argument("--table", action="append", help="a table name (repeatable); default: all")
    parser.add_argument("--min-age-s", type=float, default=3600.0)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)

    tables = args.table or list_tables(args.warehouse)
    verb = "would delete" if args.dry_run else "deleted"
    for table in tables:
        removed = vacuum_orphans(args.warehouse, table, min_age_s=args.min_age_s, dry_run=args.dry_run)
        for path in removed:
            print(f"{table}: {verb} {path}")
        print(f"{table}: {len(removed)} orphan(s) {verb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
