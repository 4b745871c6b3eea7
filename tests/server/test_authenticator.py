"""SaslServerAuthenticator's state machine on an explicit clock: what it admits in each state,
re-authentication's rules and session expiry."""

from __future__ import annotations

import pytest

from samsa.server.security.authenticator import AuthenticationFailed, SaslServerAuthenticator
from samsa.server.security.plain import PlainServer
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey

USERS = {"alice": "a", "bob": "b"}


def authenticator(reauth_ms: int = 0, now: float = 0.0) -> SaslServerAuthenticator:
    return SaslServerAuthenticator(["PLAIN"], lambda mechanism: PlainServer(USERS), lambda mechanism: reauth_ms,
                                   max_receive_size=524288, timeout=30.0, now=now,
                                   api_versions_supported=lambda version: version <= 4)


def login(auth, user="alice", password="a", now=0.0):
    auth.admit(ApiKey.SASL_HANDSHAKE, 1, now)
    assert auth.handshake(1, "PLAIN", now) == (ErrorCode.NONE, ["PLAIN"])
    auth.admit(ApiKey.SASL_AUTHENTICATE, 2, now)
    return auth.authenticate(2, f"\0{user}\0{password}".encode(), now)


def test_limits_and_deadline_before_and_after_authentication():
    auth = authenticator(now=100.0)
    assert (auth.receive_limit(10**8), auth.deadline, auth.complete) == ((524288, "sasl.server.max.receive.size"), 130.0, False)
    assert login(auth, now=101.0) == (ErrorCode.NONE, None, b"", 0)
    assert (auth.receive_limit(10**8)[0], auth.deadline, auth.complete, str(auth.principal)) == (
        10**8, float("inf"), True, "User:alice")


def test_api_versions_retry_after_an_unsupported_version_then_only_the_handshake():
    auth = authenticator()
    auth.admit(ApiKey.API_VERSIONS, 9, 0)  # unsupported: the client may try again
    auth.admit(ApiKey.API_VERSIONS, 3, 0)
    with pytest.raises(AuthenticationFailed, match="Unexpected Kafka request of type API_VERSIONS"):
        auth.admit(ApiKey.API_VERSIONS, 3, 0)


def test_v0_handshake_switches_to_raw_tokens():
    auth = authenticator()
    auth.admit(ApiKey.SASL_HANDSHAKE, 0, 0)
    auth.handshake(0, "PLAIN", 0)
    assert auth.expects_raw_token
    with pytest.raises(AuthenticationFailed):
        auth.admit(ApiKey.SASL_AUTHENTICATE, 1, 0)
    assert auth.evaluate_raw_token(b"\0bob\0b", 0) == b""
    assert (auth.complete, auth.expects_raw_token, auth.principal.name) == (True, False, "bob")


def test_session_expiry_and_reauthentication_on_the_clock():
    auth = authenticator(reauth_ms=10_000)
    assert login(auth, now=0.0)[3] == 10_000
    auth.admit(ApiKey.METADATA, 12, 9.9)
    assert login(auth, now=9.9)[3] == 10_000  # renewed at 9.9: valid until 19.9
    auth.admit(ApiKey.METADATA, 12, 19.8)
    with pytest.raises(AuthenticationFailed, match="expired"):
        auth.admit(ApiKey.METADATA, 12, 19.9)


def test_an_expired_session_may_still_reauthenticate():
    auth = authenticator(reauth_ms=1_000)
    login(auth, now=0.0)
    assert login(auth, now=5.0)[0] == ErrorCode.NONE
    auth.admit(ApiKey.METADATA, 12, 5.5)


def test_reauthentication_at_most_once_a_second():
    auth = authenticator(reauth_ms=60_000)
    login(auth, now=0.0)
    login(auth, now=2.0)
    auth.admit(ApiKey.SASL_HANDSHAKE, 1, 2.5)  # served as an ordinary request
    assert auth.handshake(1, "PLAIN", 2.5) == (ErrorCode.ILLEGAL_SASL_STATE, [])
    assert login(auth, now=3.1)[0] == ErrorCode.NONE


def test_reauthentication_keeps_the_principal():
    auth = authenticator(reauth_ms=60_000)
    login(auth, now=0.0)
    code, message, _, _ = login(auth, "bob", "b", now=2.0)
    assert (code, message, auth.failure is not None) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication from User.alice: User.bob",
        True)


def test_failed_authentication_closes_after_the_response():
    auth = authenticator()
    code, message, _, _ = login(auth, "alice", "wrong")
    assert (code, message, auth.failure is not None, auth.complete) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password", True, False)
