"""Client and broker versions, and every behaviour that differs between them, as named properties.

A ``client_version`` is a real version string ("4.9.7", "4.9.8", "5.3.3"). The conformance vectors also
use "5.x" for the upstream ``develop`` branch (newer than every 5.3.x tag), which parses here as 5.99.0.

Ask the version what it does (``version.retries_system_busy``), never its number: a version comparison
is written once, here. Adding a client version: make :func:`parse_version` accept it, then read each
property below against that tag's code (and :data:`rocketsim.client.fault.FAULT_UPDATES` if its fault line is
new). The broker a client talks to is :attr:`ClientVersion.broker`: a 4.9.x client talks to a 4.9.8
broker, a 5.x client to a 5.3.3 broker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from functools import cache

from rocketsim.errors import ConfigError

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
DEVELOP = (5, 99, 0)

FAQ_URL_4 = "http://rocketmq.apache.org/docs/faq/"
FAQ_URL_5 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"

# The client lines of the fault strategy (MQFaultStrategy and what calls it), as text and as ints.
LINE_4_9_7 = "4.9.7"  # 4.8.0-4.9.7: the fallback rewrites the cached MessageQueue (route-mutation quirk)
LINE_4_9_8 = "4.9.8"  # 4.9.8: the quirk fixed
LINE_5 = "5"  # 5.2.0 and later: QueueFilters, reachability, the detector
LINES = (LINE_4_9_7, LINE_4_9_8, LINE_5)

# The client API generations, which key the tables of what a line's classes declare (constants, defaults).
API_4 = "4.x"
API_5 = "5.x"


class FaultLine(IntEnum):
    """The fault lines as ints (arrays, the compiled engine); ``LINES[line]`` is the text."""

    V4_9_7 = 0
    V4_9_8 = 1
    V5 = 2

    @classmethod
    def of(cls, text: str) -> FaultLine:
        return cls(LINES.index(text))

    @property
    def text(self) -> str:
        return LINES[self]


def _tuple(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in text.split("."))
    return (major, minor, patch)


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

    def at_least(self, text: str) -> bool:
        """Whether this is ``text`` or later (for tables of "exists since" facts, e.g. response codes)."""
        return self.tuple >= _tuple(text)

    @property
    def is_5(self) -> bool:
        """The 5.x line (5.2.0 and later in this model); ask a named property below instead."""
        return self.major >= 5

    @property
    def api_line(self) -> str:
        """``API_4`` or ``API_5``: the key of a line's tables of declared constants and defaults."""
        return API_5 if self.is_5 else API_4

    @property
    def broker(self) -> BrokerVersion:
        """The broker this client talks to: a 4.9.x client a 4.9.8 broker, a 5.x client a 5.3.3 broker."""
        return BROKER_5_3_3 if self.is_5 else BROKER_4_9_8

    # -- fault strategy and send loop --
    @property
    def fault_line(self) -> str:
        """Which MQFaultStrategy applies: '4.9.7' (route-mutation quirk), '4.9.8' or '5'."""
        if self.is_5:
            return LINE_5
        return LINE_4_9_8 if self.at_least("4.9.8") else LINE_4_9_7

    @property
    def has_fault_detector(self) -> bool:
        """The 5.x ``LatencyFaultToleranceImpl`` detector (``startDetectorEnable``) exists."""
        return self.fault_line == LINE_5

    @property
    def retries_system_busy(self) -> bool:
        """``DefaultMQProducer.retryResponseCodes`` holds SYSTEM_BUSY (5.3.0 and later)."""
        return self.at_least("5.3.0")

    @property
    def retries_go_away(self) -> bool:
        """``DefaultMQProducer.retryResponseCodes`` holds GO_AWAY (5.3.1 and later)."""
        return self.at_least("5.3.1")

    @property
    def oneway_connects_synchronously(self) -> bool:
        """``NettyRemotingClient.invokeOneway`` connects in the caller's thread and throws its failure
        (4.9.x ``getAndCreateChannel``); 5.x ``getAndCreateChannelAsync`` connects and writes in a
        listener that drops the request silently when the connect fails."""
        return not self.is_5

    @property
    def response_scan_first_ms(self) -> int:
        """When ``scanResponseTable`` first runs after ``NettyRemotingClient.start``. 4.9.x: a
        ``java.util.Timer``, ``scheduleAtFixedRate(task, 1000 * 3, 1000)``: at 3000. 5.x: a Netty
        ``HashedWheelTimer`` (100 ms ticks), ``newTimeout(task, 1000 * 3)``: a timeout is run at the end of
        the tick its deadline falls in, ``100 * (3000 // 100 + 1)`` = 3100."""
        return 3100 if self.is_5 else 3000

    @property
    def response_scan_period_ms(self) -> int:
        """The time between two ``scanResponseTable`` runs. 4.9.x: fixed rate, 1000. 5.x: the task re-arms
        itself at the end of each run with ``newTimeout(this, 1000)``, i.e. just after a tick boundary, so
        it runs at the end of the tick 1000 ms later: 1100 (derived from ``HashedWheelTimer``; a scan of
        the response table takes far less than a tick)."""
        return 1100 if self.is_5 else 1000

    @property
    def has_max_timeout_per_request(self) -> bool:
        """``sendMsgMaxTimeoutPerRequest`` exists (5.3.3 and later)."""
        return self.at_least("5.3.3")

    # -- message encoding and properties --
    @property
    def properties_trailing_separator(self) -> bool:
        """5.x keeps the final \\x02 after the last property; 4.9 removes it."""
        return self.is_5

    @property
    def checks_properties_size_on_encode(self) -> bool:
        """4.9's encodeMessage refuses properties over 32767 bytes; 5.x has no check."""
        return not self.is_5

    @property
    def properties_map_capacity(self) -> int:
        """The initial capacity of the HashMap ``string2messageProperties`` returns (16; 128 in 5.x)."""
        return 128 if self.is_5 else 16

    @property
    def writes_compression_type(self) -> bool:
        """A configurable compression type, written in sys flag bits 8-10 (4.9.4 and later)."""
        return self.at_least("4.9.4")

    @property
    def gives_batch_uniq_key(self) -> bool:
        """5.x ``DefaultMQProducer.batch()`` gives the batch request its own UNIQ_KEY."""
        return self.is_5

    # -- decoding (MessageDecoder) --
    @property
    def decoder_refuses_unknown_magic(self) -> bool:
        """5.x ``MessageDecoder`` refuses a record whose magic code is not MESSAGE_MAGIC_CODE."""
        return self.is_5

    @property
    def decoder_position_spelling(self) -> str:
        """How ``MessageDecoder`` spells its ``*_POSITION`` constants (4.9: ``POSTION``)."""
        return "POSITION" if self.is_5 else "POSTION"

    @property
    def decoder_knows_v2_store_format(self) -> bool:
        """5.x ``MessageDecoder`` declares MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE, the store timestamp, and
        its ``decode`` / ``decodeProperties`` read the V2 format (``MessageVersion``: 2-byte topic length)."""
        return self.is_5

    # -- decoding edges (MessageDecoder.decode's flags; kept together) --
    @property
    def decoder_decompresses_by_type(self) -> bool:
        """``decode``'s ``deCompressBody`` picks the decompressor by the sys flag's type bits
        (``CompressorFactory``, 4.9.4 and later); before, ``UtilAll.uncompress`` always inflates zlib."""
        return self.at_least("4.9.4")

    @property
    def decoder_clears_compressed_flag(self) -> bool:
        """``decode`` clears COMPRESSED_FLAG in the sys flag after inflating the body (5.3.2 and later)."""
        return self.at_least("5.3.2")

    @property
    def decoder_has_crc_check_option(self) -> bool:
        """``decode(..., checkCRC)`` exists (5.x): a body whose CRC is not BODYCRC decodes to null."""
        return self.is_5

    @property
    def decoder_has_properties_string_option(self) -> bool:
        """``decode(..., isSetPropertiesString)`` exists (5.x): adds the raw text as ``propertiesString``."""
        return self.is_5

    # -- producer defaults read from each version's DefaultMQProducer (kept together) --
    @property
    def async_backpressure_defaults(self) -> AsyncBackpressure | None:
        """``DefaultMQProducer``'s async backpressure fields (5.0.0 and later; None before), read from the
        field initialisers of client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java:
        ``enableBackpressureForAsyncMode = false``; ``backPressureForAsyncSendNum = 10000`` (5.0.0-5.3.3;
        1024 on develop after 5.3.3, upstream commit cfddd12c2c); ``backPressureForAsyncSendSize = 100 *
        1024 * 1024``. Inert unless enabled: ``DefaultMQProducerImpl.executeAsyncMessageSend`` takes the
        semaphores only when ``isEnableBackpressureForAsyncMode()``."""
        if not self.is_5:
            return None
        send_num = 1024 if self.tuple > _tuple("5.3.3") else 10_000
        return AsyncBackpressure(False, send_num, 100 * 1024 * 1024)

    # -- validators and FAQ --
    @property
    def checks_inner_multi_dispatch(self) -> bool:
        """5.x ``Validators.checkMessage`` refuses an INNER_MULTI_DISPATCH with a file separator."""
        return self.is_5

    @property
    def faq_url(self) -> str:
        return FAQ_URL_5 if self.is_5 else FAQ_URL_4

    @property
    def declares_default_faq_url(self) -> bool:
        """``FAQUrl.DEFAULT_FAQ_URL`` exists (develop after 5.3.3)."""
        return self.tuple > _tuple("5.3.3")

    @property
    def group_max_length(self) -> int:
        """Validators.checkGroup's limit: 255, except develop after 5.3.3 (120)."""
        return 120 if self.tuple > _tuple("5.3.3") else 255

    def __str__(self) -> str:
        return self.text


def since(text: str) -> Callable[[ClientVersion], bool]:
    """``lambda v: v is text or later``, for tables of what exists in which version."""
    return lambda v: v.at_least(text)


def before(text: str) -> Callable[[ClientVersion], bool]:
    """``lambda v: v is older than text``."""
    return lambda v: not v.at_least(text)


def in_5_line(v: ClientVersion) -> bool:
    """For tables of what exists in the 5.x line only."""
    return v.is_5


def in_4_line(v: ClientVersion) -> bool:
    """For tables of what exists in the 4.x line only."""
    return not v.is_5


@dataclass(frozen=True)
class AsyncBackpressure:
    """The 5.x producer's async backpressure settings (``DefaultMQProducer`` field names in snake case).

    ``DefaultMQProducerImpl`` builds fair semaphores of ``max(send_num, 10)`` permits and ``max(send_size,
    1 MiB)`` bytes; an async send takes one permit and its body length before it is queued, but only when
    ``enable_backpressure_for_async_mode`` is true (false by default).
    """

    enable_backpressure_for_async_mode: bool
    back_pressure_for_async_send_num: int
    back_pressure_for_async_send_size: int


# The floors DefaultMQProducerImpl applies when it builds the semaphores (5.3.2+ setters apply them too).
BACK_PRESSURE_MIN_SEND_NUM = 10
BACK_PRESSURE_MIN_SEND_SIZE = 1024 * 1024


@dataclass(frozen=True)
class BrokerVersion:
    """A broker (and name server) release (``cluster.broker_version``; by default the one a client line
    talks to, :attr:`ClientVersion.broker`); its properties say what it does."""

    text: str

    @property
    def is_5(self) -> bool:
        return _tuple(self.text) >= (5, 0, 0)

    @property
    def keeps_wait_in_store(self) -> bool:
        """5.x stores ``WAIT=true``; a 4.9.8 broker leaves it out (SendMessageProcessor, ISSUE 2883)."""
        return self.is_5

    @property
    def stores_half_transaction_id(self) -> bool:
        """5.x ``TransactionalMessageBridge.parseHalfMessageInner`` adds ``__transactionId__`` = UNIQ_KEY."""
        return self.is_5

    # -- what the broker writes: it re-encodes every stored properties string with its own release's
    # MessageDecoder (SendMessageProcessor: ``string2messageProperties`` of the request's, then
    # ``messageProperties2String``; the delay and half transforms and a batch's own properties likewise),
    # so these follow the broker, whatever the client sent (kept together) --
    @property
    def properties_trailing_separator(self) -> bool:
        """The broker's ``MessageDecoder.messageProperties2String`` keeps the final \\x02 (5.x) or removes
        it (4.9): the stored properties string ends as the broker's release writes it."""
        return self.is_5

    @property
    def properties_map_capacity(self) -> int:
        """The initial capacity of the broker's ``string2messageProperties`` HashMap (16; 128 in 5.x): the
        order in which the stored properties string lists its entries."""
        return 128 if self.is_5 else 16

    @property
    def checks_properties_string_length(self) -> bool:
        """4.9 ``DefaultMessageStore.checkMessage`` refuses a properties string longer than
        ``Short.MAX_VALUE`` UTF-16 units (MESSAGE_ILLEGAL) before the encoder's byte check; 5.3.3's
        ``checkMessage`` has no such check."""
        return not self.is_5

    @property
    def pc_synchronized_is_system_busy(self) -> bool:
        """``[PC_SYNCHRONIZED]`` answers SYSTEM_BUSY from 5.3.0 on, SYSTEM_ERROR before."""
        return _tuple(self.text) >= (5, 3, 0)

    @property
    def pc_synchronized_code(self) -> int:
        """The response code of ``[PC_SYNCHRONIZED]`` (``SendMessageProcessor.handlePutMessageResult``,
        OS_PAGECACHE_BUSY): SYSTEM_BUSY (2) from 5.3.0, SYSTEM_ERROR (1) before."""
        return 2 if self.pc_synchronized_is_system_busy else 1

    @property
    def nameserver_scan_first_ms(self) -> int:
        """``scanNotActiveBroker``'s first run: 5 s in 4.9 (``scheduleAtFixedRate(.., 5, 10, SECONDS)``),
        5 ms in 5.x (``(.., 5, scanNotActiveBrokerInterval, MILLISECONDS)``)."""
        return 5 if self.is_5 else 5_000

    @property
    def nameserver_scan_interval_ms(self) -> int:
        """``scanNotActiveBroker``'s period: 10 s in 4.9, ``scanNotActiveBrokerInterval`` = 5 s in 5.x."""
        return 5_000 if self.is_5 else 10_000

    # -- broker defaults read from each version's BrokerConfig (kept together) --
    @property
    def transaction_check_interval_ms(self) -> int:
        """``BrokerConfig.transactionCheckInterval``: ``60 * 1000`` in 4.9.8 (also 4.8.0-4.9.7), ``30 * 1000``
        in 5.3.3 (common/src/main/java/org/apache/rocketmq/common/BrokerConfig.java field initialiser). The
        ``TransactionalMessageCheckService`` waits this long between check rounds. (transactionTimeOut 6000
        and transactionCheckMax 15 are the same in both.)"""
        return 30_000 if self.is_5 else 60_000

    def __str__(self) -> str:
        return self.text


BROKER_4_9_8 = BrokerVersion("4.9.8")
BROKER_5_3_3 = BrokerVersion("5.3.3")


@cache
def parse_broker_version(text: str) -> BrokerVersion:
    """Parse a broker version string (``cluster.broker_version``): a 4.x or 5.x release."""
    m = _VERSION_RE.match(text.strip()) if isinstance(text, str) else None
    if m is None or int(m[1]) not in (4, 5):
        raise ConfigError(f"broker_version must be a 4.x or 5.x release such as 4.9.8 or 5.3.3, got {text!r}")
    return BrokerVersion(f"{int(m[1])}.{int(m[2])}.{int(m[3])}")


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

# What encodes a properties string: a client (what it sends) or a broker (what it stores).
PropertiesEncoding = ClientVersion | BrokerVersion
