"""SyncGroup (key 14): the leader hands in the assignment; followers wait for it in the group
coordinator (coordinator/classic_group_manager.py) until it is stored."""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.SYNC_GROUP)
async def handle(ctx, request):
    return await ctx.broker.groups.submit(ctx, GroupCoordinator.sync_group, request)
