"""What a handler knows about the request it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import Broker
    from .network import Connection


@dataclass
class RequestContext:
    broker: "Broker"
    connection: "Connection"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def listener(self) -> str:
        return self.connection.listener.listener
