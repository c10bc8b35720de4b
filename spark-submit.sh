#!/usr/bin/env bash
# Run a rocketsim job with the spark-submit of the pip-installed pyspark in .venv (no Spark download).
# Spark options come before the job file and pass through; the job's own arguments come after it
# (-h for the details). What it does is rocketsim/spark/submit.py, which the rocketsim command shares:
# a preflight of the job in plain Python (bad input: one line, exit 2, before any JVM), the package zipped
# and shipped with --py-files, conf/spark-defaults.conf, the venv's Python for the executors, Spark's
# logging in build/logs/spark-<job>-*.log, and the driver's one error line on stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="$ROOT/.venv/bin/python"

# Create and install the venv on first use (the Makefile's stamp target does it).
if [[ ! -x "$PY" ]] || ! "$PY" -c 'import pyspark' >/dev/null 2>&1; then
    make -s -C "$ROOT" .venv/.installed-stamp
fi

# -P: the file's own folder is not put on sys.path (it holds modules named like top-level ones).
exec "$PY" -P "$ROOT/rocketsim/spark/submit.py" "$@"
