"""SASL/OAUTHBEARER with Kafka's unsecured validator (server/security/oauthbearer.py): the token's
checks in Kafka's order and words, the client message's parsing, the error exchange
(`{"status":"invalid_token"}`, then %x01, then SASL_AUTHENTICATION_FAILED), and over loopback the
principal and a session that ends when the token expires. JWT validation against a JWKS:
test_jwt_validator.py and test_oauthbearer_jwks.py."""

from __future__ import annotations

import base64
import json
import time

import pytest

from samsa.server.security.oauthbearer import (
    IllegalToken,
    OAuthBearerServer,
    UnsecuredValidatorOptions,
    validate_unsecured,
)
from samsa.server.security.sasl import SaslAuthenticationException, SaslException
from samsa.wire.errors import ErrorCode

from loopback import Client
from security_helpers import ApiVersions, authenticate, config, handshake, record_principals, run

NOW_MS = 1_800_000_000_000
DEFAULTS = UnsecuredValidatorOptions()
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def b64(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def jws(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}.{signature}"


def initial_response(token: str, authzid: str = "", extensions: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def test_a_valid_token_names_its_principal_and_expiry():
    token = validate_unsecured(jws({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000}), DEFAULTS,
                               NOW_MS)
    assert (token.principal, token.expiration_ms) == ("alice", NOW_MS + 60_000)
    custom = UnsecuredValidatorOptions.from_jaas({"unsecuredValidatorPrincipalClaimName": " user ",
                                                  "unsecuredValidatorRequiredScope": "read write"})
    assert validate_unsecured(jws({"user": "bob", "exp": NOW_MS / 1000 + 1, "scope": ["read", "write"]}), custom,
                              NOW_MS).principal == "bob"


@pytest.mark.parametrize("token, message", [
    (jws({"sub": "a", "exp": NOW_MS / 1000}), "The indicated time (1800000000000 ms) minus allowable clock skew "
                                             "(0 ms) was on or after the Expiration Time value"),
    (jws({"sub": "a"}), "No expiration time in JWT"),
    (jws({"exp": NOW_MS / 1000 + 60}), "No principal name in JWT claim: sub"),
    (jws({"sub": "a", "exp": "soon"}), "The exp claim had the incorrect type: str"),
    (jws({"sub": "a", "exp": NOW_MS / 1000 + 60}, {"alg": "HS256"}), "Unsecured JWS must have 'none' for an algorithm"),
    (jws({"sub": "a", "exp": NOW_MS / 1000 + 60}, signature="c2ln"), "Unsecured JWS must not contain a digital"),
    (jws({"sub": "a", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 1}), "The Issued At value"),
    (jws({"sub": "a", "exp": NOW_MS / 1000 + 60}).rsplit(".", 1)[0], "must have 3 dot-separated"),
    ("a..b", "Malformed compact serialization contains '..'"),
    ("!!!." + b64({}) + ".", "malformed Base64 URL encoded value"),
    (base64.urlsafe_b64encode(b"{nope").decode().rstrip("=") + "." + b64({}) + ".", "malformed JSON"),
])
def test_invalid_tokens_are_refused_with_kafkas_reason(token, message):
    with pytest.raises(IllegalToken) as refused:
        validate_unsecured(token, DEFAULTS, NOW_MS)
    assert message in str(refused.value) and refused.value.status == "invalid_token"


def test_a_missing_required_scope_is_insufficient_scope():
    options = UnsecuredValidatorOptions(required_scope=("admin",))
    with pytest.raises(IllegalToken) as refused:
        validate_unsecured(jws({"sub": "a", "exp": NOW_MS / 1000 + 60, "scope": "read"}), options, NOW_MS)
    assert (refused.value.status, refused.value.scope) == ("insufficient_scope", "[admin]")


def test_clock_skew_must_not_be_negative():
    with pytest.raises(ValueError, match="must not be negative"):
        UnsecuredValidatorOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def server() -> OAuthBearerServer:
    return OAuthBearerServer(lambda token: validate_unsecured(token, DEFAULTS, NOW_MS), lambda: NOW_MS)


def test_the_server_completes_with_the_token_principal_and_lifetime():
    s = server()
    assert s.evaluate(initial_response(jws({"sub": "alice", "exp": NOW_MS / 1000 + 60}), extensions="traceId=1\x01")) == b""
    assert (s.complete, s.authorization_id, s.credential_lifetime_ms) == (True, "alice", 60_000)


def test_an_invalid_token_gets_the_json_error_then_fails_on_the_clients_acknowledgement():
    s = server()
    challenge = s.evaluate(initial_response(jws({"sub": "alice", "exp": NOW_MS / 1000 - 1})))
    assert challenge == b'{"status":"invalid_token"}' and not s.complete
    with pytest.raises(SaslAuthenticationException, match='^{"status":"invalid_token"}$'):
        s.evaluate(b"\x01")


@pytest.mark.parametrize("message", [
    b"garbage", initial_response("a.b.").replace(b"Bearer", b"Basic"), b"n,,\x01host=x\x01\x01",
    initial_response("a.b.", extensions="bad_key=1\x01"),
])
def test_a_malformed_client_message_is_bad_credentials(message):
    with pytest.raises(SaslException):
        server().evaluate(message)


def test_the_authorization_id_must_be_the_principal():
    with pytest.raises(SaslAuthenticationException, match="different from the token's principal name"):
        server().evaluate(initial_response(jws({"sub": "alice", "exp": NOW_MS / 1000 + 60}), authzid="bob"))


def oauth_config(tmp_path, **props):
    return config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                  **{"sasl.enabled.mechanisms": "OAUTHBEARER",
                     "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN};", **props})


def test_over_a_listener_the_session_ends_with_the_token(tmp_path):
    async def scenario(broker, ports):
        seen = record_principals(broker)
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await handshake(client, "OAUTHBEARER")).error_code == ErrorCode.NONE
        expiry = time.time() + 60
        done = await authenticate(client, initial_response(jws({"sub": "alice", "exp": expiry})))
        assert (done.error_code, done.error_message) == (ErrorCode.NONE, None)
        assert 55_000 < done.session_lifetime_ms <= 60_000
        await client.call(ApiVersions(), 0)
        assert [str(p) for p in seen] == ["User:alice"]

        refused = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await handshake(refused, "OAUTHBEARER")).error_code == ErrorCode.NONE
        challenge = await authenticate(refused, initial_response(jws({"sub": "alice", "exp": time.time() - 1})))
        assert (challenge.error_code, challenge.auth_bytes) == (ErrorCode.NONE, b'{"status":"invalid_token"}')
        failed = await authenticate(refused, b"\x01")
        assert (failed.error_code, failed.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                             '{"status":"invalid_token"}')

    run(oauth_config(tmp_path), scenario)


def test_another_callback_handler_is_refused_at_startup(tmp_path):
    from samsa.server.broker import Broker
    from samsa.server.config.kafka_config import ConfigError

    key = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    with pytest.raises(ConfigError) as raised:
        Broker(oauth_config(tmp_path, **{key: "com.example.MyValidatorCallbackHandler"}))
    assert raised.value.name == key and "OAuthBearerValidatorCallbackHandler" in str(raised.value)
