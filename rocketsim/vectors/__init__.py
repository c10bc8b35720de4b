"""Conformance-vector checkers, one module per vector file family.

Each checker module exposes ``FILES`` (the file names it recognises) and ``run(path) -> Iterator[Result]``.
``rocketsim.conformance`` discovers them through ``CHECKERS`` below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Result:
    """The outcome of one vector (one version of one vector when outputs differ by version)."""

    file: str
    vector_id: str
    status: Status
    detail: str = ""


def passed(file: str, vector_id: str) -> Result:
    return Result(file, vector_id, "passed")


def failed(file: str, vector_id: str, detail: str) -> Result:
    return Result(file, vector_id, "failed", detail)


def skipped(file: str, vector_id: str, detail: str = "") -> Result:
    return Result(file, vector_id, "skipped", detail)
