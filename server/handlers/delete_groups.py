"""DeleteGroups (key 42), v0-2: delete empty groups with their offsets (NON_EMPTY_GROUP while members
remain); answered once the tombstones are in `__consumer_offsets`. Follows
KafkaApis.handleDeleteGroupsRequest and GroupMetadataManager: DELETE on each group.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..authorizer import DELETE, GROUP
from . import handler

DeleteGroupsResponse = response_class(ApiKey.DELETE_GROUPS)


@handler(ApiKey.DELETE_GROUPS, 0, 2)
async def handle(ctx, request):
    group_ids = list(dict.fromkeys(request.groups_names))
    allowed = ctx.authorized(DELETE, GROUP, group_ids)
    if len(allowed) == len(group_ids):
        return await ctx.services.groups.submit(ctx, GroupCoordinator.delete_groups, group_ids)
    results = {g: DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
               for g in group_ids}
    if allowed:
        deleted = await ctx.services.groups.submit(ctx, GroupCoordinator.delete_groups,
                                                   [g for g in group_ids if g in allowed])
        results.update((r.group_id, r) for r in deleted.results)
    return DeleteGroupsResponse(throttle_time_ms=0, results=list(results.values()))
