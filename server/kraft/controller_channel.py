"""Requests to the active controller of a KRaft cluster (Kafka's NodeToControllerChannelManager, as
a broker runs it): the active controller is the leader of the metadata log, as the quorum observer
knows it (quorum.py), reached on its controller listener. One connection, one request at a time;
a failed connection or a NOT_CONTROLLER answer makes the observer find the leader again. With
`learn_api_versions` (the forwarding channel) each new connection first asks the controller's
ApiVersions, as Kafka's NetworkClient does, kept as `api_versions`.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...wire.codec import Message
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class
from .quorum import QuorumObserver

log = logging.getLogger("samsa.kraft.controller_channel")
ApiVersionsRequest = request_class(ApiKey.API_VERSIONS)
API_VERSIONS_VERSION = 3


class ControllerApiVersions:
    """The API versions an active controller serves (Kafka's NodeApiVersions): api key -> (min, max).
    Compared by identity: a new connection's answer is a new object."""

    __slots__ = ("versions",)

    def __init__(self, versions: dict[int, tuple[int, int]]) -> None:
        self.versions = versions


class ControllerChannel:
    def __init__(self, quorum: QuorumObserver, node_id: int, timeout_ms: int, learn_api_versions: bool = False,
                 name: str = "heartbeat") -> None:
        self._quorum = quorum
        self._node_id = node_id
        self._name = name  # as Kafka's channel managers are named in its logs: heartbeat, forwarding
        self._timeout_ms = timeout_ms
        self._learn_api_versions = learn_api_versions
        self.api_versions: ControllerApiVersions | None = None  # the connected controller's, once known
        self._connection: tuple[tuple[int, str, int], BrokerConnection] | None = None
        self._lock = trio.Lock()

    async def call(self, request: Message, version: int) -> Any | None:
        """The active controller's answer to `request`, or None when there was none (no controller
        known within the request timeout, the connection failed, it no longer leads)."""
        async with self._lock:
            with trio.move_on_after(self._timeout_ms / 1000):
                while (leader := self._quorum.leader_endpoint) is None:
                    await self._quorum.wait_leader_changed()
            if leader is None:
                return None
            try:
                connection = await self._connect(leader)
                response = await connection.call(request, version)
            except (BrokerUnreachable, CodecError) as e:
                log.info("[NodeToControllerChannelManager id=%d name=%s] request to controller %d at %s:%d "
                         "failed: %s", self._node_id, self._name, *leader, e)
                await self.close()
                self._quorum.leader_unreachable(leader[0])
                return None
            if getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER:
                await self.close()
                self._quorum.leader_unreachable(leader[0])
            return response

    async def _connect(self, leader: tuple[int, str, int]) -> BrokerConnection:
        if self._connection is not None and self._connection[0] != leader:
            await self.close()
        if self._connection is None:
            connection = await BrokerConnection.connect(leader[1], leader[2], f"broker-{self._node_id}-to-controller",
                                                        self._timeout_ms)
            try:
                if self._learn_api_versions:
                    answer = await connection.call(ApiVersionsRequest(client_software_name="samsa",
                                                                      client_software_version="0.1.0"),
                                                   API_VERSIONS_VERSION)
                    self.api_versions = ControllerApiVersions(
                        {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys})
            except BaseException:
                with trio.CancelScope(shield=True):
                    await connection.aclose()
                raise
            self._connection = (leader, connection)
        return self._connection[1]

    async def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection[1], None
            with trio.CancelScope(shield=True):
                await connection.aclose()
