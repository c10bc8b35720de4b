"""``python -m rocketsim.bench pipeline`` (``make bench``): what users run, against the Parquet floor.

Every figure is the wall-clock time of a whole process, start-up included, started the way the README
starts it (``./spark-submit.sh --master 'local[2]' ...``):

- **floor**: :mod:`rocketsim.bench.floor`, Spark writing N ``send_results``-shaped rows to Parquet;
- **pipeline**: ``jobs/pipeline.py``, every table of the run (messages to run_summary and ``runs``);
- **compare**: ``jobs/compare.py`` with two variants (fault strategy off / on).

The cases (``--sizes``, default 400k, 2M and 10M; ``--modes`` sync and async):

More: docs/reference/modules.md, rocketsim/bench/pipeline.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from rocketsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = str(ROOT / "spark-submit.sh")
FLOOR = str(Path(__file__).with_name("floor.py"))
STEADY = str(ROOT / "conf" / "scenarios" / "steady.toml")
BROWNOUT = str(ROOT / "conf" / "scenarios" / "brownout.toml")
ASYNC = "producers.send_mode={ async = 1.0 }"
FAULT_OFF_ON = (
    "--variant",
    "fault_off:producers.send_latency_fault_enable=false",
    "--variant",
    "fault_on:producers.send_latency_fault_enable=true",
)
GIB = 2**30
CAPACITY = str(ROOT / "conf" / "scenarios" / "capacity_steady.toml")
PIPELINE_TARGET, COMPARE_TARGET, COUPLED_TARGET, WORKER_LIMIT_GIB = 1.5, 3.0, 1.5, 2.0
# summaries-only: an hour at 100,000 msg/s (360M messages) in 10 minutes
SUMMARY_RATE, HOUR_MESSAGES, HOUR_LIMIT_S = 600_000, 360_000_000, 600.0
SUMMARY_SETS = ("workload.rate_per_s=100000", "producers.threads=64")
LARGE = 100_000_000  # --large: the 100M case
SKEW_MAX = 10_000_000  # the skewed and one-producer cases run at the largest size up to this

# "[one pass] ... (1.2 s producer tasks, 0.3 s broker tasks, 0.1 s driver merge, 0.4 s commits)"
STAGES = re.compile(
    r"\((?P<producers>[\d.]+) s producer tasks, (?P<brokers>[\d.]+) s broker tasks, "
    r"(?P<driver>[\d.]+) s driver merge, (?P<commits>[\d.]+) s commits\)"
)
DONE = re.compile(r"done in (?P<s>[\d.]+) s")
ROUNDS = re.compile(r"\[iterative\] (?P<rounds>\d+) rounds")


@dataclass(frozen=True)
class Case:
    """One job to time: the job file, its arguments, and what it is called in the table."""

    name: str
    job: str  # "pipeline" | "compare"
    messages: int
    scenario: str
    overrides: tuple[str, ...] = ()
    target: float | None = PIPELINE_TARGET  # None: a cost to state, not a bound
    tables: str = ""  # --tables (a summaries-only run: "summary")
    min_rate: int | None = None  # the producer tasks' messages/s to reach (a summaries-only run)
    against: str | None = None  # the case whose job time the ratio is over (None: the floor's)

    def argv(self, warehouse: Path, master: str) -> list[str]:
        overrides = (f"workload.messages={self.messages}", *self.overrides, *self.span_kept())
        sets = [a for o in overrides for a in ("--set", o)]
        extra = FAULT_OFF_ON if self.job == "compare" else ("--tables", self.tables) if self.tables else ()
        return [
            SUBMIT,
            "--master",
            master,
            str(ROOT / "jobs" / f"{self.job}.py"),
            "--scenario",
            self.scenario,
            "--warehouse",
            str(warehouse),
            "--run-id",
            "bench",
            *sets,
            *extra,
        ]

    def span_kept(self) -> tuple[str, ...]:
        """A rate that keeps the scenario file's span when its messages would end sooner (a small size):
        its faults stay in the run (a run refuses a fault after its span)."""
        wl = load_scenario(self.scenario).workload
        if self.messages / wl.rate_per_s >= wl.span_s:
            return ()
        return (f"workload.rate_per_s={self.messages / wl.span_s:.6g}",)


@dataclass
class Timed:
    """One whole process: wall seconds, peak RSS, and what it printed."""

    seconds: float
    driver_peak: int
    worker_peak: int  # the largest single Python worker
    stdout: str


@dataclass
class Row:
    """One case: medians over the repeats."""

    case: str
    messages: int
    floor_s: float
    job_s: float
    ratio: float
    target: float | None
    messages_per_s: int
    stages_s: dict[str, float] = field(default_factory=dict)
    driver_peak_mib: int = 0
    worker_peak_mib: int = 0
    repeats: int = 1
    min_rate: int | None = None
    against: str = "floor"  # what the ratio is over: the floor, or another case's job

    @property
    def task_rate(self) -> int:
        """Messages per second of the producer tasks (0: not reported)."""
        seconds = self.stages_s.get("producers", 0.0)
        return round(self.messages / seconds) if seconds else 0

    @property
    def met(self) -> bool:
        fast = self.target is None or self.ratio <= self.target
        if self.min_rate is not None:  # a summaries-only run: its rate, and the hour's 10 minutes
            fast = self.task_rate >= self.min_rate
            fast = fast and (self.messages < HOUR_MESSAGES or self.job_s <= HOUR_LIMIT_S)
        return fast and self.worker_peak_mib < WORKER_LIMIT_GIB * 1024


class RssSampler:
    """Peak RSS under one process: the driver (spark-submit's JVM and the job's Python) and the
    largest single Python worker (``pyspark.daemon``/``pyspark.worker`` processes)."""

    def __init__(self, root: int, period_s: float = 0.2) -> None:
        self.root, self.period_s = root, period_s
        self.driver_peak = self.worker_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        try:
            procs = [psutil.Process(self.root), *psutil.Process(self.root).children(recursive=True)]
        except psutil.Error:
            return
        driver = 0
        for proc in procs:
            try:
                name, rss = " ".join(proc.cmdline()), proc.memory_info().rss
            except psutil.Error:
                continue  # a process that just ended
            if "pyspark.daemon" in name or "pyspark.worker" in name:
                self.worker_peak = max(self.worker_peak, rss)
            else:
                driver += rss
        self.driver_peak = max(self.driver_peak, driver)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.period_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_process(argv: list[str]) -> Timed:
    """Run ``argv`` to its end, timing it and sampling its RSS; raises if it fails."""
    t = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    with RssSampler(proc.pid) as rss:
        out, err = proc.communicate()
    seconds = time.monotonic() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{err[-3000:]}")
    return Timed(seconds, rss.driver_peak, rss.worker_peak, out)


def floor(n: int, work: Path, master: str) -> Timed:
    out = work / f"floor-{n}"
    try:
        return run_process([SUBMIT, "--master", master, FLOOR, str(n), str(out)])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def job(case: Case, work: Path, master: str) -> Timed:
    warehouse = work / f"wh-{re.sub(r'[^A-Za-z0-9.]+', '-', case.name)}-{case.messages}"
    try:
        return run_process(case.argv(warehouse, master))
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


def stages(timed: Timed) -> dict[str, float]:
    """The stage breakdown the pipeline printed, and the rest of the process (start-up, ``runs``)."""
    found, done = STAGES.search(timed.stdout), DONE.search(timed.stdout)
    if not found:
        return {}
    out = {k: float(v) for k, v in found.groupdict().items()}
    out["rest of the process"] = round(timed.seconds - sum(out.values()), 1)
    if done:
        out["start-up before the run"] = round(timed.seconds - float(done["s"]), 1)
    rounds = ROUNDS.search(timed.stdout)
    if rounds:
        out["iterative rounds"] = float(rounds["rounds"])
    return out


def cases_for(n: int, modes: list[str], largest: bool, hot_share: float, one_producer: bool) -> list[Case]:
    """The pipeline cases of one size (see the module docstring)."""
    scenario = STEADY if n == 400_000 else BROWNOUT
    label = "steady" if scenario == STEADY else "brownout"
    out = [Case(f"{label} {m}", "pipeline", n, scenario, (ASYNC,) if m == "async" else ()) for m in modes]
    if largest and hot_share > 0:
        out.append(Case(f"hot {hot_share:g}", "pipeline", n, BROWNOUT, (f"workload.hot_share={hot_share}",)))
    if largest and one_producer:
        out.append(
            # its bound is the worker's memory (one producer runs on one core: no ratio target)
            Case(
                "one producer",
                "pipeline",
                n,
                BROWNOUT,
                ("producers.count=1", "producers.threads=16"),
                target=None,
            )
        )
    return out


def summary_case(n: int) -> Case:
    """A summaries-only run of n messages: steady.toml at 100,000 msg/s (the hour: 360M)."""
    return Case(
        "summaries only",
        "pipeline",
        n,
        STEADY,
        SUMMARY_SETS,
        target=None,
        tables="summary",
        min_rate=SUMMARY_RATE,
    )


def coupled_cases(n: int) -> list[Case]:
    """The closed-loop model's cost at n messages: capacity_steady.toml as shipped (iterative coupling)
    against the same run with open-loop brokers."""
    return [
        Case("capacity open", "pipeline", n, CAPACITY, ("brokers.coupling=open",), target=None),
        Case("capacity iterative", "pipeline", n, CAPACITY, target=COUPLED_TARGET, against="capacity open"),
    ]


def measure(cases: list[Case], n: int, work: Path, ns: argparse.Namespace) -> list[Row]:
    """The floor of size n and each case, ``ns.repeat`` times; medians."""
    floors: list[float] = []
    timed: dict[str, list[Timed]] = {c.name: [] for c in cases}
    for r in range(ns.repeat):
        if any(c.min_rate is None for c in cases):  # a rate target needs no floor
            floors.append(floor(n, work, ns.master).seconds)
            print(f"  N={n:,} run {r + 1}: floor {floors[-1]:.1f} s", flush=True)
        for c in cases:
            timed[c.name].append(job(c, work, ns.master))
            print(f"  N={n:,} run {r + 1}: {c.name} {timed[c.name][-1].seconds:.1f} s", flush=True)
    f = statistics.median(floors) if floors else 0.0
    rows = []
    for c in cases:
        runs = sorted(timed[c.name], key=lambda t: t.seconds)
        mid = runs[len(runs) // 2]
        s = mid.seconds
        base = f if c.against is None else statistics.median(t.seconds for t in timed[c.against])
        rows.append(
            Row(
                c.name,
                n,
                round(f, 1),
                round(s, 1),
                round(s / base, 2) if base else 0.0,
                c.target,
                round(n / s),
                stages(mid),
                round(statistics.median(t.driver_peak for t in runs) / 2**20),
                round(max(t.worker_peak for t in runs) / 2**20),
                ns.repeat,
                c.min_rate,
                c.against or "floor",
            )
        )
    return rows


def _sizes(text: str) -> list[int]:
    """A comma-separated list of message counts (``_`` allowed), in increasing order."""
    return sorted(int(s.replace("_", "")) for s in text.split(",") if s)


def machine() -> str:
    cpu = platform.processor()
    info = Path("/proc/cpuinfo")
    if info.exists():
        cpu = next(
            (ln.split(":", 1)[1].strip() for ln in info.read_text().splitlines() if "model name" in ln), cpu
        )
    return f"{os.cpu_count()} cores ({cpu}), {psutil.virtual_memory().total / GIB:.0f} GiB"


def _target(target: float | None) -> str:
    return "-" if target is None else f"{target:.1f}"


def print_table(rows: list[Row], master: str) -> None:
    print(f"\nrocketsim: whole processes against the Parquet floor, --master {master}, {machine()}")
    print(
        f"{'case':>16} {'messages':>11} {'floor s':>8} {'job s':>7} {'ratio':>6} {'target':>6} "
        f"{'msg/s':>9} {'driver MiB':>10} {'worker MiB':>10}  stages (s)"
    )
    for r in rows:
        breakdown = ", ".join(f"{k} {v:g}" for k, v in r.stages_s.items())
        print(
            f"{r.case:>16} {r.messages:>11,} {r.floor_s:>8.1f} {r.job_s:>7.1f} {r.ratio:>6.2f} "
            f"{_target(r.target):>6} {r.messages_per_s:>9,} {r.driver_peak_mib:>10,} "
            f"{r.worker_peak_mib:>10,}  {breakdown}"
        )
    for r in rows:
        print(verdict(r))


def verdict(r: Row) -> str:
    """One case's PASS or FAIL line: what it was held to and what it did (a summaries-only run has no
    floor, so its line gives its job's seconds and its producer tasks' rate, not a ratio)."""
    bound = "no ratio target: a cost to state" if r.target is None else f"target <= {r.target}"
    done = f"{r.ratio:.2f}x"
    if r.min_rate is not None:
        bound = f"producer tasks {r.task_rate:,} msg/s, target >= {r.min_rate:,}"
        bound += f"; the hour under {HOUR_LIMIT_S:g} s" if r.messages >= HOUR_MESSAGES else ""
        done = f"job {r.job_s:,.1f} s"
    bound += "" if r.against == "floor" else f" of {r.against}"
    return (
        f"{'PASS' if r.met else 'FAIL'} {r.case} at {r.messages:,}: {done} ({bound}), "
        f"largest worker {r.worker_peak_mib:,} MiB (limit {WORKER_LIMIT_GIB:g} GiB)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rocketsim.bench pipeline", description=__doc__)
    p.add_argument("--sizes", default="400000,2000000,10000000", help="comma-separated message counts")
    p.add_argument("--large", action="store_true", help=f"also the {LARGE:,}-message case (sync and async)")
    p.add_argument("--modes", default="sync,async", help="send modes of the pipeline cases")
    p.add_argument("--compare-size", type=int, default=2_000_000, help="jobs/compare.py's size (0: none)")
    p.add_argument("--hot-share", type=float, default=0.5, help="the skewed run's share (0: no skewed run)")
    p.add_argument(
        "--one-producer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="at the largest size, also one producer sending every message",
    )
    p.add_argument(
        "--coupled-sizes", default="", help="sizes of the closed-loop cost runs (capacity_steady.toml)"
    )
    p.add_argument(
        "--summary-sizes",
        default="20000000",
        help="sizes of the summaries-only runs (steady.toml at 100,000 msg/s; 360000000: the hour)",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per case; figures are medians")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", default="bench-results/pipeline.json", help="where to write the table as JSON")
    ns = p.parse_args(argv)
    sizes = sorted({*_sizes(ns.sizes), *([LARGE] if ns.large else [])})
    modes = [m for m in ns.modes.split(",") if m]
    coupled = _sizes(ns.coupled_sizes)
    skewed = max((n for n in sizes if n <= SKEW_MAX), default=0)
    work = Path(tempfile.mkdtemp(prefix="rocketsim-bench-"))
    rows: list[Row] = []
    try:
        for n in sizes:
            cases = cases_for(n, modes, n == skewed, ns.hot_share, ns.one_producer)
            if n == ns.compare_size:
                cases.append(Case("compare 2 variants", "compare", n, BROWNOUT, target=COMPARE_TARGET))
            if n in coupled:
                cases += coupled_cases(n)
            rows += measure(cases, n, work, ns)
        if ns.compare_size and ns.compare_size not in sizes:
            rows += measure(
                [Case("compare 2 variants", "compare", ns.compare_size, BROWNOUT, target=COMPARE_TARGET)],
                ns.compare_size,
                work,
                ns,
            )
        for n in sorted(set(coupled) - set(sizes)):
            rows += measure(coupled_cases(n), n, work, ns)
        for n in sorted(int(s.replace("_", "")) for s in ns.summary_sizes.split(",") if s):
            rows += measure([summary_case(n)], n, work, ns)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(rows, ns.master)
    out = Path(ns.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"machine": machine(), "master": ns.master, "rows": [asdict(r) | {"met": r.met} for r in rows]},
            indent=2,
        )
    )
    print(f"written: {out}")
    return 0 if all(r.met for r in rows) else 1
