"""Client and broker versions, and every behaviour that differs between them, as named properties.

Ask the version what it does (``version.retries_system_busy``), never its number: a version comparison is
written once, here; what differs between behaviour lines is the table :data:`REMOTING_LINES`. The broker
releases (:class:`BrokerVersion`) are in :mod:`rocketsim.client.broker_versions`, re-exported here.

More: docs/reference/modules.md, rocketsim/client/versions.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cache, cached_property

from rocketsim.client.broker_versions import BROKER_4_9_8 as BROKER_4_9_8
from rocketsim.client.broker_versions import BROKER_5_3_3 as BROKER_5_3_3
from rocketsim.client.broker_versions import BROKER_LINES as BROKER_LINES
from rocketsim.client.broker_versions import VERSION_RE as _VERSION_RE
from rocketsim.client.broker_versions import BrokerLine as BrokerLine
from rocketsim.client.broker_versions import BrokerVersion as BrokerVersion
from rocketsim.client.broker_versions import parse_broker_version as parse_broker_version
from rocketsim.client.broker_versions import row_of as _row_of
from rocketsim.client.broker_versions import version_tuple as _tuple
from rocketsim.errors import ConfigError

DEVELOP = (5, 99, 0)
SUPPORTED_FIRST = (4, 3, 0)  # the client releases producers.client_version accepts
SUPPORTED_LAST = (5, 3, 3)

FAQ_URL_4 = "http://rocketmq.apache.org/docs/faq/"
FAQ_URL_5 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"

# The client lines of the model, by name (the rows of REMOTING_LINES; clients.md A.1's line ids).
LINE_4_3 = "R4.3"  # 4.3.0-4.3.2: the latency retry sticks to the broker that failed; async sends on the
# callback executor
LINE_4_4 = "R4.4"  # 4.4.0-4.6.1: R4.3 with the async sender executor
LINE_4_7 = "R4.7"  # 4.7.0-4.7.1: async retries get the budget left
LINE_4_8 = "R4.8"  # 4.8.0: one tick per candidate; ThreadLocalIndex's Math.abs bug
LINE_4_9_7 = "R4.9.7"  # 4.9.0-4.9.7: the fallback rewrites the cached MessageQueue (route-mutation quirk)
LINE_4_9_8 = "R4.9.8"  # 4.9.8: the quirk fixed
LINE_5_0 = "R5.0"  # 5.0.0: R4.9.7's strategy in the 5.x API
LINE_5_1_0 = "R5.1.0"  # 5.1.0: clients.md's R5.0 with its one overflow edge (the latency scan's sign)
LINE_5_1_3 = "R5.1.3"  # 5.1.1-5.1.3: the latency scan skips the last broker
LINE_5_1_4 = "R5.1.4"  # 5.1.4: QueueFilters, reachability in isAvailable, 10 s isolation
LINE_5_2 = "R5.2"  # 5.2.0: isAvailable by time only
LINE_5_3_0 = "R5.3.0"  # 5.3.0: SYSTEM_BUSY retried
LINE_5_3_1 = "R5.3.1"  # 5.3.1: GO_AWAY retried
LINE_5_3_2 = "R5.3.2"  # 5.3.2: async retries only with time left
LINE_5 = "R5.3.3"  # 5.3.3 (and develop): sendMsgMaxTimeoutPerRequest

# The client API generations, which key the tables of what a line's classes declare (constants, defaults).
API_4 = "4.x"
API_5 = "5.x"


# ---- client lines -------------------------------------------------------------------------------------


class IndexWrap(IntEnum):
    """How ``ThreadLocalIndex`` steps past ``Integer.MAX_VALUE`` (clients.md A.3.1); both engines read it."""

    MASK = 0  # TLI-3/4/5: ``++index & 0x7FFFFFFF``: MAX, 0, 1, ...
    ABS_GUARDED = 1  # TLI-1: ``Math.abs(index + 1)``, a negative result stored as 0: MAX, 0, 1, ...
    ABS = 2  # TLI-2 (4.8.0): ``Math.abs(index + 1)`` unguarded: MAX, MIN_VALUE, MAX, MIN_VALUE, ...


class ScanBroker(IntEnum):
    """Which brokers the latency-mode scan of ``MQFaultStrategy.selectOneMessageQueue`` accepts besides
    being available (clients.md A.3.3, the 4.x strategy; both engines read it)."""

    ANY = 0  # LAT-2/3: the first available queue
    SAME_AS_LAST = (
        1  # LAT-1: on a retry only the broker that just failed (``mq.getBrokerName().equals(last)``)
    )
    NOT_LAST = 2  # LAT-4: never the broker that just failed (``!StringUtils.equals(lastBrokerName, ..)``)


@dataclass(frozen=True)
class RemotingLine:
    """A behaviour line of the remoting client: the tags from ``since`` on (to the next row) behave alike.
    A row of :data:`REMOTING_LINES`; a column per behaviour that differs between lines, each named for
    what it does and cited from ``clients.md`` A.2/A.3 (its codes in brackets) or, where a
    :class:`ClientVersion` property of the same name exists, documented there."""

    name: str
    since: tuple[int, int, int]  # its first tag
    # -- the client's release family --
    api: str  # API_4 / API_5: which key the tables of what its classes declare (ClientVersion.api_line)
    broker: BrokerVersion  # the broker release it talks to by default (ClientVersion.broker)
    faq_url: str  # FAQUrl's base
    # -- ThreadLocalIndex [A.3.1] --
    # the first value is nextInt() itself (may be negative) [TLI-4/5]; else Math.abs(nextInt()), stored
    # before the first increment [TLI-3]
    index_start_signed: bool
    index_wrap: IndexWrap  # how the counter steps past Integer.MAX_VALUE [TLI-1/2/3]
    # ThreadLocalIndex.reset() exists and sendDefaultImpl resets the index on every retry with latency
    # fault tolerance on (``if (times > 0) resetIndex = true``) [TLI-5]
    resets_index_on_retry: bool
    # -- MQFaultStrategy.selectOneMessageQueue [A.3.2-A.3.4] --
    # selectOneMessageQueue(lastBrokerName) takes one tick per candidate examined [TPI-2/3]; else one tick,
    # then a local ``index++`` scan [TPI-1]
    ticks_per_candidate: bool
    latency_scan_broker: ScanBroker  # the 4.x latency scan's broker clause [LAT-1/2/4]
    # the 4.x latency scan's position is ``index++ % size`` (5.1.0+, no Math.abs): near Integer.MAX_VALUE
    # it goes negative, List.get throws and the catch falls back to round robin [LAT-2, 5.1.0]
    latency_scan_keeps_sign: bool
    # QueueFilters: available-and-not-last, reachable-and-not-last, then round robin; no pickOneAtLeast
    # [LAT-5/6, TPI-3]. Else: the first available queue, then pickOneAtLeast [LAT-2/3, PK-2]
    uses_queue_filters: bool
    # pickOneAtLeast's fallback rewrites the cached MessageQueue in place [LAT-2's mutation]
    rewrites_cached_queue: bool
    # getWriteQueueNumsByBroker skips queue datas without the write permission [LAT-3]
    counts_writable_queues_only: bool
    # pickOneAtLeast shuffles the items (Collections.shuffle) before its stable sort [PK-1]
    shuffles_before_pick: bool
    # -- the fault items [A.3.5, A.3.6] --
    latency_max: tuple[int, ...]  # MQFaultStrategy.latencyMax [FU-1/FU-2]
    not_available_duration: tuple[int, ...]  # MQFaultStrategy.notAvailableDuration
    isolation_latency_ms: int  # what updateFaultItem(.., isolation=true) feeds computeNotAvailableDuration
    isolation_only_extends: bool  # FaultItem's start only moves forward, for a duration > 0 [FU-2]
    tracks_reachability: bool  # updateFaultItem(.., reachable) sets FaultItem.reachableFlag [FU-2, CS-2]
    has_fault_detector: bool  # LatencyFaultToleranceImpl's detector, startDetectorEnable [FU-2]
    # FaultItem.isAvailable also needs reachableFlag (5.1.4): an item last updated unreachable (any broker
    # error) stays out of the first filter pass until an update or the detector marks it reachable
    availability_needs_reachable: bool
    fault_updates: str  # the key of its updateFaultItem calls in rocketsim.client.fault.FAULT_UPDATES
    # -- sendDefaultImpl [A.3.7, A.3.10] --
    retries_system_busy: bool  # ClientVersion.retries_system_busy [RC-3]
    retries_go_away: bool  # ClientVersion.retries_go_away [RC-4]
    has_max_timeout_per_request: bool  # ClientVersion.has_max_timeout_per_request [A.3.10]
    # -- NettyRemotingClient and the async send [A.3.8, A.3.9] --
    # invokeAsync / invokeOneway connect with getAndCreateChannelAsync and complete a future: a connect
    # failure, a refused permit or an interrupt reaches the callback (a connect failure on the event loop:
    # the connect future's listener) and a oneway failure is dropped; else (4.9 getAndCreateChannel) they
    # are thrown in the caller's thread
    remoting_completes_futures: bool
    # the callbacks' updateFaultItem latency is measured from sendMessageAsync's beginStartTime
    # (operationSucceed / operationFail); else from the ResponseFuture (after the permit) [AR-3, 5.2.0]
    async_latency_from_call_begin: bool
    # onExceptionImpl retries only with time left (``timeoutMillis > 0``) [AR-4]
    async_retry_needs_budget: bool
    async_sends_on_callback_executor: bool  # ClientVersion.async_sends_on_callback_executor [A.1, 4.3.x]
    # invokeAsync fails a request with no time left twice: ClientVersion.fails_late_async_request_twice
    fails_late_async_request_twice: bool
    # onExceptionImpl's retry is sent with the budget left (``timeoutMillis - cost``); else with 0 [AR-1]
    async_retry_gets_budget: bool
    # sendMessageAsync catches what invokeAsync throws and retries it (``catch (Exception ex)``) [AR-3];
    # else a first attempt's synchronous failure propagates to sendDefaultImpl [AR-1/2]
    async_catches_invoke_failure: bool
    # the scan's "wait response timeout" text: ", cost=" + the time since beginStartTime; else
    # " " + timeoutMillis + "ms"
    wait_timeout_reports_cost: bool
    # processSendResponse's MQBrokerException names the broker's address (`` BROKER: addr``, 4.8.0+)
    broker_error_names_address: bool
    # NettyRemotingClient's "no time left" texts name the address (4.9.3+): invokeAsync's ``invokeAsync
    # call the addr[..] timeout`` and invokeSync's budget check's ``invokeSync call the addr[..] timeout``
    # (5.1.2+: the channel's remote address); before: "invokeAsync call timeout", "invokeSync call timeout"
    invoke_timeout_names_address: bool
    unknown_reason_text: str  # operationFail's last branch: "unknown reason" ("unknow reseaon" in 4.9)
    response_scan_first_ms: int  # ClientVersion.response_scan_first_ms
    response_scan_period_ms: int  # ClientVersion.response_scan_period_ms
    has_async_backpressure: bool  # ClientVersion.async_backpressure_defaults [BP-1..4]
    has_auto_batch: bool  # ClientVersion.auto_batch_defaults [AB-1, AB-2]
    # -- messages: encoding, validators, decoding --
    properties_trailing_separator: bool  # ClientVersion.properties_trailing_separator
    checks_properties_size_on_encode: bool  # ClientVersion.checks_properties_size_on_encode
    properties_map_capacity: int  # ClientVersion.properties_map_capacity
    gives_batch_uniq_key: bool  # ClientVersion.gives_batch_uniq_key
    checks_inner_multi_dispatch: bool  # ClientVersion.checks_inner_multi_dispatch
    decoder_refuses_unknown_magic: bool  # ClientVersion.decoder_refuses_unknown_magic
    decoder_position_spelling: str  # ClientVersion.decoder_position_spelling
    decoder_knows_v2_store_format: bool  # ClientVersion.decoder_knows_v2_store_format
    decoder_has_crc_check_option: bool  # ClientVersion.decoder_has_crc_check_option
    decoder_has_properties_string_option: bool  # ClientVersion.decoder_has_properties_string_option


_R4_9_7 = RemotingLine(
    LINE_4_9_7,
    (4, 9, 0),  # 4.9.0-4.9.3 differ in pickOneAtLeast's shuffle and the async retry (docs/versions.md)
    api=API_4,
    broker=BROKER_4_9_8,
    faq_url=FAQ_URL_4,
    index_start_signed=False,
    index_wrap=IndexWrap.MASK,
    resets_index_on_retry=False,
    ticks_per_candidate=True,
    latency_scan_broker=ScanBroker.ANY,
    latency_scan_keeps_sign=False,
    uses_queue_filters=False,
    rewrites_cached_queue=True,
    counts_writable_queues_only=False,
    shuffles_before_pick=False,
    latency_max=(50, 100, 550, 1000, 2000, 3000, 15000),
    not_available_duration=(0, 0, 30000, 60000, 120000, 180000, 600000),
    isolation_latency_ms=30_000,
    isolation_only_extends=False,
    tracks_reachability=False,
    has_fault_detector=False,
    availability_needs_reachable=False,
    fault_updates="CS-1",
    retries_system_busy=False,
    retries_go_away=False,
    has_max_timeout_per_request=False,
    remoting_completes_futures=False,
    async_latency_from_call_begin=False,
    async_retry_needs_budget=False,
    async_sends_on_callback_executor=False,
    fails_late_async_request_twice=False,
    async_retry_gets_budget=True,
    async_catches_invoke_failure=True,
    wait_timeout_reports_cost=False,
    broker_error_names_address=True,
    invoke_timeout_names_address=True,
    unknown_reason_text="unknow reseaon",
    response_scan_first_ms=3000,
    response_scan_period_ms=1000,
    has_async_backpressure=False,
    has_auto_batch=False,
    properties_trailing_separator=False,
    checks_properties_size_on_encode=True,
    properties_map_capacity=16,
    gives_batch_uniq_key=False,
    checks_inner_multi_dispatch=False,
    decoder_refuses_unknown_magic=False,
    decoder_position_spelling="POSTION",
    decoder_knows_v2_store_format=False,
    decoder_has_crc_check_option=False,
    decoder_has_properties_string_option=False,
)
_R4_3 = replace(  # R4.9.7 with TLI-1, TPI-1, LAT-1, PK-1 and AR-1; async sends on the callback executor
    _R4_9_7,
    name=LINE_4_3,
    since=(4, 3, 0),
    async_sends_on_callback_executor=True,
    index_wrap=IndexWrap.ABS_GUARDED,
    ticks_per_candidate=False,
    latency_scan_broker=ScanBroker.SAME_AS_LAST,
    shuffles_before_pick=True,
    async_retry_gets_budget=False,
    async_catches_invoke_failure=False,
    fault_updates="CS-1/uncaught",
    broker_error_names_address=False,
    invoke_timeout_names_address=False,
)
_R4_4 = replace(_R4_3, name=LINE_4_4, since=(4, 4, 0), async_sends_on_callback_executor=False)
_R4_7 = replace(_R4_4, name=LINE_4_7, since=(4, 7, 0), async_retry_gets_budget=True)  # AR-2
_R5_0 = replace(  # R4.9.7's strategy in the 5.x API: its messages, its broker, async backpressure (FAQUrl
    # still 4.x's: 5.1.0 moved it)
    _R4_9_7,
    name=LINE_5_0,
    since=(5, 0, 0),
    api=API_5,
    broker=BROKER_5_3_3,
    index_start_signed=True,
    has_async_backpressure=True,
    properties_trailing_separator=True,
    checks_properties_size_on_encode=False,
    properties_map_capacity=128,
    gives_batch_uniq_key=True,
    checks_inner_multi_dispatch=True,
    decoder_refuses_unknown_magic=True,
    decoder_position_spelling="POSITION",
    decoder_knows_v2_store_format=True,
    decoder_has_crc_check_option=True,
    decoder_has_properties_string_option=True,
)
_R5_1_4 = replace(  # the RIP-63 strategy (QueueFilters, reachability, the detector, 10 s isolation)
    _R5_0,
    name=LINE_5_1_4,
    since=(5, 1, 4),
    resets_index_on_retry=True,
    uses_queue_filters=True,
    rewrites_cached_queue=False,
    latency_max=(50, 100, 550, 1800, 3000, 5000, 15000),
    not_available_duration=(0, 0, 2000, 5000, 6000, 10000, 30000),
    isolation_latency_ms=10_000,
    isolation_only_extends=True,
    tracks_reachability=True,
    has_fault_detector=True,
    availability_needs_reachable=True,
    fault_updates="CS-2/thrown",
    faq_url=FAQ_URL_5,
    response_scan_first_ms=3100,
    response_scan_period_ms=1100,
    has_auto_batch=True,  # ProduceAccumulator (RIP-27)
)
_R5_2 = replace(  # isAvailable by time only again; operationSucceed / operationFail
    _R5_1_4,
    name=LINE_5_2,
    since=(5, 2, 0),
    availability_needs_reachable=False,
    async_latency_from_call_begin=True,
    wait_timeout_reports_cost=True,
)
_R5_3_0 = replace(  # + SYSTEM_BUSY retried; getAndCreateChannelAsync (and its double failure); AR-3b
    _R5_2,
    name=LINE_5_3_0,
    since=(5, 3, 0),
    retries_system_busy=True,
    remoting_completes_futures=True,
    fails_late_async_request_twice=True,
    fault_updates="CS-2",
    unknown_reason_text="unknown reason",
)
_R5_3_1 = replace(_R5_3_0, name=LINE_5_3_1, since=(5, 3, 1), retries_go_away=True)  # RC-4
_R5_3_2 = replace(_R5_3_1, name=LINE_5_3_2, since=(5, 3, 2), async_retry_needs_budget=True)  # AR-4

# first tag -> its behaviours, in tag order: clients.md A.1's lines (a tag between two measured tags takes
# the row of the line before it, docs/versions.md says where that is an approximation). A line added
# later is a row here (its tags made to parse by parse_version).
REMOTING_LINES = (
    _R4_3,
    _R4_4,
    _R4_7,
    replace(
        _R4_7,
        name=LINE_4_8,
        since=(4, 8, 0),
        index_wrap=IndexWrap.ABS,
        latency_scan_broker=ScanBroker.ANY,
        ticks_per_candidate=True,
        broker_error_names_address=True,
    ),  # TLI-2 (the Math.abs bug), TPI-2, LAT-2; still PK-1
    _R4_9_7,
    replace(  # = R4.9.7 with LAT-3: no mutation, writable queue datas only
        _R4_9_7,
        name=LINE_4_9_8,
        since=(4, 9, 8),
        rewrites_cached_queue=False,
        counts_writable_queues_only=True,
    ),
    _R5_0,
    replace(_R5_0, name=LINE_5_1_0, since=(5, 1, 0), latency_scan_keeps_sign=True, faq_url=FAQ_URL_5),
    replace(  # LAT-4: the latency scan skips the last broker; HashedWheelTimer scans the responses
        _R5_0,
        latency_scan_keeps_sign=True,
        faq_url=FAQ_URL_5,
        name=LINE_5_1_3,
        since=(5, 1, 1),
        latency_scan_broker=ScanBroker.NOT_LAST,
        response_scan_first_ms=3100,
        response_scan_period_ms=1100,
    ),
    _R5_1_4,
    _R5_2,
    _R5_3_0,
    _R5_3_1,
    _R5_3_2,
    replace(_R5_3_2, name=LINE_5, since=(5, 3, 3), has_max_timeout_per_request=True),  # A.3.10
)
LINES = tuple(line.name for line in REMOTING_LINES)


def remoting_line(line: RemotingLine | str) -> RemotingLine:
    """A row of :data:`REMOTING_LINES`, by itself or its name."""
    if isinstance(line, RemotingLine):
        return line
    for row in REMOTING_LINES:
        if row.name == line:
            return row
    raise ConfigError(f"client line must be one of {LINES}, got {line!r}")


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

    @cached_property
    def line(self) -> RemotingLine:
        """Its behaviour line: the row of :data:`REMOTING_LINES` that says what it does."""
        return _row_of(REMOTING_LINES, self.tuple)

    @property
    def api_line(self) -> str:
        """``API_4`` or ``API_5``: the key of a line's tables of declared constants and defaults."""
        return self.line.api

    @property
    def broker(self) -> BrokerVersion:
        """The broker this client talks to: a 4.9.x client a 4.9.8 broker, a 5.x client a 5.3.3 broker."""
        return self.line.broker

    # -- fault strategy and send loop --
    @property
    def fault_line(self) -> str:
        """The name of its line (its row of :data:`REMOTING_LINES`): 'R4.3' ... 'R5.3.3'."""
        return self.line.name

    @property
    def has_fault_detector(self) -> bool:
        """The 5.x ``LatencyFaultToleranceImpl`` detector (``startDetectorEnable``) exists."""
        return self.line.has_fault_detector

    @property
    def retries_system_busy(self) -> bool:
        """``DefaultMQProducer.retryResponseCodes`` holds SYSTEM_BUSY (5.3.0 and later)."""
        return self.line.retries_system_busy

    @property
    def retries_go_away(self) -> bool:
        """``DefaultMQProducer.retryResponseCodes`` holds GO_AWAY (5.3.1 and later)."""
        return self.line.retries_go_away

    @property
    def oneway_connects_synchronously(self) -> bool:
        """``NettyRemotingClient.invokeOneway`` connects in the caller's thread and throws its failure
        (4.9.x ``getAndCreateChannel``); 5.x ``getAndCreateChannelAsync`` connects and writes in a
        listener that drops the request silently when the connect fails."""
        return not self.line.remoting_completes_futures

    @property
    def response_scan_first_ms(self) -> int:
        """When ``scanResponseTable`` first runs after ``NettyRemotingClient.start``. 4.9.x: a
        ``java.util.Timer``, ``scheduleAtFixedRate(task, 1000 * 3, 1000)``: at 3000. 5.x: a Netty
        ``HashedWheelTimer`` (100 ms ticks), ``newTimeout(task, 1000 * 3)``: a timeout is run at the end of
        the tick its deadline falls in, ``100 * (3000 // 100 + 1)`` = 3100."""
        return self.line.response_scan_first_ms

    @property
    def response_scan_period_ms(self) -> int:
        """The time between two ``scanResponseTable`` runs. 4.9.x: fixed rate, 1000. 5.x: the task re-arms
        itself at the end of each run with ``newTimeout(this, 1000)``, i.e. just after a tick boundary, so
        it runs at the end of the tick 1000 ms later: 1100 (derived from ``HashedWheelTimer``; a scan of
        the response table takes far less than a tick)."""
        return self.line.response_scan_period_ms

    @property
    def async_sends_on_callback_executor(self) -> bool:
        """``DefaultMQProducerImpl.send(msg, callback, timeout)`` submits the send to
        ``getCallbackExecutor()`` (4.3.0-4.3.2): ``NettyRemotingClient``'s ``publicExecutor``,
        ``Executors.newFixedThreadPool(clientCallbackExecutorThreads)``, whose queue is unbounded, so a
        send is never rejected, and sends and callbacks take turns on the same threads. 4.4.0 and later
        submit it to ``getAsyncSenderExecutor()`` (``LinkedBlockingQueue(50000)``: "executor rejected ")."""
        return self.line.async_sends_on_callback_executor

    @property
    def fails_late_async_request_twice(self) -> bool:
        """5.3.0+ ``NettyRemotingClient.invokeAsync``: its connect listener fails a request with no time
        left (``timeoutMillis < costTime``: ``operationFail(RemotingTooMuchRequestException)``) and, with
        no ``return`` after it, still calls ``invokeAsyncImpl``, whose ``invoke0`` future fails it again
        at once (``invokeAsyncImpl call timeout``, or ``invoke too fast`` with no permit) and hands
        ``operationFail`` a ``CompletionException``. Each failure updates the fault item
        (``updateFaultItem(b, cost, true, true)``) and runs ``onExceptionImpl``: the first never retries,
        so the application's ``onException`` runs; the second ("unknown reason") may retry. Reached only
        where a retry goes out with no time left: 5.3.0-5.3.1 (5.3.2's ``timeoutMillis > 0`` guard)."""
        return self.line.fails_late_async_request_twice

    @property
    def has_max_timeout_per_request(self) -> bool:
        """``sendMsgMaxTimeoutPerRequest`` exists (5.3.3 and later)."""
        return self.line.has_max_timeout_per_request

    # -- message encoding and properties --
    @property
    def properties_trailing_separator(self) -> bool:
        """5.x keeps the final \\x02 after the last property; 4.9 removes it."""
        return self.line.properties_trailing_separator

    @property
    def checks_properties_size_on_encode(self) -> bool:
        """4.9's encodeMessage refuses properties over 32767 bytes; 5.x has no check."""
        return self.line.checks_properties_size_on_encode

    @property
    def properties_map_capacity(self) -> int:
        """The initial capacity of the HashMap ``string2messageProperties`` returns (16; 128 in 5.x)."""
        return self.line.properties_map_capacity

    @property
    def writes_compression_type(self) -> bool:
        """A configurable compression type, written in sys flag bits 8-10 (4.9.4 and later)."""
        return self.at_least("4.9.4")

    @property
    def async_retry_logs_stack(self) -> bool:
        """``MQClientAPIImpl.onExceptionImpl`` logs an ASYNC retry at WARN with the failure's stack trace
        (``log.warn("async send msg by retry {} times. ...", ..., e)``, 4.9.4 and later); before, at INFO
        without it."""
        return self.at_least("4.9.4")

    # -- the client's connection to a broker (NettyRemotingClient: one channel per broker address) --
    @property
    def closes_channel_on_sync_timeout(self) -> bool:
        """``invokeSync`` closes the channel when a request times out (``clientCloseSocketIfTimeout``: a
        ``NettySystemConfig`` default ``true`` from 4.9.1; 4.3.x-4.9.0 declare it ``false``). The close
        runs ``NettyConnectManageHandler.close`` -> ``failFast``: every request pending on the channel,
        the other threads' too, fails at once with ``RemotingSendRequestException``."""
        return self.at_least("4.9.1")

    @property
    def close_on_timeout_needs_time_left(self) -> bool:
        """5.1.4+ ``invokeSync`` closes on a timeout only when the request had over
        ``MIN_CLOSE_TIMEOUT_MILLIS`` (100 ms) or a quarter of its timeout left (``shouldClose``), and
        never writes a request with nothing left (``left <= 0``); before, ``timeoutMillis < costTime``."""
        return self.at_least("5.1.4")

    @property
    def fails_fast_on_peer_close(self) -> bool:
        """``NettyConnectManageHandler.channelInactive`` closes the channel when the peer does, failing
        its pending requests at once (5.1.3+, apache/rocketmq #5866); before, they wait their timeout."""
        return self.at_least("5.1.3")

    @property
    def gives_batch_uniq_key(self) -> bool:
        """5.x ``DefaultMQProducer.batch()`` gives the batch request its own UNIQ_KEY."""
        return self.line.gives_batch_uniq_key

    # -- decoding (MessageDecoder) --
    @property
    def decoder_refuses_unknown_magic(self) -> bool:
        """5.x ``MessageDecoder`` refuses a record whose magic code is not MESSAGE_MAGIC_CODE."""
        return self.line.decoder_refuses_unknown_magic

    @property
    def decoder_position_spelling(self) -> str:
        """How ``MessageDecoder`` spells its ``*_POSITION`` constants (4.9: ``POSTION``)."""
        return self.line.decoder_position_spelling

    @property
    def decoder_knows_v2_store_format(self) -> bool:
        """5.x ``MessageDecoder`` declares MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE, the store timestamp, and
        its ``decode`` / ``decodeProperties`` read the V2 format (``MessageVersion``: 2-byte topic length)."""
        return self.line.decoder_knows_v2_store_format

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
        return self.line.decoder_has_crc_check_option

    @property
    def decoder_has_properties_string_option(self) -> bool:
        """``decode(..., isSetPropertiesString)`` exists (5.x): adds the raw text as ``propertiesString``."""
        return self.line.decoder_has_properties_string_option

    # -- producer defaults read from each version's DefaultMQProducer (kept together) --
    @property
    def async_backpressure_defaults(self) -> AsyncBackpressure | None:
        """``DefaultMQProducer``'s async backpressure fields (5.0.0 and later; None before), read from the
        field initialisers of client/src/main/java/org/apache/rocketmq/client/producer/DefaultMQProducer.java:
        ``enableBackpressureForAsyncMode = false``; ``backPressureForAsyncSendNum = 10000`` (5.0.0-5.3.3;
        1024 on develop after 5.3.3, upstream commit cfddd12c2c); ``backPressureForAsyncSendSize = 100 *
        1024 * 1024``. Inert unless enabled: ``DefaultMQProducerImpl.executeAsyncMessageSend`` takes the
        semaphores only when ``isEnableBackpressureForAsyncMode()``."""
        if not self.line.has_async_backpressure:
            return None
        send_num = 1024 if self.tuple > _tuple("5.3.3") else 10_000
        return AsyncBackpressure(False, send_num, 100 * 1024 * 1024)

    @property
    def auto_batch_defaults(self) -> AutoBatch | None:
        """``DefaultMQProducer.autoBatch`` and its ``ProduceAccumulator`` (5.1.4 and later; None before),
        read from client/src/main/java/org/apache/rocketmq/client/producer/ProduceAccumulator.java at
        rocketmq-all-5.2.0..5.3.3: ``autoBatch = false``, ``holdMs = 10``, ``holdSize = 32 * 1024``,
        ``totalHoldSize = 32 * 1024 * 1024`` (the same at every tag: AB-1 builds the accumulator in the
        constructor, AB-2 in ``start()``, which a simulation cannot tell apart)."""
        if not self.line.has_auto_batch:
            return None
        return AutoBatch(False, 10, 32 * 1024, 32 * 1024 * 1024)

    # -- validators and FAQ --
    @property
    def checks_inner_multi_dispatch(self) -> bool:
        """5.x ``Validators.checkMessage`` refuses an INNER_MULTI_DISPATCH with a file separator."""
        return self.line.checks_inner_multi_dispatch

    @property
    def faq_url(self) -> str:
        return self.line.faq_url

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
    """For tables of what exists in the 5.x API only."""
    return v.api_line == API_5


def in_4_line(v: ClientVersion) -> bool:
    """For tables of what exists in the 4.x API only."""
    return v.api_line == API_4


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


@dataclass(frozen=True)
class AutoBatch:
    """The 5.x producer's autoBatch settings (``DefaultMQProducer.autoBatch``, ``batchMaxDelayMs``,
    ``batchMaxBytes``, ``totalBatchMaxBytes``; the accumulator's ``holdMs``, ``holdSize`` and
    ``totalHoldSize``), in snake case."""

    auto_batch: bool
    batch_max_delay_ms: int
    batch_max_bytes: int
    total_batch_max_bytes: int


# The ranges ProduceAccumulator.batchMaxDelayMs / batchMaxBytes accept (IllegalArgumentException outside).
BATCH_MAX_DELAY_MS_MAX = 30_000
BATCH_MAX_BYTES_MAX = 2 * 1024 * 1024

# The floors DefaultMQProducerImpl applies when it builds the semaphores (5.3.2+ setters apply them too).
BACK_PRESSURE_MIN_SEND_NUM = 10
BACK_PRESSURE_MIN_SEND_SIZE = 1024 * 1024


@cache
def parse_version(text: str) -> ClientVersion:
    """Parse a client version string; "5.x" means upstream develop."""
    if text == "5.x":
        return ClientVersion(*DEVELOP)
    m = _VERSION_RE.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"client_version must look like 4.9.7 or 5.3.3, got {text!r}")
    v = ClientVersion(int(m[1]), int(m[2]), int(m[3]))
    if not (SUPPORTED_FIRST <= v.tuple <= SUPPORTED_LAST):
        raise ConfigError(
            f"client_version must be a release from 4.3.0 to 5.3.3 (the modelled lines), got {text!r}"
        )
    return v


V4_9_7 = parse_version("4.9.7")
V4_9_8 = parse_version("4.9.8")
V5_3_3 = parse_version("5.3.3")
V5_DEVELOP = parse_version("5.x")

# What encodes a properties string: a client (what it sends) or a broker (what it stores).
PropertiesEncoding = ClientVersion | BrokerVersion
