"""DescribeShareGroupOffsets (key 90), v0-1: each share partition's start offset and leader epoch,
and from v1 its lag (KIP-1226), from the share coordinator's state summaries
(GroupService.describe_share_group_offsets). Follows KafkaApis.handleDescribeShareGroupOffsetsRequest:
DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED); topics named but not describable are answered
TOPIC_AUTHORIZATION_FAILED after the others, and with all topics asked for (null) the group's
share partitions of topics not describable are left out. UNSUPPORTED_VERSION while share.version is 0
(server/features.py).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..security.authorizer import DESCRIBE, GROUP, TOPIC
from ..share.partition_metadata_client import PartitionMetadataClient
from . import handler

DescribeShareGroupOffsetsResponse = response_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition


@handler(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, feature=SHARE_GROUPS)
async def handle(ctx, request):
    end_offsets = PartitionMetadataClient(ctx.services)
    groups = []
    for group in request.groups:
        groups.append(await _describe(ctx, group, end_offsets))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


async def _describe(ctx, group, end_offsets: PartitionMetadataClient):
    service = ctx.services.groups
    if not ctx.authorize(DESCRIBE, GROUP, group.group_id):
        return Group(group_id=group.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if group.topics is None:
        described = await service.describe_share_group_offsets(ctx, group.group_id, None, end_offsets)
        if described.error_code == ErrorCode.NONE:
            allowed = ctx.authorized(DESCRIBE, TOPIC, [t.topic_name for t in described.topics])
            described.topics = [t for t in described.topics if t.topic_name in allowed]
        return described
    if not group.topics:
        return Group(group_id=group.group_id)
    allowed = ctx.authorized(DESCRIBE, TOPIC, [t.topic_name for t in group.topics])
    described = await service.describe_share_group_offsets(
        ctx, group.group_id, [(t.topic_name, list(t.partitions)) for t in group.topics if t.topic_name in allowed],
        end_offsets)
    if described.error_code != ErrorCode.NONE:
        return described
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    described.topics += [Topic(topic_name=t.topic_name, partitions=[
        Partition(partition_index=p, start_offset=-1, lag=-1, error_code=refused, error_message=refused.message)
        for p in t.partitions]) for t in group.topics if t.topic_name not in allowed]
    return described
