#!/bin/bash
# six fresh JVMs per level, 12 storms each (the first storm of each JVM is cold, as a run's pause's first
# failures are); usage: NETTY_CP=<netty-transport:-common:-buffer:-resolver jars> ./run.sh > results.txt
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG=$(mktemp)
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for i in 1 2 3 4 5 6; do for level in WARN INFO; do
  : > "$LOG"
  java -cp "$NETTY_CP" "$HERE/FailureStorm.java" $level 12 16 1024 "$LOG" 2>&1
done; done
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$LOG"
