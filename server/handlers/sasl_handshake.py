"""SaslHandshake (key 17): choose the SASL mechanism (server.security.authenticator does the work).

v0 means the tokens that follow are raw size-prefixed bytes, v1 that they come in SaslAuthenticate
requests. On an authenticated connection it starts KIP-368 re-authentication when sessions expire,
and is otherwise answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import trio

from ...wire.protocol import ApiKey, response_class
from . import handler

SaslHandshakeResponse = response_class(ApiKey.SASL_HANDSHAKE)


@handler(ApiKey.SASL_HANDSHAKE, 0, 1)
async def handle(ctx, request):
    code, mechanisms = ctx.connection.authenticator.handshake(ctx.api_version, request.mechanism, trio.current_time())
    return SaslHandshakeResponse(error_code=code, mechanisms=mechanisms)
