"""Message properties <-> their string (``MessageDecoder.messageProperties2String`` /
``string2messageProperties``): the separators, each version's trailing separator, the order of Java's
``HashMap``, and a strict parser that accepts only what the encoder of a version writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rocketsim.client.versions import V4_9_8, ClientVersion, PropertiesEncoding
from rocketsim.errors import DecodeError
from rocketsim.format.codec.errors import Mode
from rocketsim.format.codec.java_text import java_utf8_decode, java_utf8_encode, utf8_len
from rocketsim.javaint import java_string_hash

PropertyItems = Mapping[str | None, str | None] | Iterable[tuple[str | None, str | None]] | None

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_SIZE = 32767  # Short.MAX_VALUE: the PROPLEN field is a signed short


def java_hashmap_order(keys: Iterable[str | None], initial_capacity: int = 16) -> list[str | None]:
    """The order a ``java.util.HashMap`` iterates keys put in this order (duplicates keep their first slot).

    Bins are visited in index order, entries inside a bin in insertion order (resizing keeps that order).
    Not modelled: bins turned into trees (9+ keys colliding in one bin of a 64+ table).
    """
    unique = list(dict.fromkeys(keys))
    cap = 1
    while cap < max(initial_capacity, 1):
        cap <<= 1
    while len(unique) > cap * 3 // 4:
        cap <<= 1
    mask = cap - 1

    def bucket(key: str | None) -> int:
        h = java_string_hash(key) & 0xFFFF_FFFF
        return (h ^ (h >> 16)) & mask

    order = sorted(range(len(unique)), key=lambda k: (bucket(unique[k]), k))
    return [unique[k] for k in order]


def _items(props: PropertyItems) -> Iterable[tuple[str | None, str | None]]:
    if props is None:
        return ()
    if isinstance(props, Mapping):
        return props.items()
    return props


def properties_to_string(props: PropertyItems, *, version: PropertiesEncoding = V4_9_8) -> str:
    """``messageProperties2String``: ``name\\x01value\\x02`` per entry, null values skipped, a null name
    written as ``null``; 4.9 removes the final ``\\x02``, 5.x keeps it. Nothing is escaped."""
    parts = [
        f"{'null' if name is None else name}\x01{value}\x02"
        for name, value in _items(props)
        if value is not None
    ]
    text = "".join(parts)
    if text and not version.properties_trailing_separator:
        return text[:-1]
    return text


def properties_to_bytes(props: PropertyItems, *, version: PropertiesEncoding = V4_9_8) -> bytes:
    """UTF-8 bytes of ``properties_to_string`` (Java's encoder: lone surrogates become ``?``)."""
    return java_utf8_encode(properties_to_string(props, version=version))


def properties_size(props: PropertyItems, *, version: PropertiesEncoding = V4_9_8) -> int:
    """``len(properties_to_bytes(props, version=version))`` without building the string."""
    total = 0
    for name, value in _items(props):
        if value is None:
            continue
        total += (4 if name is None else utf8_len(name)) + utf8_len(value) + 2
    if total and not version.properties_trailing_separator:
        total -= 1
    return total


def string_to_properties(text: str | None) -> dict[str, str]:
    """``string2messageProperties``: split on ``\\x02``, cut each segment at its first ``\\x01``.

    A segment is kept only with a non-empty name and a non-empty value; the value may contain ``\\x01``;
    the last of duplicate names wins. Keys are in first-seen order (``java_hashmap_order`` gives Java's).
    """
    out: dict[str, str] = {}
    if not text:
        return out
    for segment in text.split(PROPERTY_SEPARATOR):
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


def parsed_properties_java_order(
    props: Mapping[str, str], *, version: PropertiesEncoding = V4_9_8
) -> list[str]:
    """Key order of the ``HashMap`` that ``string2messageProperties`` returns (capacity 16; 128 in 5.x)."""
    return [k for k in java_hashmap_order(props, version.properties_map_capacity) if k is not None]


def parse_properties(
    data: bytes, *, version: ClientVersion = V4_9_8, mode: Mode = "strict", where: str = "properties"
) -> dict[str, str]:
    """Properties bytes -> map. ``strict``: valid UTF-8 in ``version``'s canonical form, else DecodeError."""
    if mode == "java":
        return string_to_properties(java_utf8_decode(data))
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: invalid UTF-8 at byte {exc.start} ({exc.reason})") from None
    out: dict[str, str] = {}
    if not text:
        return out
    if text.endswith(PROPERTY_SEPARATOR):
        if not version.properties_trailing_separator:
            raise DecodeError(f"{where}: ends with \\x02, which {version} does not write (5.x does)")
        text = text[:-1]
    elif version.properties_trailing_separator:
        raise DecodeError(f"{where}: lacks the trailing \\x02 that {version} writes (4.9 removes it)")
    for index, segment in enumerate(text.split(PROPERTY_SEPARATOR)):
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if not sep:
            raise DecodeError(f"{where}: entry {index} {segment[:40]!r} has no \\x01 separator")
        if not name or not value:
            raise DecodeError(f"{where}: entry {index} has an empty {'name' if not name else 'value'}")
        if name in out:
            raise DecodeError(f"{where}: entry {index} repeats the name {name[:40]!r}")
        out[name] = value
    return out
