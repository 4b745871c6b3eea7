"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs it, with
the mechanisms and formulas both sides share (client/scram.py's ScramMechanism).

The broker keeps, per user and mechanism, the salt, the iteration count, StoredKey = H(HMAC(
SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key") - never the
password, nor anything a client could log in with. AlterUserScramCredentials sends the salted
password, from which the two keys are derived here.
"""

from __future__ import annotations

import base64
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...client.scram import ScramMechanism
from .sasl import SaslAuthenticationException, SaslException


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted_password, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int,
                      salt: bytes | None = None) -> ScramCredential:
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, mechanism.salted_password(password, salt, iterations),
                                        iterations)

    def to_json(self) -> dict:
        encode = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return {"salt": encode(self.salt), "stored_key": encode(self.stored_key),
                "server_key": encode(self.server_key), "iterations": self.iterations}

    @classmethod
    def from_json(cls, data: dict) -> ScramCredential:
        return cls(base64.b64decode(data["salt"]), base64.b64decode(data["stored_key"]),
                   base64.b64decode(data["server_key"]), int(data["iterations"]))


def stored_credential(credentials: Mapping[str, Mapping[str, dict]], user: str,
                      mechanism: ScramMechanism) -> ScramCredential | None:
    """A user's credential for a mechanism in the metadata image's layout (user -> mechanism name ->
    ScramCredential.to_json()), or None."""
    stored = credentials.get(user, {}).get(mechanism.mechanism_name)
    return None if stored is None else ScramCredential.from_json(stored)


# --- messages, with ScramMessages' grammar (printable ASCII; ',' and '=' escaped in names) ----

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64_CHAR = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_BASE64_CHAR}{{4}})*(?:{_BASE64_CHAR}{{3}}=|{_BASE64_CHAR}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?"
                           rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
                           rf"p=(?P<proof>{_BASE64})")


def username(saslname: str) -> str:
    """ScramFormatter.username: '=2C' is ',' and '=3D' is '='; any other '=' is an error."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslException(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


# A delegation token's login (server/security/delegation_tokens.py's DelegationTokens.login): the
# token id and mechanism -> (its SCRAM credential, its owner's name, its expiry timestamp in ms),
# each None for an unknown token (Kafka's DelegationTokenCredentialCallback).
TokenLogin = Callable[[str, ScramMechanism], tuple["ScramCredential | None", "str | None", "int | None"]]


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, credential: Callable[[str, ScramMechanism], ScramCredential | None],
                 token_login: TokenLogin | None = None, clock_ms: Callable[[], int] | None = None):
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credential = credential
        self._token_login = token_login
        self._clock_ms = clock_ms
        self.complete = False
        self.authorization_id: str | None = None
        # Logged in with a delegation token (the tokenauth=true extension): the principal is the
        # token's owner, marked token-authenticated, and the session ends when the token expires.
        self.token_authenticated = False
        self._token_expiry_ms: int | None = None
        # Set when complete: a token's session lasts until the token's expiry (Kafka's
        # CREDENTIAL.LIFETIME.MS is the expiry timestamp, of which SaslServerAuthenticator takes the time left).
        self.credential_lifetime_ms: int | None = None
        self._state = "client-first"
        self._stored: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "client-first":
                return self._client_first(token.decode("utf-8", "replace"))
            if self._state == "client-final":
                return self._client_final(token.decode("utf-8", "replace"))
            raise SaslAuthenticationException(f"Unexpected challenge in Sasl server state {self._state}")
        except (SaslException, SaslAuthenticationException):
            self._state = "failed"
            self._stored = None
            raise

    def _client_first(self, message: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslException(f"Invalid SCRAM client first message format: {message}")
        user = username(match["saslname"])
        # ScramExtensions.tokenAuthenticated: Boolean.parseBoolean, so any case of "true".
        if _extensions(match["extensions"]).get("tokenauth", "").lower() == "true":
            stored, owner, expiry = (None, None, None) if self._token_login is None else self._token_login(
                user, self._scram)
            if owner is None:
                raise SaslException(f"Token Authentication failed: Invalid tokenId : {user}")
            authorization_id, self._token_expiry_ms, self.token_authenticated = owner, expiry, True
        else:
            stored, authorization_id = self._credential(user, self._scram), user
        if stored is None:
            raise SaslException("Authentication failed: Invalid user credentials")
        if match["authzid"] and match["authzid"] != user:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is different from username")
        if stored.iterations < self._scram.min_iterations:
            raise SaslException(f"Iterations {stored.iterations} is less than the minimum "
                                f"{self._scram.min_iterations} for {self.mechanism}")
        self._stored = stored
        self.authorization_id = authorization_id
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + secrets.token_urlsafe(24)
        self._server_first = f"r={self._nonce},s={base64.b64encode(stored.salt).decode()},i={stored.iterations}"
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslException(f"Invalid SCRAM client final message format: {message}")
        if match["nonce"] != self._nonce:
            raise SaslException("Invalid client nonce in the final client message.")
        if base64.b64decode(match["channel"]) != self._gs2_header.encode():
            raise SaslException("Invalid channel binding in the final client message.")
        assert self._stored is not None
        auth_message = ",".join((self._client_first_bare, self._server_first, match["without_proof"])).encode()
        client_signature = self._scram.hmac(self._stored.stored_key, auth_message)
        proof = base64.b64decode(match["proof"])
        if len(proof) != len(client_signature):
            raise SaslException("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(self._scram.hash(client_key), self._stored.stored_key):
            raise SaslException("Invalid client credentials")
        server_signature = self._scram.hmac(self._stored.server_key, auth_message)
        self._stored = None
        self._state = "complete"
        self.complete = True
        if self._token_expiry_ms is not None and self._clock_ms is not None:
            self.credential_lifetime_ms = self._token_expiry_ms - self._clock_ms()
        return b"v=" + base64.b64encode(server_signature)
