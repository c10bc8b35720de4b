"""How a rocketsim job meets Spark, defined once for ``./spark-submit.sh`` and the ``rocketsim`` command:
the spark-submit of the pip-installed pyspark (``SPARK_HOME`` is its folder, whatever the shell says), the
package zipped and shipped with ``--py-files``, ``conf/spark-defaults.conf`` as the properties file unless
one is given, ``local[*]`` unless a master is given, the venv's Python for the executors, numba's cache
in ``build/numba-cache``, and Spark's own logging (the JVM's stderr) in a log file per job,
``build/logs/spark-<job>-<UTC time>-<pid>.log``, the newest 50 kept.

* ``./spark-submit.sh`` runs :func:`main` (this file, with the standard library only: it runs before
  anything else is known to import): it checks the job in plain Python first (the preflight: bad input
  ends there with exit code 2 and one line), then runs spark-submit on the job file, and prints the
  driver's one error line (written to ``ROCKETSIM_ERROR_FILE``) on stderr once the JVM ended.
* The ``rocketsim`` command is itself the driver (:func:`run_as_driver`): the same spark-submit options
  go into ``PYSPARK_SUBMIT_ARGS``, with which :func:`rocketsim.spark.session.build_session` starts the
  JVM (Spark's logging into the log file), so the driver's stderr is the user's terminal.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ERROR_FILE_ENV = "ROCKETSIM_ERROR_FILE"  # where the driver writes its one error line under spark-submit
SPARK_LOG_ENV = "ROCKETSIM_SPARK_LOG"  # the file Spark's logging goes to, which the error line names
LOG_DIR_ENV = "ROCKETSIM_LOG_DIR"
PREFLIGHT_ENV = "ROCKETSIM_PREFLIGHT_ONLY"  # build_session ends a preflight with PREFLIGHT_OK
PREFLIGHT_OK = 75
SUBMIT_ARGS_ENV = "PYSPARK_SUBMIT_ARGS"  # pyspark starts its JVM with these spark-submit options
DEFAULT_MASTER = "local[*]"
CONF_FILE = Path("conf") / "spark-defaults.conf"
KEEP_LOGS = 50
EXIT_USAGE = 2
# spark-submit's options that take no value; every other option takes one
FLAGS = frozenset({"--verbose", "-v", "--supervise", "--version", "--usage-error"})
# what a job file that starts Spark through build_session names (so its preflight stops there)
SPARK_JOB_MARKERS = ("build_session", "run_job", "rocketsim.command.jobs")
PACKAGE = Path(__file__).resolve().parents[1]  # the rocketsim package this file belongs to


class UsageError(Exception):
    """A spark-submit command line that cannot be run (exit code 2, one line)."""


@dataclass
class SparkOptions:
    """spark-submit's options as given (passed through), and what rocketsim adds around them."""

    args: list[str] = field(default_factory=list)  # passed through, in order
    py_files: str = ""  # the user's --py-files, shipped after the package
    files: str = ""  # the user's --files
    has_master: bool = False
    has_properties: bool = False
    cluster_mode: bool = False
    help: bool = False  # -h or --help among them

    def add(self, option: str, value: str | None) -> None:
        """One option (``value`` None: a flag, or ``--option=value`` in one word)."""
        name, _, inline = option.partition("=")
        given = inline if "=" in option else value
        if name == "--py-files":
            self.py_files = given or ""
            return
        if name == "--files":
            self.files = given or ""
            return
        master_conf = name in ("--conf", "-c") and (given or "").startswith("spark.master=")
        self.has_master |= name == "--master" or master_conf
        self.has_properties |= name == "--properties-file"
        self.cluster_mode |= name == "--deploy-mode" and given == "cluster"
        self.args += [option] if value is None else [option, value]


def parse_spark_options(argv: Sequence[str]) -> tuple[SparkOptions, list[str]]:
    """spark-submit's options up to the first word that is not one (the job file); (options, the rest)."""
    opts = SparkOptions()
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        option = argv[i]
        if option in ("-h", "--help"):
            opts.help = True
            i += 1
            continue
        if option in FLAGS or option.startswith("--") and "=" in option:
            opts.add(option, None)
            i += 1
            continue
        if i + 1 >= len(argv):
            raise UsageError(f"option {option} needs a value (see -h)")
        opts.add(option, argv[i + 1])
        i += 2
    return opts, list(argv[i:])


def submit_arguments(opts: SparkOptions, package_zip: Path, conf_file: Path | None) -> list[str]:
    """spark-submit's options for a job: the package and the user's --py-files, the default master and
    properties file unless given, then the user's options (which win)."""
    extra = ["--py-files", ",".join(filter(None, [str(package_zip), opts.py_files]))]
    if not opts.has_master:
        extra += ["--master", DEFAULT_MASTER]
    files = opts.files
    if conf_file is not None:
        if not opts.has_properties:
            extra += ["--properties-file", str(conf_file)]
        if opts.cluster_mode:  # a cluster-mode driver runs elsewhere: build_session finds it in its CWD
            files = ",".join(filter(None, [str(conf_file), files]))
    if files:
        extra += ["--files", files]
    return [*extra, *opts.args]


def project_root() -> Path:
    """The folder of ``conf/`` and ``build/``: the checkout holding the package, else the current one."""
    checkout = PACKAGE.parent
    return checkout if (checkout / CONF_FILE).is_file() else Path.cwd()


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java 17 or newer), or None."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return (
            "error: Java 17 is required by Spark and 'java' is not on PATH "
            "(Debian: apt-get install -y openjdk-17-jre-headless)"
        )
    first = (done.stderr or done.stdout).strip().splitlines()[:1]
    text = first[0] if first else ""
    quoted = text.split('"')[1] if text.count('"') >= 2 else ""
    major = quoted.split(".")[0]
    if not major.isdigit() or int(major) < 17:
        return f"error: Spark 4 needs Java 17 or newer, found: {text}"
    return None


def zip_package(build: Path) -> Path:
    """The package zipped into ``build/rocketsim.zip`` for the executors (written aside, then renamed, so
    concurrent runs never see a half-written zip)."""
    build.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rocketsim.", suffix=".zip", dir=build)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for dirpath, dirnames, filenames in os.walk(PACKAGE):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(filenames):
                    if not name.endswith((".pyc", ".pyo")):
                        full = os.path.join(dirpath, name)
                        zf.write(full, os.path.relpath(full, PACKAGE.parent))
        os.replace(tmp, build / "rocketsim.zip")
        return build / "rocketsim.zip"
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def spark_environment(root: Path) -> dict[str, str]:
    """The environment Spark runs in: the pip-installed Spark whatever ``SPARK_HOME`` says (versions must
    match), this Python for the executors (else pyspark takes whatever ``python3`` is on PATH), the quiet
    log4j of ``conf/`` and numba's cache under ``build/`` unless the caller chose others."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"pyspark is not installed for {sys.executable} (make installs it into .venv)")
    env = {
        "SPARK_HOME": list(spec.submodule_search_locations)[0],
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    if (root / "conf").is_dir():
        env["SPARK_CONF_DIR"] = os.environ.get("SPARK_CONF_DIR", str(root / "conf"))
    env["NUMBA_CACHE_DIR"] = os.environ.get("NUMBA_CACHE_DIR", str(root / "build" / "numba-cache"))
    return env


def new_log(root: Path, job: str) -> Path:
    """A new log file's path for a job's Spark logging (its folder made)."""
    folder = Path(os.environ.get(LOG_DIR_ENV) or root / "build" / "logs")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"spark-{job}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.log"


def finish_log(log: Path, ok: bool) -> None:
    """A successful job's empty log goes; the newest :data:`KEEP_LOGS` logs stay."""
    if ok and log.is_file() and log.stat().st_size == 0:
        log.unlink()
    logs = sorted(log.parent.glob("spark-*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in logs[KEEP_LOGS:]:
        with contextlib.suppress(OSError):
            old.unlink()


def run_as_driver(
    opts: SparkOptions, job: str, body: Callable[[], int], extra_env: Mapping[str, str] | None = None
) -> int:
    """``body()`` (a job, returning its exit code) with this process as the driver spark-submit would
    start (the ``rocketsim`` command): the package zipped, the environment (and ``extra_env``) and
    spark-submit's options set for :func:`rocketsim.spark.session.build_session`, and as they were again
    afterwards; Spark's logging goes to a new log file (kept if the job failed, or if Spark said
    something)."""
    root = project_root()
    conf = root / CONF_FILE
    args = submit_arguments(opts, zip_package(root / "build"), conf if conf.is_file() else None)
    log = new_log(root, job)
    env = {**spark_environment(root), **(extra_env or {}), SPARK_LOG_ENV: str(log)}
    env[SUBMIT_ARGS_ENV] = shlex.join([*args, "pyspark-shell"])
    saved = {k: os.environ.get(k) for k in [*env, ERROR_FILE_ENV]}
    os.environ.update(env)
    os.environ.pop(ERROR_FILE_ENV, None)  # the one error line goes to this process's stderr
    rc = 1
    try:
        rc = body()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        finish_log(log, rc == 0)
    return rc


USAGE = """\
usage: spark-submit.sh [spark-submit options] JOB.py [job arguments]

Runs JOB.py (a path, or one relative to the repo such as jobs/pipeline.py) with the spark-submit of
the pyspark installed in {venv}. The rocketsim package is zipped into build/ and shipped with
--py-files; conf/spark-defaults.conf is the properties file unless --properties-file is given.

Spark options pass through unchanged, e.g.
  --master spark://127.0.0.1:7077   (default: local[*])
  --conf key=value   --driver-memory 4g   --executor-memory 2g   --jars delta-spark.jar,...
Executors use the venv's Python; on a remote cluster point them at theirs with
  --conf spark.pyspark.python=/path/to/python

examples:
  spark-submit.sh jobs/pipeline.py --scenario conf/scenarios/steady.toml
  spark-submit.sh --master spark://127.0.0.1:7077 jobs/pipeline.py \
      --scenario conf/scenarios/brownout.toml --warehouse /shared/wh
The rocketsim command runs the same jobs with the same options: rocketsim --help
"""


def _job_file(job: str, root: Path) -> Path:
    path = Path(job)
    if not path.is_file() and (root / job).is_file():
        path = root / job
    if not path.is_file():
        raise UsageError(f"job file not found: {job}")
    return path


def _preflight(job: Path, job_args: Sequence[str], opts: SparkOptions) -> int | None:
    """The job in plain Python up to its build_session (which then exits 75), so bad arguments or a bad
    scenario fail with exit code 2 and one line before the JVM starts (a Python driver's stderr would
    otherwise reach stdout through spark-submit). Skipped for jobs without Spark (they would simply run
    twice), in cluster deploy mode (the driver's files are elsewhere), and with ROCKETSIM_PREFLIGHT=0.
    Returns the exit code to end with, or None to go on (exit 0: the job finished without Spark, e.g.
    --help)."""
    text = job.read_text(encoding="utf-8", errors="replace")
    if opts.cluster_mode or os.environ.get("ROCKETSIM_PREFLIGHT", "1") == "0":
        return None
    if not any(marker in text for marker in SPARK_JOB_MARKERS):
        return None
    env = {**os.environ, PREFLIGHT_ENV: "1"}
    rc = subprocess.run([sys.executable, str(job), *job_args], env=env).returncode
    return None if rc == PREFLIGHT_OK else _shell_code(rc)


def _shell_code(rc: int) -> int:
    """A child's exit code as a shell reports it (killed by signal N: 128 + N)."""
    return 128 - rc if rc < 0 else rc


def submit(argv: Sequence[str], root: Path) -> int:
    """``./spark-submit.sh``'s work after the venv exists (module docstring); returns the exit code."""
    opts, rest = parse_spark_options(argv)
    if opts.help:
        print(USAGE.format(venv=root / ".venv"), end="")
        return 0
    if not rest:
        raise UsageError("")
    job, job_args = _job_file(rest[0], root), rest[1:]
    problem = java_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    stop = _preflight(job, job_args, opts)
    if stop is not None:
        return stop
    env = {**os.environ, **spark_environment(root)}
    submitter = Path(sys.executable).parent / "spark-submit"
    if not os.access(submitter, os.X_OK):
        submitter = Path(env["SPARK_HOME"]) / "bin" / "spark-submit"
    conf = root / CONF_FILE
    args = submit_arguments(opts, zip_package(root / "build"), conf if conf.is_file() else None)
    log = new_log(root, job.stem)
    fd, error_file = tempfile.mkstemp(prefix=".rocketsim-error.", dir=root / "build")
    os.close(fd)
    env |= {ERROR_FILE_ENV: error_file, SPARK_LOG_ENV: str(log)}
    rc = 1
    try:
        with open(log, "ab") as spark_log:
            proc = subprocess.Popen([str(submitter), *args, str(job), *job_args], env=env, stderr=spark_log)
            try:
                rc = _shell_code(proc.wait())
            except KeyboardInterrupt:  # the JVM got the same SIGINT: let it end
                rc = _shell_code(proc.wait())
        said = Path(error_file).read_text(encoding="utf-8", errors="replace")
        if said:
            print(said, end="", file=sys.stderr)
        elif rc != 0:
            print(
                f"error: {job.name} ended with exit code {rc} without saying why (Spark's log: {log})",
                file=sys.stderr,
            )
    finally:
        os.unlink(error_file)
        finish_log(log, rc == 0)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = PACKAGE.parent  # the script's checkout
    # SIGTERM: end with the code a shell gives it, the temporary files removed on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return submit(argv, root)
    except UsageError as exc:
        if str(exc):
            print(f"error: {exc}", file=sys.stderr)
        else:
            print(USAGE.format(venv=root / ".venv"), end="", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
