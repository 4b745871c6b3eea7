"""ExpireDelegationToken (key 40), v1-2: the owner or a renewer sets a token's expiry to now plus
the period (never past its maximum timestamp), or with a negative period removes it at once, as
Kafka's DelegationTokenControlManager.expireDelegationToken; the change is stored.
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

Response = response_class(ApiKey.EXPIRE_DELEGATION_TOKEN)


@handler(ApiKey.EXPIRE_DELEGATION_TOKEN, 1, 2)
async def handle(ctx, request):
    if not allow_token_requests(ctx.principal, ctx.connection.listener.security_protocol):
        return Response(throttle_time_ms=0, error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                        expiry_timestamp_ms=ERROR_TIMESTAMP)
    services = ctx.services
    if (forwarded := await services.admin.forward(ctx, request)) is not None:
        return forwarded
    outcome = services.delegation_tokens.expire(request.hmac, ctx.principal, request.expiry_time_period_ms,
                                                wall_clock_ms())
    if outcome.updated is not None:
        await services.admin.store_delegation_token(services, outcome.updated)
    elif outcome.removed is not None:
        await services.admin.remove_delegation_token(services, outcome.removed)
    return Response(throttle_time_ms=0, error_code=outcome.error, expiry_timestamp_ms=outcome.expiry_timestamp)
