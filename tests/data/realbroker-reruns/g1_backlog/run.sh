#!/bin/sh
# Runs G1Backlog as the harness's driver JVM was run (-Xms1g -Xmx1g -XX:+UseG1GC, 2 processors), with a
# pending send of ~3 KiB, 6.25 KiB of short-lived work a send (9.3 KiB allocated a send, as calibrated),
# a backlog growing 0.44 a send served (72,000/s offered, 50,000/s served) up to HOLD, 1,000,000 sends.
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
