"""SCRAM-SHA-256/512 (RFC 5802) from the client's side, with the hashes of server/security/scram.py's
ScramMechanism; client.py carries its messages in SaslAuthenticate requests."""

from __future__ import annotations

import base64
import hmac
import secrets

from ..server.security.scram import ScramMechanism
from . import BROKER_REFUSED, CommandError


class ScramClient:
    """One SCRAM exchange from the client's side: first(), final(server_first), verify(server_final)."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str) -> None:
        self.mechanism, self.password = mechanism, password
        self.nonce = secrets.token_urlsafe(18)
        saslname = user.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={saslname},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        """The client-first message."""
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message (with the proof) answering the server-first message."""
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        if not fields.get("r", "").startswith(self.nonce) or "s" not in fields or "i" not in fields:
            raise CommandError(f"{self.mechanism.mechanism_name}: an invalid server-first message", BROKER_REFUSED)
        scram = self.mechanism
        salted = scram.salted_password(self.password, base64.b64decode(fields["s"]), int(fields["i"]))
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self.first_bare},{text},{without_proof}".encode()
        client_key = scram.hmac(salted, b"Client Key")
        client_signature = scram.hmac(scram.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        self.server_signature = scram.hmac(scram.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """CommandError unless the server-final message proves the broker knows the credential."""
        expected = b"v=" + base64.b64encode(self.server_signature)
        if not hmac.compare_digest(bytes(server_final), expected):
            raise CommandError("the broker's SCRAM signature does not match: not the server that holds the "
                               "credential", BROKER_REFUSED)

