"""The one error family of rocketsim."""

from __future__ import annotations


class RocketSimError(Exception):
    """Base class of every error rocketsim raises on purpose."""


class DecodeError(RocketSimError, ValueError):
    """Bytes that do not decode: truncated, corrupt, or with lengths past the end."""


class EncodeError(RocketSimError, ValueError):
    """A value that upstream's encoder refuses (e.g. properties longer than a short can hold)."""


class ConfigError(RocketSimError, ValueError):
    """A bad setting: names the key, the rule and the value."""


class MQClientError(RocketSimError):
    """Upstream's MQClientException: a response code and a text, with the FAQ suffix in the message.

    ``response_code`` is -1 when upstream builds the exception without a code; then the full message is
    ``text + suffix``; with a code it is ``"CODE: <code>  DESC: <text>" + suffix``.
    """

    def __init__(self, response_code: int, error_message: str, faq_url: str) -> None:
        self.response_code = response_code
        self.error_message = error_message
        self.faq_url = faq_url
        suffix = "\nFor more information, please visit the url, " + faq_url
        if response_code == -1:
            full = error_message + suffix
        else:
            full = f"CODE: {response_code}  DESC: {error_message}" + suffix
        self.full_message = full
        super().__init__(full)


class MeasurementError(RocketSimError, ValueError):
    """A user's measurement file that does not read: names the source, the line (1-based, 0 when the
    whole input is at fault) and what was expected there."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source} line {line}" if line > 0 else source
        super().__init__(f"{where}: {reason}")


def first_line(exc: BaseException) -> str:
    """The first line of an error's text, or its type's name if it has none (deltalake's errors carry a
    native trace after their first line)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
