"""How the leader of a partition tells the controller its new ISR in a ZooKeeper cluster (Kafka's
DefaultAlterPartitionManager). Kafka 3.9's ZooKeeper-mode broker sends AlterPartition to the
controller from inter.broker.protocol.version 2.7-IV2 on (3.9 is the default); the controller writes
the partition's state znode (its version is the partition epoch) and tells every broker with
UpdateMetadata. (Before 2.7-IV2 the leader wrote the znode itself and an /isr_change_notification;
Samsa does not implement that path.)

In a KRaft cluster (server/kraft/) the same requests go to the active controller, the leader of the
metadata log, which commits a PartitionChangeRecord.

The partitions' pending ISR changes (coordinator/partition_leader.py: at most one per partition)
wait here; one request at a time carries them all, each with its proposed ISR and the partition
epoch last confirmed. Each answer goes back to its partition (Kafka's submitAlterPartition
callback): taken (the ISR committed, the answer's partition epoch), or refused (rolled back, left
pending for the next LeaderAndIsr, or sent again).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Protocol

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...coordinator.partition_leader import IsrChange
from .replica_manager import RECOVERED
from ...wire.errors import ErrorCode
from ...wire.messages.alter_partition_request import AlterPartitionRequest, PartitionData, TopicData
from ...wire.messages.alter_partition_response import AlterPartitionResponse

if TYPE_CHECKING:
    from ..config.kafka_config import KafkaConfig
    from .replica_manager import Partition


class Registration(Protocol):
    """This broker's registration in the cluster: a request to the controller names both."""

    @property
    def broker_id(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...


class ControllerLocator(Protocol):
    def controller_endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where the controller listens on `listener`, None while none is known or reachable there."""

log = logging.getLogger("samsa.alter_partition")
# v2: topic ids and a plain ISR (v3 adds each member's broker epoch, which a ZooKeeper controller
# ignores; Kafka 4 no longer reads v0-1).
ALTER_PARTITION_VERSION = 2
RETRY_BACKOFF_S = 0.1


class AlterPartitionManager:
    def __init__(self, membership: Registration, cache: ControllerLocator, config: KafkaConfig) -> None:
        self._membership = membership
        self._cache = cache
        self._config = config
        self._pending: dict[tuple[str, int], tuple[Partition, IsrChange]] = {}
        self._submitted = trio.Event()

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """ReplicaManager.isr_change_listener: the leader proposes an ISR change."""
        self._pending[(partition.topic.name, partition.index)] = (partition, change)
        self._submitted.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        connection: BrokerConnection | None = None
        connected_to: tuple[str, int] | None = None
        try:
            while True:
                while not self._pending:
                    self._submitted = trio.Event()
                    await self._submitted.wait()
                request, sent = self._request()
                if request is None:
                    continue
                controller = self._cache.controller_endpoint(self._config.inter_broker_listener_name)
                if controller is None:
                    await trio.sleep(RETRY_BACKOFF_S)  # no controller known yet, or not reachable on the listener
                    continue
                try:
                    if connection is None or connected_to != controller:
                        if connection is not None:
                            await connection.aclose()
                        connection = None
                        connection = await BrokerConnection.connect(
                            *controller, f"broker-{self._membership.broker_id}-alter-partition-channel-manager",
                            self._config.get_int("request.timeout.ms"))
                        connected_to = controller
                    response = await connection.call(request, ALTER_PARTITION_VERSION)
                except BrokerUnreachable as e:
                    log.warning("AlterPartition to controller %s failed (%s); retrying", controller, e)
                    if connection is not None:
                        await connection.aclose()
                    connection = None
                    await trio.sleep(RETRY_BACKOFF_S)
                    continue
                if not self.handle_response(response, sent):
                    await trio.sleep(RETRY_BACKOFF_S)
        finally:
            if connection is not None:
                with trio.CancelScope(shield=True):
                    await connection.aclose()

    def _request(self) -> tuple[AlterPartitionRequest | None,
                                dict[tuple[uuid.UUID, int], tuple[Partition, IsrChange]]]:
        """The AlterPartition for the changes still pending at partitions this broker leads, and
        what it sent for each: (partition, change) by (topic id, partition index)."""
        topics: dict[uuid.UUID, TopicData] = {}
        sent: dict[tuple[uuid.UUID, int], tuple[Partition, IsrChange]] = {}
        for key, (partition, change) in list(self._pending.items()):
            leader_state = partition.leader_state
            if not partition.is_leader or leader_state is None or leader_state.pending is not change:
                del self._pending[key]  # a LeaderAndIsr replaced it
                continue
            topic_id = partition.topic.topic_id
            topic = topics.get(topic_id)
            if topic is None:
                topic = topics[topic_id] = TopicData(topic_id=topic_id, partitions=[])
            topic.partitions.append(PartitionData(
                partition_index=partition.index, leader_epoch=partition.leader_epoch, new_isr=list(change.isr),
                leader_recovery_state=RECOVERED, partition_epoch=partition.partition_epoch))
            sent[(topic_id, partition.index)] = (partition, change)
        if not topics:
            return None, sent
        request = AlterPartitionRequest(broker_id=self._membership.broker_id,
                                        broker_epoch=self._membership.broker_epoch, topics=list(topics.values()))
        return request, sent

    def handle_response(self, response: AlterPartitionResponse,
                        sent: dict[tuple[uuid.UUID, int], tuple[Partition, IsrChange]]) -> bool:
        """Take the controller's answer; False when it refused the whole request or a partition's
        change is to be sent again (after a backoff)."""
        if response.error_code != ErrorCode.NONE:
            log.warning("Controller refused AlterPartition: %s; retrying", ErrorCode(response.error_code).name)
            return False
        retried = False
        for topic in response.topics:
            for p in topic.partitions:
                entry = sent.get((topic.topic_id, p.partition_index))
                if entry is None:
                    continue
                partition, change = entry
                key = (partition.topic.name, partition.index)
                if p.error_code == ErrorCode.NONE:
                    partition.isr_change_committed(change, p.leader_epoch, tuple(p.isr), p.partition_epoch)
                    retry = False
                else:
                    retry = partition.isr_change_refused(change, p.error_code)
                if not retry and self._pending.get(key, (None, None))[1] is change:
                    del self._pending[key]
                retried |= retry
        return not retried
