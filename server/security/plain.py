"""SASL/PLAIN (RFC 4616) against the users of the listener's PlainLoginModule JAAS config, with
Kafka's PlainSaslServer messages."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from .sasl import PLAIN, SaslAuthenticationException


class PlainServer:
    mechanism = PLAIN
    credential_lifetime_ms: int | None = None

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        # message = [authzid] NUL authcid NUL passwd
        tokens = token.decode("utf-8", "replace").split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationException(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationException("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationException("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationException("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
