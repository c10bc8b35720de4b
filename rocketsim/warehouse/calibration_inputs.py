"""The files of a calibration: read users' measurement files (``FORMAT:PATH`` or a path whose format is
detected) for :mod:`rocketsim.calibration`, and write the scenario fragment.

Every failure is a :class:`rocketsim.errors.MeasurementError` naming the file (and the line where the
parser found the fault), so the job can print one line.
"""

from __future__ import annotations

import stat
from pathlib import Path

from rocketsim.calibration.formats import FORMATS, detect_format, parse_input
from rocketsim.calibration.measurements import Measurements
from rocketsim.errors import MeasurementError

MAX_INPUT_BYTES = 2 << 30  # a measurement file of more is a mistake (or a device)


def split_spec(spec: str) -> tuple[str | None, str]:
    """``FORMAT:PATH`` -> (format, path); a bare path -> (None, path)."""
    head, sep, tail = spec.partition(":")
    if sep and head in FORMATS:
        return head, tail
    if sep and head and "/" not in head and "." not in head and not Path(spec).exists():
        raise MeasurementError(
            spec, 0, f"expected FORMAT:PATH with FORMAT one of {', '.join(FORMATS)}, got {head!r}"
        )
    return None, spec


def read_text(path: str) -> str:
    """The file's text: a regular file of at most :data:`MAX_INPUT_BYTES`, UTF-8."""
    p = Path(path)
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise MeasurementError(path, 0, "expected a regular file")
        if st.st_size > MAX_INPUT_BYTES:
            raise MeasurementError(path, 0, f"expected at most {MAX_INPUT_BYTES} bytes, got {st.st_size}")
        data = p.read_bytes()
    except OSError as exc:
        raise MeasurementError(path, 0, f"cannot be read: {exc.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise MeasurementError(path, line, f"expected UTF-8 text, got byte 0x{data[exc.start]:02x}") from None


def read_input(spec: str) -> tuple[Measurements, str]:
    """One input's measurements and a line describing it (``format:path``)."""
    fmt, path = split_spec(spec)
    text = read_text(path)
    fmt = fmt or detect_format(text, path)
    return parse_input(text, path, fmt), f"{fmt}:{path}"


def read_inputs(specs: list[str]) -> tuple[Measurements, list[str]]:
    """Every input's measurements, together, and their descriptions."""
    out, described = Measurements(), []
    for spec in specs:
        ms, what = read_input(spec)
        out += ms
        described.append(what)
    return out, described


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` (folders made as needed)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p
