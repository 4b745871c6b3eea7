"""What the controller knows of the cluster (Kafka 3.9's ControllerContext): the live brokers with
their epochs (the czxid of /brokers/ids/<id>), the topics with their ids and replica assignments,
each partition's leader, ISR and epochs as its state znode holds them (with the znode's version,
the partition epoch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...wire.zk_data import BrokerRegistration, PartitionState, ReplicaAssignment

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LiveBroker:
    registration: BrokerRegistration
    epoch: int  # the czxid of its /brokers/ids/<id>


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    # unclean.leader.election.enable of the topics that override it
    unclean_overrides: dict[str, bool] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # partitions being reassigned (their assignment has adding or removing replicas)
    reassigning: set[TopicPartition] = field(default_factory=set)
    # replicas (topic partition, broker) whose StopReplica with delete is not yet answered
    deletion_pending: set[tuple[TopicPartition, int]] = field(default_factory=set)
    # Kafka's replicasOnOfflineDirs: per live broker, its replicas that answered KAFKA_STORAGE_ERROR
    # (in a failed log directory); forgotten when the broker registers again or dies
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    @property
    def live_broker_ids(self) -> set[int]:
        """Kafka's liveBrokerIds: registered and not shutting down."""
        return set(self.live_brokers) - self.shutting_down

    def live_or_shutting_down(self) -> list[int]:
        return sorted(self.live_brokers)

    def is_replica_online(self, broker_id: int, include_shutting_down: bool = False,
                          tp: TopicPartition | None = None) -> bool:
        """The broker is alive (and not shutting down, unless included); with `tp`, its replica of
        that partition is not in a failed log directory either."""
        return (broker_id in self.live_brokers and (include_shutting_down or broker_id not in self.shutting_down)
                and (tp is None or tp not in self.replicas_on_offline_dirs.get(broker_id, ())))

    def online_brokers_for(self, tp: TopicPartition) -> set[int]:
        """The live brokers (not shutting down) whose replica of `tp` is not in a failed log dir."""
        return {b for b in self.live_broker_ids if tp not in self.replicas_on_offline_dirs.get(b, ())}

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments[tp].replicas

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def topics(self) -> set[str]:
        return {tp[0] for tp in self.assignments}

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if broker_id in a.replicas)

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            del self.assignments[tp]
            self.states.pop(tp, None)
        self.topic_ids.pop(topic, None)
        self.unclean_overrides.pop(topic, None)
        self.topics_to_delete.discard(topic)
        self.reassigning = {tp for tp in self.reassigning if tp[0] != topic}
        self.deletion_pending = {(tp, b) for tp, b in self.deletion_pending if tp[0] != topic}
