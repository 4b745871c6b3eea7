"""ListGroups (key 16): every group this broker coordinates, filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from . import handler

ListGroupsResponse = response_class(ApiKey.LIST_GROUPS)


@handler(ApiKey.LIST_GROUPS)
async def handle(ctx, request):
    states = request.states_filter if ctx.api_version >= 4 else []
    types = request.types_filter if ctx.api_version >= 5 else []
    code, groups = ctx.broker.groups.coordinator.list_groups(states, types)
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=groups)
