"""How the leader of a partition tells the controller its new ISR in a ZooKeeper cluster (Kafka's
DefaultAlterPartitionManager). Kafka 3.9's ZooKeeper-mode broker sends AlterPartition to the
controller from inter.broker.protocol.version 2.7-IV2 on (3.9 is the default); the controller writes
the partition's state znode (its version is the partition epoch) and tells every broker with
UpdateMetadata. (Before 2.7-IV2 the leader wrote the znode itself and an /isr_change_notification;
Samsa does not implement that path.)

The partitions whose ISR changed wait here; one request at a time carries them all, each with the
ISR it has now and the partition epoch it last had confirmed. The answer's partition epoch is
taken; a partition whose ISR changed again meanwhile is sent again with it.
Deviation: the leader applies a change at once (Kafka keeps it pending, counting the larger of the
two ISRs for the high watermark until the controller confirms); a change the controller refuses
stays applied here until its next LeaderAndIsr.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

import trio

from ..coordinator.partition_leader import IsrChange
from ..wire.errors import ErrorCode
from ..wire.protocol import ApiKey, request_class
from .inter_broker_client import BrokerConnection, BrokerUnreachable

if TYPE_CHECKING:
    from .config import KafkaConfig
    from .replica_manager import Partition
    from .zk_broker import ZkMembership
    from .zk_metadata_cache import ZkMetadataCache

log = logging.getLogger("samsa.alter_partition")
AlterPartitionRequest = request_class(ApiKey.ALTER_PARTITION)
# v2: topic ids and a plain ISR (v3 adds each member's broker epoch, which a ZooKeeper controller
# ignores; Kafka 4 no longer reads v0-1).
ALTER_PARTITION_VERSION = 2
RETRY_BACKOFF_S = 0.1
# Refusals that only a new LeaderAndIsr resolves: retrying would be refused again.
NOT_RETRIED = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
               ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INELIGIBLE_REPLICA, ErrorCode.NEW_LEADER_ELECTED,
               ErrorCode.INVALID_REQUEST}


class AlterPartitionManager:
    def __init__(self, membership: ZkMembership, cache: ZkMetadataCache, config: KafkaConfig) -> None:
        self._membership = membership
        self._cache = cache
        self._config = config
        self._pending: dict[tuple[str, int], Partition] = {}
        self._submitted = trio.Event()

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """ReplicaManager.isr_change_listener: the leader changed the partition's ISR."""
        self._pending[(partition.topic.name, partition.index)] = partition
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
                            self._config.get("request.timeout.ms"))
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

    def _request(self):
        """The AlterPartition for the pending partitions this broker still leads, and what it sent
        for each: (partition, leader epoch, ISR) by (topic id, partition index)."""
        topics: dict[uuid.UUID, AlterPartitionRequest.TopicData] = {}
        sent: dict[tuple[uuid.UUID, int], tuple[Partition, int, tuple[int, ...]]] = {}
        for key, partition in list(self._pending.items()):
            if not partition.is_leader or partition.leader_state is None:
                del self._pending[key]
                continue
            topic_id = partition.topic.topic_id
            topic = topics.get(topic_id)
            if topic is None:
                topic = topics[topic_id] = AlterPartitionRequest.TopicData(topic_id=topic_id, partitions=[])
            isr = tuple(partition.isr)
            topic.partitions.append(AlterPartitionRequest.PartitionData(
                partition_index=partition.index, leader_epoch=partition.leader_epoch, new_isr=list(isr),
                leader_recovery_state=0, partition_epoch=partition.partition_epoch))
            sent[(topic_id, partition.index)] = (partition, partition.leader_epoch, isr)
        if not topics:
            return None, sent
        request = AlterPartitionRequest(broker_id=self._membership.broker_id,
                                        broker_epoch=self._membership.broker_epoch, topics=list(topics.values()))
        return request, sent

    def handle_response(self, response, sent) -> bool:
        """Take the controller's answer; False when it refused the whole request (retried later)."""
        if response.error_code != ErrorCode.NONE:
            log.warning("Controller refused AlterPartition: %s; retrying", ErrorCode(response.error_code).name)
            return False
        for topic in response.topics:
            for p in topic.partitions:
                entry = sent.get((topic.topic_id, p.partition_index))
                if entry is None:
                    continue
                partition, leader_epoch, isr = entry
                key = (partition.topic.name, partition.index)
                if partition.leader_epoch != leader_epoch or not partition.is_leader:
                    self._pending.pop(key, None)  # a LeaderAndIsr came meanwhile: it decides now
                    continue
                if p.error_code == ErrorCode.NONE:
                    partition.partition_epoch = p.partition_epoch
                    log.info("[Partition %s] ISR %s committed by the controller, partition epoch %d",
                             partition.name, list(p.isr), p.partition_epoch)
                    if tuple(partition.isr) == isr:
                        self._pending.pop(key, None)
                elif p.error_code in NOT_RETRIED:
                    log.warning("[Partition %s] Controller refused the ISR %s: %s; waiting for its LeaderAndIsr",
                                partition.name, list(isr), ErrorCode(p.error_code).name)
                    self._pending.pop(key, None)
                else:
                    log.info("[Partition %s] AlterPartition failed with %s; retrying", partition.name,
                             ErrorCode(p.error_code).name)
        return True
