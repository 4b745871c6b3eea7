"""The commands' connection to a cluster: bootstrap, TLS and SASL from `--command-config`, the
highest version of each API both sides speak (ApiVersions), requests routed to a broker by node id
(a partition's leader, the controller, a group's or transaction's coordinator), and a response's
error code turned into the command's one-line error.

A command adds `add_connection_arguments(parser)` and opens `async with open_client(args) as client`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import trio

from ..client.connection import BrokerConnection
from ..client.errors import AuthenticationFailed, BrokerUnreachable, error_line
from ..client.sasl import authenticate
from ..wire.codec import Message
from ..wire.errors import ErrorCode
from ..wire.messages.metadata_request import MetadataRequestTopic
from ..wire.protocol import message_class
from . import BAD_USAGE, BROKER_REFUSED, CommandError
from .client_config import ClientConfig

ApiVersionsRequest = message_class("ApiVersionsRequest")
MetadataRequest = message_class("MetadataRequest")
FindCoordinatorRequest = message_class("FindCoordinatorRequest")

GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types


def add_connection_arguments(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """-b/--bootstrap-server and --command-config, as Kafka's tools name them. A command with
    actions (topics create, ...) adds them to its own parser and, with subcommand=True, to each
    action's, so that they may come before or after the action."""
    # An action's parser must not overwrite with its defaults what the command's parser read.
    unset = argparse.SUPPRESS if subcommand else None
    parser.add_argument("-b", "--bootstrap-server", metavar="HOST:PORT", default=unset or "localhost:9092",
                        help="the brokers to start from, host:port[,host:port...] (default localhost:9092)")
    parser.add_argument("--command-config", metavar="FILE", default=unset,
                        help="a Kafka client properties file: security.protocol, ssl.*, sasl.mechanism, "
                             "sasl.jaas.config")


@contextmanager
def action_parsers(parser: argparse.ArgumentParser) -> Iterator[Any]:
    """A command with actions (`topics create`, `groups describe`, ...): the subparsers to add the
    actions to, ACTION parsed into args.action; each action added in the `with` block also takes
    the connection arguments, so that they may come before or after the action's name."""
    add_connection_arguments(parser)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    yield actions
    for action in actions.choices.values():
        add_connection_arguments(action, subcommand=True)


def open_client(args: argparse.Namespace, client_id: str = "samsa-cli",
                properties: Mapping[str, str] | None = None) -> KafkaClient:
    """A KafkaClient for the parsed -b and --command-config, `properties` over the file's (the
    console tools' --consumer-property, --producer-property); CommandError, exit 2, for a bad
    config. client.id and request.timeout.ms, when set, override `client_id` and 30 s."""
    config = ClientConfig.load(args.command_config, properties)
    return KafkaClient(args.bootstrap_server, config, config.props.get("client.id", client_id),
                       config.request_timeout_ms)


def check_error(error_code: int, error_message: str | None = None, subject: str | None = None) -> None:
    """Nothing for NONE; otherwise CommandError (exit 1) reading `subject: NAME: message`, the message
    being the broker's own when it sent one, else Kafka's text for the code."""
    if error_code != ErrorCode.NONE:
        raise CommandError(error_line(error_code, error_message, subject), BROKER_REFUSED)


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """host:port[,host:port...] as addresses; CommandError (exit 2) for a malformed one."""
    addresses = []
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"bad bootstrap server {address!r}: expected host:port", BAD_USAGE)
        addresses.append((host.strip("[]"), int(port)))
    return addresses


class KafkaClient:
    """Call `await client.send(request)` for the bootstrap broker, `send(request, node_id)` for
    another; each connection is set up once (TLS, ApiVersions, SASL) and sends every request at the
    highest version both sides know. A broker that cannot be reached is CommandError (exit 2)."""

    def __init__(self, bootstrap: str, config: ClientConfig | None = None, client_id: str = "samsa-cli",
                 timeout_ms: int = 30_000) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.config = config or ClientConfig()
        self.client_id, self.timeout_ms = client_id, timeout_ms
        self._connections: dict[int | None, tuple[BrokerConnection, dict[int, int]]] = {}
        self._addresses: dict[int, tuple[str, int]] = {}

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for connection, _ in self._connections.values():
            with trio.move_on_after(1):
                await connection.aclose()
        self._connections.clear()

    async def send(self, request: Any, node_id: int | None = None) -> Any:
        """The response to `request` from broker `node_id` (None: the bootstrap broker)."""
        connection, _ = await self._connection(node_id)
        version = await self.api_version(type(request), node_id)
        try:
            return await connection.call(request, version)
        except BrokerUnreachable as e:
            self._connections.pop(node_id, None)
            raise CommandError(f"lost the broker: {e}", BAD_USAGE) from e

    async def api_version(self, request_type: type[Message], node_id: int | None = None) -> int:
        """The version `send` uses for this request type with that broker (for requests whose
        fields differ by version)."""
        _, versions = await self._connection(node_id)
        api_key = request_type.API_KEY
        if api_key is None or api_key not in versions:
            raise CommandError(f"the broker does not support {request_type.__name__}")
        return min(versions[api_key], request_type.VALID_VERSIONS[1])

    async def supports(self, request_type: type[Message], node_id: int | None = None) -> bool:
        """Whether that broker's ApiVersions lists this request's API."""
        _, versions = await self._connection(node_id)
        return request_type.API_KEY in versions

    async def metadata(self, topics: list[str] | None = None) -> Any:
        """A Metadata response for `topics` (None: every topic, []: none, only brokers); it also
        tells the client where each broker is."""
        request = MetadataRequest(topics=None if topics is None else [
            MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False)
        response = await self.send(request)
        self._addresses.update({b.node_id: (b.host, b.port) for b in response.brokers})
        return response

    async def controller(self) -> int | None:
        """The controller's node id, or None when Metadata names none (send to any broker then)."""
        metadata = await self.metadata([])
        return metadata.controller_id if metadata.controller_id in self._addresses else None

    async def send_to_controller(self, request: Any) -> Any:
        """`request` sent to the controller (admin requests: topics, configs, ACLs, quotas, users)."""
        return await self.send(request, await self.controller())

    async def leaders(self, topics: list[str]) -> dict[tuple[str, int], int]:
        """The leader's node id of each partition of `topics`; CommandError for an unknown topic."""
        metadata = await self.metadata(topics)
        leaders = {}
        for topic in metadata.topics:
            check_error(topic.error_code, None, topic.name)
            for partition in topic.partitions:
                leaders[topic.name, partition.partition_index] = partition.leader_id
        return leaders

    async def leader(self, topic: str, partition: int) -> int:
        """The leader's node id of one partition; CommandError when it has none or does not exist."""
        leader = (await self.leaders([topic])).get((topic, partition))
        if leader is None:
            raise CommandError(f"{topic}-{partition}: UNKNOWN_TOPIC_OR_PARTITION: "
                               f"{ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message}")
        if leader < 0:
            raise CommandError(f"{topic}-{partition}: LEADER_NOT_AVAILABLE: {ErrorCode.LEADER_NOT_AVAILABLE.message}")
        return leader

    async def coordinator(self, key: str, key_type: int = GROUP) -> int:
        """The node id of the coordinator of a group (key_type GROUP) or a transactional id
        (TRANSACTION), by FindCoordinator; CommandError with the broker's error."""
        version = await self.api_version(FindCoordinatorRequest)
        if version >= 4:
            response = await self.send(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]))
            found = response.coordinators[0]
        else:
            found = response = await self.send(FindCoordinatorRequest(key=key, key_type=key_type))
        check_error(found.error_code, found.error_message, key)
        self._addresses[found.node_id] = (found.host, found.port)
        return found.node_id

    async def send_to_coordinator(self, request: Any, key: str, key_type: int = GROUP) -> Any:
        """`request` sent to the coordinator of group (or transactional id) `key`."""
        return await self.send(request, await self.coordinator(key, key_type))

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
                connection = await BrokerConnection.connect(host, port, self.client_id, self.timeout_ms,
                                                            self.config.ssl_context)
            except BrokerUnreachable as e:
                errors.append(str(e))
                continue
            try:
                answer = await connection.call(ApiVersionsRequest(), 0)
                versions = {api.api_key: api.max_version for api in answer.api_keys}
                if self.config.sasl is not None:
                    await authenticate(connection, self.config.sasl, versions)
            except BrokerUnreachable as e:
                errors.append(str(e))
                await connection.aclose()
                continue
            except AuthenticationFailed as e:
                with trio.CancelScope(shield=True):
                    await connection.aclose()
                raise CommandError(str(e), BROKER_REFUSED) from None
            except BaseException:
                with trio.CancelScope(shield=True):
                    await connection.aclose()
                raise
            self._connections[node_id] = (connection, versions)
            return connection, versions
        raise CommandError(f"cannot reach a broker: {'; '.join(errors)}", BAD_USAGE)


async def send_without_response(client: KafkaClient, request: Any, node_id: int | None = None) -> None:
    """Write a request the broker does not answer (Produce with acks=0) on the connection to
    `node_id`, without waiting for a response."""
    connection, _ = await client._connection(node_id)
    version = await client.api_version(type(request), node_id)
    try:
        await connection.send_without_response(request, version)
    except BrokerUnreachable as e:
        raise CommandError(f"lost the broker: {e}", BAD_USAGE) from e
