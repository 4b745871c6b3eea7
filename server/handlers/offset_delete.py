"""OffsetDelete (key 47), v0: delete a group's offsets for some partitions; refused for topics its
members consume (GROUP_SUBSCRIBED_TO_TOPIC). Follows KafkaApis.handleOffsetDeleteRequest and
GroupMetadataManager: DELETE on the group, READ on each topic; unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DELETE, GROUP, READ, TOPIC
from . import handler
from .offset_commit import errors_by_partition, split_known

OffsetDeleteResponse = response_class(ApiKey.OFFSET_DELETE)


@handler(ApiKey.OFFSET_DELETE, 0, 0)
async def handle(ctx, request):
    if not ctx.authorize(DELETE, GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    readable = ctx.authorized(READ, TOPIC, [t.name for t in request.topics])
    known, _ = split_known(ctx, request, readable=readable)
    response = await ctx.services.groups.submit(ctx, GroupCoordinator.offset_delete, known.group_id, known)
    if response.error_code != ErrorCode.NONE:
        return response
    errors = errors_by_partition(response.topics)
    errors.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   for t in request.topics if t.name not in readable for p in t.partitions})
    Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
    Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition
    response.topics = [Topic(name=t.name, partitions=[Partition(
        partition_index=p.partition_index,
        error_code=errors.get((t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        for p in t.partitions]) for t in request.topics]
    return response
