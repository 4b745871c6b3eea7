"""JWT validation against a JWKS (server/security/jwt_validator.py), as Kafka's BrokerJwtValidator
and jose4j do it: keys made here (cryptography), tokens signed with them (PyJWT)."""

from __future__ import annotations

import base64
import json

import pytest

from samsa.server.security.jwt_validator import BrokerJwtOptions, JsonWebKeySet, UnresolvableKey, validate_jwt
from samsa.server.security.oauthbearer import IllegalToken

from jwt_keys import SigningKey, claims, jwks

NOW_MS = 1_800_000_000_123
NOW_S = NOW_MS / 1000
OPTIONS = BrokerJwtOptions(expected_audiences=frozenset({"kafka", "other"}), expected_issuer="https://issuer.example")
RSA_KEY = SigningKey("rsa-1")
EC_KEY = SigningKey("ec-1", "EC")
KEYS = JsonWebKeySet.from_json(jwks(RSA_KEY, EC_KEY))


def refused(token: str, options: BrokerJwtOptions = OPTIONS, keys: JsonWebKeySet = KEYS) -> IllegalToken:
    with pytest.raises(IllegalToken) as error:
        validate_jwt(token, keys, options, NOW_MS)
    assert error.value.status == "invalid_token" and error.value.scope is None
    return error.value


@pytest.mark.parametrize("key", [RSA_KEY, EC_KEY], ids=["RS256", "ES256"])
def test_a_good_token_names_its_subject_and_expiry(key):
    token = validate_jwt(key.sign(claims(NOW_S)), KEYS, OPTIONS, NOW_MS)
    assert (token.principal, token.expiration_ms) == ("alice", (int(NOW_S) + 300) * 1000)


def test_an_expired_token_is_refused_after_the_clock_skew():
    issued = int(NOW_S) - 600
    assert "is on or after the Expiration Time" in str(
        refused(RSA_KEY.sign(claims(NOW_S, iat=issued, exp=int(NOW_S) - 30))))
    # Within the default 30 s of skew it still passes, as jose4j lets it.
    assert validate_jwt(RSA_KEY.sign(claims(NOW_S, iat=issued, exp=int(NOW_S) - 29)), KEYS, OPTIONS,
                        NOW_MS).principal == "alice"
    strict = BrokerJwtOptions(expected_audiences=OPTIONS.expected_audiences, expected_issuer=OPTIONS.expected_issuer,
                              clock_skew_seconds=0)
    refused(RSA_KEY.sign(claims(NOW_S, exp=int(NOW_S))), strict)


def test_not_before_and_issued_at():
    refused(RSA_KEY.sign(claims(NOW_S, nbf=int(NOW_S) + 31)))
    assert validate_jwt(RSA_KEY.sign(claims(NOW_S, nbf=int(NOW_S) + 30)), KEYS, OPTIONS, NOW_MS)
    assert "No Issued At (iat) claim present" in str(refused(RSA_KEY.sign(claims(NOW_S, iat=None))))
    # jose4j refuses no iat in the future, only an exp before it.
    assert validate_jwt(RSA_KEY.sign(claims(NOW_S, iat=int(NOW_S) + 100)), KEYS, OPTIONS, NOW_MS)
    assert "cannot be before the Issued At" in str(refused(RSA_KEY.sign(claims(NOW_S, iat=int(NOW_S) + 400))))
    assert "No Expiration Time" in str(refused(RSA_KEY.sign(claims(NOW_S, exp=None))))
    refused(RSA_KEY.sign(claims(NOW_S, exp="later")))


def test_a_bad_signature_is_refused():
    other = SigningKey("rsa-1")  # the same kid, another key
    assert "signature verification failed" in str(refused(other.sign(claims(NOW_S))))
    header, payload, signature = RSA_KEY.sign(claims(NOW_S)).split(".")
    tampered = base64.urlsafe_b64encode(json.dumps(claims(NOW_S, sub="mallory")).encode()).rstrip(b"=").decode()
    refused(f"{header}.{tampered}.{signature}")


def test_an_unknown_kid_is_unresolvable():
    error = refused(SigningKey("rsa-2").sign(claims(NOW_S)))
    assert isinstance(error, UnresolvableKey) and error.kid == "rsa-2"
    # The key type must fit the algorithm: an RSA kid with ES256 finds no key.
    assert isinstance(refused(EC_KEY.sign(claims(NOW_S), kid="rsa-1")), UnresolvableKey)


def test_without_a_kid_the_first_key_of_the_algorithms_type_verifies():
    no_kid = RSA_KEY.sign(claims(NOW_S), kid=None)
    keys = JsonWebKeySet.from_json(json.dumps({"keys": [{"kty": "oct", "k": "AAAA"}, RSA_KEY.jwk(kid=None)]}))
    assert validate_jwt(no_kid, keys, OPTIONS, NOW_MS).principal == "alice"


def test_alg_none_and_unknown_algorithms_are_refused():
    unsigned = "{}.{}.".format(*(base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
                                 for part in ({"alg": "none"}, claims(NOW_S))))
    assert "Malformed JWT" in str(refused(unsigned))
    assert "not a permitted algorithm" in str(refused(unsigned + "c2ln"))


@pytest.mark.parametrize("overrides, message", [
    ({"aud": "elsewhere"}, "doesn't contain an acceptable identifier"),
    ({"aud": ["elsewhere", "other"]}, None),
    ({"aud": None}, "No Audience (aud) claim present"),
    ({"iss": "https://evil.example"}, "doesn't match expected value"),
    ({"iss": None}, "No Issuer (iss) claim present"),
])
def test_audience_and_issuer(overrides, message):
    token = RSA_KEY.sign(claims(NOW_S, **overrides))
    if message is None:
        assert validate_jwt(token, KEYS, OPTIONS, NOW_MS).principal == "alice"
    else:
        assert message in str(refused(token))


def test_unverified_audience_and_issuer_are_not_checked():
    lax = BrokerJwtOptions()
    assert validate_jwt(RSA_KEY.sign(claims(NOW_S, aud="elsewhere", iss=None)), KEYS, lax, NOW_MS).principal == "alice"


@pytest.mark.parametrize("overrides, message", [
    ({"sub": None}, "sub value must be non-null"),
    ({"sub": " "}, "sub value must not contain only whitespace"),
    ({"sub": ""}, "sub value must be non-empty"),
    ({"sub": 7}, "Could not extract the 'sub' claim"),
])
def test_the_subject_is_required(overrides, message):
    assert message in str(refused(RSA_KEY.sign(claims(NOW_S, **overrides))))


def test_claim_names_and_scopes():
    named = BrokerJwtOptions(expected_audiences=frozenset({"kafka"}), expected_issuer="https://issuer.example",
                             sub_claim="client_id", scope_claim="scp")
    token = RSA_KEY.sign(claims(NOW_S, sub=None, client_id=" app-1 ", scp=["produce", "consume"]))
    assert validate_jwt(token, KEYS, named, NOW_MS).principal == "app-1"
    assert "scp value must not contain duplicates - produce already present" in str(
        refused(RSA_KEY.sign(claims(NOW_S, client_id="a", scp=["produce", "produce"])), named))
    assert "scp value must be non-empty" in str(refused(RSA_KEY.sign(claims(NOW_S, client_id="a", scp=[""])), named))
    # A scope string is one scope, as in Kafka (not split at spaces).
    assert validate_jwt(RSA_KEY.sign(claims(NOW_S, scope="a a")), KEYS, OPTIONS, NOW_MS)


def test_malformed_tokens():
    assert "expected three sections" in str(refused("a.b"))
    assert "expected three sections" in str(refused("a..c"))
    refused("!!!.e30.c2ln")


def test_a_jwks_skips_keys_it_cannot_use():
    keys = JsonWebKeySet.from_json(json.dumps({"keys": [{"kty": "XYZ", "kid": "x"}, "junk", RSA_KEY.jwk()]}))
    assert [k.param("kid") for k in keys.keys] == ["rsa-1"]
    for text in ("{", "[]", '{"keys": 1}'):
        with pytest.raises(ValueError):
            JsonWebKeySet.from_json(text)


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")  # PyJWT signing with it
def test_a_short_rsa_key_is_refused():
    from cryptography.hazmat.primitives.asymmetric import rsa

    weak = SigningKey("weak")
    weak.private = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    refused(weak.sign(claims(NOW_S)), keys=JsonWebKeySet.from_json(jwks(weak)))
