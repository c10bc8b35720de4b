"""Start the SparkContext every job runs on (and the SparkSession tests and readers use), and derive Spark
schemas from the Arrow ones.

Precedence of settings, lowest first: ``conf/spark-defaults.conf`` of the repo, whatever spark-submit
already put in the JVM (``--conf``, ``--master``, ``--properties-file``), then ``extra_conf``, then the
``master`` argument. The Delta extension is switched on only when its classes are on the JVM classpath
(docs/design.md §6): Maven is unreachable here, so most runs use the embedded ``deltalake`` sink instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyspark
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from rocketsim.spark.submit import DEFAULT_MASTER, PREFLIGHT_ENV, PREFLIGHT_OK, SPARK_LOG_ENV, SUBMIT_ARGS_ENV

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
CONF_FILE_NAME = "spark-defaults.conf"
# spark-submit.sh first runs a job in plain Python with PREFLIGHT_ENV set to "1", so bad arguments or a
# bad scenario fail with one line before the JVM starts; build_session then ends that dry run with
# PREFLIGHT_OK instead of starting Spark (rocketsim/spark/submit.py).

# Settings the pipeline relies on; applied unless the caller or spark-submit chose otherwise.
REQUIRED_DEFAULTS: Mapping[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "32768",
    "spark.sql.session.timeZone": "UTC",
    # Delta readers expect INT64 micros, not Spark's legacy INT96 timestamps.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark ``StructType`` of an Arrow schema (types and nullability), so schemas stay declared once."""
    return from_arrow_schema(arrow_schema)


def find_conf_file(conf_file: str | os.PathLike[str] | None = None) -> Path | None:
    """The spark-defaults file to load: ``conf_file`` if given, else the repo's, else one in the CWD."""
    if conf_file is not None:
        path = Path(conf_file)
        if not path.is_file():
            raise FileNotFoundError(f"Spark conf file not found: {path}")
        return path
    repo_root = Path(__file__).resolve().parents[2]
    for candidate in (
        repo_root / "conf" / CONF_FILE_NAME,
        Path.cwd() / "conf" / CONF_FILE_NAME,
        Path.cwd() / CONF_FILE_NAME,  # shipped with --files in cluster deploy mode
    ):
        if candidate.is_file():
            return candidate
    return None


def read_conf_file(path: Path | None) -> dict[str, str]:
    """Parse a spark-defaults file: ``key value`` (or ``key=value``) lines, ``#`` comments."""
    if path is None:
        return {}
    conf: dict[str, str] = {}
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find(" "), line.find("\t"), line.find("=")) if i > 0), default=-1)
        if sep < 0:
            raise ValueError(f"{path}:{lineno}: expected 'key value', got {raw!r}")
        key, value = line[:sep].strip(), line[sep + 1 :].strip().lstrip("=").strip()
        conf[key] = value
    return conf


Spark = SparkSession | SparkContext  # what a job runs on: a job's driver starts only the SparkContext


def build_session(
    app_name: str = "rocketsim",
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    conf_file: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Create (or return the active) SparkSession with the repo defaults, Arrow on and UTC
    (:func:`start_spark`'s SparkContext, and Spark SQL on it)."""
    conf = _spark_conf(app_name, master, extra_conf, conf_file)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("ROCKETSIM_SPARK_LOG_LEVEL", "WARN"))
    return spark


def start_spark(
    app_name: str = "rocketsim",
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    conf_file: str | os.PathLike[str] | None = None,
) -> SparkContext:
    """Create (or return the active) SparkContext with the same settings as :func:`build_session`, and no
    SparkSession: a job's driver only schedules tasks (Spark core), and Spark SQL's session costs the JVM
    seconds of CPU to start (docs/benchmarks.md). What needs SQL (the delta-spark engine) starts it on
    this context (:func:`session_of`)."""
    sc = SparkContext.getOrCreate(_spark_conf(app_name, master, extra_conf, conf_file))
    sc.setLogLevel(os.environ.get("ROCKETSIM_SPARK_LOG_LEVEL", "WARN"))
    return sc


def context_of(spark: Spark) -> SparkContext:
    """The SparkContext of a session, or the context itself."""
    return spark.sparkContext if isinstance(spark, SparkSession) else spark


def session_of(spark: Spark) -> SparkSession:
    """The session itself, or the SparkSession on a context (started on first use, with the context's
    settings: the ``spark.sql.*`` ones and the Delta extension :func:`_spark_conf` put there)."""
    return spark if isinstance(spark, SparkSession) else SparkSession.builder.getOrCreate()


def _spark_conf(
    app_name: str,
    master: str | None,
    extra_conf: Mapping[str, str] | None,
    conf_file: str | os.PathLike[str] | None,
) -> SparkConf:
    """The conf of a new SparkContext, the JVM started if it does not run yet. ``master=None`` keeps the
    master spark-submit chose, else ``local[*]``. The Delta extension is enabled only when
    ``io.delta.sql.DeltaSparkSessionExtension`` can be loaded by the driver JVM."""
    if os.environ.get(PREFLIGHT_ENV) == "1":
        raise SystemExit(PREFLIGHT_OK)  # the job's input is valid; the real run follows in spark-submit
    # Without this, pyspark starts workers with whatever `python3` is on PATH (maybe without pyarrow).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._jvm is not None
    if not submitted and os.environ.get(SUBMIT_ARGS_ENV):
        _start_jvm()  # the rocketsim command: spark-submit's options, as spark-submit.sh gives them
        submitted = True
    if submitted:
        # The JVM already runs (spark-submit or an earlier session): its conf is the base layer.
        SparkContext._ensure_initialized()
    conf = SparkConf()
    for key, value in read_conf_file(find_conf_file(conf_file)).items():
        conf.setIfMissing(key, value)
    for key, value in (extra_conf or {}).items():
        conf.set(key, str(value))
    if master is not None:
        conf.setMaster(master)
    elif not conf.contains("spark.master"):
        conf.setMaster(DEFAULT_MASTER)
    for key, value in REQUIRED_DEFAULTS.items():
        conf.setIfMissing(key, value)
    conf.setAppName(app_name)

    if not submitted:
        # Start the JVM with the final conf so driver memory and spark.jars take effect.
        SparkContext._ensure_initialized(conf=conf)
    if _delta_loadable(conf):
        extensions = [e for e in conf.get("spark.sql.extensions", "").split(",") if e]
        if DELTA_EXTENSION not in extensions:
            conf.set("spark.sql.extensions", ",".join([*extensions, DELTA_EXTENSION]))
        conf.setIfMissing("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    return conf


def _start_jvm() -> None:
    """Start the JVM as spark-submit with the options of ``PYSPARK_SUBMIT_ARGS``
    (:func:`rocketsim.spark.submit.run_as_driver` sets them), its stderr (Spark's logging) into the log
    file ``ROCKETSIM_SPARK_LOG`` names, if any."""
    log = os.environ.get(SPARK_LOG_ENV)
    if log:
        with open(log, "ab") as spark_log:  # the JVM holds its own copy
            gateway = launch_gateway(popen_kwargs={"stderr": spark_log})
    else:
        gateway = launch_gateway()
    SparkContext._ensure_initialized(gateway=gateway)


def delta_enabled(spark: Spark) -> bool:
    """Whether this session (or the sessions of this context) runs the delta-spark extension (so
    ``format("delta")`` works)."""
    if isinstance(spark, SparkSession):
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    else:
        extensions = spark.getConf().get("spark.sql.extensions", "") or ""
    return DELTA_EXTENSION in extensions.split(",") and _jvm_class_loadable(DELTA_EXTENSION)


def _delta_loadable(conf: SparkConf) -> bool:
    """Delta's extension class is on the driver classpath (via py4j), or a Delta jar is configured."""
    if _jvm_class_loadable(DELTA_EXTENSION):
        return True
    jars = [j for key in ("spark.jars", "spark.driver.extraClassPath") for j in conf.get(key, "").split(",")]
    homes = [os.environ.get("SPARK_HOME", ""), os.path.dirname(pyspark.__file__)]
    for home in filter(None, homes):
        jars += [p.name for p in (Path(home) / "jars").glob("delta-spark*.jar")]
    # A jar named but not loadable by the gateway JVM (e.g. added later) is still put on the classpath
    # by SparkContext, so trust its name.
    return any(Path(j.strip()).name.startswith(("delta-spark", "delta-core")) for j in jars if j.strip())


def _jvm_class_loadable(name: str) -> bool:
    jvm = SparkContext._jvm
    if jvm is None:
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
    except Exception:  # py4j wraps ClassNotFoundException; any failure means "not usable"
        return False
    return True
