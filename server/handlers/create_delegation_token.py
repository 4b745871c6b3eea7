"""CreateDelegationToken (key 38), v1-3 (KIP-48; v3: KIP-373's tokens for another owner): a token
for the requester, or for the owner the request names when the requester may CREATE_TOKENS on
that User resource. The broker's checks are KafkaApis.handleCreateTokenRequest's (its refusals
answer -1 timestamps); the rest is the controller's (DelegationTokenControlManager, whose
errors leave the timestamps at 0), then the token is stored with the cluster's metadata.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..clock import wall_clock_ms
from ..context import KafkaPrincipal
from ..security.authorizer import CREATE_TOKENS, USER
from ..security.delegation_tokens import ERROR_TIMESTAMP, TokenInformation, allow_token_requests
from ..security.principal import USER_TYPE
from . import handler

Response = response_class(ApiKey.CREATE_DELEGATION_TOKEN)


def _response(version: int, code: ErrorCode, owner: KafkaPrincipal, requester: KafkaPrincipal, timestamp: int = 0,
              token: TokenInformation | None = None, hmac: bytes = b""):
    """CreateDelegationTokenResponse.prepareResponse: the requester's fields from v3 on; without a
    token, every timestamp is `timestamp`."""
    response = Response(throttle_time_ms=0, error_code=code, principal_type=owner.principal_type,
                        principal_name=owner.name, issue_timestamp_ms=timestamp, expiry_timestamp_ms=timestamp,
                        max_timestamp_ms=timestamp, token_id="", hmac=hmac)
    if version >= 3:
        response.token_requester_principal_type = requester.principal_type
        response.token_requester_principal_name = requester.name
    if token is not None:
        response.issue_timestamp_ms = token.issue_timestamp
        response.expiry_timestamp_ms = token.expiry_timestamp
        response.max_timestamp_ms = token.max_timestamp
        response.token_id = token.token_id
    return response


@handler(ApiKey.CREATE_DELEGATION_TOKEN, 1, 3)
async def handle(ctx, request):
    requester = ctx.principal
    owner = (KafkaPrincipal(request.owner_principal_type, request.owner_principal_name)
             if request.owner_principal_name else requester)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in request.renewers]
    version = ctx.api_version
    if not allow_token_requests(requester, ctx.connection.listener.security_protocol):
        return _response(version, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester, ERROR_TIMESTAMP)
    if owner != requester and not ctx.authorize(CREATE_TOKENS, USER, str(owner)):
        return _response(version, ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester, ERROR_TIMESTAMP)
    if any(r.principal_type != USER_TYPE for r in renewers):
        return _response(version, ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester, ERROR_TIMESTAMP)
    services = ctx.services
    if (forwarded := await services.admin.forward(ctx, request)) is not None:
        return forwarded
    token = services.delegation_tokens.create(owner, requester, renewers, request.max_lifetime_ms, wall_clock_ms())
    if isinstance(token, ErrorCode):
        return _response(version, token, owner, requester)
    await services.admin.store_delegation_token(services, token)
    return _response(version, ErrorCode.NONE, owner, requester, token=token,
                     hmac=services.delegation_tokens.hmac(token.token_id))
