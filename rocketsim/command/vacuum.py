"""Remove what killed jobs left in a warehouse, and only what is provably garbage: their staging folders
and uncommitted files, the committed writes no complete run names, and their stale claims.

Needs no Spark: ``rocketsim vacuum --warehouse DIR`` (or ``python jobs/vacuum.py``). Refuses (exit
2, one line, nothing removed) bad arguments and a warehouse whose run_commits is missing, damaged or
behind its tables. Leaves alone the runs live jobs claim, anything younger than --min-age-s, and a
damaged table (one line on stderr each, exit 1; the other tables are still vacuumed).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from deltalake.exceptions import DeltaError

from rocketsim.arguments import OneLineArgumentParser
from rocketsim.command.options import examples_text
from rocketsim.errors import RocketSimError, first_line
from rocketsim.warehouse.vacuum import Vacuum, VacuumRefused, vacuum

EXAMPLES = (
    "rocketsim vacuum --dry-run            # list what would go from ./warehouse",
    "rocketsim vacuum --warehouse /shared/warehouse --min-age-s 86400",
)


def main(argv: Sequence[str] | None = None, prog: str = "jobs/vacuum.py", epilog: str | None = None) -> int:
    parser = OneLineArgumentParser(prog=prog, description=__doc__.splitlines()[0], epilog=epilog)
    parser.add_argument("--warehouse", default="warehouse", help="folder of the Delta tables")
    parser.add_argument("--table", action="append", help="a table name (repeatable); default: all")
    parser.add_argument(
        "--min-age-s", type=float, default=3600.0, help="keep what is younger (seconds, default 3600)"
    )
    parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    args = parser.parse_args(argv)
    try:
        done = vacuum(args.warehouse, args.table, min_age_s=args.min_age_s, dry_run=args.dry_run)
    except VacuumRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (RocketSimError, DeltaError, OSError) as exc:
        detail = first_line(exc)
        print(f"error: vacuum stopped ({type(exc).__name__}: {detail}); run it again", file=sys.stderr)
        return 1
    report(done, args.dry_run)
    return 1 if done.damaged else 0


def report(done: Vacuum, dry_run: bool) -> None:
    """What vacuum did: on stdout, and one line per damaged table on stderr."""
    delete, remove, clear = (
        ("would delete", "would remove", "would clear") if dry_run else ("deleted", "removed", "cleared")
    )
    for claim in done.busy:
        print(f"run {claim.run_id}: left alone, being written by {claim.describe()}")
    for t in done.tables:
        if t.damage:
            print(f"error: {t.table}: left alone: {t.damage}", file=sys.stderr)
            continue
        for write in t.writes:
            print(f"{t.table}: {remove} unpublished write {write}")
        for path in t.files:
            print(f"{t.table}: {delete} {path}")
        kept = f" (unpublished writes kept: {t.kept_writes})" if t.kept_writes else ""
        print(f"{t.table}: {len(t.files)} orphan(s) {delete}, {len(t.writes)} unpublished write(s){kept}")
    for claim in done.cleared:
        print(f"run {claim.run_id}: stale claim {clear} ({claim.stale})")


def command(argv: Sequence[str], prog: str) -> int:
    """``rocketsim vacuum``: :func:`main`, with examples in its help."""
    return main(argv, prog, examples_text(EXAMPLES))
