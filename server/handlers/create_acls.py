"""CreateAcls (key 30), v0-3: add ACL bindings, each checked as Kafka's AclControlManager does; an
ACL that already exists is a success and stays one binding. Follows AclApis.handleCreateAcls: ALTER
on the cluster; kept in the metadata image and applied at once.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.acl_admin import binding_of, refusal
from ..security.authorizer import create_acls
from . import handler

CreateAclsResponse = response_class(ApiKey.CREATE_ACLS)
Result = CreateAclsResponse.AclCreationResult


@handler(ApiKey.CREATE_ACLS, 0, 3, forwarded=True)
async def handle(ctx, request):
    refused = refusal(ctx, mutating=True)
    if refused is not None:
        code, message = refused
        return CreateAclsResponse(throttle_time_ms=0, results=[Result(error_code=code, error_message=message)
                                                               for _ in request.creations])
    current = ctx.services.authorizer.acls()
    errors, after = create_acls(current, [binding_of(c) for c in request.creations])
    if len(after) != len(current):
        await ctx.services.admin.change_acls(ctx.services, after)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=ErrorCode.NONE, error_message=None) if error is None
        else Result(error_code=ErrorCode.INVALID_REQUEST, error_message=error)
        for error in errors])
