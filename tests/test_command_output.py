"""What the commands print, where a new user read it wrong: ``rocketsim validate``'s per-run line wrote a
5 s p99 as ``4.76e+03``."""

from __future__ import annotations

import pytest

from rocketsim.command import validate


@pytest.mark.parametrize(
    ("ms", "shown"),
    [(0.2934, "0.293"), (28.84, "28.8"), (143.2, "143"), (4760.4, "4,760"), (2393.0, "2,393")],
)
def test_validate_writes_latencies_as_the_readme_does(ms: float, shown: str) -> None:
    assert validate._ms(ms) == shown
