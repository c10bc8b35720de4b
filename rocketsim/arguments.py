"""Command-line parsing shared by the ``rocketsim`` command and the jobs: argparse whose usage error is one
line, and the examples block of a command's help. The standard library only, so a command's ``--help`` and
its usage errors import nothing else (``tests/test_command_imports.py``)."""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Sequence


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit code 2), like a bad scenario; a description
    and an epilog are shown as written (their examples keep their lines)."""

    def __init__(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def examples_text(examples: Sequence[str]) -> str:
    """``examples:`` and each example indented (its continuation lines too)."""
    return "examples:\n" + "\n".join(f"  {line}" for e in examples for line in e.splitlines())
