"""The single broker as its own controller, for the controller APIs its admin clients use outside a
ZooKeeper cluster (Kafka 4's KRaft controller answers them): ListPartitionReassignments and
AlterPartitionReassignments, which kafka-reassign-partitions sends before it moves replicas
between log dirs (AlterReplicaLogDirs). Every partition has one replica, this broker, so no
reassignment is ever under way, and the only valid target is this broker alone, which changes
nothing (so AlterPartitionReassignments v1's AllowReplicationFactorChange, the call's second
argument, never changes an answer). Validation and messages as Kafka's
ReplicationControlManager.alterPartitionReassignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...wire.errors import ErrorCode

if TYPE_CHECKING:
    from ...coordinator.controller.kafka_controller import KafkaController
    from .cache import TopicInfo

TopicPartition = tuple[str, int]


class LocalController:
    # No KafkaController state machine: what only a cluster's controller does is refused.
    controller: KafkaController | None = None
    is_active = True

    def __init__(self, node_id: int, topics: Callable[[], Mapping[str, TopicInfo]]) -> None:
        self._node_id = node_id
        self._topics = topics

    async def call(self, kind: str, *args) -> Any:
        if kind == "list_reassignments":
            return ({},)
        if kind == "reassign":
            return ({tp: self._reassign(tp, target) for tp, target in args[0].items()},)
        return None

    def _reassign(self, tp: TopicPartition, target: tuple[int, ...] | None) -> tuple[int, str | None]:
        topic, index = tp
        found = self._topics().get(topic)
        if found is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
        if not 0 <= index < found.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
        if target is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None  # Kafka's ApiError drops a default message
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        previous = None
        for broker in sorted(target):
            if broker != self._node_id:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered.")
            if broker == previous:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes the broker {broker} more than once.")
            previous = broker
        return ErrorCode.NONE, None  # its replicas already: nothing to move
