"""Admin changes a broker of a ZooKeeper cluster writes to ZooKeeper for the controller to carry
out, as Kafka 3.9's ZkAdminManager and AdminZkClient do. Topic creation and deletion are in their
handlers (server/handlers/create_topics.py, delete_topics.py); here, adding partitions
(AdminZkClient.createNewPartitionsAssignment, then createPartitionsWithAssignment), and writing a
new topic (createTopicWithAssignment).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, replace

from kazoo.exceptions import NodeExistsError

from ...wire import zk_data
from ...wire.errors import ErrorCode
from .replica_assignment import AdminOperationError, InvalidReplicationFactor, assign_replicas_to_brokers


class AdminError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class NewPartitions:
    existing: zk_data.TopicAssignment
    added: dict[int, list[int]]  # partition id -> replicas


async def plan_new_partitions(services, topic: str, count: int,
                              assignments: list[list[int]] | None) -> NewPartitions:
    """How `topic` grows to `count` partitions: the new ones as asked or by AdminUtils' assignment
    (starting at the first replica of partition 0, as Kafka does). AdminError with Kafka's code and
    message when refused."""
    client = services.zookeeper.client
    existing = await client.get_topic_assignment(topic)
    if existing is None or not existing.partitions:
        raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    old = len(existing.partitions)
    if count < old:
        raise AdminError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {old} partitions, which is higher than the requested {count}.")
    if count == old:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    brokers = sorted((b.node_id, b.rack) for b in services.zk_metadata.alive_brokers.values())
    broker_ids = [b for b, _ in brokers]
    partition0 = list(existing.partitions[0].replicas)
    if assignments is not None:
        unknown = sorted({b for replicas in assignments for b in replicas} - set(broker_ids))
        if unknown:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        if len(assignments) != count - old:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Increasing the number of partitions by {count - old} but {len(assignments)} "
                             f"assignments provided.")
        added = {old + i: list(replicas) for i, replicas in enumerate(assignments)}
        _validate_replica_assignment(added, len(partition0), broker_ids)
    else:
        start = next((i for i, b in enumerate(broker_ids) if b >= partition0[0]), 0)
        try:
            added = assign_replicas_to_brokers(brokers, count - old, len(partition0), start, old)
        except InvalidReplicationFactor as e:
            raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        except AdminOperationError as e:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)) from None
    return NewPartitions(existing, added)


async def add_partitions(services, topic: str, plan: NewPartitions) -> None:
    """AdminZkClient.createPartitionsWithAssignment: the topic's znode with the new partitions."""
    partitions = dict(plan.existing.partitions)
    partitions.update({p: zk_data.ReplicaAssignment(tuple(r)) for p, r in plan.added.items()})
    await services.zookeeper.client.set_topic_assignment(topic, replace(plan.existing, partitions=partitions))


def _validate_replica_assignment(assignment: dict[int, list[int]], replication_factor: int,
                                 available: list[int]) -> None:
    """AdminZkClient.validateReplicaAssignment."""
    for partition, replicas in sorted(assignment.items()):
        if not replicas:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} "
                             f"for partition id {partition}.")
        if not set(replicas) <= set(available):
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Some brokers specified for partition id {partition} are not available. Specified "
                             f"brokers: {', '.join(map(str, replicas))}, available brokers: "
                             f"{', '.join(map(str, available))}.")
    wrong = {p: len(r) for p, r in sorted(assignment.items()) if len(r) != replication_factor}
    if wrong:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} "
                         f"while partitions [{', '.join(map(str, wrong))}] have replication factors "
                         f"[{', '.join(map(str, wrong.values()))}], respectively.")


async def create_topic(services, name: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> uuid.UUID:
    """AdminZkClient.createTopicWithAssignment with a new topic id, for the controller to carry out;
    AdminError TOPIC_ALREADY_EXISTS when it exists."""
    topic_id = uuid.uuid4()
    try:
        await services.zookeeper.client.create_topic(
            name, base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("="), assignment, configs)
    except NodeExistsError:
        raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
    return topic_id
