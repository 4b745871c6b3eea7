"""The metadata cache of a broker in a ZooKeeper cluster (Kafka's ZkMetadataCache): what the
controller last told this broker in UpdateMetadata. Partition states (leader, leader epoch, ISR,
replicas, offline replicas), topic ids, the live brokers with their endpoints per listener and racks,
and the controller's id.

It reads as a `MetadataCache` (server/metadata/image.py) for topics; what UpdateMetadata does not carry
comes from ZooKeeper: dynamic broker configs, ACLs, SCRAM credentials and client quotas as
`shared` (server/zookeeper/shared_metadata.py) keeps them.

Kafka's rules, kept here:
- an update carries the live brokers in full, and partition states only for what changed (a partial
  update): the states are merged into the previous ones; a partition whose leader is -2
  (LEADER_DURING_DELETE) is removed, and a topic with no partition left goes with its id;
- a request from a controller older than the latest one seen (its epoch lower) is refused with
  STALE_CONTROLLER_EPOCH (Kafka's ReplicaManager.maybeUpdateMetadataCache), and changes nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from ...wire.errors import ErrorCode
from ..metadata.cache import AliveBroker, BrokerInfo, PartitionMetadata, TopicInfo, colliding_topic
from ..metadata.image import MetadataStore

if TYPE_CHECKING:
    from .shared_metadata import ZkSharedMetadata

log = logging.getLogger("samsa.state.change")
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LEADER_DURING_DELETE
NO_LEADER_ID = -1
ZERO_UUID = uuid.UUID(int=0)


class StaleControllerEpoch(Exception):
    """Kafka's ControllerMovedException: answered with STALE_CONTROLLER_EPOCH."""

    error_code = ErrorCode.STALE_CONTROLLER_EPOCH


@dataclass(frozen=True)
class PartitionState:
    """One partition as UpdateMetadata states it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0


class ZkMetadataCache:
    """What the controller said; `update_metadata` replaces it (a snapshot read without locks: trio
    runs one task at a time and an update is applied in one step)."""

    def __init__(self, broker_id: int, local: MetadataStore,
                 shared: ZkSharedMetadata | None = None) -> None:
        self.broker_id = broker_id
        self._local = local
        self._shared = shared
        # The latest controller epoch seen (Kafka keeps it in ReplicaManager, shared with
        # LeaderAndIsr and StopReplica): 0 before any controller spoke (KafkaController.InitialControllerEpoch).
        self.controller_epoch = 0
        self.controller_id: int | None = None
        self.alive_brokers: dict[int, AliveBroker] = {}
        self.partition_states: dict[str, dict[int, PartitionState]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        # Topic config overrides as last read from /config/topics/<t> (Kafka's ZkConfigRepository
        # reads them on demand: DescribeConfigs does, server/handlers/describe_configs.py).
        self.topic_configs: dict[str, dict[str, str]] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self._updated = trio.Event()  # set, and replaced, by each update

    # --- the update ---------------------------------------------------------------------------

    def update_metadata(self, request, version: int, correlation_id: int = -1) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata request; the partitions it deleted. StaleControllerEpoch when the
        sending controller is older than the latest one seen."""
        if request.controller_epoch < self.controller_epoch:
            message = (f"Received update metadata request with correlation id {correlation_id} from an old "
                       f"controller {request.controller_id} with epoch {request.controller_epoch}. Latest known "
                       f"controller epoch is {self.controller_epoch}")
            log.warning("[Broker id=%d] %s", self.broker_id, message)
            raise StaleControllerEpoch(message)
        alive = {b.id: _alive_broker(b, version) for b in request.live_brokers}
        own = alive.get(self.broker_id)
        if own is not None and any(b.endpoints.keys() != own.endpoints.keys() for b in alive.values()):
            log.error("Listeners are not identical across brokers: %s", alive)
        topic_ids = dict(self.topic_ids)
        partition_states = {topic: dict(states) for topic, states in self.partition_states.items()}
        deleted: list[tuple[str, int]] = []
        updated = 0
        if version >= 7:  # topic ids; a zero id removes the one known
            for topic in request.topic_states:
                if topic.topic_id == ZERO_UUID:
                    topic_ids.pop(topic.topic_name, None)
                else:
                    topic_ids[topic.topic_name] = topic.topic_id
        for topic, state in _partition_states(request, version):
            if state.leader == LEADER_DURING_DELETE:
                states = partition_states.get(topic)
                if states is not None:
                    states.pop(state.partition_index, None)
                    if not states:
                        del partition_states[topic]
                        topic_ids.pop(topic, None)
                deleted.append((topic, state.partition_index))
            else:
                partition_states.setdefault(topic, {})[state.partition_index] = PartitionState(
                    state.leader, state.leader_epoch, tuple(state.isr), tuple(state.replicas),
                    tuple(state.offline_replicas) if version >= 4 else (), state.zk_version, state.controller_epoch)
                updated += 1
        if updated or deleted:
            log.info("[Broker id=%d] Add %d partitions and deleted %d partitions from metadata cache in response to "
                     "UpdateMetadata request sent by controller %d epoch %d with correlation id %d", self.broker_id,
                     updated, len(deleted), request.controller_id, request.controller_epoch, correlation_id)
        self.controller_id = request.controller_id if request.controller_id >= 0 else None
        self.alive_brokers = alive
        self.partition_states = partition_states
        self.topic_ids = topic_ids
        self.controller_epoch = request.controller_epoch
        self._index_topics()
        self._updated.set()
        self._updated = trio.Event()
        return deleted

    def take_controller_epoch(self, request, request_name: str, correlation_id: int) -> bool:
        """A LeaderAndIsr or StopReplica from a controller as new as the latest seen: its epoch becomes
        the latest (True); from an older one: False, logged as Kafka's ReplicaManager does."""
        if request.controller_epoch < self.controller_epoch:
            log.warning("[Broker id=%d] Ignoring %s request from controller %d with correlation id %d since its "
                        "controller epoch %d is old. Latest known controller epoch is %d", self.broker_id,
                        request_name, request.controller_id, correlation_id, request.controller_epoch,
                        self.controller_epoch)
            return False
        self.controller_epoch = request.controller_epoch
        return True

    async def wait_until(self, condition) -> None:
        """Until condition() holds after some update (Kafka's delayed topic operations)."""
        while not condition():
            await self._updated.wait()

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        """Wait up to timeout_ms for every partition of the topics (name -> partition count) to have a
        leader (Kafka's DelayedCreatePartitions); the topics still without."""
        with trio.move_on_after(timeout_ms / 1000):
            await self.wait_until(lambda: all(self.has_leaders(name, count) for name, count in topics.items()))
        return {name for name, count in topics.items() if not self.has_leaders(name, count)}

    def has_leaders(self, topic: str, partitions: int) -> bool:
        """Whether every partition of the topic has a leader (Kafka's DelayedCreatePartitions)."""
        states = self.partition_states.get(topic, {})
        return all(p in states and states[p].leader >= 0 for p in range(partitions))

    def _index_topics(self) -> None:
        topics = {}
        for name, states in self.partition_states.items():
            first = states.get(0) or next(iter(states.values()))
            topics[name] = TopicInfo(name, self.topic_ids.get(name, ZERO_UUID), len(states),
                                     self.topic_configs.get(name, {}), len(first.replicas))
        self.topic_configs = {name: configs for name, configs in self.topic_configs.items() if name in topics}
        self._topics = topics
        self._topics_by_id = {t.topic_id: t for t in topics.values() if t.topic_id != ZERO_UUID}

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """The overrides just read from ZooKeeper for a topic of the cache."""
        topic = self._topics.get(name)
        if topic is not None:
            self.topic_configs[name] = topic.configs = dict(configs)

    # --- reads: MetadataCache -----------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._local.cluster_id

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return self._topics

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicInfo]:
        return self._topics_by_id

    @property
    def broker_configs(self):
        return (self._local if self._shared is None else self._shared).broker_configs

    @property
    def acls(self):
        return (self._local if self._shared is None else self._shared).acls

    @property
    def scram_credentials(self):
        return (self._local if self._shared is None else self._shared).scram_credentials

    @property
    def client_quotas(self):
        return (self._local if self._shared is None else self._shared).client_quotas

    def collides(self, name: str) -> str | None:
        return colliding_topic(name, self._topics)

    # --- reads: the cluster -------------------------------------------------------------------

    def alive_nodes(self, listener: str) -> list[BrokerInfo]:
        """The live brokers reachable on `listener` (Kafka's getAliveBrokerNodes)."""
        return [node for b in self.alive_brokers.values() if (node := b.node(listener)) is not None]

    def controller_endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where the controller listens on `listener`, None if no controller is known or it is not
        alive there (Kafka's controller node provider in ZooKeeper mode)."""
        broker = None if self.controller_id is None else self.alive_brokers.get(self.controller_id)
        return None if broker is None else broker.endpoints.get(listener)

    def alive_node(self, node_id: int, listener: str) -> BrokerInfo | None:
        broker = self.alive_brokers.get(node_id)
        return None if broker is None else broker.node(listener)

    def partition_metadata(self, topic: str, listener: str, *, error_unavailable_endpoints: bool = False,
                           error_unavailable_listeners: bool = False) -> list[PartitionMetadata] | None:
        """Each partition of `topic` as a client on `listener` sees it, None for an unknown topic.
        Kafka's rules: no live leader reachable on the listener: LEADER_NOT_AVAILABLE (or
        LISTENER_NOT_FOUND, asked for, when the leader lives but lacks the listener), leader -1;
        replicas or ISR members filtered out for lacking the listener (asked for by Metadata v0):
        REPLICA_NOT_AVAILABLE."""
        states = self.partition_states.get(topic)
        if states is None:
            return None
        result = []
        for index, state in sorted(states.items()):
            replicas = self._filter(state.replicas, listener, error_unavailable_endpoints)
            isr = self._filter(state.isr, listener, error_unavailable_endpoints)
            leader = self.alive_node(state.leader, listener)
            if leader is None:
                error = (ErrorCode.LISTENER_NOT_FOUND
                         if state.leader in self.alive_brokers and error_unavailable_listeners
                         else ErrorCode.LEADER_NOT_AVAILABLE)
                leader_id = NO_LEADER_ID
            else:
                error = (ErrorCode.REPLICA_NOT_AVAILABLE
                         if len(replicas) < len(state.replicas) or len(isr) < len(state.isr) else ErrorCode.NONE)
                leader_id = leader.node_id
            result.append(PartitionMetadata(error, index, leader_id, state.leader_epoch, replicas, isr,
                                            list(state.offline_replicas)))
        return result

    def _filter(self, brokers: tuple[int, ...], listener: str, only_reachable: bool) -> list[int]:
        if not only_reachable:
            return list(brokers)
        return [b for b in brokers if self.alive_node(b, listener) is not None]


def _alive_broker(broker, version: int) -> AliveBroker:
    if version == 0:  # one PLAINTEXT endpoint, no rack
        return AliveBroker(broker.id, {"PLAINTEXT": (broker.v0_host, broker.v0_port)})
    endpoints = {}
    for ep in broker.endpoints:
        # Before v3 the listener is the security protocol's name (Kafka's ListenerName.forSecurityProtocol).
        listener = ep.listener if version >= 3 else _SECURITY_PROTOCOLS.get(ep.security_protocol, "PLAINTEXT")
        endpoints[listener] = (ep.host, ep.port)
    return AliveBroker(broker.id, endpoints, broker.rack if version >= 2 else None)


_SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _partition_states(request, version: int):
    """(topic, state) for each partition state the request carries: ungrouped before v5, grouped by
    topic from v5."""
    if version < 5:
        for state in request.ungrouped_partition_states:
            yield state.topic_name, state
        return
    for topic in request.topic_states:
        for state in topic.partition_states:
            yield topic.topic_name, state
