"""JWT validation against a JWKS (KIP-768), as Kafka's BrokerJwtValidator does it with jose4j: the
signature checked with the key of the set that jose4j's VerificationJwkSelector picks for the
token's header (by kid, key type, use, alg, curve), then jose4j's claim checks (exp and iat
required, exp/nbf with the clock skew, aud and iss against the expected ones), then Kafka's
(the scope claim's values, the subject). Pure: the key set is handed in, the time too; fetching
and refreshing the set is server/security/jwks.py's job.

PyJWT (with cryptography) parses the keys and verifies the signature; the claims are checked here
because jose4j's rules are not PyJWT's (jose4j refuses no iat in the future, PyJWT does).
Why a token is refused goes to the log only: the client learns `{"status":"invalid_token"}`, as
from Kafka's OAuthBearerValidatorCallbackHandler.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.exceptions import PyJWKError, PyJWTError

from .oauthbearer import IllegalToken, ValidatedToken

log = logging.getLogger(__name__)

# The key type each JWS algorithm verifies with (jose4j's JsonWebSignatureAlgorithm.getKeyType).
_KEY_TYPES = {
    **{f"HS{bits}": "oct" for bits in (256, 384, 512)},
    **{f"RS{bits}": "RSA" for bits in (256, 384, 512)},
    **{f"PS{bits}": "RSA" for bits in (256, 384, 512)},
    "ES256": "EC", "ES384": "EC", "ES512": "EC", "ES256K": "EC",
    "EdDSA": "OKP", "Ed25519": "OKP", "Ed448": "OKP",
}
# The curve of each ECDSA algorithm, and EdDSA's curves: how jose4j narrows several candidates.
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521", "ES256K": "secp256k1"}
_EDDSA_CURVES = ("Ed25519", "Ed448")


class UnresolvableKey(IllegalToken):
    """No key of the set verifies the token (jose4j's UnresolvableKeyException): a set fetched from
    an endpoint is refreshed early for this kid (RefreshingHttpsJwks.maybeExpediteRefresh)."""

    def __init__(self, message: str, kid: str | None) -> None:
        super().__init__(message)
        self.kid = kid


@dataclass(frozen=True)
class JsonWebKey:
    """One key of a JWKS: its parameters as published, and the key PyJWT verifies with."""

    params: Mapping[str, Any]
    key: Any

    def param(self, name: str) -> Any:
        return self.params.get(name)


class JsonWebKeySet:
    """A JWKS's usable keys, in the set's order (jose4j's JsonWebKeySet: a key that cannot be
    parsed is skipped, as jose4j skips it)."""

    def __init__(self, keys: Sequence[JsonWebKey]) -> None:
        self.keys = tuple(keys)

    @classmethod
    def from_json(cls, text: str) -> JsonWebKeySet:
        """ValueError if the text is no JWKS (no JSON object with a `keys` array)."""
        try:
            document = json.loads(text)
        except ValueError as error:
            raise ValueError(f"the JWKS is not JSON: {error}") from None
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError("The JSON JWKS content does not include the keys member.")
        keys = []
        for params in document["keys"]:
            if not isinstance(params, dict):
                continue
            try:
                keys.append(JsonWebKey(params, jwt.PyJWK(params).key))
            except (PyJWKError, PyJWTError, ValueError, TypeError, KeyError) as error:
                log.debug("Ignoring an individual JWK in a JWKS due to a problem processing it: %s", error)
        return cls(keys)

    def __repr__(self) -> str:
        return f"JsonWebKeySet(kids={[k.param('kid') for k in self.keys]})"

    def select(self, header: Mapping[str, Any]) -> JsonWebKey | None:
        """jose4j's VerificationJwkSelector.select: the keys for a signature (use `sig` or none,
        key_ops with `verify` or none) of the algorithm's key type and the header's kid; if several,
        those whose alg is the header's (or none); if still several, by curve; the first."""
        alg = header.get("alg")
        kid = header.get("kid")
        key_type = _KEY_TYPES.get(alg) if isinstance(alg, str) else None
        candidates = [k for k in self.keys
                      if k.param("kty") == key_type
                      and (kid is None or k.param("kid") == kid)
                      and k.param("use") in (None, "sig")
                      and (k.param("key_ops") is None or "verify" in k.param("key_ops"))]
        if len(candidates) > 1:
            candidates = [k for k in candidates if k.param("alg") in (None, alg)]
        if len(candidates) > 1 and key_type == "EC":
            candidates = [k for k in candidates if k.param("crv") in (None, _EC_CURVES.get(str(alg)))]
        elif len(candidates) > 1 and key_type == "OKP":
            candidates = [k for k in candidates if k.param("crv") in (None, *_EDDSA_CURVES)]
        return candidates[0] if candidates else None


@dataclass(frozen=True)
class BrokerJwtOptions:
    """BrokerJwtValidator's settings (the listener's sasl.oauthbearer.* configs)."""

    expected_audiences: frozenset[str] = frozenset()  # empty: the audience is not checked
    expected_issuer: str | None = None  # None: the issuer is not checked
    clock_skew_seconds: int = 30
    scope_claim: str = "scope"
    sub_claim: str = "sub"


def _json_part(part: str, what: str) -> dict:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(decoded)
    except (binascii.Error, ValueError):
        raise IllegalToken(f"Could not validate the access token: the JWT's {what} is not Base64url-encoded JSON") \
            from None
    if not isinstance(value, dict):
        raise IllegalToken(f"Could not validate the access token: the JWT's {what} is not a JSON object")
    return value


def _seconds(claims: Mapping[str, Any], name: str) -> int | None:
    """A NumericDate claim in whole seconds, as jose4j reads it (Number.longValue)."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise IllegalToken(f"Could not validate the access token: The value of the '{name}' claim is not the "
                           f"expected type ({value!r} - {type(value).__name__})")
    return int(value)


def _string_list(claims: Mapping[str, Any], name: str) -> list[str]:
    value = claims.get(name)
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise IllegalToken(f"Could not validate the access token: The value of the '{name}' claim is not an array "
                           "of strings or a single string value.")
    return values


def _fail(message: str) -> IllegalToken:
    return IllegalToken(f"Could not validate the access token: {message}")


def _verify_signature(token: str, header: Mapping[str, Any], keys: JsonWebKeySet) -> None:
    alg = header.get("alg")
    if not isinstance(alg, str) or alg == "none":
        raise _fail(f"'{alg}' is not a permitted algorithm.")
    if alg not in _KEY_TYPES:
        raise _fail(f"{alg} is an unknown, unsupported or unavailable alg algorithm.")
    key = keys.select(header)
    kid = header.get("kid")
    if key is None:
        raise UnresolvableKey(f"Could not validate the access token: Unable to find a suitable verification key for "
                              f"JWS w/ header {json.dumps(dict(header))} from JWKs {keys!r}",
                              kid if isinstance(kid, str) else None)
    try:
        jwt.PyJWS().decode_complete(token, key=key.key, algorithms=[alg],
                                    options={"verify_signature": True, "enforce_minimum_key_length": True})
    except PyJWTError as error:
        raise _fail(f"JWS signature verification failed ({error})") from None


def validate_jwt(token: str, keys: JsonWebKeySet, options: BrokerJwtOptions, now_ms: int) -> ValidatedToken:
    """BrokerJwtValidator.validate: the token's principal and expiry, or IllegalToken
    (UnresolvableKey if no key of the set is the token's)."""
    token = token.strip()
    parts = token.split(".")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise IllegalToken("Malformed JWT provided; expected three sections (header, payload, and signature)")
    header = _json_part(parts[0], "header")
    if header.get("crit") is not None:
        raise _fail(f"Unrecognized header parameter(s) in the crit header: {header['crit']}")
    _verify_signature(token, header, keys)
    claims = _json_part(parts[1], "payload")
    _check_claims(claims, options, now_ms // 1000)
    raw_scope = claims.get(options.scope_claim)
    scopes: Collection[Any] = [raw_scope] if isinstance(raw_scope, str) else (
        raw_scope if isinstance(raw_scope, list) else ())
    _validate_scopes(options.scope_claim, scopes)
    expiration = _seconds(claims, "exp")
    assert expiration is not None  # required by _check_claims
    if expiration < 0:
        raise IllegalToken(f'exp value must be non-negative; value given was "{expiration * 1000}"')
    subject = claims.get(options.sub_claim)
    if subject is not None and not isinstance(subject, str):
        raise IllegalToken(f"Could not extract the '{options.sub_claim}' claim from the access token")
    issued_at = _seconds(claims, "iat")
    if issued_at is not None and issued_at < 0:
        raise IllegalToken(f'iat value must be null or non-negative; value given was "{issued_at * 1000}"')
    return ValidatedToken(_claim_string(options.sub_claim, subject), expiration * 1000)


def _check_claims(claims: Mapping[str, Any], options: BrokerJwtOptions, now: int) -> None:
    """jose4j's JwtConsumer as BrokerJwtValidator builds it (exp and iat required), in its order:
    issuer, audience, then the dates."""
    if options.expected_issuer is not None:
        issuer = claims.get("iss")
        if issuer is None:
            raise _fail("No Issuer (iss) claim present.")
        if not isinstance(issuer, str):
            raise _fail("The value of the 'iss' claim is not the expected type")
        if issuer != options.expected_issuer:
            raise _fail(f"Issuer (iss) claim value ({issuer}) doesn't match expected value of "
                        f"{options.expected_issuer}")
    if options.expected_audiences:
        if claims.get("aud") is None:
            raise _fail("No Audience (aud) claim present.")
        audiences = _string_list(claims, "aud")
        if not options.expected_audiences.intersection(audiences):
            raise _fail(f"Audience (aud) claim {audiences} doesn't contain an acceptable identifier. Expected "
                        f"{' or '.join(sorted(options.expected_audiences))} as an aud value.")
    expiration, issued_at, not_before = _seconds(claims, "exp"), _seconds(claims, "iat"), _seconds(claims, "nbf")
    if expiration is None:
        raise _fail("No Expiration Time (exp) claim present.")
    if issued_at is None:
        raise _fail("No Issued At (iat) claim present.")
    skew = options.clock_skew_seconds
    if now - skew >= expiration:
        raise _fail(f"The JWT is no longer valid - the evaluation time {now} is on or after the Expiration Time "
                    f"(exp={expiration}) claim value (even when providing {skew} seconds of leeway to account for "
                    "clock skew).")
    if expiration < issued_at:
        raise _fail(f"The Expiration Time (exp={expiration}) claim value cannot be before the Issued At "
                    f"(iat={issued_at}) claim value.")
    if not_before is not None and expiration < not_before:
        raise _fail(f"The Expiration Time (exp={expiration}) claim value cannot be before the Not Before "
                    f"(nbf={not_before}) claim value.")
    if not_before is not None and now + skew < not_before:
        raise _fail(f"The JWT is not yet valid as the evaluation time {now} is before the Not Before "
                    f"(nbf={not_before}) claim time (even when providing {skew} seconds of leeway to account for "
                    "clock skew).")


def _claim_string(name: str, value: Any) -> str:
    """ClaimValidationUtils.validateString: present, not blank; trimmed."""
    if value is None:
        raise IllegalToken(f"{name} value must be non-null")
    if not isinstance(value, str):
        raise IllegalToken(f"{name} value must be a string")
    if not value:
        raise IllegalToken(f"{name} value must be non-empty")
    if not value.strip():
        raise IllegalToken(f"{name} value must not contain only whitespace")
    return value.strip()


def _validate_scopes(name: str, scopes: Collection[Any]) -> None:
    """ClaimValidationUtils.validateScopes: every scope a non-blank string, none twice."""
    seen: set[str] = set()
    for scope in scopes:
        scope = _claim_string(name, scope)
        if scope in seen:
            raise IllegalToken(f"{name} value must not contain duplicates - {scope} already present")
        seen.add(scope)
