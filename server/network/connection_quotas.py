"""Kafka's ConnectionQuotas: how many connections the broker, each listener and each client
address may hold.

* `max.connections` (and `listener.name.<listener>.max.connections`): when the broker or the
  listener is full, its acceptor waits for a connection to close before taking the next one.
  The inter-broker listener is exempt from the broker-wide limit while there are other listeners.
* `max.connections.per.ip`, `max.connections.per.ip.overrides` ("host:count,..."): a connection
  beyond its address's limit is closed at once.
* `max.connection.creation.rate` (and `listener.name.<listener>.max.connection.creation.rate`),
  KIP-612: new connections per second, measured as client quotas are (`quota.window.num` windows
  of `quota.window.size.seconds`). A connection over the rate is counted all the same; its
  acceptor then waits the throttle time (at most one window) before taking it on, so that the
  rate comes back under the limit. The inter-broker listener is exempt from the broker-wide rate
  while there are other listeners. Unlimited by default, as in Kafka.

Each of them can be changed dynamically (cluster-wide or per broker, the listener forms too), and
applies from the next connection on, as Kafka's SocketServer.reconfigure and KIP-612's
ListenerConnectionQuota do.
"""

from __future__ import annotations

import ipaddress
import socket

import trio

from ...coordinator.quota_manager import Rate, Window, java_round
from ..clock import loop_ms
from ..config.kafka_config import ConfigError
from .listener_config import ListenerConfig

UNLIMITED = 2147483647  # Integer.MAX_VALUE: the default of every limit here


class TooManyConnections(Exception):
    pass


def _parse_overrides(text: str) -> dict[str, int]:
    key = "max.connections.per.ip.overrides"
    overrides = {}
    for entry in filter(None, (item.strip() for item in text.split(","))):
        host, separator, count = entry.rpartition(":")
        try:
            limit = int(count.strip())
            if not separator or limit < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(key, f"Invalid value {text} for configuration {key}: each entry is "
                                   f"<host or address>:<non-negative count>, found '{entry}'") from None
        host = host.strip().strip("[]")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.gethostbyname(host)
            except OSError as error:
                raise ConfigError(key, f"Invalid value {text} for configuration {key}: cannot resolve {host}: "
                                       f"{error.strerror}") from None
        overrides[address] = limit
    return overrides


def check_connection_limits(config) -> dict[str, int]:
    """What Kafka's KafkaConfig checks of the per-address limits, at startup and for a dynamic
    change (ConfigError naming the key); returns the parsed max.connections.per.ip.overrides."""
    text = config.get("max.connections.per.ip.overrides") or ""
    overrides = _parse_overrides(text)
    if config.get("max.connections.per.ip") == 0 and not overrides:
        raise ConfigError("max.connections.per.ip", "max.connections.per.ip can be set to zero only if "
                                                    "max.connections.per.ip.overrides property is set.")
    return overrides


class ConnectionQuotas:
    """The limits are read from `config` on each use: a dynamic broker config change updates it in
    place (Kafka's SocketServer and ListenerConnectionQuota reconfigure theirs), and `reconfigure`
    then wakes the acceptors waiting for a slot, which a raised limit may have freed."""

    def __init__(self, config) -> None:
        self.config = config
        self._overrides = check_connection_limits(config)
        self._overrides_text = config.get("max.connections.per.ip.overrides") or ""
        self._listeners = {e.name: ListenerConfig(config, e.name) for e in config.listeners}
        # quota.window.* are read-only configs: the windows are fixed at startup.
        self.creation_window = Window(config.get("quota.window.num"), config.get("quota.window.size.seconds") * 1000)
        # Measured whatever the limit, as Kafka's sensors are: a limit set dynamically applies at
        # once to the rate already observed.
        self._broker_creation_rate = Rate(self.creation_window)
        self._listener_creation_rates = {name: Rate(self.creation_window) for name in self._listeners}
        self.inter_broker_listener: str = config.inter_broker_listener_name
        self.total = 0
        self.by_listener = {name: 0 for name in self._listeners}
        self.by_address: dict[str, int] = {}
        self._freed = trio.Event()

    def reconfigure(self) -> None:
        """The broker's dynamic configs changed: limits now read differently; a waiting acceptor
        looks again (Kafka's updateBrokerMaxConnections and ListenerConnectionQuota.reconfigure
        notify the acceptors). A connection waiting out a creation throttle keeps its wait, as in
        Kafka's updateBrokerMaxConnectionRate."""
        self._wake_acceptors()

    @property
    def max_connections(self) -> int:
        return self.config.get("max.connections")

    def listener_max(self, listener: str) -> int:
        return self._listeners[listener].get("max.connections")

    @property
    def max_creation_rate(self) -> int:
        return self.config.get("max.connection.creation.rate")

    def listener_max_creation_rate(self, listener: str) -> int:
        return self._listeners[listener].get("max.connection.creation.rate")

    @property
    def per_ip_overrides(self) -> dict[str, int]:
        text = self.config.get("max.connections.per.ip.overrides") or ""
        if text != self._overrides_text:  # parsed (and host names resolved) once per value
            self._overrides, self._overrides_text = _parse_overrides(text), text
        return self._overrides

    def _normalize(self, address: str) -> str:
        try:
            return str(ipaddress.ip_address(address))
        except ValueError:
            return address

    def limit_for(self, address: str) -> int:
        return self.per_ip_overrides.get(self._normalize(address), self.config.get("max.connections.per.ip"))

    def _protected(self, listener: str) -> bool:
        """Brokers must be able to talk to each other: the inter-broker listener is exempt from
        the broker-wide limits, unless it is the only listener."""
        return listener == self.inter_broker_listener and len(self.by_listener) > 1

    def _slot_available(self, listener: str) -> bool:
        if self.by_listener[listener] >= self.listener_max(listener):
            return False
        return self._protected(listener) or self.total < self.max_connections

    def creation_throttle_ms(self, listener: str, now_ms: int) -> int:
        """Record a new connection on `listener` against the broker's and the listener's creation
        rates: how long its acceptor must wait before taking it on (Kafka's
        recordConnectionAndGetThrottleTimeMs), the longer of the two."""
        throttle_ms = 0
        if not self._protected(listener):
            throttle_ms = self._record_creation(self._broker_creation_rate, self.max_creation_rate, now_ms)
        listener_throttle_ms = self._record_creation(self._listener_creation_rates[listener],
                                                     self.listener_max_creation_rate(listener), now_ms)
        return max(throttle_ms, listener_throttle_ms)

    def _record_creation(self, rate: Rate, limit: int, now_ms: int) -> int:
        rate.record(1, now_ms)
        if limit >= UNLIMITED:
            return 0  # nothing can exceed it
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        if limit == 0:
            return self.creation_window.size_ms
        # Kafka's QuotaUtils.boundedThrottleTime: the wait that brings the rate back to the limit.
        throttle_ms = java_round((observed - limit) / limit * rate.window_size_ms(now_ms))
        return min(throttle_ms, self.creation_window.size_ms)

    async def inc(self, listener: str, address: str) -> None:
        """Count a new connection: waits out the throttle time of a connection creation rate it
        exceeds, then while the broker or listener is full; TooManyConnections (nothing counted)
        when its address already has its maximum."""
        throttle_ms = self.creation_throttle_ms(listener, loop_ms())
        if throttle_ms:
            await trio.sleep(throttle_ms / 1000)
        while not self._slot_available(listener):
            await self._freed.wait()
        address = self._normalize(address)
        count = self.by_address.get(address, 0)
        limit = self.limit_for(address)
        if count >= limit:
            raise TooManyConnections(f"Rejected connection from {address}, address already has the configured "
                                     f"maximum of {limit} connections.")
        self.by_address[address] = count + 1
        self.by_listener[listener] += 1
        self.total += 1

    def dec(self, listener: str, address: str) -> None:
        address = self._normalize(address)
        count = self.by_address[address] - 1
        if count:
            self.by_address[address] = count
        else:
            del self.by_address[address]
        self.by_listener[listener] -= 1
        self.total -= 1
        self._wake_acceptors()

    def _wake_acceptors(self) -> None:
        self._freed.set()
        self._freed = trio.Event()
