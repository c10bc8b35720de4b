"""A run's reconciliation: the rules its tables keep with each other, checked from what the stage's tasks
report, the tables the driver made and the commits' reports. No table is read back.

Every rule compares two quantities (or sums of them), named ``<table>.<what>``:

More: docs/reference/modules.md, rocketsim/tables/reconcile.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker import store
from rocketsim.engine.plan import ONEWAY_SENT
from rocketsim.errors import RocketSimError
from rocketsim.stage.graph import STAGES, written
from rocketsim.tables import schemas
from rocketsim.tables.grouping import bools, is_value, pack_keys, string_codes


class ReconciliationError(RocketSimError, RuntimeError):
    """The run's tables disagree with each other: the run is reported as failed."""


@dataclass(frozen=True)
class Rule:
    """``sum(left) == sum(right)`` over the named quantities."""

    name: str
    left: tuple[str, ...]
    right: tuple[str, ...]


# The rules between tables, checked first (in this order), then each table's own rules (table_rules).
RULES = (
    Rule("one result per message", ("messages.rows",), ("send_results.rows",)),
    Rule("distinct (producer, seq) in messages and results", ("messages.keys",), ("send_results.keys",)),
    Rule("attempt rows = sum of results.attempts", ("send_attempts.rows",), ("send_results.attempts",)),
    Rule(
        "per-broker messages in run_summary = stored results",
        ("run_summary.stored",),
        ("send_results.stored",),
    ),
    Rule("sends in broker_windows = attempt rows", ("broker_windows.sends",), ("send_attempts.rows",)),
    Rule("sends in queue_windows = attempt rows", ("queue_windows.sends",), ("send_attempts.rows",)),
    Rule("broker_storage messages = commit_log records", ("broker_storage.messages",), ("commit_log.rows",)),
    Rule("stored attempts = attempts in commit_log", ("send_attempts.stored",), ("commit_log.attempts",)),
    Rule(
        "send_results with a queue offset = commit_log records they point at",
        ("send_results.with_offset",),
        ("commit_log.pointed",),
    ),
    Rule(
        "answered results with a stored status have a queue offset",
        ("send_results.answered_with_offset",),
        ("send_results.answered",),
    ),
    Rule(
        "one transactions row per transaction message and per other half",
        ("transactions.rows", "transactions.pointed"),
        ("messages.transaction", "transactions.halves"),
    ),
    Rule(
        "stored halves in transactions = half records in commit_log",
        ("transactions.halves",),
        ("commit_log.halves",),
    ),
    Rule(
        "halves the results point at in transactions = results in the half topic",
        ("transactions.pointed",),
        ("send_results.halves",),
    ),
)
CONSUMER_LOAD_GROUP = "consumer_load.messages:"  # + the group's name: the messages its consumers get


def fault_rules(rows: str) -> tuple[Rule, ...]:
    """The rules of fault_windows, checked when the run has a fault: each fault's two periods ("all")
    add up to the run's attempts and messages (the fewest and the most over the faults, each equal to
    the run's ``send_attempts.<rows>`` and ``messages.<rows>``)."""
    return tuple(
        Rule(
            f"{what} in fault_windows (each fault's periods, {end}) = {table}.{rows}",
            (f"fault_windows.{what}_{end}",),
            (f"{table}.{rows}",),
        )
        for what, table in (("sends", "send_attempts"), ("messages", "messages"))
        for end in ("fewest", "most")
    )


FAULT_RULES = fault_rules("rows")
# The same rules over what the producer tasks simulated (``<table>.made``), checked whenever counted:
# what a summaries-only run (``--tables summary``) keeps, which commits no message row.
SIMULATED_FAULT_RULES = fault_rules("made")
SIMULATED_RULES = (
    Rule("one result per message simulated", ("messages.made",), ("send_results.made",)),
    Rule("attempts simulated = sum of results.attempts", ("send_attempts.made",), ("send_results.attempts",)),
    Rule("sends in broker_windows = attempts simulated", ("broker_windows.sends",), ("send_attempts.made",)),
    Rule("sends in queue_windows = attempts simulated", ("queue_windows.sends",), ("send_attempts.made",)),
    *SIMULATED_FAULT_RULES,
)
# the tables the whole run writes (and must reconcile, every rule of them)
RUN_TABLES = written(STAGES)


def table_rules(table: str) -> tuple[Rule, ...]:
    """A table's own rules: rows committed = rows made (or read), rows distinct by its keys."""
    keys = schemas.TABLES[table].keys
    out = [
        Rule(f"{table} rows committed = rows made", (f"{table}.rows",), (f"{table}.made",)),
        Rule(f"{table} rows read = rows committed", (f"{table}.read",), (f"{table}.rows",)),
        Rule(
            f"{table} rows in its Delta log = rows its write committed",
            (f"{table}.rows",),
            (f"{table}.published",),
        ),
    ]
    if keys:
        out.append(
            Rule(f"{table} rows are distinct ({', '.join(keys)})", (f"{table}.rows",), (f"{table}.keys",))
        )
    return tuple(out)


def rules_of(quantities: Mapping[str, int]) -> tuple[Rule, ...]:
    """Every rule: between tables, each registry table's own, one per consumer group present."""
    groups = sorted(n[len(CONSUMER_LOAD_GROUP) :] for n in quantities if n.startswith(CONSUMER_LOAD_GROUP))
    per_group = tuple(
        Rule(
            f"consumer_load of {g} = delivered + committed messages",
            (CONSUMER_LOAD_GROUP + g,),
            ("commit_log.visible", "transactions.delivered"),
        )
        for g in groups
    )
    faults = tuple(r for r in FAULT_RULES if r.left[0] in quantities)
    tables = (r for t in schemas.TABLES for r in table_rules(t))
    return (*RULES, *SIMULATED_RULES, *per_group, *faults, *tables)


def _about_inputs(rule: Rule) -> bool:
    """Whether the rule is about a table a job reads (the whole run reads none)."""
    return any(n.endswith((".read", ".published")) for n in (*rule.left, *rule.right))


def checks(quantities: Mapping[str, int], *, complete: bool = False) -> dict[str, tuple[int, int]]:
    """Every rule whose quantities are all there: name -> (left, right), equal when the run reconciles.

    ``complete``: the whole run's quantities, so every rule between tables, every rule of the tables
    of :data:`RUN_TABLES` but those of tables read and at least one consumer group must be checked (a missing
    quantity is a bug of the stage, raised as such)."""
    out: dict[str, tuple[int, int]] = {}
    missing: list[str] = []
    required = {r.name for r in RULES} | {
        r.name for t in RUN_TABLES for r in table_rules(t) if not _about_inputs(r)
    }
    for rule in rules_of(quantities):
        names = (*rule.left, *rule.right)
        if all(n in quantities for n in names):
            out[rule.name] = (sum(quantities[n] for n in rule.left), sum(quantities[n] for n in rule.right))
        elif complete and rule.name in required:
            missing.append(f"{rule.name} (needs {', '.join(n for n in names if n not in quantities)})")
    if complete and not any(n.startswith(CONSUMER_LOAD_GROUP) for n in quantities):
        missing.append("consumer_load per group (no group counted)")
    if missing:
        raise AssertionError("the stage did not count what reconciliation needs: " + "; ".join(missing))
    return out


def check(
    quantities: Mapping[str, int], run_id: str, *, complete: bool = False
) -> dict[str, tuple[int, int]]:
    """:func:`checks`, raising :class:`ReconciliationError` naming every broken rule."""
    out = checks(quantities, complete=complete)
    broken = [f"{rule}: {x} != {y}" for rule, (x, y) in out.items() if x != y]
    if broken:
        raise ReconciliationError(f"run {run_id} does not reconcile: " + "; ".join(broken))
    return out


def add_counts(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts of several tasks (disjoint producers or brokers) added up, name by name."""
    out: dict[str, int] = {}
    for part in parts:
        for name, value in part.items():
            out[name] = out.get(name, 0) + int(value)
    return out


# ---- what each task counts ------------------------------------------------------------------------


def distinct_keys(table: pa.Table, keys: Iterable[str]) -> int:
    """Distinct tuples of ``keys`` in ``table`` (null is a value): packed into one int64 per row (a
    single pass when the rows come sorted, as a task's do), else hashed by Arrow."""
    keys = list(keys)
    if not table.num_rows:
        return 0
    codes = []
    for name in keys:
        col = table.column(name)
        if pa.types.is_string(col.type) or pa.types.is_dictionary(col.type):
            codes.append(string_codes(col)[0])
        elif pa.types.is_integer(col.type):
            values = np.asarray(col.fill_null(0).to_numpy(), np.int64) if col.null_count else None
            if values is None:
                codes.append(np.asarray(col.to_numpy(), np.int64))
            else:  # null: one more value, below every other
                low = int(pc.min(col).as_py() or 0) - 1
                values[~np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)] = low
                codes.append(values)
        else:
            return table.select(keys).group_by(keys).aggregate([]).num_rows
    packed = pack_keys(codes)
    if packed is None:
        return table.select(keys).group_by(keys).aggregate([]).num_rows
    if (packed[1:] > packed[:-1]).all():
        return len(packed)
    return len(np.unique(packed))


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(mask.cast(pa.int64())).as_py() or 0) if len(mask) else 0


def _rows(table_name: str, table: pa.Table, rows: str) -> dict[str, int]:
    """``<table>.made`` (or ``.read``) and ``<table>.keys``."""
    if rows not in ("made", "read"):
        raise ValueError(f"rows are 'made' or 'read', got {rows!r}")
    return {
        f"{table_name}.{rows}": table.num_rows,
        f"{table_name}.keys": distinct_keys(table, schemas.TABLES[table_name].keys),
    }


def message_counts(messages: pa.Table, rows: str = "made") -> dict[str, int]:
    """A producer's messages: rows, keys, and transactional messages."""
    out = _rows("messages", messages, rows)
    if "message_type" in messages.column_names:
        out["messages.transaction"] = _count_equal(messages.column("message_type"), "transaction")
    return out


def _count_equal(column: pa.ChunkedArray, value: str) -> int:
    """Rows of a string column equal to ``value``; given as dictionary arrays (the generator's codes), counted
    by their codes (comparing them as strings decodes every row first)."""
    if not pa.types.is_dictionary(column.type):
        return _count(pc.equal(column, value))
    total = 0
    for chunk in column.chunks:
        hits = np.flatnonzero(bools(pc.equal(chunk.dictionary, value)))
        if hits.size:
            codes = np.asarray(chunk.indices.drop_null(), np.int64)
            total += int(np.bincount(codes, minlength=len(chunk.dictionary))[hits].sum())
    return total


def attempt_counts(attempts: pa.Table, rows: str = "made") -> dict[str, int]:
    """A producer's attempts: rows, keys, and the attempts a broker stored (``store.is_stored_outcome``)."""
    out = _rows("send_attempts", attempts, rows)
    out["send_attempts.stored"] = _count(store.is_stored_outcome(attempts))
    return out


def result_counts(results: pa.Table, rows: str = "made") -> dict[str, int]:
    """A producer's results, whole: rows, keys, the sum of their attempts, the stored ones (a broker and a
    status other than FAILED/REJECTED) and the answered ones (stored, and not oneway); with the store
    columns (complete ``send_results`` rows), :func:`stored_result_counts` too."""
    status = results.column("status")
    not_stored = pc.is_in(status, value_set=pa.array(store.NOT_STORED_STATUSES))
    out = _rows("send_results", results, rows)
    out["send_results.attempts"] = int(pc.sum(results.column("attempts")).as_py() or 0)
    out["send_results.stored"] = _count(pc.and_(pc.invert(not_stored), pc.is_valid(results.column("broker"))))
    out["send_results.answered"] = _count(pc.invert(pc.or_(not_stored, pc.equal(status, ONEWAY_SENT))))
    if "queue_offset" in results.column_names and "store_topic" in results.column_names:
        out.update(stored_result_counts(results))
    return out


def stored_result_counts(results: pa.Table) -> dict[str, int]:
    """Results with their store columns (a broker task's, or committed ones): those with a queue offset,
    the non-oneway ones with one, and those pointing at a half."""
    offset = bools(pc.is_valid(results.column("queue_offset")))
    status = results.column("status")  # strings, or a dictionary array (a broker task's parts)
    answered = offset & bools(status.is_valid()) & ~is_value(status, ONEWAY_SENT)
    return {
        "send_results.with_offset": int(offset.sum()),
        "send_results.answered_with_offset": int(answered.sum()),
        "send_results.halves": int(is_value(results.column("store_topic"), store.HALF_TOPIC).sum()),
    }


def log_counts(log: pa.Table, rows: str = "made") -> dict[str, int]:
    """A broker's numbered commit log: rows, keys, one lead copy per stored attempt, the records results
    point at, the records consumers see (not in the half topic) and the halves."""
    out = _rows("commit_log", log, rows)
    out["commit_log.attempts"] = _count(pc.equal(log.column("seq"), log.column("send_seq")))
    out["commit_log.pointed"] = _count(log.column("is_result"))
    topic = log.column("store_topic")  # strings, or a dictionary array (a broker task's parts)
    halves = int(is_value(topic, store.HALF_TOPIC).sum())
    out["commit_log.visible"] = len(topic) - topic.null_count - halves
    out["commit_log.halves"] = halves
    return out


def storage_counts(storage: pa.Table) -> dict[str, int]:
    """A broker's ``broker_storage`` rows: rows, keys, and the records they count."""
    out = _rows("broker_storage", storage, "made")
    out["broker_storage.messages"] = int(pc.sum(storage.column("messages")).as_py() or 0)
    return out


def transaction_counts(txns: pa.Table) -> dict[str, int]:
    """``transactions`` rows (a producer's unstored ones or a broker's stored ones): rows, keys, stored
    halves, the halves results point at, delivered (committed) halves."""
    out = _rows("transactions", txns, "made")
    out["transactions.halves"] = _count(pc.is_valid(txns.column("half_queue_offset")))
    out["transactions.pointed"] = _count(txns.column("is_result"))
    out["transactions.delivered"] = _count(txns.column("delivered"))
    return out


def table_counts(name: str, table: pa.Table) -> dict[str, int]:
    """A table the driver made (summary tables, ``consumer_load``): rows, keys, and what the rules
    between tables need of it."""
    out = _rows(name, table, "made")
    if name in ("broker_windows", "queue_windows"):
        out[f"{name}.sends"] = int(pc.sum(table.column("sends")).as_py() or 0)
    elif name == "run_summary":
        brokers = table.filter(pc.not_equal(table.column("scope"), "all"))
        out["run_summary.stored"] = int(pc.sum(brokers.column("messages")).as_py() or 0)
    elif name == "fault_windows" and table.num_rows:
        every = table.filter(pc.equal(table.column("scope"), "all"))
        for what in ("sends", "messages"):
            per_fault = every.group_by("fault").aggregate([(what, "sum")]).column(f"{what}_sum")
            out[f"fault_windows.{what}_fewest"] = int(pc.min(per_fault).as_py())
            out[f"fault_windows.{what}_most"] = int(pc.max(per_fault).as_py())
    elif name == "consumer_load":
        per_group = table.group_by("consumer_group").aggregate([("messages", "sum")])
        for group, messages in zip(
            per_group.column("consumer_group").to_pylist(),
            per_group.column("messages_sum").to_pylist(),
            strict=True,
        ):
            out[CONSUMER_LOAD_GROUP + group] = int(messages)
    return out
