"""DescribeGroups (key 15), v0-6: classic groups' state, protocol and members. Follows
KafkaApis.handleDescribeGroupsRequest and GroupMetadataManager.describeGroups: DESCRIBE on each group;
an unknown group is described as Dead before v6, and from v6 (KIP-1043) answered GROUP_ID_NOT_FOUND
with Kafka's message.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.classic_group import DEAD
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, GROUP
from . import handler
from .metadata import AUTHORIZED_OPERATIONS_OMITTED

DescribeGroupsResponse = response_class(ApiKey.DESCRIBE_GROUPS)
DescribedGroup = DescribeGroupsResponse.DescribedGroup


@handler(ApiKey.DESCRIBE_GROUPS, 0, 6)
async def handle(ctx, request):
    allowed = ctx.authorized(DESCRIBE, GROUP, request.groups)
    groups_service, info = ctx.services.groups, ctx.services.groups.request_info(ctx)
    described = iter(groups_service.coordinator_for(g).describe_groups(info, [g])[0]
                     for g in request.groups if g in allowed)
    groups = [next(described) if group_id in allowed
              else DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                                  protocol_type="", protocol_data="")
              for group_id in request.groups]
    include_operations = ctx.api_version >= 3 and request.include_authorized_operations
    for group in groups:
        if ctx.api_version >= 6 and group.error_code == ErrorCode.NONE and group.group_state == DEAD.value:
            group.error_code, group.error_message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group.group_id} not found."
        if group.error_code == ErrorCode.NONE:
            group.authorized_operations = (ctx.authorized_operations(GROUP, group.group_id) if include_operations
                                           else AUTHORIZED_OPERATIONS_OMITTED)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
