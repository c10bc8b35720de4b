"""Broker (and name server) releases, and what differs between them, as named properties.

A part of :mod:`rocketsim.client.versions` (ask it: it re-exports these): a broker release's behaviours
are the rows of :data:`BROKER_LINES`, read through :class:`BrokerVersion`'s properties.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property

from rocketsim.errors import ConfigError

VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def version_tuple(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in text.split("."))
    return (major, minor, patch)


# ---- broker releases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerLine:
    """What a broker release line does (a row of :data:`BROKER_LINES`; ask :class:`BrokerVersion`)."""

    name: str
    since: tuple[int, int, int]  # its first release
    keeps_wait_in_store: bool
    stores_half_transaction_id: bool
    properties_trailing_separator: bool
    properties_map_capacity: int
    checks_properties_string_length: bool
    nameserver_scan_first_ms: int
    nameserver_scan_interval_ms: int
    transaction_check_interval_ms: int


# first release -> its behaviours; the documentation of each column is BrokerVersion's property
BROKER_LINES = (
    BrokerLine(
        "4.x",
        (4, 0, 0),
        keeps_wait_in_store=False,
        stores_half_transaction_id=False,
        properties_trailing_separator=False,
        properties_map_capacity=16,
        checks_properties_string_length=True,
        nameserver_scan_first_ms=5_000,
        nameserver_scan_interval_ms=10_000,
        transaction_check_interval_ms=60_000,
    ),
    BrokerLine(
        "5.x",
        (5, 0, 0),
        keeps_wait_in_store=True,
        stores_half_transaction_id=True,
        properties_trailing_separator=True,
        properties_map_capacity=128,
        checks_properties_string_length=False,
        nameserver_scan_first_ms=5,
        nameserver_scan_interval_ms=5_000,
        transaction_check_interval_ms=30_000,
    ),
)


def row_of(rows: tuple, version: tuple[int, int, int]):  # noqa: ANN202 - a row of either table
    """The last row whose first tag is ``version`` or earlier."""
    found = None
    for row in rows:
        if row.since <= version:
            found = row
    if found is None:
        raise ConfigError(f"no behaviour line covers version {'.'.join(map(str, version))}")
    return found


@dataclass(frozen=True)
class BrokerVersion:
    """A broker (and name server) release (``cluster.broker_version``; by default the one a client line
    talks to, :attr:`ClientVersion.broker`); its properties say what it does."""

    text: str

    @cached_property
    def line(self) -> BrokerLine:
        """Its row of :data:`BROKER_LINES`."""
        return row_of(BROKER_LINES, version_tuple(self.text))

    @property
    def keeps_wait_in_store(self) -> bool:
        """5.x stores ``WAIT=true``; a 4.9.8 broker leaves it out (SendMessageProcessor, ISSUE 2883)."""
        return self.line.keeps_wait_in_store

    @property
    def stores_half_transaction_id(self) -> bool:
        """5.x ``TransactionalMessageBridge.parseHalfMessageInner`` adds ``__transactionId__`` = UNIQ_KEY."""
        return self.line.stores_half_transaction_id

    # -- what the broker writes: it re-encodes every stored properties string with its own release's
    # MessageDecoder (SendMessageProcessor: ``string2messageProperties`` of the request's, then
    # ``messageProperties2String``; the delay and half transforms and a batch's own properties likewise),
    # so these follow the broker, whatever the client sent (kept together) --
    @property
    def properties_trailing_separator(self) -> bool:
        """The broker's ``MessageDecoder.messageProperties2String`` keeps the final \\x02 (5.x) or removes
        it (4.9): the stored properties string ends as the broker's release writes it."""
        return self.line.properties_trailing_separator

    @property
    def properties_map_capacity(self) -> int:
        """The initial capacity of the broker's ``string2messageProperties`` HashMap (16; 128 in 5.x): the
        order in which the stored properties string lists its entries."""
        return self.line.properties_map_capacity

    @property
    def checks_properties_string_length(self) -> bool:
        """4.9 ``DefaultMessageStore.checkMessage`` refuses a properties string longer than
        ``Short.MAX_VALUE`` UTF-16 units (MESSAGE_ILLEGAL) before the encoder's byte check; 5.3.3's
        ``checkMessage`` has no such check."""
        return self.line.checks_properties_string_length

    @property
    def pc_synchronized_is_system_busy(self) -> bool:
        """``[PC_SYNCHRONIZED]`` answers SYSTEM_BUSY from 5.3.0 on, SYSTEM_ERROR before."""
        return version_tuple(self.text) >= (5, 3, 0)

    @property
    def pc_synchronized_code(self) -> int:
        """The response code of ``[PC_SYNCHRONIZED]`` (``SendMessageProcessor.handlePutMessageResult``,
        OS_PAGECACHE_BUSY): SYSTEM_BUSY (2) from 5.3.0, SYSTEM_ERROR (1) before."""
        return 2 if self.pc_synchronized_is_system_busy else 1

    @property
    def nameserver_scan_first_ms(self) -> int:
        """``scanNotActiveBroker``'s first run: 5 s in 4.9 (``scheduleAtFixedRate(.., 5, 10, SECONDS)``),
        5 ms in 5.x (``(.., 5, scanNotActiveBrokerInterval, MILLISECONDS)``)."""
        return self.line.nameserver_scan_first_ms

    @property
    def nameserver_scan_interval_ms(self) -> int:
        """``scanNotActiveBroker``'s period: 10 s in 4.9, ``scanNotActiveBrokerInterval`` = 5 s in 5.x."""
        return self.line.nameserver_scan_interval_ms

    # -- broker defaults read from each version's BrokerConfig (kept together) --
    @property
    def transaction_check_interval_ms(self) -> int:
        """``BrokerConfig.transactionCheckInterval``: ``60 * 1000`` in 4.9.8 (also 4.8.0-4.9.7), ``30 * 1000``
        in 5.3.3 (common/src/main/java/org/apache/rocketmq/common/BrokerConfig.java field initialiser). The
        ``TransactionalMessageCheckService`` waits this long between check rounds. (transactionTimeOut 6000
        and transactionCheckMax 15 are the same in both.)"""
        return self.line.transaction_check_interval_ms

    def __str__(self) -> str:
        return self.text


BROKER_4_9_8 = BrokerVersion("4.9.8")
BROKER_5_3_3 = BrokerVersion("5.3.3")


@cache
def parse_broker_version(text: str) -> BrokerVersion:
    """Parse a broker version string (``cluster.broker_version``): a 4.x or 5.x release."""
    m = VERSION_RE.match(text.strip()) if isinstance(text, str) else None
    if m is None or int(m[1]) not in (4, 5):
        raise ConfigError(f"broker_version must be a 4.x or 5.x release such as 4.9.8 or 5.3.3, got {text!r}")
    return BrokerVersion(f"{int(m[1])}.{int(m[2])}.{int(m[3])}")
