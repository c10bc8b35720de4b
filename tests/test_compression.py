"""Body compression: upstream's threshold rule, byte formats, sys-flag bits, decode errors, size model."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim.client.versions import V4_9_8, V5_DEVELOP, parse_version
from rocketsim.errors import ConfigError, DecodeError
from rocketsim.format.compression import (
    COMPRESSED_FLAG,
    CompressibilityModel,
    CompressionType,
    CompressionTypeError,
    clear_compressed_flag,
    compress,
    compressed_sys_flag,
    compression_flag,
    decode_body,
    decompress,
    decompress_as,
    default_model,
    get_compression_type,
    real_sizes,
    should_compress,
    synthetic_body,
)
from rocketsim.format.compression_fits import FITS

ALL_TYPES = list(CompressionType)
TEXT = b'{"orderId":"ORD-1","status":"PAID","amount":99.95}' * 200


# ---------------------------------------------------------------- types and sys-flag bits


def test_compression_type_values_and_flags() -> None:
    assert [(t.name, t.value, t.flag) for t in CompressionType] == [
        ("LZ4", 1, 0x100),
        ("ZSTD", 2, 0x200),
        ("ZLIB", 3, 0x300),
    ]
    assert CompressionType.of(" zstd ") is CompressionType.ZSTD
    with pytest.raises(ConfigError, match="Unsupported compress type name: snappy"):
        CompressionType.of("snappy")


@pytest.mark.parametrize(
    ("flag", "ctype"),
    [(0x0, "ZLIB"), (0x1, "ZLIB"), (0x101, "LZ4"), (0x201, "ZSTD"), (0x301, "ZLIB"), (0x300, "ZLIB")],
)
def test_get_compression_type_reads_bits_8_to_10(flag: int, ctype: str) -> None:
    assert get_compression_type(flag).name == ctype


@pytest.mark.parametrize("value", [4, 5, 6, 7])
def test_unknown_type_values_raise_like_find_by_value(value: int) -> None:
    with pytest.raises(CompressionTypeError, match=f"^Unknown compress type value: {value}$"):
        get_compression_type((value << 8) | COMPRESSED_FLAG)
    with pytest.raises(DecodeError):
        decompress(compress(TEXT), (value << 8) | COMPRESSED_FLAG)


def test_clear_compressed_flag_keeps_the_type_bits() -> None:
    assert clear_compressed_flag(0x301) == 0x300
    assert clear_compressed_flag(0x31) == 0x30


def test_compressed_sys_flag_by_type_and_version() -> None:
    assert compressed_sys_flag() == 0x301
    assert compressed_sys_flag(CompressionType.LZ4, version=V5_DEVELOP) == 0x101
    assert compressed_sys_flag(CompressionType.ZSTD) == 0x201
    old = parse_version("4.9.3")
    assert compressed_sys_flag(version=old) == 0x1
    assert compressed_sys_flag(version=parse_version("4.9.4")) == 0x301
    with pytest.raises(ConfigError, match="compress_type must be ZLIB"):
        compressed_sys_flag(CompressionType.LZ4, version=old)


# ---------------------------------------------------------------- threshold rule


@pytest.mark.parametrize(
    ("body_len", "is_batch", "expected"),
    [(4095, False, False), (4096, False, True), (4097, False, True), (0, False, False)]
    + [(4096, True, False), (4 << 20, True, False)],
)
def test_should_compress_threshold_and_batches(body_len: int, is_batch: bool, expected: bool) -> None:
    assert should_compress(body_len, is_batch) is expected


def test_should_compress_custom_threshold() -> None:
    assert should_compress(10, False, threshold=10)
    assert not should_compress(9, False, threshold=10)


# ---------------------------------------------------------------- byte formats


@pytest.mark.parametrize("level", [-1, 0, 1, 5, 9])
def test_zlib_is_the_plain_zlib_stream(level: int) -> None:
    assert compress(TEXT, CompressionType.ZLIB, level) == zlib.compress(TEXT, level)


@pytest.mark.parametrize("level", [-2, 10])
def test_zlib_refuses_levels_deflater_refuses(level: int) -> None:
    with pytest.raises(ConfigError, match="-1..9"):
        compress(TEXT, CompressionType.ZLIB, level)


@pytest.mark.parametrize("size", [0, 5, 70_000])
def test_lz4_frame_header_is_lz4_java_s(size: int) -> None:
    out = compress(bytes(size), CompressionType.LZ4)
    # magic, FLG (version 01, independent blocks, no checksums, no size), BD (4 MB blocks), header checksum
    assert out[:7].hex() == "04224d18607073"
    assert out[-4:] == b"\0\0\0\0"  # end mark
    assert compress(bytes(size), CompressionType.LZ4, 1) == out  # level ignored


def test_lz4_splits_bodies_into_4_mb_blocks() -> None:
    body = bytes(4 * 1024 * 1024 + 1)
    out = compress(body, CompressionType.LZ4)
    first = int.from_bytes(out[7:11], "little")
    second_at = 11 + (first & 0x7FFFFFFF)
    assert int.from_bytes(out[second_at : second_at + 4], "little") != 0  # a second block follows
    assert decompress_as(out, CompressionType.LZ4, max_size=len(body)) == body  # beyond the 4 MiB default


def test_zstd_frame_has_no_size_and_ends_with_empty_last_block() -> None:
    out = compress(TEXT, CompressionType.ZSTD, 5)
    assert out[:4].hex() == "28b52ffd"
    assert out[4] == 0x00  # frame header descriptor: no content size, no checksum, window descriptor follows
    assert out[-3:].hex() == "010000"
    assert compress(b"", CompressionType.ZSTD).hex() == "28b52ffd0058010000"
    assert decompress_as(compress(TEXT, CompressionType.ZSTD, 99), CompressionType.ZSTD) == TEXT  # clamped


# ---------------------------------------------------------------- round trips and decode errors


@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=20_000), ctype=st.sampled_from(ALL_TYPES), level=st.integers(1, 9))
def test_round_trip_through_the_sys_flag(body: bytes, ctype: CompressionType, level: int) -> None:
    data = compress(body, ctype, level)
    flag = compressed_sys_flag(ctype)
    assert decompress(data, flag) == body
    assert decode_body(data, flag) == body


def test_flag_without_type_bits_reads_zlib() -> None:
    assert decompress(compress(TEXT), COMPRESSED_FLAG) == TEXT


def test_decode_body_leaves_uncompressed_bodies_alone() -> None:
    assert decode_body(b"plain", 0x300) == b"plain"


@pytest.mark.parametrize("ctype", ALL_TYPES)
def test_truncated_stream_raises(ctype: CompressionType) -> None:
    data = compress(TEXT, ctype)
    for cut in (1, len(data) // 2, len(data) - 1):
        with pytest.raises(DecodeError):
            decompress_as(data[:cut], ctype)


@pytest.mark.parametrize("ctype", ALL_TYPES)
def test_garbage_empty_and_trailing_bytes_raise(ctype: CompressionType) -> None:
    for bad in (b"", b"\x00" * 16, bytes(range(256)), compress(TEXT, ctype) + b"\x01"):
        with pytest.raises(DecodeError):
            decompress_as(bad, ctype)


def test_raw_deflate_without_zlib_header_is_refused() -> None:
    with pytest.raises(DecodeError, match="ZLIB"):
        decompress(bytes.fromhex("cb48cdc9c90700"), compressed_sys_flag())


def test_java_compat_mode_matches_upstream_readers() -> None:
    zlib_body = compress(b"abc")
    assert decompress_as(zlib_body + b"junk", CompressionType.ZLIB, java_compat=True) == b"abc"
    for ctype in ALL_TYPES:
        assert decompress_as(b"", ctype, java_compat=True) == b""
    z = zlib.compressobj(zdict=b"hello world")
    with_dict = z.compress(b"hello world hello") + z.flush()
    assert decompress_as(with_dict, CompressionType.ZLIB, java_compat=True) == b""  # needsDictionary: EOF
    with pytest.raises(DecodeError):
        decompress_as(with_dict, CompressionType.ZLIB)
    with pytest.raises(DecodeError):  # truncation still fails (EOFException upstream)
        decompress_as(zlib_body[:-1], CompressionType.ZLIB, java_compat=True)


def test_any_changed_zlib_byte_is_caught() -> None:
    data = compress(TEXT)
    for i in range(0, len(data), max(1, len(data) // 25)):
        bad = bytearray(data)
        bad[i] ^= 0x55
        with pytest.raises(DecodeError):
            decompress_as(bytes(bad), CompressionType.ZLIB)


@pytest.mark.parametrize("ctype", [CompressionType.LZ4, CompressionType.ZSTD])
def test_broken_frame_structure_is_caught(ctype: CompressionType) -> None:
    data = bytearray(compress(TEXT, ctype))
    data[0] ^= 0xFF  # magic number
    with pytest.raises(DecodeError):
        decompress_as(bytes(data), ctype)


def test_lz4_block_length_past_the_end_is_caught() -> None:
    data = bytearray(compress(TEXT, CompressionType.LZ4))
    data[7:11] = (len(data)).to_bytes(4, "little")  # first block claims more bytes than the frame holds
    with pytest.raises(DecodeError):
        decompress_as(bytes(data), CompressionType.LZ4)


# ---------------------------------------------------------------- synthetic bodies


def test_synthetic_body_is_deterministic_and_sized() -> None:
    a = synthetic_body(10_000, 0.5, 7)
    assert len(a) == 10_000
    assert a == synthetic_body(10_000, 0.5, 7)
    assert a != synthetic_body(10_000, 0.5, 8)
    assert synthetic_body(1000, 0.3, (1, 2, 3)) == synthetic_body(1000, 0.3, [1, 2, 3])
    assert synthetic_body(0, 1.0, 1) == b""


def test_synthetic_compressibility_orders_the_ratio() -> None:
    ratios = [len(compress(synthetic_body(65_536, c, 3))) / 65_536 for c in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[0] > 1.0  # random bytes do not shrink
    assert ratios[-1] < 0.35  # all text: about 0.27 with zlib-5


@pytest.mark.parametrize(("size", "c"), [(-1, 0.5), (10, -0.1), (10, 1.5)])
def test_synthetic_body_refuses_bad_arguments(size: int, c: float) -> None:
    with pytest.raises(ConfigError):
        synthetic_body(size, c, 0)


# ---------------------------------------------------------------- the size model


@pytest.mark.parametrize("ctype", [CompressionType.ZLIB, CompressionType.LZ4])
def test_model_predicts_real_sizes_within_a_few_percent(ctype: CompressionType) -> None:
    model = default_model(ctype)
    rng = np.random.default_rng(2024)
    n = 60
    sizes = np.exp(rng.uniform(np.log(4096), np.log(1 << 20), n)).astype(np.int64)
    cs = rng.uniform(0.0, 1.0, n)
    real = real_sizes(sizes, cs, [(42, i) for i in range(n)], ctype)
    err = np.abs(model.predict_sizes(sizes, cs) - real) / real
    assert np.median(err) < 0.02
    assert err.max() < 0.08


def test_model_follows_the_lz4_64k_table_switch() -> None:
    model = default_model(CompressionType.LZ4)
    sizes = np.array([65_546, 65_547])
    predicted = model.predict_sizes(sizes, np.ones(2))
    real = real_sizes(sizes, np.ones(2), [1, 1], CompressionType.LZ4)
    assert np.all(np.abs(predicted - real) / real < 0.03)
    assert predicted[1] < 0.85 * predicted[0]


def test_predict_sizes_is_vectorised_and_clamped() -> None:
    model = default_model(CompressionType.ZLIB)
    out = model.predict_sizes(np.array([0, 4096, 1 << 22]), np.array([1.0, 0.0, 0.5]))
    assert out.dtype == np.int64 and out.shape == (3,)
    assert out[0] == len(compress(b""))  # never below an empty stream
    assert out[1] > 4096  # random bytes grow a little
    assert model.predict_sizes(np.array([5000]), 0.5).shape == (1,)  # scalar compressibility broadcasts


def test_calibrate_on_given_samples() -> None:
    samples = [(synthetic_body(s, c, (s, int(c * 10))), c) for s in (4096, 16384) for c in (0.0, 0.5, 1.0)]
    model = CompressibilityModel.calibrate(CompressionType.ZSTD, 3, samples)
    assert model.ctype is CompressionType.ZSTD and model.level == 3
    body, c = samples[-1]
    real = len(compress(body, CompressionType.ZSTD, 3))
    assert model.predict_sizes(np.array([len(body)]), np.array([c]))[0] == pytest.approx(real, rel=0.01)
    with pytest.raises(ConfigError):
        CompressibilityModel.calibrate(CompressionType.ZLIB, 5, [(b"", 0.5)])


@pytest.mark.parametrize("key", sorted(FITS))
def test_kept_fits_are_what_the_calibration_gives(key: tuple[str, int]) -> None:
    """The default models' fits kept in rocketsim/format/compression_fits.py are the calibration's on this
    machine's compressors (a build that compresses otherwise fails here: refit the table). To 1e-12, not to
    the bit: the normal equations' solve ends in the last bits the CPU's BLAS kernel gives (an AMD and an
    Intel host differ by an ulp), while one byte more or less in one sample moves a coefficient by ~1e-7."""
    ctype, level = CompressionType[key[0]], key[1]
    fitted, kept = CompressibilityModel.calibrate(ctype, level), default_model(ctype, level)
    assert kept.min_size == fitted.min_size, f"refit {key}: {fitted.min_size}, {fitted.coef}"
    assert kept.coef == pytest.approx(fitted.coef, rel=1e-12, abs=0), f"refit {key}: {fitted.coef}"


def test_levels_without_a_kept_fit_are_calibrated() -> None:
    assert (CompressionType.ZLIB.name, 1) not in FITS
    assert default_model(CompressionType.ZLIB, 1) == CompressibilityModel.calibrate(CompressionType.ZLIB, 1)
    assert default_model(CompressionType.ZLIB, 1) != default_model(CompressionType.ZLIB, 5)


def test_default_model_is_cached() -> None:
    assert default_model(CompressionType.ZLIB) is default_model(CompressionType.ZLIB, 5)
    # the model is version independent: same compressors in 4.9.4+ and 5.x
    assert V4_9_8.writes_compression_type


# ---------------------------------------------------------------- decompression bombs


def _bomb(ctype: CompressionType, size: int, *, content_size: bool = True) -> bytes:
    """``size`` zero bytes compressed (a few KiB at most)."""
    zeros = bytes(size)
    if ctype is CompressionType.ZSTD and not content_size:
        return zstandard.ZstdCompressor(write_content_size=False).compress(zeros)
    return compress(zeros, ctype, 5)


@pytest.mark.parametrize(
    "ctype, content_size",
    [
        (CompressionType.ZLIB, True),
        (CompressionType.LZ4, True),
        (CompressionType.ZSTD, True),
        (CompressionType.ZSTD, False),  # no declared size: stopped while decompressing
    ],
)
def test_a_decompression_bomb_fails_at_max_message_size(ctype: CompressionType, content_size: bool) -> None:
    bomb = _bomb(ctype, 64 << 20, content_size=content_size)
    assert len(bomb) < 512 << 10  # small on the wire, 64 MiB inflated
    with pytest.raises(
        DecodeError, match=rf"^{ctype.name} body of \d+ bytes decompresses to more than 4194304 "
    ):
        decompress_as(bomb, ctype)
    with pytest.raises(DecodeError, match="decompresses to more than 1000 bytes"):
        decode_body(
            _bomb(ctype, 1001, content_size=content_size),
            COMPRESSED_FLAG | compression_flag(ctype),
            max_size=1000,
        )
    exact = _bomb(ctype, 1000, content_size=content_size)
    assert decompress_as(exact, ctype, max_size=1000) == bytes(1000)  # the bound itself is allowed
    assert decompress_as(bomb, ctype, max_size=64 << 20) == bytes(64 << 20)
