"""A SASL login on a new connection, as Kafka's SaslClientAuthenticator does it: SaslHandshake v1
names the mechanism, then SaslAuthenticate requests carry the mechanism's tokens (PLAIN: one;
SCRAM-SHA-256/512: scram.py's exchange)."""

from __future__ import annotations

from dataclasses import dataclass

from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from .connection import BrokerConnection
from .errors import AuthenticationFailed, error_line
from .scram import ScramClient, ScramMechanism

SaslHandshakeRequest = message_class("SaslHandshakeRequest")
SaslAuthenticateRequest = message_class("SaslAuthenticateRequest")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class SaslLogin:
    """Who the client logs in as, and how."""

    mechanism: str  # one of MECHANISMS
    username: str
    password: str


async def authenticate(connection: BrokerConnection, login: SaslLogin, versions: dict[int, int]) -> None:
    """Log in on `connection` (`versions`: the broker's highest version of each API, from its
    ApiVersions); AuthenticationFailed with the broker's error when it refuses."""
    handshake = await connection.call(SaslHandshakeRequest(mechanism=login.mechanism), 1)
    if handshake.error_code != ErrorCode.NONE:
        raise AuthenticationFailed(error_line(
            handshake.error_code, f"the broker offers {', '.join(handshake.mechanisms) or 'none'}", login.mechanism))
    version = min(versions.get(SaslAuthenticateRequest.API_KEY, 0), SaslAuthenticateRequest.VALID_VERSIONS[1])

    async def exchange(token: bytes) -> bytes:
        response = await connection.call(SaslAuthenticateRequest(auth_bytes=token), version)
        if response.error_code != ErrorCode.NONE:
            raise AuthenticationFailed(error_line(response.error_code, response.error_message,
                                                  f"{login.mechanism} login as {login.username}"))
        return bytes(response.auth_bytes)

    if login.mechanism == "PLAIN":
        await exchange(f"\0{login.username}\0{login.password}".encode())
        return
    mechanism = ScramMechanism.from_name(login.mechanism)
    if mechanism is None:
        raise ValueError(f"no SASL mechanism {login.mechanism} here ({', '.join(MECHANISMS)})")
    scram = ScramClient(mechanism, login.username, login.password)
    server_first = await exchange(scram.first())
    scram.verify(await exchange(scram.final(server_first)))
