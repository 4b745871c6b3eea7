"""DeleteGroups (key 42), v0-2: delete empty groups with their offsets (NON_EMPTY_GROUP while members
remain); answered once the tombstones are in `__consumer_offsets`. Follows
KafkaApis.handleDeleteGroupsRequest and GroupMetadataManager: DELETE on each group.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DELETE, GROUP
from . import handler

DeleteGroupsResponse = response_class(ApiKey.DELETE_GROUPS)


@handler(ApiKey.DELETE_GROUPS, 0, 2)
async def handle(ctx, request):
    group_ids = list(dict.fromkeys(request.groups_names))
    allowed = ctx.authorized(DELETE, GROUP, group_ids)
    results = {g: DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
               for g in group_ids}
    # One call per coordinator (in a cluster, each partition of __consumer_offsets has its own).
    by_coordinator: dict[int, list[str]] = {}
    groups = ctx.services.groups
    for group_id in group_ids:
        if group_id in allowed:
            by_coordinator.setdefault(id(groups.coordinator_for(group_id)), []).append(group_id)
    for ids in by_coordinator.values():
        deleted = await groups.submit(ctx, GroupCoordinator.delete_groups, ids[0], ids)
        results.update((r.group_id, r) for r in deleted.results)
    return DeleteGroupsResponse(throttle_time_ms=0, results=list(results.values()))
