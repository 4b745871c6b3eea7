"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka computes them, for both sides of an
exchange: the mechanisms with their hashes and formulas (Kafka's ScramMechanism and
ScramFormatter, which the broker's server/security/scram.py uses too), and the client's side of a
login (`ScramClient`; sasl.py carries its messages in SaslAuthenticate requests).

Names and passwords are used as their UTF-8 bytes, without SASLprep, as Kafka's ScramFormatter
does: a library that prepares them (scramp) would fail logins to credentials Kafka's tools made
for a password whose preparation changes it.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import secrets

from .errors import AuthenticationFailed

MAX_ITERATIONS = 16384  # ScramMechanism.maxIterations (ScramControlManager.MAX_ITERATIONS)


class ScramMechanism(enum.Enum):
    """Kafka's ScramMechanism: the type byte of the admin APIs, the hash, the least iterations."""

    SCRAM_SHA_256 = (1, "SCRAM-SHA-256", "sha256")
    SCRAM_SHA_512 = (2, "SCRAM-SHA-512", "sha512")

    def __init__(self, type_id: int, mechanism_name: str, hash_name: str) -> None:
        self.type_id = type_id
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.min_iterations = 4096

    @classmethod
    def from_type(cls, type_id: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type_id == type_id), None)

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


def saslname(username: str) -> str:
    """ScramFormatter.saslName: ',' as '=2C' and '=' as '=3D'."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """One SCRAM exchange from the client's side: first(), final(server_first), verify(server_final).
    AuthenticationFailed when the broker's messages are not SCRAM's or do not prove that it holds
    the credential."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str, token_auth: bool = False) -> None:
        self.mechanism, self.password = mechanism, password
        self.nonce = secrets.token_urlsafe(18)
        # token_auth: logging in with a delegation token (user: its id, password: its base64 HMAC),
        # which Kafka's ScramLoginModule says with the tokenauth=true extension.
        self.first_bare = f"n={saslname(user)},r={self.nonce}" + (",tokenauth=true" if token_auth else "")
        self.server_signature = b""

    def first(self) -> bytes:
        """The client-first message."""
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message (with the proof) answering the server-first message."""
        text = bytes(server_first).decode()
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        if not fields.get("r", "").startswith(self.nonce) or "s" not in fields or "i" not in fields:
            raise AuthenticationFailed(f"{self.mechanism.mechanism_name}: an invalid server-first message")
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
        """Nothing when the server-final message proves the broker knows the credential."""
        expected = b"v=" + base64.b64encode(self.server_signature)
        if not hmac.compare_digest(bytes(server_final), expected):
            raise AuthenticationFailed("the broker's SCRAM signature does not match: not the server that holds "
                                       "the credential")
