#!/bin/sh
# Runs G1Backlog as the harness's driver JVM was run (-Xms1g -Xmx1g -XX:+UseG1GC, 2 processors), with a
# pending send of ~2.65 KiB and 6.25 KiB of short-lived work a send (8.9 KiB allocated a send; the ramp's
# calibration gives 9.3), a backlog growing 0.44 a send served up to HOLD, 1,000,000 sends. The growth
# (72,000/s offered over ~50,000/s stored) and the largest HOLD (the harness's 2 x 50,000 executor queue
# and 2 x 65,535 async permits) give the workload its shape only: what the model takes from the output,
# the ratio of a full collection's CPU per live KiB to a young one's per copied KiB, is the collector's.
set -e
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/g1backlog}
mkdir -p "$OUT"
javac -d "$OUT" G1Backlog.java
for HOLD in "$@"; do
  rm -f hold_$HOLD.gclog  # else the JVM keeps the last one as hold_$HOLD.gclog.0
  java -Xms1g -Xmx1g -XX:+UseG1GC -XX:ActiveProcessorCount=2 -Xlog:gc,gc+cpu:file=hold_$HOLD.gclog:uptime \
    -cp "$OUT" G1Backlog 1000000 0.44 6.25 "$HOLD" > hold_$HOLD.csv
done
