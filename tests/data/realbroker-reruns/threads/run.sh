#!/bin/bash
# One harness session with every JVM thread sampled (sample_threads.py, each 0.5 s) during each load.
# usage: run.sh HARNESS_DIR OUT_DIR "NAME STEPS [PRODUCERS]" ...   e.g. run.sh ../harness out "r40 10000:2,40000:10"
# (PRODUCERS: the driver's producers, 2 unless given; the driver's collections go to OUT_DIR/NAME.gc.log;
# DRIVER_JAVA_OPTS: more of the driver's JVM options, e.g. "-Xlog:jit+compilation=debug:file=OUT/jit.log:time")
# Run as root at nice -n -20 (as the other reruns); JFR: JAVA_TOOL_OPTIONS="-XX:StartFlightRecording=
# filename=driver.jfr,settings=profile" for the driver, `jcmd BROKER_PID JFR.start settings=profile
# filename=broker.jfr` for the broker; read with `jfr print --events jdk.ExecutionSample,
# jdk.NativeMethodSample --stack-depth 64 REC.jfr | python3 jfr_split.py`.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
H=$(cd "$1" && pwd); OUT=$(mkdir -p "$2" && cd "$2" && pwd); shift 2
cd "$H"
echo "loadavg at start: $(cat /proc/loadavg)"
./start.sh --wipe > "$OUT/start.log" 2>&1 || { cat "$OUT/start.log"; exit 1; }
BPID=$(cat run/broker.pid)
for spec in "$@"; do
  set -- $spec
  name=$1; steps=$2; producers=${3:-2}
  python3 "$HERE/sample_threads.py" "$OUT/$name.csv" "$BPID" --interval 0.5 &
  SP=$!
  echo "== $name $steps loadavg $(cat /proc/loadavg)"
  JAVA_TOOL_OPTIONS="-Xlog:gc:file=$OUT/$name.gc.log:time,uptimemillis ${DRIVER_JAVA_OPTS:-}" \
  WAIT_PAGECACHERT=0 QUIET_WAIT=60 ./run_load.sh "thr_$name" --steps "$steps" --mode async --producers "$producers" \
    --warmup 2000 > "$OUT/$name.driver.out" 2> "$OUT/$name.driver.err"
  echo "rc $? loadavg $(cat /proc/loadavg)"
  sleep 1; touch "$OUT/$name.csv.stop"; wait $SP
  cp "results/thr_$name/cpu.json" "$OUT/$name.cpu.json"; cp "results/thr_$name/meta.json" "$OUT/$name.meta.json"
done
./stop.sh --wipe > "$OUT/stop.log" 2>&1
echo "done loadavg $(cat /proc/loadavg)"
