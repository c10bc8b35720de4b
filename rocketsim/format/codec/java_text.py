"""Java strings as the client writes and reads them: UTF-8 the way ``String.getBytes`` and
``new String(bytes, UTF_8)`` do it (a lone surrogate written as ``?``, malformed input read as U+FFFD
exactly where the JDK puts them) and ``String.length()`` in UTF-16 units.
"""

from __future__ import annotations


def java_utf8_encode(text: str) -> bytes:
    """``text.getBytes(UTF_8)``: a lone surrogate becomes ``?``; a surrogate pair one 4-byte character."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Join surrogate pairs held as two code points, then let 'replace' write '?' for lone ones.
        joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return joined.encode("utf-8", "replace")


def utf8_len(text: str) -> int:
    """Length of ``java_utf8_encode(text)``."""
    return len(text) if text.isascii() else len(java_utf8_encode(text))


def utf16_len(text: str) -> int:
    """Java ``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def java_utf8_decode(data: bytes) -> str:
    """``new String(data, UTF_8)``: malformed input becomes U+FFFD exactly where the JDK puts them."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _java_utf8_decode_malformed(bytes(data))


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _java_utf8_decode_malformed(b: bytes) -> str:
    # The JDK's replacement rules (String.decodeUTF8_UTF16): one U+FFFD per malformed subsequence, where the
    # length of a malformed 3-/4-byte sequence depends on which byte first breaks it.
    out: list[str] = []
    n = len(b)
    i = 0
    repl = "\ufffd"
    while i < n:
        b1 = b[i]
        i += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if i < n:
                b2 = b[i]
                if _cont(b2):
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                    i += 1
                else:
                    out.append(repl)
                continue
            out.append(repl)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if i + 1 < n:
                b2, b3 = b[i], b[i + 1]
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append(repl)
                    i += 0 if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(repl if 0xD800 <= c <= 0xDFFF else chr(c))
                    i += 2
                continue
            if i < n and ((b1 == 0xE0 and (b[i] & 0xE0) == 0x80) or not _cont(b[i])):
                out.append(repl)
                continue
            out.append(repl)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if i + 2 < n:
                b2, b3, b4 = b[i], b[i + 1], b[i + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(repl)
                    if (
                        b1 > 0xF4
                        or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                        or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
                        or not _cont(b2)
                    ):
                        pass
                    elif not _cont(b3):
                        i += 1
                    else:
                        i += 2
                else:
                    out.append(chr(uc))
                    i += 3
                continue
            if b1 > 0xF4 or (
                i < n
                and (
                    (b1 == 0xF0 and not 0x90 <= b[i] <= 0xBF)
                    or (b1 == 0xF4 and (b[i] & 0xF0) != 0x80)
                    or not _cont(b[i])
                )
            ):
                out.append(repl)
                continue
            i += 1
            out.append(repl)
            if i < n and not _cont(b[i]):
                continue
            break
        else:
            out.append(repl)
    return "".join(out)
