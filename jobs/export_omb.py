"""Write a run (or each variant of a comparison) as OpenMessaging Benchmark result files (TestResult JSON),
which OMB's bin/create_charts.py and the tools built on OMB's format read.

Needs no Spark: python jobs/export_omb.py --warehouse DIR --run-id ID --out DIR
    [--driver NAME] [--workload NAME] [--warmup-s S]
(the same as ``rocketsim export omb``: rocketsim/command/export.py)
"""

from __future__ import annotations

import sys

from rocketsim.command.export import omb as main

if __name__ == "__main__":
    sys.exit(main())
