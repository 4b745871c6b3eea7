"""SaslHandshake (key 17), v0-1: choose the SASL mechanism (server.security.authenticator does the
work, as Kafka's SaslServerAuthenticator). v0: the tokens that follow are raw size-prefixed bytes; v1:
they come in SaslAuthenticate requests. On an authenticated connection it starts KIP-368
re-authentication when sessions expire, else ILLEGAL_SASL_STATE (KafkaApis.handleSaslHandshakeRequest).
Deviations: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER only: GSSAPI is refused at startup.
"""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..clock import loop_time
from . import handler

SaslHandshakeResponse = response_class(ApiKey.SASL_HANDSHAKE)


@handler(ApiKey.SASL_HANDSHAKE, 0, 1)
async def handle(ctx, request):
    code, mechanisms = ctx.connection.authenticator.handshake(ctx.api_version, request.mechanism, loop_time())
    return SaslHandshakeResponse(error_code=code, mechanisms=mechanisms)
