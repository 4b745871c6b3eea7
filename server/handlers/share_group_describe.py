"""ShareGroupDescribe (key 77), v1: share groups (KIP-932) with their epochs, assignor (`simple`),
members and each member's assignment; groups of other types are GROUP_ID_NOT_FOUND ("Group g is not
a share group."). Follows KafkaApis.handleShareGroupDescribe and GroupMetadataManager.shareGroupDescribe:
DESCRIBE on each group, DESCRIBE on the topics its members are assigned. UNSUPPORTED_VERSION while share.version is 0
(server/features.py).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..security.authorizer import DESCRIBE, GROUP, TOPIC
from . import handler

ShareGroupDescribeResponse = response_class(ApiKey.SHARE_GROUP_DESCRIBE)
DescribedGroup = ShareGroupDescribeResponse.DescribedGroup


@handler(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, feature=SHARE_GROUPS)
async def handle(ctx, request):
    allowed = ctx.authorized(DESCRIBE, GROUP, request.group_ids)
    groups = []
    for group_id in request.group_ids:
        if group_id not in allowed:
            groups.append(DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        [group] = ctx.services.groups.coordinator_for(group_id).share.describe([group_id])
        topics = {tp.topic_name for m in group.members for tp in m.assignment.topic_partitions}
        if group.error_code == ErrorCode.NONE and len(ctx.authorized(DESCRIBE, TOPIC, topics)) < len(topics):
            group = DescribedGroup(group_id=group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message="The described group uses topics that the client is not "
                                                 "authorized to describe.")
        elif group.error_code == ErrorCode.NONE and request.include_authorized_operations:
            group.authorized_operations = ctx.authorized_operations(GROUP, group_id)
        groups.append(group)
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)
