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
"""

from __future__ import annotations

import ipaddress
import socket

import trio

from ...coordinator.quota_manager import Rate, Window, java_round
from ..clock import loop_ms
from ..config import ConfigError
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


class ConnectionQuotas:
    def __init__(self, config) -> None:
        self.max_connections: int = config.get("max.connections")
        self.max_per_ip: int = config.get("max.connections.per.ip")
        self.per_ip_overrides = _parse_overrides(config.get("max.connections.per.ip.overrides") or "")
        if self.max_per_ip == 0 and not self.per_ip_overrides:
            raise ConfigError("max.connections.per.ip", "max.connections.per.ip can be set to zero only if "
                                                        "max.connections.per.ip.overrides property is set.")
        self.listener_max = {e.name: ListenerConfig(config, e.name).get("max.connections") for e in config.listeners}
        self.creation_window = Window(config.get("quota.window.num"), config.get("quota.window.size.seconds") * 1000)
        self.max_creation_rate: int = config.get("max.connection.creation.rate")
        self.listener_max_creation_rate = {e.name: ListenerConfig(config, e.name).get("max.connection.creation.rate")
                                           for e in config.listeners}
        self._broker_creation_rate = Rate(self.creation_window)
        self._listener_creation_rates = {name: Rate(self.creation_window) for name in self.listener_max}
        self.inter_broker_listener: str = config.inter_broker_listener_name
        self.total = 0
        self.by_listener = {name: 0 for name in self.listener_max}
        self.by_address: dict[str, int] = {}
        self._freed = trio.Event()

    def _normalize(self, address: str) -> str:
        try:
            return str(ipaddress.ip_address(address))
        except ValueError:
            return address

    def limit_for(self, address: str) -> int:
        return self.per_ip_overrides.get(self._normalize(address), self.max_per_ip)

    def _protected(self, listener: str) -> bool:
        """Brokers must be able to talk to each other: the inter-broker listener is exempt from
        the broker-wide limits, unless it is the only listener."""
        return listener == self.inter_broker_listener and len(self.by_listener) > 1

    def _slot_available(self, listener: str) -> bool:
        if self.by_listener[listener] >= self.listener_max[listener]:
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
                                                     self.listener_max_creation_rate[listener], now_ms)
        return max(throttle_ms, listener_throttle_ms)

    def _record_creation(self, rate: Rate, limit: int, now_ms: int) -> int:
        if limit >= UNLIMITED:
            return 0  # Kafka measures it all the same; nothing can exceed it
        rate.record(1, now_ms)
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
        self._freed.set()
        self._freed = trio.Event()
