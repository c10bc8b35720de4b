"""Message-body compression as the RocketMQ producer does it, plus a seeded size model for scale.

Upstream behaviour (``DefaultMQProducerImpl.tryToCompressMessage`` and ``sendKernelImpl``):

* a non-batch message whose body length is ``>= compressMsgBodyOverHowmuch`` (4096) is compressed at
  ``compressLevel`` (5); a ``MessageBatch`` never is;
* 4.9.4 and later (and 5.x) use the configured ``CompressionType`` (default ZLIB) and OR ``COMPRESSED_FLAG``
  with the type flag into the request sys flag (0x301 for ZLIB); up to 4.9.3 the client always used zlib
  (``UtilAll.compress``) and set only ``COMPRESSED_FLAG``;
* on decode, type bits 8-10 of the sys flag pick the decompressor; 0 means ZLIB (older writers), 4..7 fail.

More: docs/reference/modules.md, rocketsim/format/compression.py.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache

import lz4.frame
import numpy as np
import zstandard

from rocketsim.client.versions import V4_9_8, ClientVersion
from rocketsim.errors import ConfigError, DecodeError
from rocketsim.format.compression_fits import FITS
from rocketsim.format.validate import DEFAULT_MAX_MESSAGE_SIZE

# MessageSysFlag bits this module reads and writes (same values in 4.9.8 and 5.x)
COMPRESSED_FLAG = 0x1
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2  # also the mask of the two transaction bits
COMPRESSION_TYPE_COMPARATOR = 0x7 << 8  # the three type bits 8-10 (type flags: CompressionType.flag)

DEFAULT_COMPRESS_LEVEL = 5
DEFAULT_COMPRESS_OVER = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch


class CompressionTypeError(DecodeError):
    """A sys flag whose compression-type bits name no type (upstream: ``RuntimeException``)."""


class CompressionType(Enum):
    """Upstream's ``CompressionType``: ``value`` is the 3-bit type, ``flag`` its sys-flag bits."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def flag(self) -> int:
        """``getCompressionFlag()``: the value shifted into sys-flag bits 8-10."""
        return self.value << 8

    compression_flag = flag

    @classmethod
    def of(cls, name: str) -> CompressionType:
        """``CompressionType.of``: a trimmed, case-insensitive name (the system property's value)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ConfigError(f"Unsupported compress type name: {name}") from None

    @classmethod
    def find_by_value(cls, value: int) -> CompressionType:
        """``CompressionType.findByValue``: 0 reads as ZLIB (writers without a type), 4..7 raise."""
        if value == 0:
            return cls.ZLIB
        try:
            return cls(value)
        except ValueError:
            raise CompressionTypeError(f"Unknown compress type value: {value}") from None


# ---------------------------------------------------------------- MessageSysFlag helpers


def get_compression_type(sys_flag: int) -> CompressionType:
    """``MessageSysFlag.getCompressionType``: the type named by bits 8-10 (0 means ZLIB)."""
    return CompressionType.find_by_value((sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8)


def compression_flag(ctype: CompressionType) -> int:
    """``CompressionType.getCompressionFlag``."""
    return ctype.flag


def clear_compressed_flag(sys_flag: int) -> int:
    """``MessageSysFlag.clearCompressedFlag``: drops bit 0 only; the type bits stay."""
    return sys_flag & ~COMPRESSED_FLAG


def get_transaction_value(sys_flag: int) -> int:
    """``MessageSysFlag.getTransactionValue``: the two transaction bits (0, 4, 8 or 12)."""
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


def reset_transaction_value(sys_flag: int, transaction_type: int) -> int:
    """``MessageSysFlag.resetTransactionValue``: replace the transaction bits by ``transaction_type``."""
    return (sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | transaction_type


def supports_compression_type(version: ClientVersion = V4_9_8) -> bool:
    """Whether the client has a configurable compression type and writes type bits (4.9.4 and later)."""
    return version.writes_compression_type


def compressed_sys_flag(
    ctype: CompressionType = CompressionType.ZLIB, *, version: ClientVersion = V4_9_8
) -> int:
    """The bits ``sendKernelImpl`` ORs into the request sys flag for a compressed body.

    0x1 | type flag (0x301 for ZLIB) from 4.9.4 on; up to 4.9.3 only 0x1, and zlib is the only type.
    """
    if supports_compression_type(version):
        return COMPRESSED_FLAG | ctype.flag
    if ctype is not CompressionType.ZLIB:
        raise ConfigError(
            f"compress_type must be ZLIB for client_version {version} (before 4.9.4), got {ctype.name}"
        )
    return COMPRESSED_FLAG


def should_compress(body_len: int, is_batch: bool, threshold: int = DEFAULT_COMPRESS_OVER) -> bool:
    """The producer's rule: a non-batch body of at least ``threshold`` bytes is compressed."""
    return not is_batch and body_len >= threshold


# ---------------------------------------------------------------- compress / decompress


_ZSTD_MIN_LEVEL = -(1 << 17)  # ZSTD_minCLevel() of libzstd 1.5


def _zstd_level(level: int) -> int:
    # libzstd (behind zstd-jni) clamps out-of-range levels; python-zstandard refuses them instead
    return max(_ZSTD_MIN_LEVEL, min(level, zstandard.MAX_COMPRESSION_LEVEL))


def compress(
    body: bytes, ctype: CompressionType = CompressionType.ZLIB, level: int = DEFAULT_COMPRESS_LEVEL
) -> bytes:
    """Compress ``body`` as upstream's compressor of ``ctype`` does at ``level`` (ignored by LZ4).

    ZLIB accepts levels -1..9 like ``java.util.zip.Deflater``; anything else is a :class:`ConfigError`.
    """
    if ctype is CompressionType.ZLIB:
        if not -1 <= level <= 9:
            raise ConfigError(f"compress_level for ZLIB must be in -1..9, got {level}")
        return zlib.compress(body, level)
    if ctype is CompressionType.LZ4:
        # the streaming API keeps the 4 MB block size; one-shot lz4.frame.compress would shrink it to fit
        c = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB,
            block_linked=False,
            compression_level=0,
            content_checksum=False,
            block_checksum=False,
            auto_flush=False,
        )
        return c.begin() + c.compress(body) + c.flush()
    if ctype is CompressionType.ZSTD:
        z = zstandard.ZstdCompressor(level=_zstd_level(level), write_content_size=False, write_checksum=False)
        o = z.compressobj()
        # ZstdOutputStream: write, flush (ends a block), close (adds an empty last block)
        return (
            o.compress(body)
            + o.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
            + o.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)
        )
    raise ConfigError(f"compress_type must be a CompressionType, got {ctype!r}")


def _zlib_needs_dictionary(data: bytes) -> bool:
    """A valid zlib header with FDICT set: ``InflaterInputStream`` stops there and returns no bytes."""
    return (
        len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0 and data[1] & 0x20 != 0
    )


def decompress_as(
    data: bytes,
    ctype: CompressionType,
    *,
    java_compat: bool = False,
    max_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> bytes:
    """Decompress one complete stream of ``ctype`` into at most ``max_size`` bytes (the producer's
    ``max_message_size``, default 4 MiB: no body a client sends decompresses to more).

    Unlike upstream (``UtilAll.uncompress`` and the compressors inflate without a bound), a stream that
    would decompress to more than ``max_size`` bytes raises :class:`DecodeError` after producing at most
    ``max_size + 1`` bytes of it (a decompression bomb costs no more memory than the largest body).

    Raises :class:`DecodeError` for corrupt, truncated or empty input and for bytes after the end of the
    stream. ZLIB ends with an Adler-32, so any changed byte is caught; LZ4 and ZSTD frames are written
    without checksums (as upstream writes them), so a changed literal byte decodes to wrong bytes that no
    reader can notice; broken structure (lengths, offsets, headers) is caught.

    ``java_compat`` reproduces upstream's ``decompress`` where it is laxer: empty input gives empty output
    (its read buffer is ``src.length`` long, so the first read returns 0), and for ZLIB bytes after the end
    of the stream are ignored and a stream asking for a preset dictionary gives empty output.
    """
    if java_compat:
        if not data:
            return b""
        if ctype is CompressionType.ZLIB and _zlib_needs_dictionary(data):
            return b""
    limit = max_size + 1
    try:
        if ctype is CompressionType.ZLIB:
            zd = zlib.decompressobj()
            out = zd.decompress(data, limit)
            done, rest = zd.eof, zd.unused_data
        elif ctype is CompressionType.LZ4:
            ld = lz4.frame.LZ4FrameDecompressor()
            out = ld.decompress(data, max_length=limit)
            done, rest = ld.eof, ld.unused_data
        elif ctype is CompressionType.ZSTD:
            out, done, rest = _zstd_bounded(data, limit)
        else:
            raise ConfigError(f"compress_type must be a CompressionType, got {ctype!r}")
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise DecodeError(f"corrupt {ctype.name} body ({len(data)} bytes): {e}") from None
    except _TooBig:
        out = None
    if out is None or len(out) > max_size:
        raise DecodeError(
            f"{ctype.name} body of {len(data)} bytes decompresses to more than {max_size} bytes "
            "(max_message_size): refused"
        )
    if not done:
        raise DecodeError(f"truncated {ctype.name} body: {len(data)} bytes end inside the stream")
    if rest and not (java_compat and ctype is CompressionType.ZLIB):
        raise DecodeError(f"{ctype.name} body has {len(rest)} bytes after the end of the stream")
    return out


_ZSTD_STEP = 256  # input bytes fed at a time: a zstd block expands at most ~128 KiB per few bytes


def _zstd_bounded(data: bytes, limit: int) -> tuple[bytes, bool, bytes]:
    """(output, ended, bytes after the frame) of one zstd frame, fed a few bytes at a time and stopped
    once ``limit`` bytes came out (:class:`_TooBig`); a frame whose header declares that many is not
    decompressed at all."""
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        declared = -1  # no complete header: the decompressor says what is wrong
    if declared >= limit:
        raise _TooBig
    sd = zstandard.ZstdDecompressor().decompressobj()
    parts: list[bytes] = []
    size = 0
    for at in range(0, max(len(data), 1), _ZSTD_STEP):
        part = sd.decompress(data[at : at + _ZSTD_STEP])
        parts.append(part)
        size += len(part)
        if size >= limit:
            raise _TooBig
        if sd.eof:
            return b"".join(parts), True, sd.unused_data + data[at + _ZSTD_STEP :]
    return b"".join(parts), sd.eof, b""


class _TooBig(Exception):
    """A zstd frame that decompresses beyond the limit."""


def decompress(data: bytes, sys_flag: int, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Decompress ``data`` with the type named by ``sys_flag`` bits 8-10 (0 means ZLIB; 4..7 raise),
    into at most ``max_size`` bytes."""
    return decompress_as(data, get_compression_type(sys_flag), max_size=max_size)


def decode_body(body: bytes, sys_flag: int, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """``MessageDecoder``'s rule: decompress only when ``COMPRESSED_FLAG`` is set, else return ``body``;
    a body decompressing to more than ``max_size`` bytes raises :class:`DecodeError`."""
    return decompress(body, sys_flag, max_size=max_size) if sys_flag & COMPRESSED_FLAG else body


# ---------------------------------------------------------------- synthetic bodies and the size model

_CHUNK = 64  # random and text bytes are mixed in chunks of this many bytes
_TOKEN = 4  # text is a sequence of 4-byte tokens drawn from the template below
_TEXT_TEMPLATE = (
    b'{"orderId":"ORD-20240101-000123","userId":1234567,"status":"PAID","amount":99.95,'
    b'"currency":"USD","items":[{"sku":"SKU-001","qty":2},{"sku":"SKU-042","qty":1}],'
    b'"shipTo":{"city":"Hangzhou","zip":"310000"},"tags":["vip","promo"],"ts":1700000000000}   '
)
_TOKENS = np.frombuffer(_TEXT_TEMPLATE[: len(_TEXT_TEMPLATE) // _TOKEN * _TOKEN], dtype=np.uint8).reshape(
    -1, _TOKEN
)


def synthetic_body(size: int, compressibility: float, seed: int | Sequence[int]) -> bytes:
    """A deterministic body: a ``compressibility`` fraction of JSON-like text, the rest uniform random bytes.

    The body is cut into 64-byte chunks; ``round(compressibility * chunks)`` of them, chosen by the seed,
    hold text (4-byte tokens of an order-event template in random order, about 6 bits per 4 bytes), the
    others random bytes. 0 gives incompressible bytes, 1 text that zlib-5 shrinks to about 0.27 of its
    size. The same (size, compressibility, seed) always gives the same bytes.
    """
    if size < 0:
        raise ConfigError(f"body size must be >= 0, got {size}")
    if not 0.0 <= compressibility <= 1.0:
        raise ConfigError(f"compressibility must be in [0, 1], got {compressibility}")
    rng = np.random.default_rng(seed)
    chunks = -(-size // _CHUNK)
    text_chunks = round(compressibility * chunks)
    out = np.frombuffer(rng.bytes(size), dtype=np.uint8).copy()
    if text_chunks:
        n_tokens = -(-size // _TOKEN)
        text = _TOKENS[rng.integers(0, len(_TOKENS), n_tokens)].reshape(-1)[:size]
        chosen = np.zeros(chunks, dtype=bool)
        chosen[rng.permutation(chunks)[:text_chunks]] = True
        mask = np.repeat(chosen, _CHUNK)[:size]
        out[mask] = text[mask]
    return out.tobytes()


def real_sizes(
    body_sizes: np.ndarray,
    compressibility: np.ndarray,
    seeds: Iterable[int | Sequence[int]],
    ctype: CompressionType = CompressionType.ZLIB,
    level: int = DEFAULT_COMPRESS_LEVEL,
) -> np.ndarray:
    """Compressed sizes by really compressing :func:`synthetic_body` bodies (the exact, slow option)."""
    return np.array(
        [
            len(compress(synthetic_body(int(s), float(c), seed), ctype, level))
            for s, c, seed in zip(body_sizes, compressibility, seeds, strict=True)
        ],
        dtype=np.int64,
    )


# knots of the size model: compressibility 0, 0.1, ..., 1 and body sizes 2^6 .. 2^20 (flat beyond).
# 65546/65547: liblz4 (and lz4-java) switch to a wider hash table from 64 KiB + 11 bytes on, which
# shrinks LZ4 output of text by a fifth at once.
_C_KNOTS = np.linspace(0.0, 1.0, 11)
_SIZE_KNOTS = np.array([64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65546, 65547, 131072, 262144, 1 << 20])
_LOG2_SIZE_KNOTS = np.log2(_SIZE_KNOTS)


_N_C = len(_C_KNOTS)
_BLOCK = 1 << 16  # rows per step of the vectorised prediction: keeps the temporaries in cache


def _cell(body_sizes: np.ndarray, compressibility: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear cell of each body: flat index of its lower-left coefficient and the two fractions."""
    ls = np.log2(np.maximum(body_sizes, 1.0))
    np.clip(ls, _LOG2_SIZE_KNOTS[0], _LOG2_SIZE_KNOTS[-1], out=ls)
    si = np.searchsorted(_LOG2_SIZE_KNOTS, ls, side="right") - 1
    np.clip(si, 0, len(_LOG2_SIZE_KNOTS) - 2, out=si)
    ts = (ls - _LOG2_SIZE_KNOTS[si]) / (_LOG2_SIZE_KNOTS[si + 1] - _LOG2_SIZE_KNOTS[si])
    x = np.clip(compressibility, 0.0, 1.0) * (_N_C - 1)  # the c knots are evenly spaced
    ci = np.minimum(x.astype(np.intp), _N_C - 2)
    return si * _N_C + ci, ts, x - ci


def _design(body_sizes: np.ndarray, compressibility: np.ndarray) -> np.ndarray:
    """Least-squares design matrix: one row per sample, one column per (size knot, c knot) coefficient."""
    base, ts, tc = _cell(body_sizes, compressibility)
    rows = np.arange(len(base))
    a = np.zeros((len(base), len(_LOG2_SIZE_KNOTS) * _N_C))
    for offset, w in (
        (0, (1 - ts) * (1 - tc)),
        (1, (1 - ts) * tc),
        (_N_C, ts * (1 - tc)),
        (_N_C + 1, ts * tc),
    ):
        np.add.at(a, (rows, base + offset), w)
    return a


@dataclass(frozen=True)
class CompressibilityModel:
    """Predicts compressed body sizes without compressing: ``size * ratio(log2 size, compressibility)``.

    ``ratio`` is a tensor-product linear spline (knots: compressibility 0, 0.1, ..., 1; body sizes 2^6 ..
    2^20, constant beyond) fitted by least squares to real compressions of sample bodies (by default
    :func:`synthetic_body` bodies on the knot grid, averaged over several seeds for small sizes).
    Predictions are never below the size of an empty compressed stream.

    Accuracy against real compression of fresh :func:`synthetic_body` bodies (new seeds, sizes log-uniform
    in 4 KiB..4 MiB, compressibility uniform in [0, 1], 400 bodies, default calibration, level 5), as
    relative error |predicted - real| / real:

    ====  ============  =========  =====
    type  median error  p95 error  max
    ====  ============  =========  =====
    ZLIB  0.1 %         1.0 %      2.2 %
    LZ4   0.1 %         0.5 %      1.4 %
    ZSTD  0.2 %         1.0 %      2.1 %
    ====  ============  =========  =====

    The largest errors are on small, nearly all-text bodies (about 4 KiB, compressibility near 1), where
    other samples reach 5-6 %. Bodies of 64 B..4 KiB (below the default threshold) are rougher: median
    about 1 %, p95 up to 8 %, max about 20 %. ``tests/test_compression.py`` checks 4 KiB..1 MiB bodies
    (median within 2 %, max within 8 %).

    The model describes the synthetic generator, not real payloads: choose ``compressibility`` per
    workload so that its ratio matches the payloads you care about (see :meth:`ratio`).
    """

    ctype: CompressionType
    level: int
    coef: tuple[float, ...]
    min_size: int

    @classmethod
    def calibrate(
        cls,
        ctype: CompressionType = CompressionType.ZLIB,
        level: int = DEFAULT_COMPRESS_LEVEL,
        sample_bodies: Iterable[tuple[bytes, float]] | None = None,
        *,
        seed: int = 0,
    ) -> CompressibilityModel:
        """Fit the model to real compressions of ``sample_bodies`` ((body, compressibility) pairs).

        Without samples, bodies from :func:`synthetic_body` on the knot grid are used (seeded by ``seed``).
        """
        if sample_bodies is None:
            sample_bodies = _default_samples(seed)
        sizes, cs, ratios = [], [], []
        for body, c in sample_bodies:
            if len(body) == 0:
                continue
            sizes.append(len(body))
            cs.append(c)
            ratios.append(len(compress(body, ctype, level)) / len(body))
        if not sizes:
            raise ConfigError("sample_bodies must hold at least one non-empty body")
        a = _design(np.array(sizes, dtype=np.float64), np.array(cs, dtype=np.float64))
        # a small ridge towards the mean ratio keeps knots without samples defined
        lam = 1e-6
        n = a.shape[1]
        mean = float(np.mean(ratios))
        lhs = a.T @ a + lam * np.eye(n)
        rhs = a.T @ np.array(ratios) + lam * mean
        coef = np.linalg.solve(lhs, rhs)
        return cls(ctype, level, tuple(float(x) for x in coef), len(compress(b"", ctype, level)))

    def ratio(self, body_sizes: np.ndarray, compressibility: np.ndarray) -> np.ndarray:
        """Predicted compressed size / body size (about 0.2 s per million bodies)."""
        s, c = np.broadcast_arrays(
            np.asarray(body_sizes, dtype=np.float64), np.asarray(compressibility, dtype=np.float64)
        )
        shape = s.shape
        s, c = s.ravel(), c.ravel()
        coef = np.asarray(self.coef)
        out = np.empty(len(s))
        for i in range(0, len(s), _BLOCK):
            base, ts, tc = _cell(s[i : i + _BLOCK], c[i : i + _BLOCK])
            c00, c01 = coef.take(base), coef.take(base + 1)
            c10, c11 = coef.take(base + _N_C), coef.take(base + _N_C + 1)
            low = c00 + tc * (c01 - c00)
            out[i : i + _BLOCK] = low + ts * (c10 + tc * (c11 - c10) - low)
        return out.reshape(shape)

    def predict_sizes(self, body_sizes: np.ndarray, compressibility: np.ndarray) -> np.ndarray:
        """Predicted compressed sizes (int64), vectorised over bodies."""
        s = np.asarray(body_sizes, dtype=np.float64)
        pred = np.rint(self.ratio(s, compressibility) * s)
        return np.maximum(pred, self.min_size).astype(np.int64)


def _default_samples(seed: int) -> Iterable[tuple[bytes, float]]:
    for k, size in enumerate(_SIZE_KNOTS.tolist()):
        repeats = max(1, min(8, (1 << 16) // size))  # average out the noise of small bodies
        for j, c in enumerate(_C_KNOTS):
            for r in range(repeats):
                yield synthetic_body(size, float(c), (seed, k, j, r)), float(c)


def default_model(
    ctype: CompressionType = CompressionType.ZLIB, level: int = DEFAULT_COMPRESS_LEVEL
) -> CompressibilityModel:
    """The model calibrated on the default synthetic grid (once per type and level; the default level's
    fits are kept, :mod:`rocketsim.format.compression_fits`)."""
    return _default_model(ctype, level)


@cache
def _default_model(ctype: CompressionType, level: int) -> CompressibilityModel:
    fit = FITS.get((ctype.name, level))  # the calibration's fit, kept (compression_fits)
    if fit is None:
        return CompressibilityModel.calibrate(ctype, level)
    min_size, coef = fit
    return CompressibilityModel(ctype, level, coef, min_size)
