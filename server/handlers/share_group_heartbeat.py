"""ShareGroupHeartbeat (key 76), v1: a member of a share group (KIP-932) joins, heartbeats or leaves
(coordinator/share_group_manager.py); answered once the group's records are in `__consumer_offsets`,
the share partitions it subscribed to initialized through the persister afterwards
(GroupService.share_group_heartbeat). Follows KafkaApis.handleShareGroupHeartbeat and
GroupCoordinatorService.shareGroupHeartbeat: READ on the group, DESCRIBE on the subscribed topics.
UNSUPPORTED_VERSION while share.version is 0
(server/features.py).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..security.authorizer import DESCRIBE, GROUP, READ, TOPIC
from . import handler

ShareGroupHeartbeatResponse = response_class(ApiKey.SHARE_GROUP_HEARTBEAT)


@handler(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1, feature=SHARE_GROUPS)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names or []
    if len(ctx.authorized(DESCRIBE, TOPIC, names)) < len(set(names)):
        # Kafka's answer: a member may not learn of topics it cannot describe.
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return await ctx.services.groups.share_group_heartbeat(ctx, request)
