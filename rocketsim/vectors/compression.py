"""Checker for ``compression.json``: compressors, ``MessageSysFlag`` helpers and ``CompressionType``.

One result per vector and per version key of ``same_in_versions`` (the upstream classes are identical in
4.9.8 and 5.x, so both keys are checked against the same expected output).

ZLIB and LZ4 bytes must equal the vector. ZSTD bytes are informative (the vectors came from a newer
libzstd than zstd-jni bundles, and ours may differ again): a ZSTD vector passes when the bytes are equal,
or, if they differ, when both the vector's bytes and ours decompress to the input; the result's detail
then says that the bytes differed. Where Java threw, we must raise. Decompression vectors run in
``java_compat`` mode (upstream's reader ignores bytes after a zlib stream and returns nothing for empty
input, where the library's default refuses both).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocketsim.format.compression import (
    CompressionType,
    clear_compressed_flag,
    compress,
    decompress_as,
    get_compression_type,
    get_transaction_value,
    reset_transaction_value,
)
from rocketsim.vectors import Result, failed, passed, skipped

FILES = ("compression.json",)

TRANSACTION_COMMIT_TYPE = 0x2 << 2
_COMPRESSORS = {
    "ZlibCompressor.compress": CompressionType.ZLIB,
    "LZ4Compressor.compress": CompressionType.LZ4,
    "ZSTDCompressor.compress": CompressionType.ZSTD,
}
_DECOMPRESSORS = {kind.replace(".compress", ".decompress"): ctype for kind, ctype in _COMPRESSORS.items()}


def _short(value: Any, limit: int = 96) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def _vector_id(v: dict[str, Any]) -> str:
    kind = v.get("kind", "?")
    if kind in _COMPRESSORS:
        return f"{kind}:{v.get('id')}:level={v.get('level')}"
    if kind == "MessageSysFlag":
        return f"{kind}:{v.get('input')}"
    if kind == "CompressionType":
        return f"{kind}:{v.get('name')}"
    return f"{kind}:{v.get('id', '?')}"


def _outcome(fn: Callable[[], Any]) -> Any:
    """Our value, or ``{"exception": <class>, "message": <text>}`` when we raised."""
    try:
        return fn()
    except Exception as e:  # the vectors record Java exceptions; any raise of ours is compared to them
        return {"exception": type(e).__name__, "message": str(e)}


def _check_compress(v: dict[str, Any]) -> tuple[bool, str]:
    ctype = _COMPRESSORS[v["kind"]]
    data = bytes.fromhex(v["input_hex"])
    expected = v["output"]
    if "exception" in expected:
        ours = _outcome(lambda: compress(data, ctype, v["level"]))
        ok = isinstance(ours, dict)
        return ok, "" if ok else f"Java threw {expected['exception']}, we returned {len(ours)} bytes"
    want = bytes.fromhex(expected["hex"])
    got = compress(data, ctype, v["level"])
    if got == want:
        if decompress_as(want, ctype) != data:
            return False, "bytes equal but they do not decompress to the input"
        return True, ""
    if ctype is not CompressionType.ZSTD:
        return (
            False,
            f"differ: got {_short(got.hex())} ({len(got)} B), want {_short(want.hex())} ({len(want)} B)",
        )
    vector_ok = _outcome(lambda: decompress_as(want, ctype)) == data
    ours_ok = _outcome(lambda: decompress_as(got, ctype)) == data
    if vector_ok and ours_ok:
        return True, f"ZSTD bytes differ ({len(got)} B vs {len(want)} B, informative); both round-trip"
    return False, f"ZSTD bytes differ and round trip failed (vector's: {vector_ok}, ours: {ours_ok})"


def _check_decompress(v: dict[str, Any]) -> tuple[bool, str]:
    ctype = _DECOMPRESSORS[v["kind"]]
    data = bytes.fromhex(v["input_hex"])
    expected = v["output"]
    ours = _outcome(lambda: decompress_as(data, ctype, java_compat=True))
    if "exception" in expected:
        ok = isinstance(ours, dict)
        return ok, "" if ok else f"Java threw {expected['exception']}, we returned {_short(ours.hex())}"
    want = bytes.fromhex(expected["hex"])
    if ours != want:
        return False, f"got {_short(ours)}, want {_short(want.hex())}"
    return True, ""


def _check_sys_flag(v: dict[str, Any]) -> tuple[bool, str]:
    flag = v["input"]
    ours: dict[str, Any] = {
        "getTransactionValue": get_transaction_value(flag),
        "clearCompressedFlag": clear_compressed_flag(flag),
        "resetTransactionValue_to_COMMIT": reset_transaction_value(flag, TRANSACTION_COMMIT_TYPE),
        "getCompressionType": _outcome(lambda: get_compression_type(flag).name),
    }
    diffs = []
    for key, want in v["output"].items():
        if key not in ours:
            diffs.append(f"{key}: not modelled")
            continue
        got = ours[key]
        if isinstance(want, dict) and "exception" in want:
            if not (isinstance(got, dict) and got.get("message") == want.get("message")):
                diffs.append(f"{key}: Java threw {_short(want)}, we gave {_short(got)}")
        elif got != want:
            diffs.append(f"{key}: got {_short(got)}, want {_short(want)}")
    return not diffs, "; ".join(diffs)


def _check_type(v: dict[str, Any]) -> tuple[bool, str]:
    ctype = _outcome(lambda: CompressionType[v["name"]])
    if isinstance(ctype, dict):
        return False, f"no CompressionType named {v['name']}"
    got = (ctype.value, ctype.flag)
    want = (v["value"], v["compressionFlag"])
    return got == want, "" if got == want else f"(value, flag) got {got}, want {want}"


_CHECKS: dict[str, Callable[[dict[str, Any]], tuple[bool, str]]] = {
    **dict.fromkeys(_COMPRESSORS, _check_compress),
    **dict.fromkeys(_DECOMPRESSORS, _check_decompress),
    "MessageSysFlag": _check_sys_flag,
    "CompressionType": _check_type,
}


def run(path: Path) -> Iterator[Result]:
    """Check every vector of ``path`` once per version key."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    versions = doc.get("same_in_versions") or ["4.9.8", "5.x"]
    for v in doc["vectors"]:
        base = _vector_id(v)
        check = _CHECKS.get(v.get("kind", ""))
        if check is None:
            for ver in versions:
                yield skipped(path.name, f"{base}@{ver}", f"unknown kind {v.get('kind')!r}")
            continue
        try:
            ok, detail = check(v)
        except Exception as e:  # a crash on one vector is that vector's failure, not the run's
            ok, detail = False, f"checker raised {type(e).__name__}: {_short(str(e))}"
        for ver in versions:
            vid = f"{base}@{ver}"
            if not ok:
                yield failed(path.name, vid, detail)
            elif detail:
                yield Result(path.name, vid, "passed", detail)
            else:
                yield passed(path.name, vid)
