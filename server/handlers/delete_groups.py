"""DeleteGroups (key 42), v0-3: delete empty groups with their offsets (NON_EMPTY_GROUP while members
remain); answered once the tombstones are in `__consumer_offsets`. A share group's share partitions
lose their state first (DeleteShareGroupState through the persister, GroupService.delete_groups).
Follows KafkaApis.handleDeleteGroupsRequest and GroupCoordinatorService.deleteGroups: DELETE on each group.
v3 adds a per-group error message, which Kafka sets only where a streams group's topology plugin or
the coordinator's write failed; for the errors Samsa answers (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
NOT_COORDINATOR, ...) it is null, as in Kafka.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DELETE, GROUP
from . import handler

DeleteGroupsResponse = response_class(ApiKey.DELETE_GROUPS)


@handler(ApiKey.DELETE_GROUPS, 0, 3)
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
        results.update(await groups.delete_groups(ctx, ids))
    return DeleteGroupsResponse(throttle_time_ms=0, results=list(results.values()))
