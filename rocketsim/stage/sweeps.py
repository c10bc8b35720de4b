"""The tasks of a comparison of variants and of a capacity sweep: only summary aggregates leave them
(keyed by variant, into the scratch store), which the driver merges (:func:`merged_sweep`).

A comparison's producer task (:func:`variant_task`): one producer's messages generated once for the
variants of one message signature (:func:`rocketsim.scenario.variants.message_signature`), each variant
simulated on them. A coupled variant (closed-loop brokers) and a capacity sweep's cluster size are run
whole in one task (:func:`whole_run_task`: its producers are simulated together).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import engine
from rocketsim.broker.queue import OPEN
from rocketsim.scenario import Scenario, variants, workload
from rocketsim.stage.driver import merge_aggregates
from rocketsim.stage.protocols import VARIANT_AGGREGATES, WHOLE_RUN_AGGREGATES, Scratch, scratch_key
from rocketsim.stage.tables import producer_messages
from rocketsim.tables import summaries
from rocketsim.tables.summaries import SummaryAggregates


def variant_aggregates(
    scenarios: Mapping[str, Scenario], share: workload.ProducerShare, window_ms: int
) -> SummaryAggregates:
    """One producer's messages, generated once for ``scenarios`` (variants of one message signature),
    simulated under each; the summary aggregates of every variant, keyed by its name (``variant``),
    merged."""
    names = list(scenarios)
    if not names:
        raise ValueError("variant_aggregates needs at least one variant")
    first = variants.message_signature(scenarios[names[0]])
    if any(variants.message_signature(scenarios[n]) != first for n in names[1:]):
        raise ValueError(f"variants {names} do not share their messages (different message signatures)")
    messages = producer_messages(scenarios[names[0]], share)
    parts = []
    for name in names:
        out = engine.simulate(messages, scenarios[name])
        parts.append(
            summaries.producer_aggregates(
                out.attempts,
                out.results,
                window_ms,
                {"variant": name},
                messages=messages,
                faults=summaries.fault_spans(scenarios[name].faults),
            )
        )
    return summaries.merge(parts)


@dataclass(frozen=True)
class WholeRun:
    """A variant run whole (:func:`whole_run_aggregates`): its summary aggregates, and the iterative
    coupling's rounds and last residual (None unless ``brokers.coupling = iterative``)."""

    aggregates: SummaryAggregates
    rounds: int | None = None
    residual: int | None = None


def whole_run_aggregates(sc: Scenario, variant: str, window_ms: int) -> WholeRun:
    """Every producer of one variant generated and simulated together (with closed-loop brokers they are
    coupled: the variant's run is whole), its summary aggregates keyed by its name (``variant``), and
    the coupling's rounds and residual."""
    shares = workload.producer_shares(sc)
    messages = pa.concat_tables([producer_messages(sc, s) for s in shares])
    rounds = residual = None
    if sc.coupling == OPEN or not messages.num_rows:
        out = engine.simulate(messages, sc)
    else:
        producers = sorted(pc.unique(messages.column("producer")).to_pylist())  # as engine.simulate
        by_producer = {p: messages.filter(pc.equal(messages.column("producer"), p)) for p in producers}
        run = engine.coupled_run(by_producer, sc)
        outs = [run.outputs[p] for p in sorted(run.outputs)]
        out = engine.SimOutput(
            pa.concat_tables([o.attempts for o in outs]), pa.concat_tables([o.results for o in outs])
        )
        rounds, residual = getattr(run, "rounds", None), getattr(run, "residual", None)
    aggregates = summaries.producer_aggregates(
        out.attempts,
        out.results,
        window_ms,
        {"variant": variant},
        messages=messages,
        faults=summaries.fault_spans(sc.faults),
    )
    return WholeRun(aggregates, rounds, residual)


def variant_task(
    scenarios: Mapping[str, Scenario],
    share: workload.ProducerShare,
    window_ms: int,
    scratch: Scratch,
    group: int,
) -> dict[str, int]:
    """A comparison's producer task: :func:`variant_aggregates` of one producer under the variants of
    message-signature group ``group``, into the scratch store; its counts (messages and attempts over
    those variants)."""
    aggregates = variant_aggregates(scenarios, share, window_ms)
    scratch.put_bytes(scratch_key(VARIANT_AGGREGATES, group, share.producer), aggregates.to_bytes())
    scopes = aggregates.result_scopes
    return {
        "messages": int(pc.sum(scopes.column("messages")).as_py() or 0),
        "attempts": int(pc.sum(scopes.column("attempts")).as_py() or 0),
    }


def whole_run_task(
    sc: Scenario, variant: str, index: int, window_ms: int, scratch: Scratch
) -> dict[str, int]:
    """The task of variant number ``index`` run whole (:func:`whole_run_aggregates`): its aggregates into
    the scratch store; its counts (and the iterative coupling's ``rounds`` and ``residual``)."""
    run = whole_run_aggregates(sc, variant, window_ms)
    scratch.put_bytes(scratch_key(WHOLE_RUN_AGGREGATES, index), run.aggregates.to_bytes())
    coupling = {"rounds": run.rounds, "residual": run.residual} if run.rounds is not None else {}
    return {"messages": sc.workload.total_messages(), **coupling}


def merged_sweep(
    scratch: Scratch, groups: Sequence[Sequence[int]] = (), whole_runs: int = 0
) -> SummaryAggregates:
    """What the tasks put in the scratch store, merged: :func:`variant_task`'s of each group's producers
    (``groups``: per message-signature group, its producers) and :func:`whole_run_task`'s of
    ``whole_runs`` variants."""
    keys = [scratch_key(VARIANT_AGGREGATES, g, p) for g, ps in enumerate(groups) for p in ps]
    keys += [scratch_key(WHOLE_RUN_AGGREGATES, i) for i in range(whole_runs)]
    return merge_aggregates(scratch, keys)
