"""Client versions and the behaviour each line of the Java client has.

A ``client_version`` is a real version string ("4.9.7", "4.9.8", "5.3.3"). The conformance vectors also
use "5.x" for the upstream ``develop`` branch (newer than every 5.3.x tag), which parses here as 5.99.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from rocketsim.errors import ConfigError

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
DEVELOP = (5, 99, 0)

FAQ_URL_4 = "http://rocketmq.apache.org/docs/faq/"
FAQ_URL_5 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


@dataclass(frozen=True, order=True)
class ClientVersion:
    """A parsed client version; its properties say which upstream behaviour applies."""

    major: int
    minor: int
    patch: int

    @property
    def text(self) -> str:
        return "5.x" if self.tuple == DEVELOP else f"{self.major}.{self.minor}.{self.patch}"

    @property
    def tuple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    @property
    def is_5(self) -> bool:
        """The 5.x line (5.2.0 and later in this model)."""
        return self.major >= 5

    @property
    def fault_line(self) -> str:
        """Which MQFaultStrategy applies: '4.9.7' (route-mutation quirk), '4.9.8' or '5'."""
        if self.is_5:
            return "5"
        return "4.9.8" if self.tuple >= (4, 9, 8) else "4.9.7"

    @property
    def properties_trailing_separator(self) -> bool:
        """5.x keeps the final \\x02 after the last property; 4.9 removes it."""
        return self.is_5

    @property
    def checks_properties_size_on_encode(self) -> bool:
        """4.9's encodeMessage refuses properties over 32767 bytes; 5.x has no check."""
        return not self.is_5

    @property
    def faq_url(self) -> str:
        return FAQ_URL_5 if self.is_5 else FAQ_URL_4

    @property
    def group_max_length(self) -> int:
        """Validators.checkGroup's limit: 255, except develop after 5.3.3 (120)."""
        return 120 if self.tuple > (5, 3, 3) else 255

    def __str__(self) -> str:
        return self.text


@cache
def parse_version(text: str) -> ClientVersion:
    """Parse a client version string; "5.x" means upstream develop."""
    if text == "5.x":
        return ClientVersion(*DEVELOP)
    m = _VERSION_RE.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"client_version must look like 4.9.7 or 5.3.3, got {text!r}")
    v = ClientVersion(int(m[1]), int(m[2]), int(m[3]))
    if not ((4, 8, 0) <= v.tuple < (5, 0, 0) or v.tuple >= (5, 2, 0)):
        raise ConfigError(
            f"client_version must be in 4.8.0-4.9.8 or 5.2.0 and later (the modelled lines), got {text!r}"
        )
    return v


V4_9_7 = parse_version("4.9.7")
V4_9_8 = parse_version("4.9.8")
V5_3_3 = parse_version("5.3.3")
V5_DEVELOP = parse_version("5.x")
