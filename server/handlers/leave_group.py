"""LeaveGroup (key 13), v0-5: members leave a classic group (v3+: several at once, or static members
removed by group.instance.id, KIP-345). Follows KafkaApis.handleLeaveGroupRequest and
GroupMetadataManager.classicGroupLeave: READ on the group; answered by the group coordinator.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import GROUP, READ
from . import handler


@handler(ApiKey.LEAVE_GROUP, 0, 5)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return response_class(ApiKey.LEAVE_GROUP)(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await ctx.services.groups.submit(ctx, GroupCoordinator.leave_group, request.group_id, request)
