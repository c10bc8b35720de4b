"""Dispatch ``python -m rocketsim.bench <name> [args]`` to ``rocketsim.bench.<name>.main``."""

from __future__ import annotations

import importlib
import sys

BENCHES = ("core", "send", "features", "pipeline", "digest")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHES:
        print(f"usage: python -m rocketsim.bench {{{'|'.join(BENCHES)}}} [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(f"rocketsim.bench.{argv[0]}")
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
