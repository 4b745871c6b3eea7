"""What each committed batch of the metadata log changes on this broker (Kafka's
BrokerMetadataPublisher): the metadata cache handlers read, the finalized feature levels, the ACLs
of the authorizer, client quotas, the topics the group coordinators see, and the partitions this
broker hosts: it leads or follows each partition of which it is a replica as the partition's
registration says (the replica manager's become_leader_or_follower, as a ZooKeeper cluster's
LeaderAndIsr drives it), and stops and deletes the replicas of deleted topics and of partitions
moved away from it. A replica whose log is in another directory than its registration names goes
to the AssignmentsManager (Kafka's ReplicaManager.maybeUpdateTopicAssignment), which tells the
controller.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path

from ...storage.cluster_metadata import MetadataReplay
from ..features import BrokerFeatures
from ..replication.replica_manager import EPOCH_DURING_DELETE, PartitionState, ReplicaManager
from ..security.authorizer import StandardAuthorizer, AclBinding
from ..throttle import BrokerQuotas
from .assignments import AssignmentsManager
from .metadata_cache import KraftMetadataCache

log = logging.getLogger("samsa.kraft.publisher")


class BrokerMetadataPublisher:
    def __init__(self, node_id: int, cache: KraftMetadataCache, replicas: ReplicaManager, features: BrokerFeatures,
                 authorizer: StandardAuthorizer | None, quotas: BrokerQuotas, inter_broker_listener: str,
                 on_published: Callable[[int], None], assignments: AssignmentsManager | None = None,
                 directory_id: Callable[[Path], uuid.UUID | None] = lambda _: None) -> None:
        self._node_id = node_id
        self._cache = cache
        self._replicas = replicas
        self._features = features
        self._authorizer = authorizer
        self._quotas = quotas
        self._listener = inter_broker_listener
        self._on_published = on_published  # offset -> None (the lifecycle's metadata offset)
        self._assignments = assignments
        self._directory_id = directory_id  # a log dir's directory.id
        self._hosted: dict[tuple[str, int], PartitionState] = {}  # what was published of this broker's replicas
        self._acls: list[dict[str, str]] | None = None
        self._topic_layout: dict[str, tuple[uuid.UUID, int]] = {}  # name -> (topic id, partitions) as last published

    def publish(self, replay: MetadataReplay, offset: int) -> None:
        cache = self._cache
        cache.publish(replay.image, offset)
        features = dict(cache.features or {})
        levels = {name: level for name, level in features.items() if name in self._features.supported}
        if levels != {name: level for name, level in self._features.finalized.items() if level}:
            self._features.finalize(levels, offset)
        if self._authorizer is not None and cache.acls != self._acls:
            self._acls = list(cache.acls)
            self._authorizer.set_acls([AclBinding.from_json(acl) for acl in self._acls])
        self._quotas.refresh()
        self._publish_replicas()
        # Topics created, deleted or grown anywhere in the cluster (not only those hosted here): the
        # group coordinators' consumer groups subscribed to them rebalance (Kafka's GroupCoordinator
        # onNewMetadataImage), as the replica manager signals a single broker's own changes.
        layout = {name: (topic.topic_id, topic.num_partitions) for name, topic in cache.topics.items()}
        if layout != self._topic_layout:
            self._topic_layout = layout
            self._replicas.on_topics_changed()
        self._on_published(offset)

    def _publish_replicas(self) -> None:
        ours = {(topic, index): state for topic, states in self._cache.partition_states.items()
                for index, state in states.items() if self._node_id in state.replicas}
        gone = {key: (EPOCH_DURING_DELETE, True) for key in self._hosted if key not in ours}
        if gone:
            log.info("[Broker id=%d] Deleting the replicas of %s: no longer assigned here", self._node_id,
                     ", ".join(f"{t}-{p}" for t, p in sorted(gone)))
            self._replicas.stop_replicas(gone)
        updated = [state for key, state in ours.items() if self._hosted.get(key) != state]
        changed = [state for state in updated if not self._known_here(state)]
        self._hosted = ours
        if not changed:
            self._maybe_update_assignments(updated)
            return
        brokers = {node_id: endpoint for node_id, broker in self._cache.alive_brokers.items()
                   if (endpoint := broker.endpoints.get(self._listener)) is not None}
        new_topics = {s.topic: self._cache.topics[s.topic] for s in changed if self._replicas.get(s.topic, s.partition) is None}
        errors = self._replicas.become_leader_or_follower(changed, brokers, new_topics, same_epoch_accepted=True)
        # (An ISR this broker's own AlterPartition changed comes back here too; _known_here skips it.)
        for (topic, index), code in errors.items():
            if code:
                log.warning("[Broker id=%d] %s-%d: cannot take its leadership as the metadata says (error %d)",
                            self._node_id, topic, index, code)
        self._maybe_update_assignments(updated)

    def _maybe_update_assignments(self, states: list[PartitionState]) -> None:
        """Kafka's maybeUpdateTopicAssignment for each replica the change touched: its log's
        directory, where it is not the one the registration names."""
        if self._assignments is None:
            return
        for state in states:
            registered = self._cache.local_directories.get((state.topic, state.partition))
            partition = self._replicas.get(state.topic, state.partition)
            if registered is None or state.topic_id is None or partition is None or partition.is_offline:
                continue
            log_ = partition.opened_log
            directory = None if log_ is None else self._directory_id(log_.dir.parent)
            if directory is not None and directory != registered:
                self._assignments.on_assignment(state.topic_id, state.partition, directory)

    def _known_here(self, state: PartitionState) -> bool:
        """An ISR change this broker, as the leader, already took from the controller's AlterPartition
        answer (same leader epoch, partition epoch not newer): leading it again would start over
        what the leader tracks of its followers."""
        partition = self._replicas.get(state.topic, state.partition)
        return (partition is not None and partition.is_leader and state.leader == self._node_id
                and partition.leader_epoch == state.leader_epoch and partition.partition_epoch >= state.partition_epoch)
