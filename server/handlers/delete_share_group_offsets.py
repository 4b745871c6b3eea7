"""DeleteShareGroupOffsets (key 92), v0: an empty share group forgets the share partitions of some
topics (their state deleted through the persister, GroupService.delete_share_group_offsets).
Follows KafkaApis.handleDeleteShareGroupOffsetsRequest: DELETE on the group
(GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED, listed first); a
refusal of the group is the answer's error alone. UNSUPPORTED_VERSION while share.version is 0
(server/features.py).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..security.authorizer import DELETE, GROUP, READ, TOPIC
from . import handler

DeleteShareGroupOffsetsResponse = response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


@handler(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, feature=SHARE_GROUPS)
async def handle(ctx, request):
    if not ctx.authorize(DELETE, GROUP, request.group_id):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return DeleteShareGroupOffsetsResponse(error_code=refused, error_message=refused.message)
    readable = ctx.authorized(READ, TOPIC, [t.topic_name for t in request.topics])
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    topics = [Topic(topic_name=t.topic_name, error_code=refused, error_message=refused.message)
              for t in request.topics if t.topic_name not in readable]
    request.topics = [t for t in request.topics if t.topic_name in readable]
    response = await ctx.services.groups.delete_share_group_offsets(ctx, request)
    if response.error_code != ErrorCode.NONE:
        return DeleteShareGroupOffsetsResponse(error_code=response.error_code, error_message=response.error_message)
    return DeleteShareGroupOffsetsResponse(responses=topics + response.responses)
