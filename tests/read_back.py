"""The rules a run's tables keep with each other, read back from its committed tables (plain pandas): what
the pipeline checked by reading every table back before it reconciled from counts
(:mod:`rocketsim.tables.reconcile`, whose rule names these are). ``read(table)`` gives the run's rows of a
table; each rule is name -> (left, right), equal when the run reconciles."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pyarrow as pa

from rocketsim.broker import store
from rocketsim.tables import schemas

Read = Callable[[str], pa.Table]


def _frame(read: Read, table: str) -> pd.DataFrame:
    return read(table).to_pandas()


def broker_side_checks(read: Read) -> dict[str, tuple[int, int]]:
    """The rules between the broker-side tables and the others."""
    log, results = _frame(read, "commit_log"), _frame(read, "send_results")
    attempts, messages = _frame(read, "send_attempts"), _frame(read, "messages")
    txns, load = _frame(read, "transactions"), _frame(read, "consumer_load")
    half = log["store_topic"] == store.HALF_TOPIC
    with_offset = results["queue_offset"].notna()
    answered = ~results["status"].isin([*store.NOT_STORED_STATUSES, "ONEWAY_SENT"])
    halves, pointed = int(txns["half_queue_offset"].notna().sum()), int(txns["is_result"].sum())
    checks = {
        "broker_storage messages = commit_log records": (
            int(_frame(read, "broker_storage")["messages"].sum()),
            len(log),
        ),
        "stored attempts = attempts in commit_log": (
            int(attempts["stored"].sum()),
            len(log[["producer", "send_seq", "attempt"]].drop_duplicates()),
        ),
        "send_results with a queue offset = commit_log records they point at": (
            int(with_offset.sum()),
            int(log["is_result"].sum()),
        ),
        "answered results with a stored status have a queue offset": (
            int((answered & with_offset).sum()),
            int(answered.sum()),
        ),
        "one transactions row per transaction message and per other half": (
            len(txns) + pointed,
            int((messages["message_type"] == "transaction").sum()) + halves,
        ),
        "stored halves in transactions = half records in commit_log": (halves, int(half.sum())),
        "halves the results point at in transactions = results in the half topic": (
            pointed,
            int((results["store_topic"] == store.HALF_TOPIC).sum()),
        ),
    }
    delivered = int((~half).sum()) + int(txns["delivered"].sum())
    for group, messages_got in load.groupby("consumer_group")["messages"].sum().items():
        checks[f"consumer_load of {group} = delivered + committed messages"] = (int(messages_got), delivered)
    return checks


def run_checks(read: Read) -> dict[str, tuple[int, int]]:
    """Every rule of a whole run: each table's rows distinct by its keys, the rules between the
    generated, simulated and summary tables, and :func:`broker_side_checks`."""
    checks = {}
    for spec in schemas.written_by(
        schemas.GENERATE, schemas.SIMULATE, schemas.BROKER_SIDE, schemas.SUMMARIZE
    ):
        if spec.keys:
            rows = _frame(read, spec.name)
            distinct = len(rows[list(spec.keys)].drop_duplicates())
            checks[f"{spec.name} rows are distinct ({', '.join(spec.keys)})"] = (len(rows), distinct)
    messages, results = _frame(read, "messages"), _frame(read, "send_results")
    attempts, summary = _frame(read, "send_attempts"), _frame(read, "run_summary")
    stored = results["broker"].notna() & ~results["status"].isin(store.NOT_STORED_STATUSES)
    keys = ["producer", "seq"]
    checks |= {
        "one result per message": (len(messages), len(results)),
        "distinct (producer, seq) in messages and results": (
            len(messages[keys].drop_duplicates()),
            len(results[keys].drop_duplicates()),
        ),
        "attempt rows = sum of results.attempts": (len(attempts), int(results["attempts"].sum())),
        "per-broker messages in run_summary = stored results": (
            int(summary.loc[summary["scope"] != "all", "messages"].sum()),
            int(stored.sum()),
        ),
        "sends in broker_windows = attempt rows": (
            int(_frame(read, "broker_windows")["sends"].sum()),
            len(attempts),
        ),
        "sends in queue_windows = attempt rows": (
            int(_frame(read, "queue_windows")["sends"].sum()),
            len(attempts),
        ),
    }
    return checks | broker_side_checks(read)
