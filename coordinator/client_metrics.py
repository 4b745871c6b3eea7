"""Client telemetry sessions (KIP-714), sans I/O: Kafka's ClientMetricsManager and
ClientMetricsInstance as a state machine. The shell feeds it the client-metrics subscriptions,
each GetTelemetrySubscriptions and PushTelemetry request with the time it arrived, disconnects and
clock ticks; it answers with error codes and subscriptions, and says which client instances are gone.

A client instance is created at its first request (or again once the subscriptions changed since
it was evaluated): the subscriptions whose `match` patterns all match the client's attributes give
its metrics (a `*` among them: all, sent as just `*`), the smallest push interval, and a
subscription id that is the CRC32C of Java's `metrics.toString() + pushIntervalMs` XOR the instance
id's hash, so the ids are the ones Kafka would compute. The metric names come back in Java's
HashSet order, as Kafka sends them.

Timing, as Kafka checks it: a GetTelemetrySubscriptions less than a push interval after the last
Get or Push is THROTTLING_QUOTA_EXCEEDED (Kafka exempts a client whose last error was
UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE, but its condition is always true, so in
effect no one is exempt: kept so); the first Push after a Get is always accepted (clients jitter
the interval), later ones only a push interval apart, unless terminating. A client that pushed with
`terminating` set gets INVALID_REQUEST for any later push. An instance is forgotten when its
connection closes or when no request came for max(60 s, 3 push intervals).
"""

from __future__ import annotations

import base64
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import crc32c

from ..wire.compression import CompressionType
from ..wire.errors import ErrorCode

DEFAULT_INTERVAL_MS = 5 * 60 * 1000  # ClientMetricsConfigs.DEFAULT_INTERVAL_MS
ALL_METRICS = "*"
CACHE_MAX_SIZE = 16384  # Kafka's LRU cache of client instances (16k connections per broker)
DEFAULT_CACHE_EXPIRY_MS = 60 * 1000
# The time of a request never made (Kafka's 0, the epoch: its clock is the wall clock; ours may be
# any clock, a test's starting at 0).
NEVER = -(1 << 62)
# What Kafka lists as accepted, in its order (a push may also come uncompressed).
SUPPORTED_COMPRESSION_TYPES = (CompressionType.ZSTD, CompressionType.LZ4, CompressionType.GZIP, CompressionType.SNAPPY)
_KNOWN_COMPRESSION_TYPES = frozenset(CompressionType)  # CompressionType.forId
# Uuid.RESERVED: the zero id and the metadata topic's id.
RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})

# ClientMetricsConfigs' match attributes.
CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_ATTRIBUTES = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                              CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})


# --- Java's hashing, for the subscription id and the order of the metric names --------------------


def java_string_hash(s: str) -> int:
    """String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_uuid_hash(value: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two longs XORed, then the halves of that XORed."""
    xor = (value.int >> 64) ^ (value.int & 0xFFFFFFFFFFFFFFFF)
    h = (xor >> 32) ^ (xor & 0xFFFFFFFF)
    return h - (1 << 32) if h >= 1 << 31 else h


def java_hash_order(items: Iterable[str]) -> list[str]:
    """The iteration order of a java.util.HashSet the strings were added to in this order: by
    bucket (the spread hash masked by the table size, which doubles past 3/4 full), insertion order
    within one."""
    unique = list(dict.fromkeys(items))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(s: str) -> int:
        h = java_string_hash(s) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(unique, key=bucket)  # sorted is stable: insertion order within a bucket


def java_set_string(items: list[str]) -> str:
    """AbstractCollection.toString."""
    return "[" + ", ".join(items) + "]"


def subscription_id(metrics: list[str], push_interval_ms: int, client_instance_id: uuid.UUID) -> int:
    """ClientMetricsManager.computeSubscriptionId (a signed 32-bit int)."""
    crc = crc32c.crc32c((java_set_string(metrics) + str(push_interval_ms)).encode())
    signed = crc - (1 << 32) if crc >= 1 << 31 else crc
    return signed ^ java_uuid_hash(client_instance_id)


# --- subscriptions and client instances -------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """A client-metrics config resource, parsed: its metric name prefixes, push interval and
    match patterns (attribute name: compiled pattern; none matches every client)."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int = DEFAULT_INTERVAL_MS
    match: Mapping[str, re.Pattern] = field(default_factory=dict)

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        # ClientMetricsInstanceMetadata.isMatch: every pattern matches the whole attribute.
        return all(attributes.get(name) is not None and pattern.fullmatch(attributes[name])
                   for name, pattern in self.match.items())


@dataclass(frozen=True)
class ClientAttributes:
    """What the broker knows of the client that sent a request (ClientMetricsInstanceMetadata)."""

    client_id: str | None
    software_name: str | None
    software_version: str | None
    source_address: str | None
    source_port: int | None
    connection_id: str

    def match_attributes(self, client_instance_id: uuid.UUID) -> dict[str, str | None]:
        return {CLIENT_INSTANCE_ID: kafka_uuid_string(client_instance_id), CLIENT_ID: self.client_id,
                CLIENT_SOFTWARE_NAME: self.software_name, CLIENT_SOFTWARE_VERSION: self.software_version,
                CLIENT_SOURCE_ADDRESS: self.source_address,
                CLIENT_SOURCE_PORT: None if self.source_port is None else str(self.source_port)}


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


@dataclass
class ClientInstance:
    """ClientMetricsInstance: one client's evaluated subscription and request times."""

    client_instance_id: uuid.UUID
    attributes: ClientAttributes
    subscription_id: int
    subscription_version: int
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = NEVER
    last_push_ms: int = NEVER
    terminating: bool = False
    expires_at_ms: int = 0

    def may_get(self, now_ms: int) -> bool:
        """maybeUpdateGetRequestTimestamp."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        """maybeUpdatePushRequestTimestamp: the first push after a Get is always on time."""
        accepted = (self.last_get_ms > self.last_push_ms
                    or now_ms - self.last_push_ms >= self.push_interval_ms)
        if accepted:
            self.last_push_ms = now_ms
        return accepted


@dataclass(frozen=True)
class SubscriptionAnswer:
    """A GetTelemetrySubscriptions response's content (error_code alone when it is not NONE)."""

    error_code: ErrorCode
    message: str | None = None
    client_instance_id: uuid.UUID = uuid.UUID(int=0)
    subscription_id: int = 0
    requested_metrics: tuple[str, ...] = ()
    accepted_compression_types: tuple[int, ...] = ()
    push_interval_ms: int = 0
    telemetry_max_bytes: int = 0
    delta_temporality: bool = False


@dataclass(frozen=True)
class PushAnswer:
    """A PushTelemetry's verdict: NONE means the payload is to be exported."""

    error_code: ErrorCode
    message: str | None = None


def _random_client_instance_id() -> uuid.UUID:
    return uuid.uuid4()


class ClientMetricsManager:
    """The broker's client telemetry state (Kafka's ClientMetricsManager), driven by the shell."""

    def __init__(self, telemetry_max_bytes: int, *, cache_expiry_ms: int = DEFAULT_CACHE_EXPIRY_MS,
                 cache_max_size: int = CACHE_MAX_SIZE,
                 new_uuid: Callable[[], uuid.UUID] = _random_client_instance_id) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.cache_expiry_ms = cache_expiry_ms
        self.cache_max_size = cache_max_size
        self._new_uuid = new_uuid
        self.subscriptions: dict[str, Subscription] = {}
        # Bumped on every subscription change: instances evaluated before it are evaluated again.
        self.subscription_version = 0
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()  # least recently used first
        self._by_connection: dict[str, uuid.UUID] = {}

    # --- subscriptions ---

    def update_subscription(self, name: str, subscription: Subscription | None) -> None:
        """A client-metrics resource set (or, None, all its configs deleted)."""
        if subscription is None:
            if self.subscriptions.pop(name, None) is not None:
                self.subscription_version += 1
            return
        self.subscriptions[name] = subscription
        self.subscription_version += 1

    # --- requests ---

    def get_subscriptions(self, now_ms: int, client_instance_id: uuid.UUID,
                          client: ClientAttributes) -> SubscriptionAnswer:
        """processGetTelemetrySubscriptionRequest: the zero id asks for a new instance id."""
        if client_instance_id == uuid.UUID(int=0):
            client_instance_id = self._fresh_id()
        instance = self._instance(now_ms, client_instance_id, client)
        if not instance.may_get(now_ms):
            return SubscriptionAnswer(ErrorCode.THROTTLING_QUOTA_EXCEEDED, _too_early(client_instance_id))
        return SubscriptionAnswer(
            ErrorCode.NONE, client_instance_id=client_instance_id, subscription_id=instance.subscription_id,
            requested_metrics=tuple(instance.metrics), accepted_compression_types=SUPPORTED_COMPRESSION_TYPES,
            push_interval_ms=instance.push_interval_ms, telemetry_max_bytes=self.telemetry_max_bytes,
            delta_temporality=True)

    def push(self, now_ms: int, client_instance_id: uuid.UUID, subscription_id: int, terminating: bool,
             compression_type: int, metrics_size: int, client: ClientAttributes) -> PushAnswer:
        """processPushTelemetryRequest up to the export: whether the payload is to be exported."""
        if client_instance_id in RESERVED_IDS:
            return PushAnswer(ErrorCode.INVALID_REQUEST, f"Invalid request from the client [{kafka_uuid_string(client_instance_id)}], "
                                                         "invalid client instance id")
        instance = self._instance(now_ms, client_instance_id, client)
        try:
            return self._validate_push(now_ms, instance, subscription_id, terminating, compression_type, metrics_size)
        finally:
            instance.terminating = terminating

    def _validate_push(self, now_ms: int, instance: ClientInstance, subscription_id: int, terminating: bool,
                       compression_type: int, metrics_size: int) -> PushAnswer:
        client = kafka_uuid_string(instance.client_instance_id)
        if instance.terminating:
            return PushAnswer(ErrorCode.INVALID_REQUEST,
                              f"Client [{client}] sent the previous request with state terminating to TRUE, "
                              "can not acceptany requests after that")  # sic, Kafka's message
        if not instance.may_push(now_ms) and not terminating:
            return PushAnswer(ErrorCode.THROTTLING_QUOTA_EXCEEDED, _too_early(instance.client_instance_id))
        if subscription_id != instance.subscription_id:
            return PushAnswer(ErrorCode.UNKNOWN_SUBSCRIPTION_ID, f"Unknown client subscription id for the client [{client}]")
        if compression_type not in _KNOWN_COMPRESSION_TYPES:
            return PushAnswer(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                              f"Unknown compression type [{compression_type}] is received in telemetry request from [{client}]")
        if metrics_size > self.telemetry_max_bytes:
            return PushAnswer(ErrorCode.TELEMETRY_TOO_LARGE,
                              f"Telemetry request from [{client}] is larger than the maximum allowed size "
                              f"[{self.telemetry_max_bytes}]")
        return PushAnswer(ErrorCode.NONE)

    # --- instance lifetime ---

    def disconnected(self, connection_id: str) -> uuid.UUID | None:
        """A connection closed: the instance that last used it is forgotten; its id, if any."""
        client_instance_id = self._by_connection.pop(connection_id, None)
        if client_instance_id is not None and self.instances.pop(client_instance_id, None) is not None:
            return client_instance_id
        return None

    def expire(self, now_ms: int) -> list[uuid.UUID]:
        """Forget the instances no request came for in their expiry time; their ids."""
        gone = [i.client_instance_id for i in self.instances.values() if i.expires_at_ms <= now_ms]
        for client_instance_id in gone:
            self._forget(client_instance_id)
        return gone

    def _forget(self, client_instance_id: uuid.UUID) -> None:
        instance = self.instances.pop(client_instance_id)
        if self._by_connection.get(instance.attributes.connection_id) == client_instance_id:
            del self._by_connection[instance.attributes.connection_id]

    def _fresh_id(self) -> uuid.UUID:
        # Uuid.randomUuid: never a reserved id nor one whose string starts with '-'; never one in use.
        while True:
            candidate = self._new_uuid()
            if (candidate not in RESERVED_IDS and not kafka_uuid_string(candidate).startswith("-")
                    and candidate not in self.instances):
                return candidate

    def _instance(self, now_ms: int, client_instance_id: uuid.UUID, client: ClientAttributes) -> ClientInstance:
        """ClientMetricsManager.clientInstance: cached, re-evaluated after a subscription change,
        created otherwise; its expiry pushed back."""
        instance = self.instances.get(client_instance_id)
        if instance is None:
            instance = self._evaluate(client_instance_id, client)
        elif instance.subscription_version < self.subscription_version:
            # A new instance with the first one's attributes (Kafka keeps the instance metadata).
            instance = self._evaluate(client_instance_id, instance.attributes)
        self.instances[client_instance_id] = instance
        self.instances.move_to_end(client_instance_id)
        self._by_connection[client.connection_id] = client_instance_id
        while len(self.instances) > self.cache_max_size:
            self._forget(next(iter(self.instances)))
        instance.expires_at_ms = now_ms + max(self.cache_expiry_ms, instance.push_interval_ms * 3)
        return instance

    def _evaluate(self, client_instance_id: uuid.UUID, client: ClientAttributes) -> ClientInstance:
        """createClientInstance: the matching subscriptions' metrics and smallest interval."""
        attributes = client.match_attributes(client_instance_id)
        interval_ms = DEFAULT_INTERVAL_MS
        metrics: list[str] = []
        for subscription in self.subscriptions.values():
            if subscription.matches(attributes):
                metrics.extend(subscription.metrics)
                interval_ms = min(interval_ms, subscription.interval_ms)
        ordered = [ALL_METRICS] if ALL_METRICS in metrics else java_hash_order(metrics)
        return ClientInstance(client_instance_id, client, subscription_id(ordered, interval_ms, client_instance_id),
                              self.subscription_version, ordered, interval_ms)


def _too_early(client_instance_id: uuid.UUID) -> str:
    return (f"Request from the client [{kafka_uuid_string(client_instance_id)}] arrived before the next "
            "push interval time")
