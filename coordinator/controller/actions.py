"""What the controller asks its shell to do, in order. Every ZooKeeper write is conditioned on the
controller epoch znode's version (Kafka's `checkControllerEpoch` in the same multi): a controller
that lost its election cannot write. The requests to brokers carry what Kafka 3.9's
ControllerBrokerRequestBatch puts in LeaderAndIsr, UpdateMetadata and StopReplica; the shell picks
each broker's version and encodes them."""

from __future__ import annotations

from dataclasses import dataclass

from ...wire.zk_data import BrokerRegistration, PartitionState, TopicAssignment

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class CreatePartitionStates:
    """Create /brokers/topics/<t>/partitions/<p>/state for each (its parents too where missing)."""

    states: dict[TopicPartition, PartitionState]
    controller_epoch_zk_version: int


@dataclass(frozen=True)
class UpdatePartitionStates:
    """Set each state znode, expecting version `state.zk_version - 1` (a partition epoch moved by
    someone else fails the write: the shell reports it back with `partition_state_conflict`)."""

    states: dict[TopicPartition, PartitionState]
    controller_epoch_zk_version: int


@dataclass(frozen=True)
class WriteTopicAssignment:
    """Set /brokers/topics/<t> (a reassignment's replicas, adding and removing)."""

    topic: str
    assignment: TopicAssignment
    controller_epoch_zk_version: int


@dataclass(frozen=True)
class RemoveZkReassignments:
    """Take these partitions out of /admin/reassign_partitions (the znode goes when none is left)."""

    partitions: tuple[TopicPartition, ...]
    controller_epoch_zk_version: int


@dataclass(frozen=True)
class DeleteTopic:
    """The last step of a deletion: /brokers/topics/<t> (with its partitions), /config/topics/<t>,
    then /admin/delete_topics/<t>."""

    topic: str
    controller_epoch_zk_version: int


@dataclass(frozen=True)
class DeleteTopicDeletionMarker:
    """/admin/delete_topics/<t> for a topic that does not exist."""

    topic: str
    controller_epoch_zk_version: int


@dataclass(frozen=True)
class LeaderAndIsrPartition:
    topic: str
    partition: int
    state: PartitionState  # its zk_version is the partition epoch
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    is_new: bool


@dataclass(frozen=True)
class SendLeaderAndIsr:
    broker_id: int
    broker_epoch: int
    controller_id: int
    controller_epoch: int
    partitions: tuple[LeaderAndIsrPartition, ...]
    topic_ids: dict[str, str]  # zk_data's url-safe base64 form
    live_leaders: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class UpdateMetadataPartition:
    topic: str
    partition: int
    state: PartitionState  # leader -2 (LEADER_DURING_DELETE): the partition is being deleted
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True)
class SendUpdateMetadata:
    broker_id: int
    broker_epoch: int
    controller_id: int
    controller_epoch: int
    partitions: tuple[UpdateMetadataPartition, ...]
    topic_ids: dict[str, str]
    live_brokers: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int  # -2 (EPOCH_DURING_DELETE) when the topic is being deleted
    delete: bool


@dataclass(frozen=True)
class SendStopReplica:
    broker_id: int
    broker_epoch: int
    controller_id: int
    controller_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


Action = (CreatePartitionStates | UpdatePartitionStates | WriteTopicAssignment | RemoveZkReassignments | DeleteTopic
          | DeleteTopicDeletionMarker | SendLeaderAndIsr | SendUpdateMetadata | SendStopReplica)
