"""``rocketsim run``, ``compare`` and ``capacity``: the jobs of ``jobs/pipeline.py`` (and its stages),
``jobs/compare.py`` and ``jobs/capacity.py`` with their own options and checks (:mod:`rocketsim.spark.cli`:
bad input is one line and exit 2 before Spark starts), plus spark-submit's options, with this process as
the Spark driver (:func:`rocketsim.command.options.run_on_spark`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketsim.command import options
from rocketsim.command.jobs import ALL, RUN_JOBS, capacity_job, compare_job, run_stage_job
from rocketsim.spark.cli import parse_capacity_args, parse_compare_args, parse_job_args

RUN_DESCRIPTION = """\
Run a scenario on Spark: generate its messages, simulate every send, number what the brokers store and
summarize, in one pass, into the warehouse's Delta tables; the run is reconciled, then published at once
(readers see the old run until then). --stage runs one stage of it on the run's published tables."""
RUN_EXAMPLES = (
    "rocketsim run --scenario conf/scenarios/steady.toml",
    "rocketsim run --scenario conf/scenarios/brownout.toml --set workload.messages=100000 --run-id b1",
    "rocketsim run --scenario conf/scenarios/steady.toml --stage summarize --window-ms 60000",
    "rocketsim run --scenario conf/scenarios/steady.toml --tables summary \\\n"
    "      --set workload.messages=0 --set workload.duration_s=3600",
    "rocketsim run --master spark://spark-master:7077 --executor-memory 4g \\\n"
    "      --scenario conf/scenarios/brownout.toml --warehouse /shared/warehouse --partitions 64",
)
STAGE = options.Extra(
    "run",
    "--stage",
    {"choices": list(RUN_JOBS), "default": ALL, "metavar": "STAGE", "help": "one of the above (default all)"},
    "what --stage runs:\n" + "\n".join(f"  {name:<13}{job.summary}" for name, job in RUN_JOBS.items()),
)

COMPARE_DESCRIPTION = """\
Compare variants of one scenario on the very same messages and fault timeline, in one Spark job: the
comparisons and comparison_windows tables, and a table of each metric's delta against the baseline."""
COMPARE_EXAMPLES = (
    "rocketsim compare --scenario conf/scenarios/brownout.toml \\\n"
    "      --variant fault_off:producers.send_latency_fault_enable=false \\\n"
    "      --variant fault_on:producers.send_latency_fault_enable=true",
    "rocketsim compare --scenario conf/scenarios/brownout.toml \\\n"
    "      --sweep producers.client_version=4.9.8,5.3.3 \\\n"
    "      --sweep producers.send_latency_fault_enable=false,true",
)

CAPACITY_DESCRIPTION = """\
Find the smallest cluster (brokers, or write queues per broker) that meets a send-latency p99 target and
a failure bound for a scenario, in one Spark job: every size on the same messages, the sweep's tables, the
answer and a chart."""
CAPACITY_EXAMPLES = (
    "rocketsim capacity --scenario conf/scenarios/cascade.toml --brokers 4,5,6,7 --target-p99-ms 200",
    "rocketsim capacity --scenario conf/scenarios/steady.toml --write-queues 2,4,8 --target-p99-ms 50 \\\n"
    "      --chart queues.png",
)


def run(argv: Sequence[str] | None = None, prog: str = "rocketsim run") -> int:
    """``rocketsim run``: jobs/pipeline.py, or with --stage the job of one stage; returns the exit code."""
    ns, rest = options.split(argv, prog, (STAGE,))
    epilog = options.help_text(prog, RUN_EXAMPLES, (STAGE,))
    # exits 2 before Spark; --tables is the whole run's
    args, scenario = parse_job_args(
        rest, prog, RUN_DESCRIPTION, epilog, whole_run=ns.stage == ALL, more_usage=options.usage((STAGE,))
    )
    return options.run_on_spark(ns, RUN_JOBS[ns.stage].job, lambda: run_stage_job(ns.stage, args, scenario))


def compare(argv: Sequence[str] | None = None, prog: str = "rocketsim compare") -> int:
    """``rocketsim compare``: jobs/compare.py; returns the exit code."""
    ns, rest = options.split(argv, prog)
    epilog = options.help_text(prog, COMPARE_EXAMPLES)
    args, base, scenarios = parse_compare_args(rest, prog, COMPARE_DESCRIPTION, epilog, options.usage())
    return options.run_on_spark(ns, "compare", lambda: compare_job(args, base, scenarios))


def capacity(argv: Sequence[str] | None = None, prog: str = "rocketsim capacity") -> int:
    """``rocketsim capacity``: jobs/capacity.py; returns the exit code."""
    ns, rest = options.split(argv, prog)
    epilog = options.help_text(prog, CAPACITY_EXAMPLES)
    args, base, scenarios = parse_capacity_args(rest, prog, CAPACITY_DESCRIPTION, epilog, options.usage())
    return options.run_on_spark(ns, "capacity", lambda: capacity_job(args, base, scenarios))
