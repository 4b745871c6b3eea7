"""The controller's connections to the brokers (Kafka 3.9's ControllerChannelManager): one sender
per live broker, each with its own queue, sending the controller's LeaderAndIsr, UpdateMetadata and
StopReplica in order over the broker's `inter.broker.listener.name` endpoint. Each request goes at
the highest version both sides know (ApiVersions when connecting; up to what Kafka 3.9 sends with
IBP 3.9: LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4). A request that fails is sent again
on a new connection, until it is answered or the broker is removed (it went away, or this broker
stopped being controller)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...coordinator.controller.actions import SendLeaderAndIsr, SendStopReplica, SendUpdateMetadata
from ...wire.messages.leader_and_isr_request import (LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState,
                                                    LeaderAndIsrTopicState)
from ...wire.messages.stop_replica_request import StopReplicaPartitionState, StopReplicaTopicState
from ...wire.messages.update_metadata_request import (UpdateMetadataBroker, UpdateMetadataEndpoint,
                                                     UpdateMetadataPartitionState, UpdateMetadataTopicState)
from ...wire.protocol import ApiKey, request_class
from ...wire.zk_data import BrokerRegistration, topic_uuid

log = logging.getLogger("samsa.controller.channel")
RETRY_BACKOFF_S = 0.1  # Kafka's controller retries every 100 ms
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

LeaderAndIsrRequest = request_class(ApiKey.LEADER_AND_ISR)
UpdateMetadataRequest = request_class(ApiKey.UPDATE_METADATA)
StopReplicaRequest = request_class(ApiKey.STOP_REPLICA)
ApiVersionsRequest = request_class(ApiKey.API_VERSIONS)
# (lowest version with topic-grouped partitions, which is all this controller writes; Kafka 3.9's highest)
VERSIONS = {ApiKey.LEADER_AND_ISR: (2, 7), ApiKey.UPDATE_METADATA: (5, 8), ApiKey.STOP_REPLICA: (3, 4)}

ControlAction = SendLeaderAndIsr | SendUpdateMetadata | SendStopReplica


class ControllerChannelManager:
    def __init__(self, nursery: trio.Nursery, listener_name: str, timeout_ms: int, client_id: str,
                 on_response: Callable[[ControlAction, object], None]) -> None:
        self._nursery = nursery
        self._listener_name = listener_name
        self._timeout_ms = timeout_ms
        self._client_id = client_id
        self._on_response = on_response
        self._senders: dict[int, _Sender] = {}

    def add_broker(self, registration: BrokerRegistration) -> None:
        if registration.broker_id in self._senders:
            return
        sender = _Sender(self, registration)
        self._senders[registration.broker_id] = sender
        self._nursery.start_soon(sender.run)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.cancel_scope.cancel()

    def brokers(self) -> set[int]:
        return set(self._senders)

    def send(self, action: ControlAction) -> None:
        sender = self._senders.get(action.broker_id)
        if sender is None:
            log.warning("No channel to broker %d: %s not sent", action.broker_id, type(action).__name__)
            return
        sender.queue_send.send_nowait(action)

    def close(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)


class _Sender:
    def __init__(self, manager: ControllerChannelManager, registration: BrokerRegistration) -> None:
        self.manager = manager
        self.registration = registration
        self.queue_send, self.queue = trio.open_memory_channel[ControlAction](math.inf)
        self.cancel_scope = trio.CancelScope()

    async def run(self) -> None:
        with self.cancel_scope:
            connection: BrokerConnection | None = None
            versions: dict[int, int] = {}
            try:
                async for action in self.queue:
                    failures = 0
                    while True:
                        try:
                            if connection is None:
                                connection, versions = await self._connect()
                            version = versions.get(_API_KEYS[type(action)])
                            if version is None:
                                log.error("Broker %d does not take %s at a version this controller writes: not sent",
                                          action.broker_id, type(action).__name__)
                                response = None
                                break
                            response = await connection.call(_build(action, version), version)
                            break
                        except BrokerUnreachable as e:
                            failures += 1
                            # Once per request: a broker starting or gone fails every 100 ms.
                            log.log(logging.WARNING if failures == 1 else logging.DEBUG,
                                    "Controller's %s to broker %d failed (%s); retrying", type(action).__name__,
                                    action.broker_id, e)
                            if connection is not None:
                                await connection.aclose()
                                connection = None
                            await trio.sleep(RETRY_BACKOFF_S)
                    if response is not None:
                        self.manager._on_response(action, response)
            finally:
                if connection is not None:
                    with trio.CancelScope(shield=True):
                        await connection.aclose()

    async def _connect(self) -> tuple[BrokerConnection, dict[int, int]]:
        endpoint = self.registration.endpoint(self.manager._listener_name)
        if endpoint is None:
            raise BrokerUnreachable(f"broker {self.registration.broker_id} has no {self.manager._listener_name} "
                                    "listener")
        connection = await BrokerConnection.connect(endpoint.host or "localhost", endpoint.port,
                                                    self.manager._client_id, self.manager._timeout_ms)
        try:
            answer = await connection.call(ApiVersionsRequest(), 0)
        except BrokerUnreachable:
            await connection.aclose()
            raise
        theirs = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        versions: dict[int, int] = {}
        for api_key, (lowest, highest) in VERSIONS.items():
            if api_key in theirs and theirs[api_key][1] >= lowest:
                versions[api_key] = min(highest, theirs[api_key][1])
        return connection, versions


_API_KEYS = {SendLeaderAndIsr: ApiKey.LEADER_AND_ISR, SendUpdateMetadata: ApiKey.UPDATE_METADATA,
             SendStopReplica: ApiKey.STOP_REPLICA}


def _build(action: ControlAction, version: int):
    if isinstance(action, SendLeaderAndIsr):
        return _leader_and_isr(action)
    if isinstance(action, SendUpdateMetadata):
        return _update_metadata(action)
    return _stop_replica(action)


def _leader_and_isr(a: SendLeaderAndIsr):
    topics: dict[str, LeaderAndIsrTopicState] = {}
    for p in a.partitions:
        topic = topics.setdefault(p.topic, LeaderAndIsrTopicState(p.topic, topic_uuid(a.topic_ids.get(p.topic))))
        topic.partition_states.append(LeaderAndIsrPartitionState(
            p.topic, p.partition, p.state.controller_epoch, p.state.leader, p.state.leader_epoch, list(p.state.isr),
            p.state.zk_version, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas), p.is_new,
            p.state.leader_recovery_state))
    leaders = []
    for r in a.live_leaders:
        endpoint = r.endpoints[0]
        leaders.append(LeaderAndIsrLiveLeader(r.broker_id, endpoint.host or "", endpoint.port))
    return LeaderAndIsrRequest(controller_id=a.controller_id, controller_epoch=a.controller_epoch,
                               broker_epoch=a.broker_epoch, topic_states=list(topics.values()), live_leaders=leaders)


def _update_metadata(a: SendUpdateMetadata):
    topics: dict[str, UpdateMetadataTopicState] = {}
    for p in a.partitions:
        topic = topics.setdefault(p.topic, UpdateMetadataTopicState(p.topic, topic_uuid(a.topic_ids.get(p.topic))))
        topic.partition_states.append(UpdateMetadataPartitionState(
            p.topic, p.partition, p.state.controller_epoch, p.state.leader, p.state.leader_epoch, list(p.state.isr),
            p.state.zk_version, list(p.replicas), list(p.offline_replicas)))
    brokers = [UpdateMetadataBroker(
        r.broker_id, endpoints=[UpdateMetadataEndpoint(e.port, e.host or "", e.listener_name,
                                                       SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
                                for e in r.endpoints], rack=r.rack) for r in a.live_brokers]
    return UpdateMetadataRequest(controller_id=a.controller_id, controller_epoch=a.controller_epoch,
                                 broker_epoch=a.broker_epoch, topic_states=list(topics.values()), live_brokers=brokers)


def _stop_replica(a: SendStopReplica):
    topics: dict[str, StopReplicaTopicState] = {}
    for p in a.partitions:
        topics.setdefault(p.topic, StopReplicaTopicState(p.topic)).partition_states.append(
            StopReplicaPartitionState(p.partition, p.leader_epoch, p.delete))
    return StopReplicaRequest(controller_id=a.controller_id, controller_epoch=a.controller_epoch,
                              broker_epoch=a.broker_epoch, topic_states=list(topics.values()))
