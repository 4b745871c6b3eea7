"""What a handler knows about the request it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import Broker
    from .network import Connection


@dataclass(frozen=True)
class KafkaPrincipal:
    """Who sent a request (Kafka's KafkaPrincipal): quotas and ACLs key on it."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")  # an unauthenticated connection's principal


@dataclass
class RequestContext:
    broker: "Broker"
    connection: "Connection"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    principal: KafkaPrincipal = ANONYMOUS

    @property
    def listener(self) -> str:
        return self.connection.listener.listener
