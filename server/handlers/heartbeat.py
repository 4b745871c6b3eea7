"""Heartbeat (key 12): keeps a classic group member's session; answered by the group coordinator
(coordinator/classic_group_manager.py), REBALANCE_IN_PROGRESS when the member must rejoin."""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.HEARTBEAT)
async def handle(ctx, request):
    return await ctx.broker.groups.submit(ctx, GroupCoordinator.heartbeat, request)
