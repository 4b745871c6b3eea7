"""SASL/OAUTHBEARER (RFC 7628, KIP-255): the mechanism's server (Kafka's OAuthBearerSaslServer),
whatever validates the token, and Kafka's default server callback, the unsecured validator
(OAuthBearerUnsecuredValidatorCallbackHandler): an unsigned JWS (`{"alg":"none"}`) whose claims
name the principal (`sub`) and an expiration time (`exp`), meant for development as in Kafka. Its
options are the unsecuredValidator* options of the listener's OAuthBearerLoginModule JAAS config.
The other callback, OAuthBearerValidatorCallbackHandler (signed JWTs checked against a JWKS,
KIP-768), is jwt_validator.py's and jwks.py's.

An invalid token is answered as Kafka's OAuthBearerSaslServer answers it: a JSON error as the
challenge (`{"status":"invalid_token"}`), then SASL_AUTHENTICATION_FAILED with that JSON once the
client acknowledges it with %x01. A malformed client message fails as bad credentials. The
session lasts until the token expires (KIP-368: the client re-authenticates before), or
connections.max.reauth.ms if that is sooner.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .sasl import OAUTHBEARER, SaslAuthenticationException, SaslException

# RFC 7628's client initial response as Kafka's OAuthBearerClientInitialResponse matches it:
# gs2-header, then key=value pairs each ended by %x01, then a final %x01.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


class IllegalToken(Exception):
    """The token is refused (Kafka's OAuthBearerIllegalTokenException); `scope` names the scope
    it lacks, if that is why."""

    def __init__(self, message: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope

    @property
    def status(self) -> str:
        return "insufficient_scope" if self.scope is not None else "invalid_token"


@dataclass(frozen=True)
class ValidatedToken:
    principal: str
    expiration_ms: int  # the `exp` claim, in ms since the epoch


@dataclass(frozen=True)
class UnsecuredValidatorOptions:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> UnsecuredValidatorOptions:
        """From the login module's options (blank ones take the defaults); ValueError if invalid."""
        def option(name: str) -> str | None:
            value = options.get(name)
            return value.strip() if value is not None and value.strip() else None

        skew = option("unsecuredValidatorAllowableClockSkewMs")
        skew_ms = int(skew) if skew is not None else 0
        if skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        scope = option("unsecuredValidatorRequiredScope")
        return cls(principal_claim=option("unsecuredValidatorPrincipalClaimName") or "sub",
                   scope_claim=option("unsecuredValidatorScopeClaimName") or "scope",
                   required_scope=tuple(scope.split()) if scope else (),
                   allowable_clock_skew_ms=skew_ms)


def _json_part(part: str) -> dict:
    try:
        # Strict, as Java's URL decoder: a character outside the URL-safe alphabet is an error.
        decoded = base64.b64decode(part + "=" * (-len(part) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(decoded)
    except ValueError:
        raise IllegalToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise IllegalToken("malformed JSON")
    return value


def _number(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise IllegalToken(f"The {name} claim had the incorrect type: {type(value).__name__}")
    return float(value)


def validate_unsecured(token: str, options: UnsecuredValidatorOptions, now_ms: int) -> ValidatedToken:
    """Kafka's OAuthBearerUnsecuredJws and the unsecured validator's checks, in their order."""
    if ".." in token:
        raise IllegalToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    header, claims = _json_part(parts[0]), _json_part(parts[1])
    if header.get("alg") != "none":
        raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise IllegalToken("Unsecured JWS must not contain a digital signature")
    expiration = _number(claims, "exp")
    if expiration is None:
        raise IllegalToken("No expiration time in JWT")
    principal = claims.get(options.principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise IllegalToken(f"No principal name in JWT claim: {options.principal_claim}")
    skew = options.allowable_clock_skew_ms
    issued_at = _number(claims, "iat")
    if issued_at is not None and 1000 * issued_at > now_ms + skew:
        raise IllegalToken(f"The Issued At value ({issued_at:f} seconds) was after the indicated time ({now_ms} ms) "
                           f"plus allowable clock skew ({skew} ms)")
    if now_ms - skew >= 1000 * expiration:
        raise IllegalToken(f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after "
                           f"the Expiration Time value ({expiration:f} seconds)")
    if issued_at is not None and expiration <= issued_at:
        raise IllegalToken(f"The Expiration Time time ({expiration:f} seconds) was not after the Issued At time "
                           f"({issued_at:f} seconds)")
    raw_scope = claims.get(options.scope_claim)
    scope = set(raw_scope.split()) if isinstance(raw_scope, str) else set(raw_scope or ())
    for required in options.required_scope:
        if required not in scope:
            required_list = f"[{', '.join(options.required_scope)}]"
            raise IllegalToken(f"The provided scope ({scope}) was missing a required scope ({required}).  All required "
                               f"scope elements: {required_list}", scope=required_list)
    return ValidatedToken(principal, int(1000 * expiration))


def _error_json(error: IllegalToken) -> str:
    """Kafka's jsonErrorResponse, byte for byte."""
    text = f'{{"status":"{error.status}"'
    if error.scope is not None:
        text += f', "scope":"{error.scope}"'
    return text + "}"


class OAuthBearerServer:
    mechanism = OAUTHBEARER

    def __init__(self, validate: Callable[[str], ValidatedToken], wall_ms: Callable[[], int]) -> None:
        self._validate = validate
        self._wall_ms = wall_ms
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_lifetime_ms: int | None = None
        self._error: str | None = None  # the JSON error sent, until the client acknowledges it

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationException(self._error)
        self._error = None
        authorization_id, token_value = _initial_response(token)
        try:
            validated = self._validate(token_value)
        except IllegalToken as error:
            self._error = _error_json(error)
            return self._error.encode()
        if authorization_id and authorization_id != validated.principal:
            raise SaslAuthenticationException(
                f"Authentication failed: Client requested an authorization id ({authorization_id}) that is different "
                f"from the token's principal name ({validated.principal})")
        self.authorization_id = validated.principal
        self.credential_lifetime_ms = validated.expiration_ms - self._wall_ms()
        self.complete = True
        return b""


def _initial_response(message: bytes) -> tuple[str, str]:
    """(authorization id, token) of the client's first message; SaslException if malformed.
    Extensions are accepted whatever they say, as the unsecured validator accepts them."""
    match = _INITIAL_RESPONSE.fullmatch(message.decode("utf-8", "replace"))
    if match is None:
        raise SaslException("Invalid OAUTHBEARER client first message")
    pairs = dict(pair.split("=", 1) for pair in match["kvpairs"].split("\x01") if pair)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslException("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in pairs.items():
        if not _EXTENSION_KEY.fullmatch(key) or not _EXTENSION_VALUE.fullmatch(value):
            raise SaslException(f"Extension name {key} is invalid")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslException("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise SaslException(f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}")
    return match["authzid"] or "", auth_match["token"]
