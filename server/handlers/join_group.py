"""JoinGroup (key 11): join a classic group. The request is parked in the group coordinator
(coordinator/classic_group_manager.py) until the rebalance completes, like Kafka's DelayedJoin."""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.JOIN_GROUP)
async def handle(ctx, request):
    return await ctx.broker.groups.submit(ctx, GroupCoordinator.join_group, request)
