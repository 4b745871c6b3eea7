"""DeleteGroups (key 42): delete empty groups with their offsets (NON_EMPTY_GROUP while members
remain); answered once the tombstones are in `__consumer_offsets`."""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.DELETE_GROUPS)
async def handle(ctx, request):
    return await ctx.broker.groups.submit(ctx, GroupCoordinator.delete_groups, request.groups_names)
