"""ListGroups (key 16), v0-5: every group this broker coordinates, filtered by state (v4+) and type
(v5+, KIP-848). Follows KafkaApis.handleListGroupsRequest: with DESCRIBE on the cluster all of them,
else those the sender may DESCRIBE.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, DESCRIBE, GROUP
from . import handler

ListGroupsResponse = response_class(ApiKey.LIST_GROUPS)


@handler(ApiKey.LIST_GROUPS, 0, 5)
async def handle(ctx, request):
    states = request.states_filter if ctx.api_version >= 4 else []
    types = request.types_filter if ctx.api_version >= 5 else []
    code, groups = ctx.services.groups.list_groups(states, types)
    if not ctx.authorize(DESCRIBE, CLUSTER):
        groups = [g for g in groups if ctx.authorize(DESCRIBE, GROUP, g.group_id)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=groups)
