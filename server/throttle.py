"""Client quotas applied to requests: what each request records against which quota, the throttle
time its response carries, and the muting of its connection for that time.

KIP-219: a client over a quota gets its response at once with `throttle_time_ms`, and nothing more
is read from its connection until that time has passed. Kafka does this for every request version
(since 2.0 it never holds a response back): a client too old to throttle itself still waits,
because its next request is not read. Per Kafka's KafkaApis:

* every request records its handling time against `request_percentage`, except an acks=0 produce;
* a produce records its size against `producer_byte_rate` after it is appended (the data is
  kept; the client is slowed down afterwards);
* a fetch records its response size against `consumer_byte_rate`; a fetch over quota gets an empty
  response instead, and its bytes are taken back;
* CreateTopics, CreatePartitions and DeleteTopics count partitions against
  `controller_mutation_rate` (KIP-599);
* a response carries the largest throttle time of the quotas it recorded against.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Protocol, cast

import trio

from ..coordinator.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from ..coordinator.quota_manager import (ClientQuotaManager, ConnectionRateQuota, ControllerMutationQuota,
                                         ControllerMutationQuotaManager, Window)
from ..wire.protocol import response_class
from .clock import elapsed_ns, loop_ms, loop_time

if TYPE_CHECKING:
    from ..coordinator.quota_manager import QuotaConfigs
    from ..wire.codec import Message
    from .config.kafka_config import KafkaConfig
    from .context import RequestContext
    from .network.socket_server import Connection

# Errors.THROTTLING_QUOTA_EXCEEDED's message, as a topic refused by the mutation quota carries it.
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."
# Kafka's ClientRequestQuotaManager.NANOS_TO_PERCENTAGE_PER_SECOND.
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9


class BrokerQuotas:
    """The broker's quota managers over the client quotas of its metadata image."""

    def __init__(self, config: KafkaConfig, quotas: QuotaConfigs) -> None:
        window = Window(config.get_int("quota.window.num"), config.get_int("quota.window.size.seconds") * 1000)
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, quotas, window)
        # Kafka's ClientRequestQuotaManager caps its throttle time at one window.
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, quotas, window, max_throttle_ms=window.size_ms)
        self.controller_mutation = ControllerMutationQuotaManager(quotas, Window(
            config.get_int("controller.quota.window.num"),
            config.get_int("controller.quota.window.size.seconds") * 1000))
        self.connections = ConnectionRateQuota(quotas, window)

    def refresh(self) -> None:
        """Apply a change of the client quotas to clients already measured."""
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation, self.connections):
            manager.refresh()


def _request_throttle_ms(ctx: RequestContext, now_ms: int | None = None) -> int:
    """Record the time this request has taken so far (long-poll waits excepted)."""
    request = ctx.services.quotas.request
    if not request.enabled:
        return 0
    busy_ns = elapsed_ns() - ctx.started_ns - ctx.waited_ns
    return request.record(ctx.principal.name, ctx.client_id, busy_ns * NANOS_TO_PERCENTAGE_PER_SECOND,
                          loop_ms() if now_ms is None else now_ms)


class not_request_time:
    """Time a request spends parked (a long poll, a rebalance) is not time spent handling it.
    (A class, not a generator: every long poll enters one.) What it wraps passes through the
    scheduler: the connection then reads the next frame without another checkpoint."""

    __slots__ = ("ctx", "start")

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> None:
        self.start = elapsed_ns()

    def __exit__(self, *exc_info) -> None:
        self.ctx.waited_ns += elapsed_ns() - self.start


def produce_throttled(ctx: RequestContext) -> bool:
    """Whether a produce may be throttled: some produce or request quota is configured."""
    quotas = ctx.services.quotas
    return quotas.produce.enabled or quotas.request.enabled


def record_produce(ctx: RequestContext, acks: int) -> None:
    if not produce_throttled(ctx):
        ctx.throttle_time_ms = 0
        return
    quotas = ctx.services.quotas
    now_ms = loop_ms()
    bandwidth = quotas.produce.record(ctx.principal.name, ctx.client_id, ctx.request_size, now_ms)
    ctx.throttle_time_ms = max(bandwidth, 0 if acks == 0 else _request_throttle_ms(ctx, now_ms))


def fetch_max_bytes(ctx: RequestContext) -> int | None:
    """What one fetch may return without certainly exceeding the client's byte rate."""
    limit = ctx.services.quotas.fetch.max_value_in_window(ctx.principal.name, ctx.client_id)
    return None if limit is None else int(limit)


def record_fetch(ctx: RequestContext, response_bytes: int) -> int:
    """Record a fetch response about to be sent; its throttle time, non-zero when the client must
    get an empty response instead (whose bytes are then not counted)."""
    quotas = ctx.services.quotas
    if not (quotas.fetch.enabled or quotas.request.enabled):
        ctx.throttle_time_ms = 0
        return 0
    now_ms = loop_ms()
    request_ms = _request_throttle_ms(ctx, now_ms)
    bandwidth_ms = quotas.fetch.record(ctx.principal.name, ctx.client_id, response_bytes, now_ms)
    ctx.throttle_time_ms = max(request_ms, bandwidth_ms)
    if ctx.throttle_time_ms:
        quotas.fetch.unrecord(ctx.principal.name, ctx.client_id, response_bytes, now_ms)
    return ctx.throttle_time_ms


def mutation_quota(ctx: RequestContext, strict_since_version: int) -> ControllerMutationQuota:
    """The controller mutation quota of one request: strict (refusing topics with
    THROTTLING_QUOTA_EXCEEDED) from the version that can carry that error, permissive before."""
    return ctx.services.quotas.controller_mutation.new_quota(
        ctx.principal.name, ctx.client_id, ctx.api_version >= strict_since_version, loop_ms())


def record_mutations(quota: ControllerMutationQuota, partitions: int) -> bool:
    """Count `partitions` created or deleted; False when the quota refuses them."""
    return quota.record(partitions, loop_ms())


def finish_mutations(ctx: RequestContext, quota: ControllerMutationQuota) -> None:
    now_ms = loop_ms()
    ctx.throttle_time_ms = max(quota.throttle_time_ms(now_ms), _request_throttle_ms(ctx, now_ms))


class _Throttled(Protocol):
    throttle_time_ms: int


@cache
def _throttle_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of the API's response that carry throttle_time_ms (most APIs, all versions)."""
    for field in response_class(api_key)._schema:
        if field.name == "throttle_time_ms":
            return field.versions
    return None


def finish_request(ctx: RequestContext, response: Message | None) -> None:
    """For every request once its handler has answered: record its time unless the handler
    recorded its quotas itself, put the throttle time in the response, mute the connection."""
    if ctx.throttle_time_ms is None:
        ctx.throttle_time_ms = _request_throttle_ms(ctx)
    throttle_ms = ctx.throttle_time_ms
    if throttle_ms > 0:
        conn = ctx.connection
        conn.muted_until = max(conn.muted_until, loop_time() + throttle_ms / 1000)
    if response is not None:
        versions = _throttle_versions(ctx.api_key)
        if versions is not None and versions[0] <= ctx.api_version <= versions[1]:
            # The API's schema has the field, so its response class does: a type checker sees a
            # generated class's fields, not a Message's.
            cast(_Throttled, response).throttle_time_ms = throttle_ms


async def wait_unmuted(conn: Connection) -> None:
    """Hold back reading a throttled connection's next request until its throttle time is over."""
    if conn.muted_until and conn.muted_until > loop_time():
        await trio.sleep_until(conn.muted_until)


def connection_throttle_ms(quotas: BrokerQuotas, host: str) -> int:
    """KIP-612: non-zero when a new connection from `host` exceeds its IP's creation rate."""
    return quotas.connections.record_connection(host, loop_ms())
