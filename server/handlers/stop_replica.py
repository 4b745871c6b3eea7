"""StopReplica (key 5), v0-4: the controller of a ZooKeeper cluster tells this broker to stop
replicating partitions, and with delete_partitions to delete them (a reassignment moved them away, or
their topic is being deleted). Served in cluster mode only. Follows Kafka 3.9's
KafkaApis.handleStopReplicaRequest and ReplicaManager.stopReplicas: CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise); a broker epoch older than this broker's registration
(v1+): STALE_BROKER_EPOCH; a controller epoch older than the latest seen (shared with UpdateMetadata
and LeaderAndIsr): STALE_CONTROLLER_EPOCH. Those answer with the error alone (no partitions), as
Kafka's does; otherwise each partition with its own error (FENCED_LEADER_EPOCH for an older leader
epoch than the partition's, from v3 where the request carries epochs).
Deviation: group and transaction coordinators keep the state of a deleted `__consumer_offsets` or
`__transaction_state` partition (Kafka's onResignation).
"""

from __future__ import annotations

import logging

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from ..replication.replica_manager import NO_EPOCH
from ..control_plane import UNKNOWN_BROKER_EPOCH
from . import handler

log = logging.getLogger("samsa.state.change")
StopReplicaResponse = response_class(ApiKey.STOP_REPLICA)
PartitionError = StopReplicaResponse.StopReplicaPartitionError


def stop_replica_states(request, version: int) -> dict[tuple[str, int], tuple[int, bool]]:
    """(leader epoch, delete) by partition: v0 lists partitions, v1-2 topics with their partitions,
    both with one delete flag and no epochs; v3+ each partition with its epoch and flag."""
    if version == 0:
        return {(p.topic_name, p.partition_index): (NO_EPOCH, request.delete_partitions)
                for p in request.ungrouped_partitions}
    if version < 3:
        return {(t.name, p): (NO_EPOCH, request.delete_partitions) for t in request.topics for p in t.partition_indexes}
    return {(t.topic_name, p.partition_index): (p.leader_epoch, p.delete_partition)
            for t in request.topic_states for p in t.partition_states}


@handler(ApiKey.STOP_REPLICA, 0, 4, cluster_only=True)
async def handle(ctx, request):
    services = ctx.services
    version = ctx.api_version
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return StopReplicaResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker_epoch = request.broker_epoch if version >= 1 else UNKNOWN_BROKER_EPOCH
    if services.control_plane.is_broker_epoch_stale(broker_epoch, "StopReplica", request):
        return StopReplicaResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    states = stop_replica_states(request, version)
    replica_manager, control_plane = services.replica_manager, services.control_plane
    async with replica_manager.state_change_lock:
        if not control_plane.take_controller_epoch(request, "StopReplica", ctx.correlation_id):
            return StopReplicaResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
        log.info("[Broker id=%d] Handling StopReplica request correlationId %d from controller %d for %d partitions",
                 services.node_id, ctx.correlation_id, request.controller_id, len(states))
        errors = replica_manager.stop_replicas(states)
    return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=[
        PartitionError(topic_name=topic, partition_index=index, error_code=code)
        for (topic, index), code in errors.items()])
