"""DeleteAcls (key 31), v0-3: remove every ACL binding each filter matches, all filters at once.
Follows AclApis.handleDeleteAcls and AclControlManager.deleteAcls: ALTER on the cluster; each filter
answered with the bindings it removed.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.acl_admin import filter_of, refusal
from ..security.authorizer import delete_acls
from . import handler

DeleteAclsResponse = response_class(ApiKey.DELETE_ACLS)
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
MatchingAcl = DeleteAclsResponse.DeleteAclsMatchingAcl


def matching_acl(acl, version: int):
    entry = MatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=acl.resource_type,
                        resource_name=acl.name, principal=acl.principal, host=acl.host, operation=acl.operation,
                        permission_type=acl.permission)
    if version >= 1:  # v0 filters match literal patterns only
        entry.pattern_type = acl.pattern_type
    return entry


@handler(ApiKey.DELETE_ACLS, 0, 3, forwarded=True)
async def handle(ctx, request):
    refused = refusal(ctx, mutating=True)
    if refused is not None:
        code, message = refused
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in request.filters])
    current = ctx.services.authorizer.acls()
    results, after = delete_acls(current, [filter_of(f) for f in request.filters])
    if len(after) != len(current):
        await ctx.services.admin.change_acls(ctx.services, after)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=result, matching_acls=[])
        if isinstance(result, str) else
        FilterResult(error_code=ErrorCode.NONE, error_message=None,
                     matching_acls=[matching_acl(acl, ctx.api_version) for acl in result])
        for result in results])
