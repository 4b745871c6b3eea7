"""Client quota enforcement as Kafka does it, sans I/O: values and a clock (milliseconds) in,
throttle times out.

* `ClientQuotaManager` is Kafka's ClientQuotaManager for one quota key: `producer_byte_rate`
  (produce request bytes), `consumer_byte_rate` (fetch response bytes) or `request_percentage`
  (time spent handling a client's requests, in percent of one thread; Kafka's
  ClientRequestQuotaManager, whose throttle time alone is capped at one window).
* `ControllerMutationQuotaManager` is KIP-599's: partitions created or deleted, against a token
  bucket, strict (refusing with THROTTLING_QUOTA_EXCEEDED) or permissive (accepting, throttling).
* `ConnectionRateQuota` is KIP-612's `connection_creation_rate` for `ip` entities.

Which configured entity applies to a (user, client-id) is Kafka's order of precedence:
/users/<user>/clients/<client-id>, /users/<user>/clients/<default>, /users/<user>,
/users/<default>/clients/<client-id>, /users/<default>/clients/<default>, /users/<default>,
/clients/<client-id>, /clients/<default>. The entity found also decides who shares a measured rate
(Kafka's metric tags): every client of a user with a user quota shares one, every client-id under a
client-id quota (or the client-id default) has its own.

Rates are Kafka's Rate over a SampledStat: `samples` windows of `window_ms` (quota.window.num,
quota.window.size.seconds), one more kept while the oldest is still in use, and a young rate
measured as if the missing windows had been empty. A client whose rate O exceeds its bound T is
throttled for (O - T) / T * W, W the span the rate was measured over: the time it must stay quiet
for the rate to come back to T.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass

from .client_quotas import CONNECTION_CREATION_RATE, CONTROLLER_MUTATION_RATE, IP, Entity, quota_entity

# Kafka's ClientQuotaManagerConfig.InactiveSensorExpirationTimeSeconds: a client's measured rate
# is forgotten after an hour without requests.
INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
_EXPIRY_CHECK_INTERVAL_MS = 60_000
_CACHE_LIMIT = 10_000  # clients whose quota lookup is remembered between configuration changes

QuotaConfigs = Mapping[Entity, Mapping[str, float]]


def java_round(x: float) -> int:
    """Math.round: halves go up, as Kafka rounds throttle times."""
    return math.floor(x + 0.5)


@dataclass(frozen=True)
class Window:
    """How a rate is sampled (Kafka's MetricConfig): `samples` windows of `size_ms` each."""

    samples: int = 11
    size_ms: int = 1000


class _Sample:
    __slots__ = ("value", "events", "start_ms", "last_event_ms")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.events = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """Kafka's Rate over a WindowedSum: the sum of the live samples per second of the span they cover."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window.size_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than configured: the oldest may still overlap the measured span.
        self._current = (self._current + 1) % (self.window.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.window.samples * self.window.size_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over: from the oldest live sample, and never less than
        `samples - 1` whole windows (a young rate is not judged on its first instants alone)."""
        self._purge_obsolete(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window.size_ms
        min_full_windows = self.window.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.window.size_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        self._purge_obsolete(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000)


class TokenBucket:
    """Kafka's TokenBucket: refilled at the quota rate up to a burst of `samples * size` seconds of
    it; the quota is exhausted while the bucket is below zero. A new bucket starts full."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.tokens: float | None = None
        self._last_ms = 0

    def _burst(self, rate: float) -> float:
        return self.window.samples * self.window.size_ms / 1000 * rate

    def measure(self, rate: float, now_ms: int) -> float:
        burst = self._burst(rate)
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + rate * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms
        return self.tokens

    def record(self, value: float, rate: float, now_ms: int) -> None:
        self.tokens = min(self._burst(rate), self.measure(rate, now_ms) - value)


class _Sensor:
    __slots__ = ("stat", "last_record_ms")

    def __init__(self, stat, now_ms: int) -> None:
        self.stat = stat
        self.last_record_ms = now_ms


def _lookup(quotas: QuotaConfigs, key: str, entity: Entity) -> float | None:
    values = quotas.get(entity)
    return None if values is None else values.get(key)


class _QuotaSensors:
    """What every client quota shares: the configured entity that applies to a (user, client-id),
    its limit, and one sensor per group of clients sharing a measured rate."""

    def __init__(self, key: str, quotas: QuotaConfigs, window: Window) -> None:
        self.key = key
        self.quotas = quotas
        self.window = window
        self.sensors: dict[tuple[str, str], _Sensor] = {}
        self._next_expiry_check_ms: int | None = None
        self._tags: dict[tuple[str, str | None], tuple[str, str]] = {}
        self._limits: dict[tuple[str, str], float | None] = {}
        self.enabled = False
        self.refresh()

    def refresh(self) -> None:
        """Take up a change of `quotas`: what applies to whom is cached between changes."""
        self.enabled = any(self.key in values for values in self.quotas.values())
        self._tags.clear()
        self._limits.clear()

    def _configured(self, user, client_id) -> bool:
        return _lookup(self.quotas, self.key, quota_entity(user=user, client_id=client_id)) is not None

    def _configured_user(self, user) -> bool:
        return _lookup(self.quotas, self.key, quota_entity(user=user)) is not None

    def metric_tags(self, user: str, client_id: str | None) -> tuple[str, str]:
        """(user, client-id) of the measured rate this client shares: Kafka's quotaMetricTags.
        An empty string leaves that part out."""
        tags = self._tags.get((user, client_id))
        if tags is None:
            if len(self._tags) >= _CACHE_LIMIT:
                self._tags.clear()
            tags = self._tags[(user, client_id)] = self._find_tags(user, client_id or "")
        return tags

    def _find_tags(self, user: str, client_id: str) -> tuple[str, str]:
        if self._configured(user, client_id) or self._configured(user, None):
            return user, client_id
        if self._configured_user(user):
            return user, ""
        if self._configured(None, client_id) or self._configured(None, None):
            return user, client_id
        if self._configured_user(None):
            return user, ""
        return "", client_id

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """The bound for a measured rate with these tags, None for none: Kafka's quotaLimit."""
        if tags in self._limits:
            return self._limits[tags]
        if len(self._limits) >= _CACHE_LIMIT:
            self._limits.clear()
        limit = self._limits[tags] = self._find_limit(*tags)
        return limit

    def _find_limit(self, user: str, client_id: str) -> float | None:
        if user and client_id:
            candidates = [quota_entity(user=u, client_id=c)
                          for u, c in ((user, client_id), (user, None), (None, client_id), (None, None))]
        elif user:
            candidates = [quota_entity(user=user), quota_entity(user=None)]
        elif client_id:
            candidates = [quota_entity(client_id=client_id), quota_entity(client_id=None)]
        else:
            return None
        return next((limit for entity in candidates if (limit := _lookup(self.quotas, self.key, entity)) is not None),
                    None)

    def quota(self, user: str, client_id: str | None) -> float | None:
        """The bound that applies to this client, None for none."""
        return self.quota_limit(self.metric_tags(user, client_id))

    def sensor(self, tags: tuple[str, str], now_ms: int, new_stat) -> _Sensor:
        self._expire(now_ms)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = _Sensor(new_stat(self.window), now_ms)
        sensor.last_record_ms = now_ms
        return sensor

    def _expire(self, now_ms: int) -> None:
        if self._next_expiry_check_ms is not None and now_ms < self._next_expiry_check_ms:
            return
        self._next_expiry_check_ms = now_ms + _EXPIRY_CHECK_INTERVAL_MS
        for tags in [t for t, s in self.sensors.items() if now_ms - s.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS]:
            del self.sensors[tags]


class ClientQuotaManager(_QuotaSensors):
    """A rate quota (bytes or request-time percent per second) per (user, client-id)."""

    def __init__(self, key: str, quotas: QuotaConfigs, window: Window = Window(),
                 max_throttle_ms: int | None = None) -> None:
        super().__init__(key, quotas, window)
        self.max_throttle_ms = max_throttle_ms

    def record(self, user: str, client_id: str | None, value: float, now_ms: int) -> int:
        """Record `value` and return the throttle time it earns (0 within the quota)."""
        if not self.enabled:
            return 0
        tags = self.metric_tags(user, client_id)
        rate = self.sensor(tags, now_ms, Rate).stat
        rate.record(value, now_ms)
        limit = self.quota_limit(tags)
        if limit is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        throttle_ms = java_round((observed - limit) / limit * rate.window_size_ms(now_ms))
        return throttle_ms if self.max_throttle_ms is None else min(throttle_ms, self.max_throttle_ms)

    def unrecord(self, user: str, client_id: str | None, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch sends nothing, so counts nothing)."""
        if self.enabled:
            self.sensor(self.metric_tags(user, client_id), now_ms, Rate).stat.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str | None) -> float | None:
        """The most one request may carry without being throttled for certain (Kafka bounds a
        fetch's bytes by it), None when no quota applies."""
        if not self.enabled:
            return None
        limit = self.quota(user, client_id)
        if limit is None:
            return None
        return limit * (self.window.samples - 1) * self.window.size_ms / 1000


class ControllerMutationQuota:
    """One request's view of the controller mutation quota (Kafka's Strict- and
    PermissiveControllerMutationQuota): partitions are recorded one topic at a time."""

    def __init__(self, limit: tuple[TokenBucket, float] | None, strict: bool) -> None:
        self._limit = limit  # the bucket and its rate; None: no quota applies
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, partitions: int, now_ms: int) -> bool:
        """Count `partitions` mutations; False when refused (strict, and the quota was already
        exhausted before them: the topic gets THROTTLING_QUOTA_EXCEEDED)."""
        if self._limit is None:
            return True
        bucket, rate = self._limit
        if self.strict:
            tokens = bucket.measure(rate, now_ms)
            if tokens < 0:
                self._violated(tokens, rate, now_ms)
                return False
            bucket.record(partitions, rate, now_ms)
            return True
        bucket.record(partitions, rate, now_ms)
        tokens = bucket.measure(rate, now_ms)
        if tokens < 0:
            self._violated(tokens, rate, now_ms)
        return True

    def _violated(self, tokens: float, rate: float, now_ms: int) -> None:
        # The time for the bucket to refill to zero.
        self._throttle_ms = java_round(-tokens / rate * 1000)
        self._recorded_ms = now_ms

    def throttle_time_ms(self, now_ms: int) -> int:
        """The throttle earned, less the time since it was (a response may come later)."""
        return max(0, self._throttle_ms - (now_ms - self._recorded_ms))


class ControllerMutationQuotaManager(_QuotaSensors):
    def __init__(self, quotas: QuotaConfigs, window: Window = Window()) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, quotas, window)

    def new_quota(self, user: str, client_id: str | None, strict: bool, now_ms: int) -> ControllerMutationQuota:
        if not self.enabled:
            return ControllerMutationQuota(None, strict)
        tags = self.metric_tags(user, client_id)
        rate = self.quota_limit(tags)
        if rate is None:
            return ControllerMutationQuota(None, strict)
        return ControllerMutationQuota((self.sensor(tags, now_ms, TokenBucket).stat, rate), strict)


def _ip_key(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class ConnectionRateQuota:
    """KIP-612: new connections per second from one IP address, `connection_creation_rate` of
    its `ip` entity or of the default one. A connection over the quota is refused: it is closed
    after the throttle time (at most one window), and not counted."""

    def __init__(self, quotas: QuotaConfigs, window: Window = Window()) -> None:
        self.quotas = quotas
        self.window = window
        self._limits: dict = {}
        self._default: float | None = None
        self._rates: dict = {}
        self.refresh()

    def refresh(self) -> None:
        self._limits = {}
        self._default = None
        for entity, values in self.quotas.items():
            limit = values.get(CONNECTION_CREATION_RATE)
            if limit is None or len(entity) != 1 or entity[0][0] != IP:
                continue
            name = entity[0][1]
            if name is None:
                self._default = limit
            elif (address := _ip_key(name)) is not None:
                self._limits[address] = limit
        self._rates = {address: rate for address, rate in self._rates.items()
                       if address in self._limits or self._default is not None}

    def record_connection(self, host: str, now_ms: int) -> int:
        """Count a new connection from `host`; the throttle time when it is refused, else 0."""
        if not self._limits and self._default is None:
            return 0
        address = _ip_key(host)
        limit = self._limits.get(address, self._default)
        if limit is None:
            return 0
        rate = self._rates.get(address)
        if rate is None:
            rate = self._rates[address] = Rate(self.window)
        rate.record(1, now_ms)
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        rate.record(-1, now_ms)
        throttle_ms = java_round((observed - limit) / limit * rate.window_size_ms(now_ms))
        return min(throttle_ms, self.window.size_ms)

