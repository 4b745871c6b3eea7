"""SyncGroup (key 14), v0-5: the leader hands in the assignment; followers wait for it in the group
coordinator (coordinator/classic_group_manager.py) until it is stored. Follows
KafkaApis.handleSyncGroupRequest and GroupMetadataManager.classicGroupSync: READ on the group.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import GROUP, READ
from ..throttle import not_request_time
from . import handler


@handler(ApiKey.SYNC_GROUP, 0, 5)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return response_class(ApiKey.SYNC_GROUP)(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    with not_request_time(ctx):  # the wait for the rebalance
        return await ctx.services.groups.submit(ctx, GroupCoordinator.sync_group, request.group_id, request)
