"""The kinds of series an incident is given as and the errors a burst can inject: the names the replay's
command line offers, in a module that imports nothing (``rocketsim replay --help`` loads neither pandas nor
scipy)."""

from __future__ import annotations

LATENCY, ERRORS, UP = "latency", "errors", "up"
KINDS = (LATENCY, ERRORS, UP)
# response_code (RemotingHelper: ResponseCode names lower-cased) -> the error an error_burst injects
RESPONSE_CODES = {
    "system_busy": "system_busy",
    "system_error": "system_error",
    "service_not_available": "service_not_available",
    "flush_disk_timeout": "flush_disk_timeout",
    "flush_slave_timeout": "flush_slave_timeout",
    "slave_not_available": "slave_not_available",
}
