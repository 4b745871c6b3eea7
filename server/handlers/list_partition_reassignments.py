"""ListPartitionReassignments (key 46), v0: the reassignments under way, from the controller of a
ZooKeeper cluster (Kafka 3.9's KafkaApis.handleListPartitionReassignmentsRequest,
KafkaController.processListPartitionReassignments); a single broker, its own controller, has none
(server/metadata/local_controller.py). The admin client sends it to the controller. DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); a
broker that is not the controller answers NOT_CONTROLLER. No topics named: every reassignment."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.messages.list_partition_reassignments_response import (OngoingPartitionReassignment,
                                                                    OngoingTopicReassignment)
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, DESCRIBE
from . import handler

ListPartitionReassignmentsResponse = response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, forwarded=True)
async def handle(ctx, request):
    if not ctx.authorize(DESCRIBE, CLUSTER):
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.services.controller
    partitions = None if request.topics is None else [
        (t.name, p) for t in request.topics for p in t.partition_indexes]
    answer = None if controller is None else await controller.call("list_reassignments", partitions)
    if answer is None:
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    (ongoing,) = answer
    by_topic: dict[str, OngoingTopicReassignment] = {}
    for (topic, partition), a in ongoing.items():
        by_topic.setdefault(topic, OngoingTopicReassignment(topic)).partitions.append(OngoingPartitionReassignment(
            partition, list(a.replicas), list(a.adding_replicas), list(a.removing_replicas)))
    return ListPartitionReassignmentsResponse(error_message=None, topics=list(by_topic.values()))
