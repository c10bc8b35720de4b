"""The install-time warm-up of the compiled engine (rocketsim/engine/warm.py)."""

from rocketsim.engine import warm


def test_warm_scenario_reaches_every_message_type_and_the_fault_strategy():
    sc = warm.warm_scenario()
    assert sc.producers.send_latency_fault_enable
    assert set(sc.workload.message_types) == {"normal", "ordered", "delay", "transaction"}


def test_warm_runs_the_compiled_engine(capsys):
    assert warm.main() == 0
    assert "compiled engine ready" in capsys.readouterr().out
