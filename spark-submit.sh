#!/usr/bin/env bash
# Run a rocketsim job with the spark-submit of the pip-installed pyspark in .venv (no Spark download).
# Spark options come before the job file and pass through; the job's own arguments come after it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
CONF_FILE="$ROOT/conf/spark-defaults.conf"
ZIP="$ROOT/build/rocketsim.zip"

usage() {
    cat <<EOF
usage: $(basename "$0") [spark-submit options] JOB.py [job arguments]

Runs JOB.py (a path, or one relative to the repo such as jobs/pipeline.py) with the spark-submit of
the pyspark installed in $VENV. The rocketsim package is zipped into build/ and shipped with
--py-files; conf/spark-defaults.conf is the properties file unless --properties-file is given.

Spark options pass through unchanged, e.g.
  --master spark://127.0.0.1:7077   (default: local[*])
  --conf key=value   --driver-memory 4g   --executor-memory 2g   --jars delta-spark.jar,...
Executors use the venv's Python; on a remote cluster point them at theirs with
  --conf spark.pyspark.python=/path/to/python

examples:
  $(basename "$0") jobs/pipeline.py --scenario conf/scenarios/steady.toml
  $(basename "$0") --master spark://127.0.0.1:7077 jobs/pipeline.py --scenario conf/scenarios/brownout.toml --warehouse /shared/wh
EOF
}

# Options of spark-submit that take no value; every other --option takes one.
is_flag() {
    case "$1" in
        --verbose | -v | --supervise | --version | --usage-error) return 0 ;;
        *) return 1 ;;
    esac
}

spark_args=()
job=""
have_master=0
have_props=0
cluster_mode=0
user_py_files=""
user_files=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help)
            usage
            exit 0
            ;;
        --py-files)
            user_py_files="$2"
            shift 2
            continue
            ;;
        --py-files=*)
            user_py_files="${1#--py-files=}"
            shift
            continue
            ;;
        --files)
            user_files="$2"
            shift 2
            continue
            ;;
        --files=*)
            user_files="${1#--files=}"
            shift
            continue
            ;;
        --master | --master=*) have_master=1 ;;
        --properties-file | --properties-file=*) have_props=1 ;;
        --conf | -c)
            [[ "${2:-}" == spark.master=* ]] && have_master=1
            ;;
        --deploy-mode)
            [[ "${2:-}" == cluster ]] && cluster_mode=1
            ;;
        --deploy-mode=cluster) cluster_mode=1 ;;
    esac
    if [[ "$1" == -* ]]; then
        if is_flag "$1" || [[ "$1" == --*=* ]]; then
            spark_args+=("$1")
            shift
        else
            if [[ $# -lt 2 ]]; then
                echo "error: option $1 needs a value (see -h)" >&2
                exit 2
            fi
            spark_args+=("$1" "$2")
            shift 2
        fi
    else
        job="$1"
        shift
        break
    fi
done
if [[ -z "$job" ]]; then
    usage >&2
    exit 2
fi
if [[ ! -f "$job" && -f "$ROOT/$job" ]]; then
    job="$ROOT/$job"
fi
if [[ ! -f "$job" ]]; then
    echo "error: job file not found: $job" >&2
    exit 2
fi

JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
if ! command -v "$JAVA" >/dev/null 2>&1; then
    echo "error: Java 17 is required by Spark and 'java' is not on PATH (Debian: apt-get install -y openjdk-17-jre-headless)" >&2
    exit 1
fi
java_major="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
if [[ -z "$java_major" || "$java_major" -lt 17 ]]; then
    echo "error: Spark 4 needs Java 17 or newer, found: $("$JAVA" -version 2>&1 | head -1)" >&2
    exit 1
fi

# Create and install the venv on first use (the Makefile's stamp target does it).
if [[ ! -x "$PY" ]] || ! "$PY" -c 'import pyspark' >/dev/null 2>&1; then
    make -s -C "$ROOT" .venv/.installed-stamp
fi

# Preflight: run the job in plain Python up to its build_session (which then exits 75), so bad arguments
# or a bad scenario fail here with exit code 2 and one line on stderr, before the JVM starts (a Python
# driver's stderr would otherwise reach stdout through spark-submit). Skipped for jobs without Spark (they
# would simply run twice), in cluster deploy mode (the driver's files are elsewhere), and with
# ROCKETSIM_PREFLIGHT=0. Exit 0 means the job finished without Spark (e.g. --help).
if [[ $cluster_mode -eq 0 && "${ROCKETSIM_PREFLIGHT:-1}" != 0 ]] && grep -qE "build_session|run_job" "$job"; then
    rc=0
    ROCKETSIM_PREFLIGHT_ONLY=1 "$PY" "$job" "$@" || rc=$?
    [[ $rc -eq 75 ]] || exit $rc
fi

PYSPARK_DIR="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
# Always the pip-installed Spark, whatever SPARK_HOME the shell may point at (versions must match).
export SPARK_HOME="$PYSPARK_DIR"
SUBMIT="$VENV/bin/spark-submit"
[[ -x "$SUBMIT" ]] || SUBMIT="$PYSPARK_DIR/bin/spark-submit"
export PYSPARK_PYTHON="$PY"
export PYSPARK_DRIVER_PYTHON="$PY"
# conf/ holds log4j2.properties (a quiet console) next to the Spark defaults.
export SPARK_CONF_DIR="${SPARK_CONF_DIR:-$ROOT/conf}"
# numba's compiled send loop is cached here (a zip-imported package cannot cache beside its source).
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$ROOT/build/numba-cache}"

# Zip the package for the executors; built in a temp file and renamed, so concurrent runs never see
# a half-written zip.
mkdir -p "$ROOT/build"
tmp_zip="$(mktemp "$ROOT/build/.rocketsim.XXXXXX.zip")"
# The job's one error line: the Python driver writes it here (its own stderr reaches the JVM's stdout),
# and this script prints it on stderr once the JVM ended (rocketsim/spark/launch.py).
error_file="$(mktemp "$ROOT/build/.rocketsim-error.XXXXXX")"
trap 'rm -f "$tmp_zip" "$error_file"' EXIT
export ROCKETSIM_ERROR_FILE="$error_file"
# Spark's own logging (the JVM's stderr: log4j's console, the JVM's warnings) goes to a log file per
# job, which the error line names; the newest 50 are kept.
LOG_DIR="${ROCKETSIM_LOG_DIR:-$ROOT/build/logs}"
mkdir -p "$LOG_DIR"
export ROCKETSIM_SPARK_LOG="$LOG_DIR/spark-$(basename "$job" .py)-$(date -u +%Y%m%dT%H%M%S)-$$.log"
"$PY" - "$ROOT" "$tmp_zip" <<'EOF'
import os, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "rocketsim")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith((".pyc", ".pyo")):
                full = os.path.join(dirpath, name)
                zf.write(full, os.path.relpath(full, root))
EOF
mv -f "$tmp_zip" "$ZIP"

py_files="$ZIP"
[[ -n "$user_py_files" ]] && py_files="$ZIP,$user_py_files"
extra=(--py-files "$py_files")
[[ $have_master -eq 0 ]] && extra+=(--master "local[*]")
files="$user_files"
if [[ -f "$CONF_FILE" ]]; then
    [[ $have_props -eq 0 ]] && extra+=(--properties-file "$CONF_FILE")
    # A cluster-mode driver runs elsewhere: ship the defaults so build_session finds them in its CWD.
    [[ $cluster_mode -eq 1 ]] && files="$CONF_FILE${files:+,$files}"
fi
[[ -n "$files" ]] && extra+=(--files "$files")

rc=0
"$SUBMIT" "${extra[@]}" ${spark_args[@]+"${spark_args[@]}"} "$job" "$@" 2>>"$ROCKETSIM_SPARK_LOG" || rc=$?
if [[ -s "$error_file" ]]; then
    cat "$error_file" >&2
elif [[ $rc -ne 0 ]]; then
    echo "error: $(basename "$job") ended with exit code $rc without saying why (Spark's log: $ROCKETSIM_SPARK_LOG)" >&2
fi
if [[ $rc -eq 0 && ! -s "$ROCKETSIM_SPARK_LOG" ]]; then
    rm -f "$ROCKETSIM_SPARK_LOG"
fi
# shellcheck disable=SC2012 # names without spaces, made above
ls -1t "$LOG_DIR"/spark-*.log 2>/dev/null | tail -n +51 | xargs -r rm -f || true
exit $rc
