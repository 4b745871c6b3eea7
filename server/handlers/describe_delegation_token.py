"""DescribeDelegationToken (key 41), v1-3: the tokens of the owners asked for (null: all; empty:
none) that the requester owns, requested, may renew, may DESCRIBE (DELEGATION_TOKEN resource) or
whose owner it may DESCRIBE_TOKENS of (KIP-373), with their HMACs (KafkaApis.handleDescribeTokensRequest
and DelegationTokenManager.filterToken). v3 adds each token's requester.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..context import KafkaPrincipal
from ..security.authorizer import DELEGATION_TOKEN, DESCRIBE, DESCRIBE_TOKENS, USER
from ..security.delegation_tokens import allow_token_requests
from . import handler

Response = response_class(ApiKey.DESCRIBE_DELEGATION_TOKEN)
Token = Response.DescribedDelegationToken
Renewer = Response.DescribedDelegationTokenRenewer


@handler(ApiKey.DESCRIBE_DELEGATION_TOKEN, 1, 3)
async def handle(ctx, request):
    tokens = ctx.services.delegation_tokens
    if not allow_token_requests(ctx.principal, ctx.connection.listener.security_protocol):
        return Response(throttle_time_ms=0, error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[])
    if not tokens.enabled:
        return Response(throttle_time_ms=0, error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[])
    if request.owners is not None and not request.owners:
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, tokens=[])
    owners = None if request.owners is None else [KafkaPrincipal(o.principal_type, o.principal_name)
                                                  for o in request.owners]
    found = tokens.describe(ctx.principal, owners, lambda token_id: ctx.authorize(DESCRIBE, DELEGATION_TOKEN, token_id),
                            lambda owner: ctx.authorize(DESCRIBE_TOKENS, USER, str(owner)))
    v3 = ctx.api_version >= 3  # the requester's fields are v3's
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, tokens=[
        Token(principal_type=token.owner.principal_type, principal_name=token.owner.name,
              token_requester_principal_type=token.requester.principal_type if v3 else "",
              token_requester_principal_name=token.requester.name if v3 else "", issue_timestamp=token.issue_timestamp,
              expiry_timestamp=token.expiry_timestamp, max_timestamp=token.max_timestamp, token_id=token.token_id,
              hmac=hmac, renewers=[Renewer(principal_type=r.principal_type, principal_name=r.name)
                                   for r in token.renewers])
        for token, hmac in found])
