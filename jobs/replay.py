"""Turn an incident's per-broker series (Prometheus range queries or Grafana CSV downloads) into a fault
timeline, write it as a scenario on your own cluster and workload, and optionally run it.

python jobs/replay.py --base conf/scenarios/steady.toml --latency p99.json [--errors codes.json]
    [--up up.csv] [--broker-map 10.0.0.5:5557=broker-a ...] [--baseline-s 0:300] [--name NAME]
    [--out FILE] [--error-code system_busy]
./spark-submit.sh jobs/replay.py ... --run [--warehouse DIR] [--run-id ID]   (runs it with jobs/pipeline.py's
    run_job, so spark-submit.sh checks it in plain Python first)
(the same as ``rocketsim replay``: rocketsim/command/replay.py)
"""

from __future__ import annotations

import sys

from rocketsim.command.replay import main

if __name__ == "__main__":
    sys.exit(main())
