"""Split a thread group's JFR samples by what its stack shows.

usage: jfr print --events jdk.ExecutionSample,jdk.NativeMethodSample --stack-depth 64 REC.jfr | \
       python3 jfr_split.py
Per thread group (the thread's name less its number) and event kind, counts the samples whose stack
holds each marker below (first match wins, in order); a native sample whose top frame waits in the
selector (epoll, select, park) is idle, not CPU, and is counted as such.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

MARKERS = (  # (group prefix, label, a frame that marks it)
    ("SendMessageThread", "under putMessageLock", "MappedFile.appendMessage"),
    ("SendMessageThread", "encode (outside the lock)", "MessageExtEncoder.encode"),
    ("SendMessageThread", "asyncPutMessage other", "CommitLog.asyncPutMessage"),
    ("NettyClientWorkerThread", "request encode", "NettyEncoder"),
    ("NettyClientWorkerThread", "answer decode", "NettyDecoder"),
    ("NettyClientWorkerThread", "answer handling", "processResponseCommand"),
    ("NettyClientWorkerThread", "write", "write"),
    ("NettyClientSelector", "socket write", "write"),
    ("NettyClientSelector", "socket read", "read"),
    ("NettyServerCodecThread", "request decode", "NettyDecoder"),
    ("NettyServerCodecThread", "answer encode", "NettyEncoder"),
    ("NettyServerCodecThread", "request handling", "processRequestCommand"),
    ("NettyServerNIOSelector", "socket read", "read"),
    ("NettyServerNIOSelector", "socket write", "write"),
)
IDLE = ("epoll", "select", "park", "Object.wait", "sleep")


def group(thread: str) -> str:
    return re.sub(r"[\s_#\-]*\d+([\s_#\-]+\d+)*$", "", thread)


def classify(g: str, frames: list[str], native: bool) -> str:
    if native and frames and any(w in frames[0] for w in IDLE):
        return "idle"
    for prefix, label, marker in MARKERS:
        if g.startswith(prefix) and any(marker in f for f in frames):
            return label
    return "other"


def events(lines):
    kind, thread, frames = None, None, []
    for line in lines:
        s = line.strip()
        if s.startswith("jdk.ExecutionSample") or s.startswith("jdk.NativeMethodSample"):
            if kind is not None:
                yield kind, thread, frames
            kind, thread, frames = s.split()[0], None, []
        elif s.startswith("sampledThread"):
            m = re.search(r'"(.*)"', s)
            thread = m.group(1) if m else s
        elif kind is not None and "line:" in s:
            frames.append(s)
    if kind is not None:
        yield kind, thread, frames


def main() -> None:
    counts: Counter[tuple[str, str, str]] = Counter()
    for kind, thread, frames in events(sys.stdin):
        g = group(thread or "?")
        counts[(g, kind.split(".")[1], classify(g, frames, kind.endswith("NativeMethodSample")))] += 1
    totals: Counter[str] = Counter()
    for (g, _, label), n in counts.items():
        if label != "idle":
            totals[g] += n
    for g, total in totals.most_common(30):
        parts = sorted(
            ((label, kind, n) for (gg, kind, label), n in counts.items() if gg == g), key=lambda x: -x[2]
        )
        print(f"{g}: {total} samples (not idle): " + "; ".join(f"{lab} [{k}] {n}" for lab, k, n in parts))


if __name__ == "__main__":
    main()
