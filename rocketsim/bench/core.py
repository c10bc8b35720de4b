"""``python -m rocketsim.bench core``: throughput of the codec and of body compression on one core.

Prints encodes/s and size-function calls/s for 128 B, 1 KiB and 16 KiB bodies (scalar, and per row for the
vectorised column functions), then compressions/s for ZLIB (level 5), LZ4 and ZSTD on 4 KiB and 64 KiB
bodies. Bodies are semi-compressible JSON-like order events from a seeded generator, so runs are
comparable. The vectorised size functions have a target of 2 million rows/s.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np

from rocketsim.client.versions import parse_version
from rocketsim.format.codec import (
    SocketAddress,
    StoredMessage,
    encode_message,
    encode_store,
    encoded_message_size,
    encoded_message_sizes,
    properties_size,
    properties_sizes,
    store_size,
)
from rocketsim.format.message import Message

BODY_SIZES = (128, 1024, 16 * 1024)
COMPRESS_SIZES = (4 * 1024, 64 * 1024)
VECTOR_TARGET_ROWS_PER_S = 2_000_000

_WORDS = (
    "created",
    "paid",
    "shipped",
    "cancelled",
    "refunded",
    "pending",
    "EUR",
    "USD",
    "CNY",
    "express",
    "standard",
    "warehouse-7",
    "warehouse-12",
    "mobile",
    "web",
    "true",
    "false",
    "null",
)


def realistic_body(size: int, seed: int = 7) -> bytes:
    """Order-event JSON lines: repeated keys and vocabulary, random ids and amounts (zlib ratio ~3-4)."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    while len(out) < size:
        words = rng.choice(len(_WORDS), 4)
        out += (
            f'{{"orderId":"{rng.integers(10**11, 10**12)}","userId":{rng.integers(1, 10**7)},'
            f'"status":"{_WORDS[words[0]]}","currency":"{_WORDS[words[1]]}",'
            f'"amount":{rng.integers(1, 10**6) / 100:.2f},"channel":"{_WORDS[words[2]]}",'
            f'"flag":{_WORDS[words[3]]},"ts":{1_700_000_000_000 + int(rng.integers(0, 10**9))}}}\n'
        ).encode()
    return bytes(out[:size])


def _rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``fn``, timed over batches until ``seconds`` have passed."""
    fn()
    calls, batch = 0, 1
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(batch):
            fn()
        calls += batch
        batch = min(batch * 2, 1 << 16)
        elapsed = time.perf_counter() - start
    return calls / elapsed


def _row_rate(fn: Callable[[], object], rows: int, seconds: float) -> float:
    return _rate(fn, seconds) * rows


def _message(body_size: int) -> Message:
    return Message.create(
        "TopicTest", realistic_body(body_size), tags="TagA", keys="order-100000001"
    ).with_uniq_key("C0A8016430391B6D35864A3E59000000")


def _columns(rows: int, seed: int = 11) -> dict[str, object]:
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    tags = pa.array(np.char.add("Tag", rng.integers(0, 16, rows).astype(str)))
    keys = pa.array(np.char.add("order-", rng.integers(10**8, 10**9, rows).astype(str)))
    return {"TAGS": tags, "KEYS": keys, "WAIT": "true", "UNIQ_KEY": 32}


def _fmt(rate: float) -> str:
    return f"{rate:>14,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketsim.bench core", description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.4, help="time per measurement (default 0.4)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per vectorised call (default 1e6)")
    parser.add_argument("--version", default="4.9.8", help="client version of the encodings (default 4.9.8)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the vectorised target is missed")
    args = parser.parse_args(argv)
    version = parse_version(args.version)
    secs, rows = args.seconds, args.rows

    print(f"rocketsim core benchmark (client {version}, {secs:.2f} s per figure, one core)")
    print(
        f"{'body':>8} {'encode/s':>14} {'size/s':>14} {'props size/s':>14} {'store enc/s':>14} "
        f"{'store size/s':>14} {'vector rows/s':>14}"
    )
    columns = _columns(rows)
    slowest_vector = float("inf")
    for size in BODY_SIZES:
        msg = _message(size)
        stored = StoredMessage(
            topic=msg.topic,
            body=msg.body,
            properties=msg.properties,
            born_host=SocketAddress(b"\xc0\xa8\x00\x0a", 54321),
            store_host=SocketAddress(b"\x0a\x00\x00\x05", 10911),
        )
        body_lens = np.full(rows, size, dtype=np.int64)

        def vectorised(body_lens: np.ndarray = body_lens) -> np.ndarray:
            return encoded_message_sizes(
                body_lens, properties_sizes(columns, version=version), version=version
            )

        vector_rate = _row_rate(vectorised, rows, secs)
        slowest_vector = min(slowest_vector, vector_rate)
        print(
            f"{size:>8}"
            f"{_fmt(_rate(lambda m=msg: encode_message(m, version=version), secs))} "
            f"{_fmt(_rate(lambda m=msg: encoded_message_size(m, version=version), secs))} "
            f"{_fmt(_rate(lambda m=msg: properties_size(m.properties, version=version), secs))} "
            f"{_fmt(_rate(lambda s=stored: encode_store(s, version=version), secs))} "
            f"{_fmt(_rate(lambda s=stored: store_size(s, version=version), secs))} "
            f"{_fmt(vector_rate)}"
        )
    verdict = "meets" if slowest_vector >= VECTOR_TARGET_ROWS_PER_S else "MISSES"
    print(
        f"vectorised sizes (properties_sizes + encoded_message_sizes, {rows:,} rows/call): "
        f"{slowest_vector:,.0f} rows/s, {verdict} the {VECTOR_TARGET_ROWS_PER_S:,} rows/s target"
    )

    try:
        from rocketsim.format.compression import CompressionType, compress
    except ImportError as exc:
        print(f"compression: skipped ({exc})")
    else:
        print(f"{'body':>8} {'type':>6} {'compress/s':>14} {'MB/s':>10} {'ratio':>7}")
        for size in COMPRESS_SIZES:
            body = realistic_body(size)
            for ctype in (CompressionType.ZLIB, CompressionType.LZ4, CompressionType.ZSTD):
                rate = _rate(lambda b=body, c=ctype: compress(b, c, 5), secs)
                ratio = size / len(compress(body, ctype, 5))
                print(f"{size:>8} {ctype.name:>6} {_fmt(rate)} {rate * size / 1e6:>10.1f} {ratio:>7.2f}")
    return 1 if args.check and slowest_vector < VECTOR_TARGET_ROWS_PER_S else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
