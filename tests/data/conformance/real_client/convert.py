"""Convert the ASYNC / ONEWAY real-client traces (``traces/*.tar.xz``) into replay vectors.

``python tests/data/conformance/real_client/convert.py`` writes ``real_client_async_4_9.jsonl``,
``real_client_oneway_4_9.jsonl`` and ``real_client_async_5_x.jsonl`` one folder up; their format is in
that folder's README ("real_client_async_4_9.jsonl, ..."). The conversion is mechanical: each step is one
client action the driver recorded, in the recorded order; where the real client read its clock several
times for one action, the step's ``t`` is the reading the recorded values imply (the README lists them).
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path
from typing import Any

from rocketsim.vectors.fault_strategy import REAL_CLIENT_TAGS

HERE = Path(__file__).resolve().parent
OUT = HERE.parent
ARCHIVES = {
    "4.9.8-async.tar.xz": "real_client_async_4_9.jsonl",
    "4.9.8-oneway.tar.xz": "real_client_oneway_4_9.jsonl",
    "5.3.3-async.tar.xz": "real_client_async_5_x.jsonl",
}
# every other tag's ASYNC and ONEWAY traces (README "More client tags")
OTHER_TAGS = REAL_CLIENT_TAGS  # every other tag (README "More client tags")
# Every scenario converts. Three kinds needed the thread model of the tag's client to say which send an
# event belongs to (the driver files an event under the send it last began, not the one the client
# worked for):
# - 4.3.2 runs an async send on the callback executor (DefaultMQProducerImpl.send(msg, callback,
#   timeout): getCallbackExecutor().submit; the asyncSenderExecutor came in 4.4.0), which the driver set
#   to its one thread, so the send and every callback share it: sendDefaultImpl's own update comes once
#   per send, before any callback of it (that thread is busy until sendKernelImpl returns), and a later
#   update on it after a select is a callback's (_sources);
# - 4.5.2 R30: a callback's and the next send's dispatch update of one broker in the same ms, the first
#   logged showing the second's latency (_order_concurrent_updates);
# - 5.3.0/5.3.1 fail a retry with no time left twice (NettyRemotingClient.invokeAsync's listener calls
#   operationFail and, with no return after it, invokeAsyncImpl -> invoke0 fails it again, on the same
#   event-loop thread: rocketsim.client.versions.ClientVersion.fails_late_async_request_twice). The
#   update after such a result on the loop is the same send's second failure, and a send has a result
#   step per onException call.
for _tag in OTHER_TAGS:
    for _mode in ("async", "oneway"):
        ARCHIVES[f"{_tag}-{_mode}.tar.xz"] = f"real_client_{_mode}_{_tag.replace('.', '_')}.jsonl"
FLUSH_CODES = {10: "FLUSH_DISK_TIMEOUT", 11: "FLUSH_SLAVE_TIMEOUT", 12: "SLAVE_NOT_AVAILABLE"}
EVENT_LOOP = "NettyClientSelector_1"  # the client's Netty event loop thread


def _int32(x: int) -> int:
    return ((x + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _thread(name: str) -> str:
    """Short thread names: E1 the driver's async sender executor, Cn the callback executor, A1 main."""
    if name == "oracle-async-sender":
        return "E1"
    if name.startswith("NettyClientPublicExecutor_"):
        return "C" + name.rsplit("_", 1)[1]
    if name == "main":
        return "A1"
    if name == EVENT_LOOP:  # the Netty event loop (5.3.0+ completes a refused request there)
        return name
    raise ValueError(f"unknown thread {name}")


def _table(faults: dict[str, dict[str, Any]], v5: bool) -> list[list]:
    """A recorded fault table (ConcurrentHashMap order) as the vectors' rows."""
    rows = []
    for name, f in faults.items():
        row = [name, f["latency_ms"], f["start_ts"]]
        if v5:
            row += [f["reachable"], f["check_stamp"]]
        rows.append(row)
    return rows


def _text(message: str | None, names: dict[str, str]) -> str | None:
    """A recorded exception text with broker addresses as the model names them (the broker's name)."""
    if message is None:
        return None
    for addr, name in names.items():
        message = message.replace(addr, name)
    return message


def convert_scenario(folder: Path) -> list[dict[str, Any]]:
    meta = json.loads((folder / "meta.json").read_text())
    cluster = json.loads((folder / "cluster.json").read_text())
    driver = [json.loads(x) for x in (folder / "driver.jsonl").read_text().splitlines() if x.strip()]
    broker = [json.loads(x) for x in (folder / "broker.jsonl").read_text().splitlines() if x.strip()]
    version, mode, sc = meta["version"], meta["mode"], meta["id"]
    # the 5.1.4+ strategy (reachable flags, resetIndex) logs reset_index with each selection
    v5 = any("reset_index" in e for e in driver if e["ev"] == "select")
    # a closed channel fails its requests at once (NettyRemotingClient, apache/rocketmq #5866) from 5.1.3
    fails_fast = tuple(int(x) for x in version.split(".")) >= (5, 1, 3)
    names = {f"127.0.0.1:{b['port']}": b["name"] for b in cluster["brokers"]}
    start = next(e for e in driver if e["ev"] == "start")
    route = next(e for e in driver if e["ev"] == "route")
    end = next(e for e in driver if e["ev"] == "end")

    def parse_list(text: str) -> list[int]:
        return [int(x) for x in text.strip("[]").split(",")]

    config = {
        "sendLatencyFaultEnable": start["latency_fault"],
        "retryTimesWhenSendFailed": start["retries"],
        "retryTimesWhenSendAsyncFailed": start["retries_async"],
        "retryAnotherBrokerWhenNotStoreOK": start["retry_another_broker"],
        "sendMsgTimeout": start["timeout_ms"],
        "latencyMax": parse_list(start["latency_max"]),
        "notAvailableDuration": parse_list(start["not_available"]),
    }
    queue_datas = [
        {
            "brokerName": b["name"],
            "writeQueueNums": b["write_queues"],
            "readQueueNums": b["read_queues"],
            "perm": 6,
            "hasMasterAddr": True,
        }
        for b in cluster["brokers"]
    ]
    queues = [[q.split("/")[0], int(q.split("/")[1])] for q in route["queues"].split()]

    # the client side, event by event, as steps (t, request and out filled in below)
    steps: list[dict[str, Any]] = []
    attempts: dict[int, list[dict[str, Any]]] = {}  # per send: its attempts' select and send steps
    probes: list[dict[str, Any]] = []  # lft_avail / lft_pick / rand since the last select
    lft: dict[str, dict[str, Any]] = {}  # the last lft_update per thread
    awaiting_update: dict[str, int] = {}  # callback thread -> send whose success update is due on it
    threads: dict[str, str] = {}
    presets: dict[str, int] = {}
    forced: dict[str, list[int]] = {}
    seen: set[tuple[str, str]] = set()
    results: dict[int, dict[str, Any]] = {}
    for e in driver:
        ev = e["ev"]
        if ev == "send_begin":
            steps.append({"what": "submit", "k": e["msg"], "t": e["now"], "th": "A1"})
        elif ev in ("lft_avail", "lft_pick", "rand"):
            probes.append(e)
        elif ev == "select":
            th = _thread(e["thread"])
            threads[th] = e["thread"]
            k = e["msg"]
            step = {
                "what": "select",
                "k": k,
                "t": e["now"],
                "th": th,
                "i": len(attempts.get(k, [])),
                "last": e["last_broker"],
                "sel": [e["mq"]["broker"], e["mq"]["queue"]],
                "idx": [e["send_index_before"], e["send_index_after"]],
                "worst": [e["worst_index_before"], e["worst_index_after"]],
            }
            if v5:
                step["reset"] = e["reset_index"]
            _first_values(step, th, probes, v5, presets, forced, seen)
            probes = []
            send = {"what": "send", "k": k, "t": None, "th": th, "i": step["i"]}
            steps += [step, send]
            attempts.setdefault(k, []).append({"select": step, "send": send})
        elif ev == "lft_update":
            lft[e["thread"]] = e
        elif ev == "fault_update":
            th = _thread(e["thread"])
            threads[th] = e["thread"]
            k = awaiting_update.pop(th, e["msg"])
            u = lft.pop(e["thread"], None)
            if u is None:  # latency fault tolerance off: updateFaultItem returned at once
                u = {"now": e["now"], "duration_ms": None}
                t = e["now"]
            else:
                assert u["broker"] == e["broker"] and u["latency_ms"] == e["latency_ms"]
                after = e["faults_after"][e["broker"]]
                t = u["now"] if v5 else after["start_ts"] - u["duration_ms"]
            duration = u["duration_ms"]
            upd = [e["broker"], e["latency_ms"], e["isolation"]]
            if v5:
                upd.append(e["reachable"])
            upd.append(duration)
            steps.append(
                {
                    "what": "update",
                    "k": k,
                    "t": t,
                    "th": th,
                    "upd": upd,
                    "table": _table(e["faults_after"], v5),
                    "_lft_now": u["now"],
                }
            )
        elif ev == "result":
            k = e["msg"]
            th = _thread(e["thread"]) if "thread" in e else "A1"
            status = e["status"]
            if status == "ONEWAY_RETURNED":
                res: dict[str, Any] = {"oneway": True}
            elif status == "EXCEPTION":
                res = {
                    "thrown": e["exception"],
                    "responseCode": e["response_code"],
                    "message": _text(e["message"], names),
                }
            else:
                res = {"returned": status, "mq": [e["mq"]["broker"], e["mq"]["queue"]]}
                if th != "A1":
                    awaiting_update[th] = k  # onSuccess, then updateFaultItem on the same thread
            if th == EVENT_LOOP and e.get("cause") == "RemotingTooMuchRequestException":
                awaiting_update[th] = k  # invokeAsync's listener fails it again on the loop (above)
            step = {"what": "result", "k": k, "t": e["wall_ms"], "th": th, "res": res}
            steps.append(step)
            results.setdefault(k, step)  # a send's first result (a second: the 5.3.0 double failure)

    _order_concurrent_updates(steps)
    requests = _requests(broker, attempts)
    _sources(steps, requests)
    _sends(steps, attempts, requests, broker, mode, v5, fails_fast, names, results)
    _move_early_updates(steps)
    _drop_torn_tables(steps)
    for n, step in enumerate(steps):
        step["type"] = "step"
        step["sc"] = sc
        step["n"] = n
    header = {
        "type": "scenario",
        "scenario": f"{sc}_{meta['name']}",
        "upstream": f"rocketmq-all-{version}",
        "mode": mode,
        "description": meta["desc"],
        "topic": start["topic"],
        "sim_start_time_ms": route["wall_ms"],
        "config": config,
        "route_initial_queueDatas": queue_datas,
        "messageQueueList_initial": queues,
        "threads": dict(sorted(threads.items())) | {"A1": "main"},
        "index_start_values": presets,
        "forced_random_values": forced,
        "sends": sum(1 for s in steps if s["what"] == "submit"),
        "oracle": {"args": meta["args"], "cluster": cluster},
    }
    ordered = [{k: s[k] for k in ("type", "sc", "n", "t", "th", "k", "what") if k in s} | s for s in steps]
    tail = {
        "type": "scenario_end",
        "scenario": header["scenario"],
        "sends": header["sends"],
        "steps": len(steps),
        "final_fault_table": _table(end["fault_table"], v5),
    }
    return [header, *ordered, tail]


def _first_values(
    step: dict[str, Any],
    th: str,
    probes: list[dict[str, Any]],
    v5: bool,
    presets: dict[str, int],
    forced: dict[str, list[int]],
    seen: set[tuple[str, str]],
) -> None:
    """A thread's index values the run started from: the driver's seeded ones (``--seed-index``: the
    sending thread's indexes set before the first send), or the first draw, recorded (``rand``) or
    derived from the value after the first selection and the increments that selection made."""
    for name, (before, after) in (("sendWhichQueue#1", step["idx"]), ("whichItemWorst", step["worst"])):
        key = f"{name}@{th}"
        if (name, th) in seen or (before is None and after is None):
            continue
        seen.add((name, th))
        if before is not None:
            presets[key] = before
            continue
        rand = [p["value"] for p in probes if p["ev"] == "rand" and p["index"] == name]
        if rand:
            forced[key] = rand[:1]
            continue
        if name == "whichItemWorst":
            increments = 1
        elif v5:  # one incrementAndGet per probe of every filter pass (only the first pass is logged)
            increments = sum(1 for p in probes if p["ev"] == "lft_avail")
        else:  # 4.9, latency on: one, or three through pickOneAtLeast (start, select, queue id)
            increments = 3 if any(p["ev"] == "lft_pick" for p in probes) else 1
        forced[key] = [_int32(after - increments)]


def _order_concurrent_updates(steps: list[dict[str, Any]]) -> None:
    """Put each update where its table write happened. An update made on one thread while another
    thread updated the same broker may be logged after it although it wrote first: its table snapshot
    (taken after the call returned) then shows the other update's latency, not its own. Such an update
    goes just before the one that overwrote it, at its own clock read, without a table to compare (the
    snapshot is of a later state; the next update's is checked). One logged first may still show the
    later one's latency (4.5.2 R30: a callback's and the next send's dispatch update of one broker in the
    same ms, the ``lft_update`` reads in that order): it wrote first and keeps its place, without a table."""
    for u in [s for s in steps if s["what"] == "update"]:
        broker, latency = u["upd"][0], u["upd"][1]
        if u["upd"][-1] is None:  # fault tolerance off: no table write to place
            continue
        shown = next(row[1] for row in u["table"] if row[0] == broker)
        if shown == latency:
            continue
        at = steps.index(u)
        v = next((s for s in reversed(steps[:at]) if _overwrites(s, u, shown)), None)
        if v is not None:
            steps.remove(u)
            steps.insert(steps.index(v), u)
        elif not any(_overwrites(s, u, shown) for s in steps[at + 1 :]):
            raise ValueError(f"step {at}: no update shows latency {shown} of {u['upd'][0]}")
        u["t"] = u["_lft_now"]
        del u["table"]
    for s in steps:
        s.pop("_lft_now", None)


def _overwrites(s: dict[str, Any], u: dict[str, Any], shown: int) -> bool:
    """Whether ``s`` is another thread's update of ``u``'s broker with the latency ``u``'s table shows."""
    return s["what"] == "update" and s["th"] != u["th"] and s["upd"][:2] == [u["upd"][0], shown]


def _drop_torn_tables(steps: list[dict[str, Any]]) -> None:
    """A snapshot taken while another thread was inside ``updateFaultItem`` may show an item half
    written (its new start, its old latency: no update ever wrote that pair); such an update keeps no
    table to compare (4.x items: ``[name, latency, start]``, start = the update's time + duration)."""
    written = {
        (u["upd"][0], u["upd"][1], u["t"] + u["upd"][-1])
        for u in steps
        if u["what"] == "update" and u["upd"][-1] is not None
    }
    for u in steps:
        rows = u.get("table") if u["what"] == "update" else None
        if rows and len(rows[0]) == 3 and any(row[2] and tuple(row) not in written for row in rows):
            del u["table"]


def _move_early_updates(steps: list[dict[str, Any]]) -> None:
    """An update logged after another thread's steps whose clock reads are later than its own write
    happened before them (a selection there already saw it): it goes just before the first of them,
    without a table to compare (its snapshot, taken after the call returned, may show their writes)."""
    for u in [s for s in steps if s["what"] == "update"]:
        at = steps.index(u)
        j = at
        while j > 0 and steps[j - 1]["th"] != u["th"] and (steps[j - 1]["t"] or 0) > u["t"]:
            j -= 1
        if j < at:
            steps.remove(u)
            steps.insert(j, u)
            u.pop("table", None)


def _requests(
    broker: list[dict[str, Any]], attempts: dict[int, list[dict[str, Any]]]
) -> dict[tuple[int, int], dict[str, Any]]:
    """The broker's record of each attempt that reached it, keyed (send, attempt): a request of send k
    (``keys`` = ``k<k>``) belongs to the last attempt of k selected before it arrived."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for e in broker:
        if e["ev"] != "request" or e.get("req") != "SEND_MESSAGE_V2":
            continue
        k = int(e["keys"][1:])
        selected = [a["select"] for a in attempts[k] if a["select"]["t"] <= e["wall_ms"]]
        out[(k, selected[-1]["i"])] = e
    return out


def _sources(steps: list[dict[str, Any]], requests: dict[tuple[int, int], dict[str, Any]]) -> None:
    """Each update's call site: ``oneway``; ``sync_failure`` (thrown inside sendMessageAsync before the
    request reached the broker, on the thread that selected the attempt); ``dispatch`` (sendDefaultImpl
    after sendKernelImpl returned, on the executor: once per send, before any callback of it, since 4.3.2's
    callbacks run on that thread too); or ``callback``."""
    last_select: dict[int, dict[str, Any]] = {}
    updated: set[int] = set()  # sends whose last selected attempt has had an update
    dispatched: set[int] = set()  # sends whose sendDefaultImpl has made its update
    for s in steps:
        k = s["k"]
        if s["what"] == "select":
            last_select[k] = s
            updated.discard(k)
        elif s["what"] == "update":
            sel = last_select.get(k)
            fresh = sel is not None and k not in updated and sel["th"] == s["th"]
            if s["th"] == "A1":
                s["src"] = "oneway"
            elif fresh and (k, sel["i"]) not in requests:  # type: ignore[index]
                s["src"] = "sync_failure"
            elif fresh and s["th"] == "E1" and k not in dispatched:
                s["src"] = "dispatch"
                dispatched.add(k)
            else:
                s["src"] = "callback"
            updated.add(k)


def _sends(
    steps: list[dict[str, Any]],
    attempts: dict[int, list[dict[str, Any]]],
    requests: dict[tuple[int, int], dict[str, Any]],
    broker: list[dict[str, Any]],
    mode: str,
    v5: bool,
    fails_fast: bool,
    names: dict[str, str],
    results: dict[int, dict[str, Any]],
) -> None:
    """Fill in each attempt's send step: the request the broker received (``request``), what the call
    came to (``out``) and the clock reads the recorded latencies imply (``t``); and the select's ``t``
    where a latency was measured from it."""
    closed = {(e["node"], e["opaque"]) for e in broker if e["ev"] == "closed"}
    by_send: dict[int, list[dict[str, Any]]] = {}
    for s in steps:
        by_send.setdefault(s["k"], []).append(s)
    for k, atts in attempts.items():
        mine = by_send[k]
        for a in atts:
            select, send = a["select"], a["send"]
            after = mine[mine.index(send) + 1 :]
            nxt = next((s for s in after if s["what"] in ("update", "select", "result")), None)
            update = nxt if nxt is not None and nxt["what"] == "update" else None
            r = requests.get((k, select["i"]))
            if update is None and r is None:  # refused before the wire, no update (4.x "too much request")
                send["t"] = nxt["t"]  # type: ignore[index]
                continue
            if update is None:
                update = next(s for s in after if s["what"] == "update")
            if mode == "oneway":
                if r is None:  # written to a channel its broker closed before reading it
                    send["unread"] = _unread(select, broker)
                    send["out"] = ["remoting:send_request", 0]  # the caller's write went out at once
                else:
                    send["request"] = [r["node"], r["queue_id"]]
                    send["out"] = _broker_answer(r["action"])
                select["t"] = send["t"] = update["t"] - update["upd"][1]
                continue
            if r is None:  # refused before the wire: no request, no outcome
                send["t"] = update["t"] - update["upd"][1]
                continue
            send["request"] = [r["node"], r["queue_id"]]
            if update["src"] == "dispatch":  # sendDefaultImpl measured from just after the select
                select["t"] = update["t"] - update["upd"][1]
                callback = next(s for s in after if s["what"] == "update" and s["src"] == "callback")
            else:
                callback = update
            latency = callback["upd"][1]
            send["t"] = callback["t"] - latency  # the callback's latency is measured from here
            res = results[k]
            success = not callback["upd"][2]
            if success:
                status = res["res"]["returned"]
                send["out"] = ["ok" if status == "SEND_OK" else f"status:{status}", latency]
            elif res["res"].get("thrown") == "MQBrokerException" and res is _next_result(mine, callback):
                code = res["res"]["responseCode"]
                remark = res["res"]["message"].split("DESC: ", 1)[1].rsplit(" BROKER: ", 1)[0]
                send["out"] = [f"broker:{code}", latency, remark]
            elif fails_fast and (r["node"], r["opaque"]) in closed:  # channelInactive -> failFast
                send["out"] = ["remoting:send_request", latency]
            else:  # no answer: the response-table scan
                send["out"] = ["remoting:timeout", latency]
        for s in mine:
            if s["what"] == "send":
                s["request"] = [_text(s["request"][0], names), s["request"][1]] if "request" in s else None
                if s["request"] is None:
                    del s["request"]
        res = results[k]
        cost = res["res"].get("message") or ""
        if v5 and cost.startswith("wait response timeout, cost="):  # read at the result
            last_send = [s for s in mine if s["what"] == "send"][-1]
            res["t"] = last_send["t"] + int(cost.rsplit("=", 1)[1])


def _unread(select: dict[str, Any], broker: list[dict[str, Any]]) -> list:
    """The queue a oneway request went to when its broker never read it: the broker closed the
    connection (its scripted ``close``) after the request was written, with the request still unread."""
    node, queue = select["sel"]
    closed = [e for e in broker if e["ev"] == "conn_close" and e["node"] == node]
    assert any(e["wall_ms"] >= select["t"] for e in closed), f"{node}: no close after the write"
    return [node, queue]


def _next_result(mine: list[dict[str, Any]], after: dict[str, Any]) -> dict[str, Any] | None:
    """The send's first result step after ``after`` with no select between them (no retry)."""
    for s in mine[mine.index(after) + 1 :]:
        if s["what"] == "select":
            return None
        if s["what"] == "result":
            return s
    return None


def _broker_answer(action: dict[str, Any]) -> list:
    """What a scripted broker did with a request, as an outcome (a oneway caller never sees it)."""
    delay = action.get("delay_ms", 0)
    if action.get("drop"):
        return ["remoting:timeout", delay]
    if action.get("close"):
        return ["remoting:send_request", delay]
    code = action.get("code")
    if code is None:
        return ["ok", delay]
    if code in FLUSH_CODES:
        return [f"status:{FLUSH_CODES[code]}", delay]
    return [f"broker:{code}", delay]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write the vector files to")
    out_dir = parser.parse_args(argv).out
    for archive, out in ARCHIVES.items():
        lines: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(HERE / "traces" / archive) as tar:
            tar.extractall(tmp, filter="data")
            (top,) = Path(tmp).iterdir()
            for folder in sorted(top.iterdir()):
                lines += convert_scenario(folder)
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        (out_dir / out).write_text(text, encoding="utf-8")
        print(f"{out}: {sum(1 for x in lines if x['type'] == 'scenario')} scenarios, {len(lines)} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
