"""AlterPartitionReassignments (key 45), v0-1: start or cancel (null replicas) partition
reassignments at the controller of a ZooKeeper cluster (Kafka 3.9's
KafkaApis.handleAlterPartitionReassignmentsRequest, KafkaController.processApiPartitionReassignment,
in coordinator/controller/); a single broker is its own controller, whose one replica per
partition leaves nothing to reassign (server/metadata/local_controller.py). The admin client
sends it to the controller. ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); a broker that is not
the controller answers NOT_CONTROLLER. v1 (KIP-860, Kafka 4's; Kafka 3.9 served v0) may forbid
changing a partition's replication factor: such a target gets INVALID_REPLICATION_FACTOR, as Kafka 4's
controller answers (a single broker's only valid target, itself, never changes it), and the answer
repeats the flag."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.messages.alter_partition_reassignments_response import (ReassignablePartitionResponse,
                                                                     ReassignableTopicResponse)
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER, CLUSTER
from . import handler

AlterPartitionReassignmentsResponse = response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, forwarded=True)
async def handle(ctx, request):
    if not ctx.authorize(ALTER, CLUSTER):
        return AlterPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.services.controller
    reassignments = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
                     for t in request.topics for p in t.partitions}
    allow_change = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    answer = None if controller is None else await controller.call("reassign", reassignments, allow_change)
    if answer is None:
        return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    (results,) = answer
    by_topic: dict[str, ReassignableTopicResponse] = {}
    for (topic, partition), (error, message) in results.items():
        by_topic.setdefault(topic, ReassignableTopicResponse(topic)).partitions.append(
            ReassignablePartitionResponse(partition, error, message))
    return AlterPartitionReassignmentsResponse(error_message=None, allow_replication_factor_change=allow_change,
                                               responses=list(by_topic.values()))
