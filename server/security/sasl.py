"""What every SASL mechanism server shares (javax.security.sasl.SaslServer's shape in Kafka).

A mechanism server takes the client's tokens one at a time (`evaluate`) and answers each with a
challenge, until it is `complete` with an `authorization_id`. It fails with one of two errors, as
in Kafka: SaslAuthenticationException carries a message meant for the client; SaslException means
bad credentials, and the client learns only that (its message may name users and stays in the log).
"""

from __future__ import annotations

from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslException(Exception):
    """Authentication failed; the client is told only that its credentials are invalid."""


class SaslAuthenticationException(Exception):
    """Authentication failed with a message the client may see."""


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str | None
    # How long the credential stays valid once complete (an OAUTHBEARER token's expiry), or None:
    # the session lasts no longer (Kafka's CREDENTIAL.LIFETIME.MS negotiated property).
    credential_lifetime_ms: int | None

    def evaluate(self, token: bytes) -> bytes: ...
