"""LeaderAndIsr (key 4), v0-7: the controller of a ZooKeeper cluster makes this broker the leader or
a follower of partitions (server/replication/replica_manager.py does it). Served in cluster mode only. Follows
Kafka 3.9's KafkaApis.handleLeaderAndIsrRequest and ReplicaManager.becomeLeaderOrFollower:
CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); a broker epoch older than
this broker's registration (v2+): STALE_BROKER_EPOCH; a controller epoch older than the latest seen
(one epoch, shared with UpdateMetadata and StopReplica): STALE_CONTROLLER_EPOCH. Those answer every
partition with the error; otherwise each partition gets its own (INCONSISTENT_TOPIC_ID,
STALE_CONTROLLER_EPOCH for a leader epoch not newer than the known one, UNKNOWN_TOPIC_OR_PARTITION
when this broker is not a replica, a storage error). A partition new to this broker gets its log,
with the topic's overrides read from ZooKeeper's /config/topics/<t>; a follower fetches from its
leader's endpoint on the inter-broker listener, as the metadata cache knows it.
A partition's `leader_recovery_state` (v6+) is kept; a leader elected uncleanly (RECOVERING) marks
itself RECOVERED, as Kafka 3.9's Partition.makeLeader. From a KRaft controller in migration
(`is_k_raft_controller`, v7) a leader epoch equal to the known one is taken too, as Kafka's broker
does. Kafka acts on the request `type` (FULL) only with `zookeeper.metadata.migration.enable`, to
find stray logs: Samsa does not take part in a migration, and logs the FULL request it ignores.
Deviation: group and transaction coordinators do not move with the leadership of
`__consumer_offsets` and `__transaction_state` (Kafka's onLeadershipChange).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import trio

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from ..metadata.cache import TopicInfo
from ..replication.replica_manager import ZERO_UUID, PartitionState
from ..control_plane import UNKNOWN_BROKER_EPOCH
from . import handler

log = logging.getLogger("samsa.state.change")
LeaderAndIsrResponse = response_class(ApiKey.LEADER_AND_ISR)
FULL = 2  # AbstractControlRequest.Type: UNKNOWN 0, INCREMENTAL 1, FULL 2
PartitionError = LeaderAndIsrResponse.LeaderAndIsrPartitionError
TopicError = LeaderAndIsrResponse.LeaderAndIsrTopicError


def partition_states(request, version: int) -> Iterator[PartitionState]:
    """The request's partition states: ungrouped before v2, grouped by topic from v2 (with the
    topic's id from v5)."""
    if version < 2:
        for s in request.ungrouped_partition_states:
            yield _state(s.topic_name, None, s)
        return
    for topic in request.topic_states:
        topic_id = topic.topic_id if version >= 5 else None
        for s in topic.partition_states:
            yield _state(topic.topic_name, topic_id, s)


def _state(topic: str, topic_id: uuid.UUID | None, s) -> PartitionState:
    return PartitionState(topic, s.partition_index, s.leader, s.leader_epoch, tuple(s.isr), s.partition_epoch,
                          tuple(s.replicas), topic_id, s.leader_recovery_state)


def leader_and_isr_response(states: list[PartitionState], errors: dict[tuple[str, int], int], version: int,
                            error_code: int = ErrorCode.NONE):
    """Kafka's response: each partition's error, by name before v5, grouped by topic id from v5."""
    response = LeaderAndIsrResponse(error_code=error_code)
    if version < 5:
        response.partition_errors = [PartitionError(topic_name=s.topic, partition_index=s.partition,
                                                    error_code=errors[(s.topic, s.partition)]) for s in states]
        return response
    topics: dict[uuid.UUID, Any] = {}  # LeaderAndIsrTopicError by topic id
    for s in states:
        topic_id = s.topic_id or ZERO_UUID
        topic = topics.get(topic_id)
        if topic is None:
            topic = topics[topic_id] = TopicError(topic_id=topic_id, partition_errors=[])
        topic.partition_errors.append(PartitionError(partition_index=s.partition,
                                                     error_code=errors[(s.topic, s.partition)]))
    response.topics = list(topics.values())
    return response


def refused(states: list[PartitionState], version: int, error_code: int):
    """Kafka's LeaderAndIsrRequest.getErrorResponse: the error at the top and for every partition."""
    return leader_and_isr_response(states, {(s.topic, s.partition): error_code for s in states}, version, error_code)


@handler(ApiKey.LEADER_AND_ISR, 0, 7, cluster_only=True)
async def handle(ctx, request):
    services = ctx.services
    version = ctx.api_version
    states = list(partition_states(request, version))
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return refused(states, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker_epoch = request.broker_epoch if version >= 2 else UNKNOWN_BROKER_EPOCH
    if services.control_plane.is_broker_epoch_stale(broker_epoch, "LeaderAndIsr", request):
        return refused(states, version, ErrorCode.STALE_BROKER_EPOCH)
    replica_manager, control_plane = services.replica_manager, services.control_plane
    async with replica_manager.state_change_lock:
        if not control_plane.take_controller_epoch(request, "LeaderAndIsr", ctx.correlation_id):
            return refused(states, version, ErrorCode.STALE_CONTROLLER_EPOCH)
        new_topics = await _new_topics(services, states)
        brokers = control_plane.replica_endpoints(services.config.inter_broker_listener_name)
        kraft_controller = version >= 7 and request.is_k_raft_controller
        if kraft_controller and request.type_ == FULL:
            log.warning("Ignoring the stray-replica check of a full LeaderAndIsr from KRaft controller %d: "
                        "Samsa does not take part in a ZooKeeper to KRaft migration", request.controller_id)
        if new_topics:  # their logs made off the event loop (disk I/O): produces and fetches go on meanwhile
            await trio.to_thread.run_sync(replica_manager.create_missing_logs, states, new_topics,
                                          limiter=services.disk_limiter)
        errors = replica_manager.become_leader_or_follower(states, brokers, new_topics,
                                                           same_epoch_accepted=kraft_controller)
    return leader_and_isr_response(states, errors, version)


async def _new_topics(services, states: list[PartitionState]) -> dict[str, TopicInfo]:
    """The topics of the partitions this broker does not host yet, with their overrides where the
    cluster keeps them (Kafka's LogManager reads them from ZooKeeper when it creates a log)."""
    replica_manager = services.replica_manager
    topics: dict[str, TopicInfo] = {}
    for s in states:
        if s.topic in topics or replica_manager.get(s.topic, s.partition) is not None:
            continue
        known = services.control_plane.known_topic(s.topic)
        configs = await services.control_plane.topic_configs(s.topic)
        partitions = max(p.partition for p in states if p.topic == s.topic) + 1
        topics[s.topic] = TopicInfo(s.topic, s.topic_id or ZERO_UUID,
                                    max(partitions, known.num_partitions if known else 0), configs, len(s.replicas))
    return topics
