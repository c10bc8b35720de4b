"""Calibrate the broker model from your own measurements: a scenario fragment and a fit report.

Needs no Spark: python jobs/calibrate.py --input omb:result.json [--input store-log:store.log ...]
    [--saturation RATE[@BYTES]] [--fix latency.spike_alpha=1.5] [--match node_id=broker-a]
    [--broker NAME] --out calibrated.toml [--report DIR]
(the same as ``rocketsim calibrate``: rocketsim/command/calibrate.py)
"""

from __future__ import annotations

import sys

from rocketsim.command.calibrate import main

if __name__ == "__main__":
    sys.exit(main())
