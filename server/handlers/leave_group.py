"""LeaveGroup (key 13): members leave a classic group (v3+: several at once, or static members
removed by group.instance.id, KIP-345); answered by the group coordinator."""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.LEAVE_GROUP)
async def handle(ctx, request):
    return await ctx.broker.groups.submit(ctx, GroupCoordinator.leave_group, request)
