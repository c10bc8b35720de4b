"""Run the upstream conformance vectors against the library.

``python -m rocketsim.conformance DIR`` runs every vector file it recognises in DIR, prints one line per
failing vector saying what differed, and ends with ``N passed, N failed, N skipped``. The exit code is 1
if any vector failed or none ran.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

from rocketsim.vectors import Result, async_replay, fault_strategy

# file (its path under the vectors folder) -> checker module (under rocketsim.vectors) that knows its format
CHECKERS: dict[str, str] = {
    "properties.json": "properties",
    "encode_message.json": "encode_message",
    "store_encode.json": "store_encode",
    "uniq_id.json": "uniq_id",
    "compression.json": "compression",
    "validators.json": "validators",
    "constants.json": "constants",
    "fault_strategy_4_9.jsonl": "fault_strategy",
    "fault_strategy_4_9_7.jsonl": "fault_strategy",
    "fault_strategy_5_x.jsonl": "fault_strategy",
    # the real, unmodified Java client (4.9.8, 4.9.7, 5.3.3) against a scripted broker, SYNC sends: the same
    # record format, the version from each scenario header's ``upstream``
    "real_client_fault_strategy_4_9.jsonl": "fault_strategy",
    "real_client_fault_strategy_4_9_7.jsonl": "fault_strategy",
    "real_client_fault_strategy_5_x.jsonl": "fault_strategy",
    # every other tag from 4.3.2 to 5.3.2, and the probes of all 15 tags (fault_strategy.FILES)
    **{name: "fault_strategy" for name in fault_strategy.FILES if name.startswith("real_client_")},
    # the same client, ASYNC and ONEWAY sends: step-by-step traces (real_client/README.md)
    "real_client_async_4_9.jsonl": "async_replay",
    "real_client_oneway_4_9.jsonl": "async_replay",
    "real_client_async_5_x.jsonl": "async_replay",
    **{name: "async_replay" for name in async_replay.FILES},
    # the gRPC family: the real rocketmq-python-client 5.1.2 against a scripted Proxy (grpc/README.md)
    "grpc/grpc_python_5_1_2.jsonl": "grpc_send",
    # the same client and oracle, scenarios this project added (grpc/oracle/grpc_python_probes_set.json)
    "grpc/grpc_python_5_1_2_probes.jsonl": "grpc_send",
}


def run_dir(directory: Path) -> Iterator[Result]:
    """Yield the result of every vector in every recognised file of ``directory`` (``CHECKERS``' paths)."""
    for name, module_name in sorted(CHECKERS.items()):
        path = directory / name
        if not path.is_file():
            continue
        module = importlib.import_module(f"rocketsim.vectors.{module_name}")
        yield from module.run(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketsim.conformance", description=__doc__)
    parser.add_argument("directory", type=Path, help="folder holding the vector files")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list skipped vectors")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"not a directory: {args.directory}", file=sys.stderr)
        return 2
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for result in run_dir(args.directory):
        counts[result.status] += 1
        if result.status == "failed" or (args.verbose and result.status == "skipped"):
            print(f"{result.status.upper()} {result.file} {result.vector_id}: {result.detail}")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] or counts["passed"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
