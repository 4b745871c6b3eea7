"""The single broker as its own controller, for the controller APIs its admin clients use outside a
ZooKeeper cluster (Kafka 4's KRaft controller answers them): ListPartitionReassignments and
AlterPartitionReassignments, which kafka-reassign-partitions sends before it moves replicas
between log dirs (AlterReplicaLogDirs), and ElectLeaders (kafka-leader-election). Every partition
has one replica, this broker, so no reassignment is ever under way, and the only valid target is
this broker alone, which changes nothing (so AlterPartitionReassignments v1's
AllowReplicationFactorChange, the call's second argument, never changes an answer); and every
partition is led by its preferred replica, so no election is ever needed. Validation and messages
as Kafka's ReplicationControlManager.alterPartitionReassignment and electLeaders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...wire.errors import ErrorCode

if TYPE_CHECKING:
    from ...coordinator.controller.kafka_controller import KafkaController
    from .cache import TopicInfo

TopicPartition = tuple[str, int]
# ElectLeaders' election types (Kafka's ElectionType).
PREFERRED, UNCLEAN = 0, 1
# Per topic, (partition, error code, error message) in the order asked.
ElectionResults = list[tuple[str, list[tuple[int, int, str | None]]]]


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

    def elect_leaders(self, named: list[tuple[str, list[int]]] | None, election_type: int
                      ) -> tuple[int, ElectionResults]:
        """ElectLeaders as Kafka's KRaft controller answers it (QuorumController.electLeaders,
        ReplicationControlManager.electLeaders): (the request's error, the results per topic).
        Named partitions are answered each, in the order asked, repeats included; none named is
        every topic, each listed, without its partitions (ELECTION_NOT_NEEDED is left out then).
        Preferred and unclean alike need no election here: every partition's one replica, its
        preferred one, leads it. An empty list is answered before the election type is read; an
        unknown type is INVALID_REQUEST for the request and for every partition named."""
        if named is not None and not named:
            return ErrorCode.NONE, []
        if election_type not in (PREFERRED, UNCLEAN):
            message = f"Unknown election type {election_type}"
            return ErrorCode.INVALID_REQUEST, [
                (topic, [(p, ErrorCode.INVALID_REQUEST, message) for p in partitions]) for topic, partitions in named or []]
        topics = self._topics()
        if named is None:
            return ErrorCode.NONE, [(topic, []) for topic in topics]
        return ErrorCode.NONE, [(topic, [(p, *self._elect(topics, topic, p)) for p in partitions])
                               for topic, partitions in named]

    @staticmethod
    def _elect(topics: Mapping[str, TopicInfo], topic: str, index: int) -> tuple[int, str | None]:
        found = topics.get(topic)
        if found is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
        if not 0 <= index < found.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{index}"
        return ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.ELECTION_NOT_NEEDED.message
