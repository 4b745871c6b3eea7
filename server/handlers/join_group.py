"""JoinGroup (key 11), v0-9: join a classic group. Follows KafkaApis.handleJoinGroupRequest and
GroupMetadataManager.classicGroupJoin (Kafka 3.x's GroupCoordinator.handleJoinGroup): READ on the
group; the request is parked in the group coordinator (coordinator/classic_group_manager.py) until
the rebalance completes, like Kafka's DelayedJoin.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.classic_group_manager import UNKNOWN_MEMBER_ID, join_error
from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey
from ..security.authorizer import GROUP, READ
from ..throttle import not_request_time
from . import handler


@handler(ApiKey.JOIN_GROUP, 0, 9)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return join_error(ctx.services.groups.request_info(ctx), UNKNOWN_MEMBER_ID,
                          ErrorCode.GROUP_AUTHORIZATION_FAILED)
    with not_request_time(ctx):  # the wait for the rebalance
        return await ctx.services.groups.submit(ctx, GroupCoordinator.join_group, request.group_id, request)
