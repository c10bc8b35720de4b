"""Bad messages inside a valid workload (docs/design.md §4, §8): every invalid kind becomes a REJECTED
result with the client validator's text and no attempt, the simulation completes, and the compiled path
agrees with the reference -- also when a producer has nothing left to send (every message rejected),
which once crashed the compiled path with an IndexError."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim import engine
from rocketsim.engine import compiled, reference
from rocketsim.scenario import INVALID_KINDS, Scenario, scenario_from_mapping, workload

# The start of upstream's message for each kind the client refuses (Validators.checkMessage /
# checkTopic, Message.putUserProperty).
UPSTREAM_TEXT = {
    "bad_topic": "The specified topic[bad topic!] contains illegal characters",
    "empty_body": "CODE: 13  DESC: the message body length is zero",
    "oversize_body": "CODE: 13  DESC: the message body size over max value, MAX: 4194304",
    "reserved_property": "The Property<UNIQ_KEY> is used by system, input another please",
}
# No client checks a single message's properties (Validators.checkMessage of 4.9.8 and 5.3.3 has no such
# check): the broker refuses them (DefaultMessageStore.checkMessage / the CommitLog encoder in 4.9.8,
# MessageExtEncoder.encode in 5.3.3; SendMessageProcessor.handlePutMessageResult answers MESSAGE_ILLEGAL).
BROKER_REFUSED = "oversize_properties"
BROKER_TEXT = (
    "MQBrokerException: CODE: 13  DESC: the message is illegal, maybe msg body or properties length not "
    "matched. msg body length limit 4194304B, msg properties length limit 32KB. BROKER: broker-"
)


def _scenario(invalid: dict[str, float], messages: int = 30) -> Scenario:
    return scenario_from_mapping(
        {
            "producers": {"count": 2, "send_mode": {"sync": 1, "oneway": 1}},
            "workload": {
                "messages": messages,
                "message_types": {"normal": 3, "delay": 1, "transaction": 1},
                "invalid": invalid,
            },
        }
    )


def _simulate(messages: pa.Table, sc: Scenario, *, fast: bool) -> engine.SimOutput:
    """One producer: ``fast``, the compiled engine where it covers the input (else the reference)."""
    if fast and compiled.supports(sc, messages):
        return compiled.simulate_producer(messages, sc)
    return reference.simulate_producer(messages, sc)


def _per_producer(messages: pa.Table, sc: Scenario, *, fast: bool) -> engine.SimOutput:
    outs = [
        _simulate(messages.filter(pc.equal(messages.column("producer"), p)), sc, fast=fast)
        for p in range(sc.producers.count)
    ]
    return engine.SimOutput(
        pa.concat_tables([o.attempts for o in outs]), pa.concat_tables([o.results for o in outs])
    )


def _key(t: pa.Table) -> pa.Table:
    return t.sort_by([("producer", "ascending"), ("seq", "ascending")])


def test_upstream_texts_cover_every_invalid_kind() -> None:
    assert set(UPSTREAM_TEXT) | {BROKER_REFUSED} == set(INVALID_KINDS)


def test_oversize_properties_fail_at_the_broker() -> None:
    sc = _scenario({BROKER_REFUSED: 1.0})
    messages = workload.generate(sc)
    out = _per_producer(messages, sc, fast=True)
    assert _key(out.results).equals(_key(_per_producer(messages, sc, fast=False).results))
    m = messages.to_pandas()[["producer", "seq", "send_mode", "message_type"]]
    results = out.results.to_pandas().merge(m, on=["producer", "seq", "send_mode"])
    assert (results.status != "REJECTED").all()
    oneway = (results.send_mode == "oneway") & (results.message_type != "transaction")  # halves are SYNC
    sync = results[~oneway]
    assert len(sync) > 0 and (sync.status == "FAILED").all() and (sync.attempts == 1).all()
    assert sync.error.str.startswith(BROKER_TEXT).all()  # one attempt: 13 is not a retry code
    assert oneway.any() and (results[oneway].status == "ONEWAY_SENT").all()  # unseen
    assert set(out.attempts.column("outcome").to_pylist()) == {"broker:13"}


@pytest.mark.parametrize("kind", list(UPSTREAM_TEXT))
def test_every_message_of_a_kind_rejected_with_upstream_text(kind: str) -> None:
    sc = _scenario({kind: 1.0})
    messages = workload.generate(sc)
    for fast in (True, False):
        out = _per_producer(messages, sc, fast=fast)
        results = out.results
        assert results.num_rows == messages.num_rows == 30
        assert set(results.column("status").to_pylist()) == {"REJECTED"}
        assert set(results.column("attempts").to_pylist()) == {0}
        assert out.attempts.num_rows == 0
        assert all(e.startswith(UPSTREAM_TEXT[kind]) for e in results.column("error").to_pylist()), kind
    assert _key(_per_producer(messages, sc, fast=True).results).equals(
        _key(_per_producer(messages, sc, fast=False).results)
    )


def test_mixed_invalid_kinds_are_counted_and_the_rest_is_sent() -> None:
    sc = _scenario(dict.fromkeys(INVALID_KINDS, 0.08), messages=600)  # 40 % invalid
    messages = workload.generate(sc)
    fast = _per_producer(messages, sc, fast=True)
    reference = _per_producer(messages, sc, fast=False)
    assert _key(fast.results).equals(_key(reference.results))
    results = fast.results.to_pandas()
    assert len(results) == 600
    rejected = results[results.status == "REJECTED"]
    assert 110 < len(rejected) < 270
    for kind, text in UPSTREAM_TEXT.items():
        assert rejected.error.str.startswith(text).any(), kind
    # exactly the messages the generator made invalid are rejected, and none of them was attempted;
    # oversize properties are sent (and refused by the broker) unless the message is refused otherwise
    m = messages.to_pandas()
    invalid = (
        (m.topic != "TopicTest")
        | (m.body_size == 0)
        | (m.body_size > sc.producers.max_message_size)
        | m.reserved_property.notna()
    )
    expected = set(zip(m.producer[invalid], m.seq[invalid], strict=True))
    assert set(zip(rejected.producer, rejected.seq, strict=True)) == expected
    assert (rejected.attempts == 0).all()
    sent = results[results.status != "REJECTED"]
    assert fast.attempts.num_rows == sent.attempts.sum() and len(sent) > 0
