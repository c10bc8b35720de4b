"""Remove what killed jobs left in a warehouse, and only what is provably garbage: their staging folders
and uncommitted files, the committed writes no complete run names, and their stale claims.

Needs no Spark: ``python jobs/vacuum.py --warehouse DIR`` (or through ./spark-submit.sh; the same as
``rocketsim vacuum``: rocketsim/command/vacuum.py, which says what it refuses and leaves alone).
"""

from __future__ import annotations

import sys

from rocketsim.command.vacuum import main

if __name__ == "__main__":
    sys.exit(main())
