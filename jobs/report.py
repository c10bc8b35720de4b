"""Write a self-contained HTML report of one run (summary tables and charts, PNGs embedded).

Needs no Spark: python jobs/report.py [--run-id ID] [--warehouse DIR] [--out FILE] [--omb FILE ...]
(the same as ``rocketsim report``: rocketsim/command/report.py)
"""

from __future__ import annotations

import sys

from rocketsim.command.report import main

if __name__ == "__main__":
    sys.exit(main())
