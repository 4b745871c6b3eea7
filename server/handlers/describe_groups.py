"""DescribeGroups (key 15): classic groups' state, protocol and members; an unknown group is
described as Dead (before v6, Kafka's behaviour)."""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from . import handler
from .metadata import AUTHORIZED_OPERATIONS_OMITTED

DescribeGroupsResponse = response_class(ApiKey.DESCRIBE_GROUPS)
# What an unsecured broker allows on a group: READ, DELETE, DESCRIBE (AclOperation codes 3, 6, 8).
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8))


@handler(ApiKey.DESCRIBE_GROUPS)
async def handle(ctx, request):
    groups = ctx.broker.groups.coordinator.describe_groups(ctx.broker.groups.request_info(ctx), request.groups)
    include_operations = ctx.api_version >= 3 and request.include_authorized_operations
    for group in groups:
        group.authorized_operations = GROUP_OPERATIONS if include_operations else AUTHORIZED_OPERATIONS_OMITTED
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
