"""DescribeAcls (key 29), v0-3: the ACL bindings a filter matches, grouped by resource pattern.
Follows KafkaApis.handleDescribeAcls (AclApis) and StandardAuthorizer.acls: DESCRIBE on the cluster;
SECURITY_DISABLED without an authorizer; an unknown filter element is INVALID_REQUEST.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
"""

from __future__ import annotations

from typing import Any

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.acl_admin import filter_of, refusal
from . import handler

DescribeAclsResponse = response_class(ApiKey.DESCRIBE_ACLS)
Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription


def resources(acls, version: int) -> list:
    """Kafka's DescribeAclsResponse.aclsResources: one entry per resource pattern, in order."""
    by_pattern: dict[tuple[int, str, int], Any] = {}  # (resource type, name, pattern type) -> Resource
    for acl in acls:
        key = (acl.resource_type, acl.name, acl.pattern_type)
        entry = by_pattern.get(key)
        if entry is None:
            entry = by_pattern[key] = Resource(resource_type=acl.resource_type, resource_name=acl.name, acls=[])
            if version >= 1:  # v0 knows literal patterns only, which its filter asks for
                entry.pattern_type = acl.pattern_type
        entry.acls.append(Description(principal=acl.principal, host=acl.host, operation=acl.operation,
                                      permission_type=acl.permission))
    return list(by_pattern.values())


@handler(ApiKey.DESCRIBE_ACLS, 0, 3)
async def handle(ctx, request):
    refused = refusal(ctx, mutating=False)
    if refused is None:
        acl_filter = filter_of(request)
        invalid = acl_filter.unknown_element()
        if invalid is None:
            return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                        resources=resources(ctx.services.authorizer.acls(acl_filter), ctx.api_version))
        refused = ErrorCode.INVALID_REQUEST, invalid
    code, message = refused
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
