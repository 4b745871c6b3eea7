"""SaslAuthenticate (key 36), v0-2: one SASL token each way (server.security.authenticator does the
work, as Kafka's SaslServerAuthenticator). v1+ carries the session lifetime (KIP-368). A failure
answers SASL_AUTHENTICATION_FAILED with Kafka's message and closes the connection; after
authentication it is ILLEGAL_SASL_STATE (KafkaApis.handleSaslAuthenticateRequest).
Deviations: PLAIN, SCRAM and OAUTHBEARER with Kafka's unsecured validator only (no GSSAPI, no JWT
validation against a JWKS).
"""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..clock import loop_time
from . import handler

SaslAuthenticateResponse = response_class(ApiKey.SASL_AUTHENTICATE)


@handler(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def handle(ctx, request):
    code, message, token, lifetime_ms = ctx.connection.authenticator.authenticate(
        ctx.api_version, request.auth_bytes, loop_time())
    response = SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=token)
    if ctx.api_version >= 1:
        response.session_lifetime_ms = lifetime_ms
    return response
