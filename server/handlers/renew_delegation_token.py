"""RenewDelegationToken (key 39), v1-2: the owner or a renewer pushes a token's expiry out by the
renew period (at most delegation.token.expiry.time.ms, never past its maximum timestamp), as
Kafka's DelegationTokenControlManager.renewDelegationToken; the token is stored again.
KafkaApis refuses token-authenticated and PLAINTEXT connections (expiry -1); the controller's
errors answer expiry 0.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..clock import wall_clock_ms
from ..security.delegation_tokens import ERROR_TIMESTAMP, allow_token_requests
from . import handler

Response = response_class(ApiKey.RENEW_DELEGATION_TOKEN)


@handler(ApiKey.RENEW_DELEGATION_TOKEN, 1, 2)
async def handle(ctx, request):
    if not allow_token_requests(ctx.principal, ctx.connection.listener.security_protocol):
        return Response(throttle_time_ms=0, error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                        expiry_timestamp_ms=ERROR_TIMESTAMP)
    services = ctx.services
    if (forwarded := await services.admin.forward(ctx, request)) is not None:
        return forwarded
    outcome = services.delegation_tokens.renew(request.hmac, ctx.principal, request.renew_period_ms, wall_clock_ms())
    if outcome.updated is not None:
        await services.admin.store_delegation_token(services, outcome.updated)
    return Response(throttle_time_ms=0, error_code=outcome.error, expiry_timestamp_ms=outcome.expiry_timestamp)
