"""``python -m rocketsim.bench digest``: a digest of every table of the shipped scenarios, to prove that a
change kept the behaviour (or to show exactly which tables it changed).

More: docs/reference/modules.md, rocketsim/bench/digest.py.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from rocketsim.stage.graph import RUN_TABLES

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("steady", "broker_outage", "brownout", "flapping", "hung_broker")
LINES = ("4.9.7", "4.9.8", "5.3.3")
MESSAGES = 20_000
# At their own rates 20,000 messages end before most fault windows start; these rates spread the same
# 20,000 messages over the whole fault timeline (the "-span" cases).
SPAN_RATES = {"broker_outage": 55.0, "brownout": 40.0, "flapping": 40.0, "hung_broker": 95.0}
# what the shipped scenarios leave out, on top of steady.toml
MIXED = (
    "producers.send_mode.sync=0.5",
    "producers.send_mode.async=0.3",
    "producers.send_mode.oneway=0.2",
    "workload.message_types.normal=0.6",
    "workload.message_types.ordered=0.1",
    "workload.message_types.delay=0.1",
    "workload.message_types.transaction=0.1",
    "workload.message_types.batch=0.1",
    "workload.invalid.bad_topic=0.002",
    "workload.invalid.oversize_body=0.002",
    "workload.invalid.reserved_property=0.002",
    "producers.send_latency_fault_enable=true",
    "faults=[{broker='broker-b', kind='slowdown', start_s=1.0, end_s=3.0, factor=40.0}]",
)
# the closed-loop scenarios (brokers.coupling = iterative), each on its own client line, and the exact joint
# loop on a smaller run of two of them
CLOSED_LOOP = ("cascade", "overload_retry", "store_stall", "capacity_steady")
JOINT = {"cascade": 4_000, "store_stall": 4_000}
TABLES = RUN_TABLES  # every table of a run (the stage graph)
RUNS_WALL_CLOCK = ("started_at", "wall_time_s", "code_version")


def cases() -> list[tuple[str, str, list[str]]]:
    """(case name, scenario file, overrides) of every run the digest makes."""
    out = []
    for line in LINES:
        common = [f"workload.messages={MESSAGES}", f"producers.client_version={line}"]
        for name in SCENARIOS:
            out.append((f"{name}-{line}", f"conf/scenarios/{name}.toml", common))
            if name in SPAN_RATES:
                span = [*common, f"workload.rate_per_s={SPAN_RATES[name]}"]
                out.append((f"{name}-{line}-span", f"conf/scenarios/{name}.toml", span))
        mixed = [*common, *MIXED]
        if line == "5.3.3":
            mixed.append("producers.start_detector_enable=true")
        out.append((f"mixed-{line}", "conf/scenarios/steady.toml", mixed))
    for name in CLOSED_LOOP:
        out.append((f"{name}-closed", f"conf/scenarios/{name}.toml", [f"workload.messages={MESSAGES}"]))
    for name, messages in JOINT.items():
        joint = [f"workload.messages={messages}", "brokers.coupling=joint"]
        out.append((f"{name}-joint", f"conf/scenarios/{name}.toml", joint))
    return out


def _pipeline_main():  # noqa: ANN202 - the job's own main()
    spec = importlib.util.spec_from_file_location("rocketsim_pipeline_job", ROOT / "jobs" / "pipeline.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module.main


def _canonical(value: object) -> object:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items())}
    return value


def table_digest(table: pa.Table) -> str:
    """sha256 over the rows (columns by name, rows sorted), independent of file layout and row order."""
    table = table.select(sorted(table.column_names))
    rows = [json.dumps(_canonical(r), sort_keys=True, default=str) for r in table.to_pylist()]
    rows.sort()
    h = hashlib.sha256()
    h.update(json.dumps(table.column_names).encode())
    for r in rows:
        h.update(r.encode())
        h.update(b"\n")
    return f"{len(rows)}:{h.hexdigest()[:16]}"


def read_run(warehouse: Path, table: str, run_id: str) -> pa.Table | None:
    """The run's rows of ``table`` as an outside reader selects them (docs/tables.md's query: the rows
    whose ``write_id`` the run-level commit names, when the warehouse has one), without ``run_id``,
    the ``write_id`` bookkeeping column and the wall-clock columns of ``runs``."""
    uri = str(warehouse / table)
    if not DeltaTable.is_deltatable(uri):
        return None
    filters = [("run_id", "=", run_id)]
    commits = str(warehouse / "run_commits")
    if DeltaTable.is_deltatable(commits):
        # filtered on the partition column only: deltalake's dataset skips every file on a column the
        # log has no statistics of (here "table"), whatever the filter
        named = DeltaTable(commits).to_pyarrow_table(filters=[("run_id", "=", run_id)]).to_pylist()
        filters.append(("write_id", "in", [r["write_id"] for r in named if r["table"] == table]))
    t = DeltaTable(uri).to_pyarrow_table(filters=filters)
    drop = ["run_id", "write_id", *(RUNS_WALL_CLOCK if table == "runs" else ())]
    return t.drop_columns([c for c in drop if c in t.column_names])


def run_digests(warehouse: Path, only: list[str] | None) -> dict[str, dict[str, str]]:
    main = _pipeline_main()
    out: dict[str, dict[str, str]] = {}
    for name, scenario, overrides in cases():
        if only and name not in only:
            continue
        argv = ["--scenario", str(ROOT / scenario), "--warehouse", str(warehouse), "--run-id", name]
        # at their own rates the non-span cases end before their faults start: run them all the same
        argv += ["--quiet", "--allow-late-faults"]
        for o in overrides:
            argv += ["--set", o]
        print(f"[digest] {name}", file=sys.stderr, flush=True)
        code = main(argv)
        if code:
            raise SystemExit(f"[digest] {name}: jobs/pipeline.py exited with {code}")
        out[name] = {}
        for table in TABLES:
            t = read_run(warehouse, table, name)
            out[name][table] = "absent" if t is None else table_digest(t)
    return out


def compare(now: dict[str, dict[str, str]], before: dict[str, dict[str, str]]) -> list[str]:
    diffs = []
    for case, tables in now.items():
        for table, digest in tables.items():
            old = before.get(case, {}).get(table)
            if old != digest:
                diffs.append(f"{case}/{table}: {old} -> {digest}")
    return diffs


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m rocketsim.bench digest", description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the digests here (JSON)")
    p.add_argument("--compare", help="digests to compare with (JSON); exit 1 on any difference")
    p.add_argument("--case", action="append", help="only this case (repeatable), e.g. steady-4.9.8")
    p.add_argument("--warehouse", help="keep the tables here (default: a temporary folder)")
    ns = p.parse_args(argv)
    os.chdir(ROOT)
    warehouse = Path(ns.warehouse) if ns.warehouse else Path(tempfile.mkdtemp(prefix="rocketsim-digest-"))
    try:
        digests = run_digests(warehouse, ns.case)
    finally:
        if not ns.warehouse:
            shutil.rmtree(warehouse, ignore_errors=True)
    for case, tables in digests.items():
        for table, digest in tables.items():
            print(f"{case:24s} {table:20s} {digest}")
    if ns.out:
        Path(ns.out).write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    if ns.compare:
        diffs = compare(digests, json.loads(Path(ns.compare).read_text()))
        for d in diffs:
            print(f"DIFFERS {d}")
        print(f"{len(diffs)} table(s) differ from {ns.compare}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
