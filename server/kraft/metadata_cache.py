"""The metadata cache of a KRaft cluster's broker (Kafka's KRaftMetadataCache): the metadata log as
replayed from the controller quorum (storage/cluster_metadata.py's MetadataReplay), published after
each committed batch. Topics with their partitions' leaders, ISRs and epochs, the registered brokers
(alive: registered and unfenced), KIP-966's eligible leader replicas, and the records a single broker keeps in its image (configs, ACLs,
SCRAM credentials, client quotas), converted by the same code that imports Kafka's metadata log
(server/metadata/image.py's MetadataImage.from_cluster_metadata).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import trio

from ...storage.cluster_metadata import ClusterMetadata, KraftPartition
from ...wire.errors import ErrorCode
from ..metadata.cache import AliveBroker, BrokerInfo, PartitionMetadata, TopicInfo, colliding_topic
from ..metadata.image import MetadataImage
from ..replication.replica_manager import PartitionState

NO_LEADER_ID = -1


class KraftMetadataCache:
    def __init__(self, broker_id: int, cluster_id: str) -> None:
        self.broker_id = broker_id
        self._cluster_id = cluster_id
        self._records = MetadataImage(Path("/nonexistent"), cluster_id)  # never saved: the controller's
        self.alive_brokers: dict[int, AliveBroker] = {}
        # topic -> partition -> state, as replica_manager.PartitionState (what the publisher hands the
        # replica manager, and what the transaction markers' channel reads: leader).
        self.partition_states: dict[str, dict[int, PartitionState]] = {}
        # topic -> partition -> (eligible leader replicas, last known ELR), where either is not empty
        self._elrs: dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        # (topic, partition) -> the directory its registration assigns this broker's replica (UNASSIGNED
        # when the controller left it to the broker), where the registration names directories.
        self.local_directories: dict[tuple[str, int], uuid.UUID] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self.offset = -1  # the last metadata offset published
        self._updated = trio.Event()
        # Updated in place: the quota managers hold this mapping (server/throttle.py).
        self._client_quotas: dict = {}

    # --- the update ---------------------------------------------------------------------------

    def publish(self, image: ClusterMetadata, offset: int) -> None:
        """The replayed metadata, committed up to `offset`, is now what the broker serves."""
        self._records = MetadataImage.from_cluster_metadata(Path("/nonexistent"), self._cluster_id, image)
        if self._records.client_quotas != self._client_quotas:
            self._client_quotas.clear()
            self._client_quotas.update(self._records.client_quotas)
        self.alive_brokers = {
            b.broker_id: AliveBroker(b.broker_id, {name: (host, port) for name, (host, port, _) in b.endpoints.items()},
                                     b.rack)
            for b in image.brokers.values() if not b.fenced}
        states: dict[str, dict[int, PartitionState]] = {}
        for topic in image.topics.values():
            states[topic.name] = {index: _state(topic.name, topic.topic_id, index, p)
                                  for index, p in topic.partitions.items()}
        self.partition_states = states
        self._elrs = {topic.name: elrs for topic in image.topics.values()
                      if (elrs := {index: (p.elr, p.last_known_elr) for index, p in topic.partitions.items()
                                   if p.elr or p.last_known_elr})}
        broker_id = self.broker_id
        self.local_directories = {(topic.name, index): p.directories[p.replicas.index(broker_id)]
                                  for topic in image.topics.values() for index, p in topic.partitions.items()
                                  if broker_id in p.replicas and len(p.directories) == len(p.replicas)}
        self._topics = {t.name: TopicInfo(t.name, t.topic_id, len(t.partitions), dict(t.configs),
                                          len(t.partitions[0].replicas) if 0 in t.partitions else 1)
                        for t in image.topics.values()}
        self._topics_by_id = {t.topic_id: t for t in self._topics.values()}
        self.offset = offset
        self._updated.set()
        self._updated = trio.Event()

    async def wait_until(self, condition) -> None:
        """Until condition() holds after some publication."""
        while not condition():
            await self._updated.wait()

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        """Wait up to timeout_ms for every partition of the topics to have a leader; those still without."""
        def has_leaders(name: str, count: int) -> bool:
            states = self.partition_states.get(name, {})
            return all(p in states and states[p].leader >= 0 for p in range(count))

        with trio.move_on_after(timeout_ms / 1000):
            while not all(has_leaders(name, count) for name, count in topics.items()):
                await self._updated.wait()
        return {name for name, count in topics.items() if not has_leaders(name, count)}

    # --- reads: MetadataView ------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return self._topics

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicInfo]:
        return self._topics_by_id

    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._records.broker_configs

    @property
    def client_metrics(self) -> Mapping[str, Mapping[str, str]]:
        return self._records.client_metrics

    @property
    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._records.group_configs

    @property
    def acls(self) -> list[dict[str, str]]:
        return self._records.acls

    @property
    def scram_credentials(self) -> Mapping[str, Mapping[str, dict]]:
        return self._records.scram_credentials

    @property
    def client_quotas(self):
        return self._client_quotas

    @property
    def delegation_tokens(self) -> Mapping[str, Mapping]:
        return self._records.delegation_tokens

    @property
    def features(self) -> Mapping[str, int] | None:
        return self._records.features

    def collides(self, name: str) -> str | None:
        return colliding_topic(name, self._topics)

    # --- reads: the cluster -------------------------------------------------------------------

    @property
    def controller_id(self) -> int | None:
        """What Metadata and DescribeCluster name as the controller: clients cannot reach a KRaft
        controller, so Kafka's brokers name an alive broker (KRaftMetadataCache.getRandomAliveBrokerId);
        Samsa names the lowest id, the same at every request."""
        return min(self.alive_brokers, default=None)

    def alive_nodes(self, listener: str) -> list[BrokerInfo]:
        return [node for _, b in sorted(self.alive_brokers.items()) if (node := b.node(listener)) is not None]

    def alive_node(self, node_id: int, listener: str) -> BrokerInfo | None:
        broker = self.alive_brokers.get(node_id)
        return None if broker is None else broker.node(listener)

    def partition_metadata(self, topic: str, listener: str, *, error_unavailable_endpoints: bool = False,
                           error_unavailable_listeners: bool = False) -> list[PartitionMetadata] | None:
        """Kafka's KRaftMetadataCache.partitionMetadata: a leader not alive on the listener gives
        LEADER_NOT_AVAILABLE (LISTENER_NOT_FOUND when asked for and the leader lacks the listener);
        replicas filtered for lacking the listener (Metadata v0): REPLICA_NOT_AVAILABLE. With the
        eligible leader replicas and last known ELR of the registration (DescribeTopicPartitions')."""
        states = self.partition_states.get(topic)
        if states is None:
            return None
        result = []
        elrs = self._elrs.get(topic, {})
        for index, state in sorted(states.items()):
            replicas = self._filter(state.replicas, listener, error_unavailable_endpoints)
            isr = self._filter(state.isr, listener, error_unavailable_endpoints)
            offline = [b for b in state.replicas if b not in self.alive_brokers]
            leader = self.alive_node(state.leader, listener)
            if leader is None:
                error = (ErrorCode.LISTENER_NOT_FOUND if state.leader in self.alive_brokers
                         and error_unavailable_listeners else ErrorCode.LEADER_NOT_AVAILABLE)
                leader_id = NO_LEADER_ID
            else:
                error = (ErrorCode.REPLICA_NOT_AVAILABLE
                         if len(replicas) < len(state.replicas) or len(isr) < len(state.isr) else ErrorCode.NONE)
                leader_id = leader.node_id
            elr, last_known_elr = elrs.get(index, ((), ()))
            result.append(PartitionMetadata(error, index, leader_id, state.leader_epoch, replicas, isr, offline,
                                            list(elr), list(last_known_elr)))
        return result

    def _filter(self, brokers: tuple[int, ...], listener: str, only_reachable: bool) -> list[int]:
        if not only_reachable:
            return list(brokers)
        return [b for b in brokers if self.alive_node(b, listener) is not None]


def _state(topic: str, topic_id: uuid.UUID, index: int, p: KraftPartition) -> PartitionState:
    return PartitionState(topic, index, p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.replicas, topic_id,
                          p.leader_recovery_state)
