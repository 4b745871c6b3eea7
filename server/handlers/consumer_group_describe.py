"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 consumer groups with their epochs, assignor, members,
and each member's current and target assignment, and (v1, KIP-1099) its type: every member here uses
the consumer protocol; classic groups are not found here (DescribeGroups).
Follows KafkaApis.handleConsumerGroupDescribe and GroupMetadataManager.consumerGroupDescribe: DESCRIBE
on each group; UNSUPPORTED_VERSION when the consumer protocol is disabled.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, GROUP, TOPIC
from ..coordinators.consumer_groups import consumer_protocol_enabled
from ..features import CONSUMER_GROUPS
from . import handler

ConsumerGroupDescribeResponse = response_class(ApiKey.CONSUMER_GROUP_DESCRIBE)
DescribedGroup = ConsumerGroupDescribeResponse.DescribedGroup


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, feature=CONSUMER_GROUPS)
async def handle(ctx, request):
    if not consumer_protocol_enabled(ctx.services.config.get):
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            DescribedGroup(group_id=g, error_code=ErrorCode.UNSUPPORTED_VERSION) for g in request.group_ids])
    allowed = ctx.authorized(DESCRIBE, GROUP, request.group_ids)
    by_id = iter(ctx.services.groups.coordinator_for(g).consumer.describe([g])[0]
                 for g in request.group_ids if g in allowed)
    groups = []
    for group_id in request.group_ids:
        if group_id not in allowed:
            groups.append(DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        group = next(by_id)
        topics = {tp.topic_name for m in group.members for a in (m.assignment, m.target_assignment)
                  for tp in a.topic_partitions}
        if group.error_code == ErrorCode.NONE and len(ctx.authorized(DESCRIBE, TOPIC, topics)) < len(topics):
            group = DescribedGroup(group_id=group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message="The described group uses topics that the client is not "
                                                 "authorized to describe.")
        elif group.error_code == ErrorCode.NONE and request.include_authorized_operations:
            group.authorized_operations = ctx.authorized_operations(GROUP, group_id)
        groups.append(group)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
