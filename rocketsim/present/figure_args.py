"""The command line of the modules that re-make the docs' figures (``python -m rocketsim.present.X
[OUT_DIR]``): one optional folder, ``docs`` by default, and ``--help``, which says what the module
simulates and writes before it takes minutes to do it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def out_dir(argv: Sequence[str], module: str, doc: str | None) -> Path:
    """The folder the figure goes to, from ``argv``; ``--help`` prints the module's docstring (exit 0), a
    bad command line one usage line (exit 2)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir", nargs="?", default="docs", metavar="OUT_DIR", help="default: docs")
    return Path(parser.parse_args(list(argv)).out_dir)
