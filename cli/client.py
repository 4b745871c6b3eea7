"""The commands' connection to a cluster: bootstrap, the highest version of each API both sides
speak (ApiVersions), and requests routed to a broker by node id (Metadata's brokers)."""

from __future__ import annotations

from typing import Any

from ..server.inter_broker_client import BrokerConnection, BrokerUnreachable
from ..wire.messages.metadata_request import MetadataRequestTopic
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError

ApiVersionsRequest = message_class("ApiVersionsRequest")
MetadataRequest = message_class("MetadataRequest")


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"bad bootstrap server {address!r}: expected host:port", BAD_USAGE)
        addresses.append((host, int(port)))
    return addresses


class KafkaClient:
    """Call `await client.send(request)` for the bootstrap broker, `send(request, node_id)` for
    another; each connection asks ApiVersions once and sends every request at the highest version
    both sides know."""

    def __init__(self, bootstrap: str, client_id: str = "samsa-cli", timeout_ms: int = 30_000) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id, self.timeout_ms = client_id, timeout_ms
        self._connections: dict[int | None, tuple[BrokerConnection, dict[int, int]]] = {}
        self._addresses: dict[int, tuple[str, int]] = {}

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for connection, _ in self._connections.values():
            await connection.aclose()
        self._connections.clear()

    async def send(self, request: Any, node_id: int | None = None) -> Any:
        connection, versions = await self._connection(node_id)
        api_key = request.API_KEY
        if api_key not in versions:
            raise CommandError(f"the broker does not support {type(request).__name__}")
        version = min(versions[api_key], request.VALID_VERSIONS[1])
        try:
            return await connection.call(request, version)
        except BrokerUnreachable as e:
            self._connections.pop(node_id, None)
            raise CommandError(f"lost the broker: {e}", BAD_USAGE) from e

    async def metadata(self, topics: list[str] | None = None) -> Any:
        request = MetadataRequest(topics=None if topics is None else [
            MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False)
        response = await self.send(request)
        self._addresses = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    async def _connection(self, node_id: int | None) -> tuple[BrokerConnection, dict[int, int]]:
        if node_id in self._connections:
            return self._connections[node_id]
        if node_id is None:
            candidates = self.bootstrap
        else:
            if node_id not in self._addresses:
                await self.metadata([])
            if node_id not in self._addresses:
                raise CommandError(f"no broker with id {node_id} in the cluster's metadata")
            candidates = [self._addresses[node_id]]
        errors = []
        for host, port in candidates:
            try:
                connection = await BrokerConnection.connect(host, port, self.client_id, self.timeout_ms)
                answer = await connection.call(ApiVersionsRequest(), 0)
            except BrokerUnreachable as e:
                errors.append(str(e))
                continue
            versions = {api.api_key: api.max_version for api in answer.api_keys}
            self._connections[node_id] = (connection, versions)
            return connection, versions
        raise CommandError(f"cannot reach a broker: {'; '.join(errors)}", BAD_USAGE)
