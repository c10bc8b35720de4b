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
    and an epilog are shown as written (their examples keep their lines). ``more_usage``: what the usage
    line ends with besides this parser's options, e.g. ``[--stage STAGE]`` that the command takes off the
    command line before this parser sees it."""

    def __init__(self, *args: typing.Any, more_usage: Sequence[str] = (), **kwargs: typing.Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.more_usage = tuple(more_usage)

    def format_usage(self) -> str:
        return self._with_more(super().format_usage())

    def format_help(self) -> str:
        text, usage = super().format_help(), super().format_usage()
        return text.replace(usage.rstrip("\n"), self._with_more(usage).rstrip("\n"), 1)

    def _with_more(self, usage: str) -> str:
        """``usage`` (argparse's, wrapped as argparse wraps it) with :attr:`more_usage` at its end."""
        if not self.more_usage:
            return usage
        lines = usage.rstrip("\n").split("\n")
        indent = " " * len(f"usage: {self.prog} ")
        width = self._get_formatter()._width  # the width argparse's own formatter wraps the usage to
        for part in self.more_usage:
            if len(lines[-1]) + 1 + len(part) <= width:
                lines[-1] += " " + part
            else:
                lines.append(indent + part)
        return "\n".join(lines) + "\n"

    def error(self, message: str) -> typing.NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def examples_text(examples: Sequence[str]) -> str:
    """``examples:`` and each example indented (its continuation lines too)."""
    return "examples:\n" + "\n".join(f"  {line}" for e in examples for line in e.splitlines())
