"""Heartbeat (key 12), v0-4: keeps a classic group member's session. Follows
KafkaApis.handleHeartbeatRequest and GroupMetadataManager.classicGroupHeartbeat: READ on the group;
answered by the group coordinator (coordinator/classic_group_manager.py), REBALANCE_IN_PROGRESS when
the member must rejoin.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import GROUP, READ
from . import handler


@handler(ApiKey.HEARTBEAT, 0, 4)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return response_class(ApiKey.HEARTBEAT)(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await ctx.services.groups.submit(ctx, GroupCoordinator.heartbeat, request.group_id, request)
