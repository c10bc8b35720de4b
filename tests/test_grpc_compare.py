"""docs/grpc.md's comparison (rocketsim.present.grpc_compare): its per-window numbers and its recovery
rule, on small runs and hand-made windows."""

from __future__ import annotations

import pandas as pd
import pytest

from rocketsim.present import grpc_compare as gc
from rocketsim.scenario import load_scenario

pytest.importorskip("matplotlib")


def windows(p99: list[float], share: list[float], failed: list[int] | None = None) -> pd.DataFrame:
    n = len(p99)
    w = pd.DataFrame({"w": range(n), "p99_ms": p99, "sick_share_pct": share, "failed": failed or [0] * n})
    w["t_s"] = (w["w"] + 0.5) * gc.WINDOW_MS / 1000
    return w


def test_recovery_waits_for_latency_share_and_failures_to_settle() -> None:
    ms = gc.WINDOW_MS
    # fault over windows 2..3 (ends at window 4's start); windows 4 and 5 still avoid the broker
    per = windows([10, 10, 500, 500, 10, 10, 10, 10], [25, 25, 5, 5, 5, 10, 24, 25])
    assert gc.time_to_recover_s(per, 2 * ms, 4 * ms, 25.0) == 2 * ms / 1000
    # a failure after the fault counts as not recovered yet
    per = windows([10, 10, 500, 500, 10, 10, 10, 10], [25] * 8, [0, 0, 5, 5, 0, 0, 3, 0])
    assert gc.time_to_recover_s(per, 2 * ms, 4 * ms, 25.0) == 3 * ms / 1000
    assert gc.time_to_recover_s(windows([10, 10, 500, 500, 10], [25] * 5), 2 * ms, 4 * ms, 25.0) == 0.0
    assert gc.time_to_recover_s(windows([10, 10, 500, 500, 500], [25] * 5), 2 * ms, 4 * ms, 25.0) is None


def test_a_small_run_per_variant_gives_windows_numbers_and_a_figure() -> None:
    per, spans = {}, {}
    for name in ("gRPC Python, cluster Proxy", "gRPC Java, local Proxies"):
        overrides = ["workload.messages=3000", "workload.rate_per_s=20", *gc.VARIANTS[name]]
        sc = load_scenario(gc.SCENARIO, [*overrides, "faults.0.factor=300"])
        messages, out = gc.run_once(sc)
        per[name] = gc.send_windows(out)
        row = gc.numbers(sc, messages, out, per[name])
        assert row["failed"] >= 0 and row["retries"] >= 0
        assert set(per[name].columns) >= {"p99_ms", "retries_per_s", "sick_share_pct", "t_s"}
        spans["x300"] = gc.timeline.fault_spans(sc)
    fig = gc.figure({"x300": per}, spans)
    assert len(fig.axes) == 3
    assert "gRPC Java, local Proxies" in gc.markdown({"gRPC Java, local Proxies": row})
