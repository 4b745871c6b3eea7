"""Delegation tokens (server/security/delegation_tokens.py) with an explicit clock: creation,
renewal, expiry and description with Kafka's checks and timestamps; SCRAM logins with a token
(tokenauth=true); the ZooKeeper znode as Kafka 3.9 writes it; the image keeping tokens across a
restart."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from samsa.client.scram import ScramClient, ScramMechanism
from samsa.server.context import KafkaPrincipal
from samsa.server.metadata.image import MetadataImage
from samsa.server.security.authenticator import SaslServerAuthenticator
from samsa.server.security.delegation_tokens import (
    DelegationTokens,
    TokenConfig,
    TokenInformation,
    allow_token_requests,
    create_hmac,
    new_token_id,
)
from samsa.server.security.sasl import SaslException
from samsa.server.security.scram import ScramServer
from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode

ALICE, BOB, CAROL = (KafkaPrincipal("User", n) for n in ("alice", "bob", "carol"))
DAY, WEEK = 86400000, 604800000
T0 = 1_700_000_000_000
SHA512 = ScramMechanism.SCRAM_SHA_512


def tokens(secret: str | None = "secret", **config) -> DelegationTokens:
    return DelegationTokens(TokenConfig(secret, **config))


def created(manager: DelegationTokens, owner=ALICE, requester=ALICE, renewers=(), max_lifetime_ms=0,
            now=T0) -> TokenInformation:
    token = manager.create(owner, requester, list(renewers), max_lifetime_ms, now)
    assert isinstance(token, TokenInformation)
    manager.update(token)  # what the admin manager does once it is stored
    return token


def test_the_hmac_is_hmac_sha512_of_the_token_id_under_the_secret_key():
    assert create_hmac("tok", "key") == hmac.new(b"key", b"tok", hashlib.sha512).digest()
    assert len(new_token_id()) == 22 and "=" not in new_token_id()


def test_without_a_secret_key_everything_is_disabled():
    for manager in (tokens(None), tokens("")):
        assert not manager.enabled
        assert manager.create(ALICE, ALICE, [], 0, T0) == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert manager.renew(b"x", ALICE, 0, T0).error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        assert manager.expire(b"x", ALICE, 0, T0).error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_creation_timestamps_follow_the_configs_and_the_requested_lifetime():
    manager = tokens(max_lifetime_ms=WEEK, expiry_time_ms=DAY)
    token = created(manager)
    assert (token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) == (T0, T0 + DAY, T0 + WEEK)
    short = created(manager, max_lifetime_ms=1000)  # shorter than the renewal time: expiry is the maximum
    assert (short.expiry_timestamp, short.max_timestamp) == (T0 + 1000, T0 + 1000)
    long = created(manager, max_lifetime_ms=10 * WEEK)  # capped at delegation.token.max.lifetime.ms
    assert long.max_timestamp == T0 + WEEK
    assert manager.create(ALICE, ALICE, [KafkaPrincipal("Group", "g")], 0, T0) == ErrorCode.INVALID_PRINCIPAL_TYPE


def test_renewal_by_owner_or_renewer_within_the_maximum():
    manager = tokens(max_lifetime_ms=WEEK, expiry_time_ms=DAY)
    token = created(manager, renewers=[BOB])
    mac = manager.hmac(token.token_id)
    assert manager.renew(mac, CAROL, 0, T0 + 1).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert manager.renew(b"unknown", ALICE, 0, T0 + 1).error == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    outcome = manager.renew(mac, BOB, 5000, T0 + 10)
    assert (outcome.error, outcome.expiry_timestamp) == (ErrorCode.NONE, T0 + 5010)
    assert outcome.updated is not None and outcome.updated.expiry_timestamp == T0 + 5010
    # A longer period than delegation.token.expiry.time.ms is cut to it; never past the maximum.
    assert manager.renew(mac, ALICE, 10 * DAY, T0).expiry_timestamp == T0 + DAY
    lasting = tokens(max_lifetime_ms=WEEK, expiry_time_ms=WEEK)
    long_lived = created(lasting)
    assert lasting.renew(lasting.hmac(long_lived.token_id), ALICE, 0, T0 + WEEK - 10).expiry_timestamp == T0 + WEEK
    # Past its expiry the token cannot be renewed, and that is said before the owner is checked.
    assert manager.renew(mac, CAROL, 0, T0 + DAY + 1).error == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_expiry_sets_the_timestamp_or_removes_the_token():
    manager = tokens(max_lifetime_ms=WEEK, expiry_time_ms=DAY)
    token = created(manager, renewers=[BOB])
    mac = manager.hmac(token.token_id)
    assert manager.expire(mac, CAROL, -1, T0).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    outcome = manager.expire(mac, BOB, 1000, T0 + 5)
    assert (outcome.error, outcome.expiry_timestamp, outcome.updated.expiry_timestamp) == (
        ErrorCode.NONE, T0 + 1005, T0 + 1005)
    manager.update(outcome.updated)
    assert manager.expire(mac, ALICE, 1000, T0 + 2000).error == ErrorCode.DELEGATION_TOKEN_EXPIRED
    removal = manager.expire(mac, ALICE, -1, T0 + 2000)  # a negative period: at once, even when expired
    assert (removal.error, removal.expiry_timestamp, removal.removed) == (ErrorCode.NONE, T0 + 2000, token.token_id)
    manager.remove(token.token_id)
    assert manager.token_for_hmac(mac) is None and manager.credential(token.token_id, SHA512) is None


def test_expired_tokens_are_found_by_the_sweep():
    manager = tokens(max_lifetime_ms=WEEK, expiry_time_ms=DAY)
    first, second = created(manager), created(manager, max_lifetime_ms=1000)
    assert manager.expired(T0 + 1000) == []
    assert manager.expired(T0 + 1001) == [second]
    assert {t.token_id for t in manager.expired(T0 + DAY + 1)} == {first.token_id, second.token_id}


def test_describe_filters_by_owner_and_permission():
    manager = tokens()
    mine = created(manager, renewers=[BOB])
    for_carol = created(manager, owner=CAROL, requester=ALICE)
    theirs = created(manager, owner=CAROL, requester=CAROL)
    never = lambda *_: False  # noqa: E731

    def ids(requester, owners=None, token=never, owner=never):
        return {t.token_id for t, _ in manager.describe(requester, owners, token, owner)}
    assert ids(ALICE) == {mine.token_id, for_carol.token_id}  # the owner, and the requester (KIP-373)
    assert ids(BOB) == {mine.token_id}  # a renewer
    assert ids(ALICE, [CAROL]) == {for_carol.token_id}
    assert ids(BOB, token=lambda token_id: token_id == theirs.token_id) == {mine.token_id, theirs.token_id}
    assert ids(BOB, owner=lambda o: o == CAROL) == {mine.token_id, for_carol.token_id, theirs.token_id}
    [(_, mac)] = manager.describe(BOB, [ALICE], never, never)
    assert mac == manager.hmac(mine.token_id)


def test_tokens_are_described_in_the_order_of_kafkas_concurrent_hash_map():
    manager = tokens()
    for token_id in ("c", "a", "b", "q"):  # String.hashCode: 99, 97, 98, 113 (bucket 1 of 16, as "a")
        manager.update(TokenInformation(token_id, ALICE, ALICE, (), T0, T0 + WEEK, T0 + DAY))
    never = lambda *_: False  # noqa: E731
    assert [t.token_id for t, _ in manager.describe(ALICE, None, never, never)] == ["a", "q", "b", "c"]
    for n in range(8):  # the twelfth token doubles the table: "a" (97) and "q" (113) part
        manager.update(TokenInformation(f"t{n}", ALICE, ALICE, (), T0, T0 + WEEK, T0 + DAY))
    described = [t.token_id for t, _ in manager.describe(ALICE, None, never, never)]
    assert [token_id for token_id in described if len(token_id) == 1] == ["a", "b", "c", "q"]


def test_token_requests_are_refused_over_plaintext_ssl_without_a_certificate_and_token_logins():
    assert allow_token_requests(ALICE, "SASL_PLAINTEXT")
    assert allow_token_requests(ALICE, "SSL")
    assert not allow_token_requests(ALICE, "PLAINTEXT")
    assert not allow_token_requests(KafkaPrincipal("User", "ANONYMOUS"), "SSL")
    assert not allow_token_requests(KafkaPrincipal("User", "alice", token_authenticated=True), "SASL_SSL")
    assert KafkaPrincipal("User", "alice", token_authenticated=True) == ALICE


# --- SCRAM with tokenauth=true --------------------------------------------------------------------

def login(manager: DelegationTokens, token_id: str, password: str, mechanism=SHA512, now=T0 + 1000) -> ScramServer:
    server = ScramServer(mechanism, lambda user, m: None, manager.login, lambda: now)
    client = ScramClient(mechanism, token_id, password, token_auth=True)
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    return server


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_token_logs_in_as_its_owner_until_it_expires(mechanism):
    manager = tokens(expiry_time_ms=DAY)
    token = created(manager)
    password = base64.b64encode(manager.hmac(token.token_id)).decode()
    server = login(manager, token.token_id, password, mechanism, now=T0 + 1000)
    assert (server.complete, server.authorization_id, server.token_authenticated) == (True, "alice", True)
    assert server.credential_lifetime_ms == DAY - 1000  # the session ends with the token


def test_a_token_login_with_a_wrong_hmac_or_unknown_id_fails():
    manager = tokens()
    token = created(manager)
    with pytest.raises(SaslException, match="Invalid client credentials"):
        login(manager, token.token_id, base64.b64encode(b"wrong").decode())
    with pytest.raises(SaslException, match="Token Authentication failed: Invalid tokenId : nope"):
        login(manager, "nope", "x")
    # Without tokenauth the token id is an ordinary (unknown) user name.
    server = ScramServer(SHA512, lambda user, m: None, manager.login, lambda: T0)
    with pytest.raises(SaslException, match="Invalid user credentials"):
        server.evaluate(ScramClient(SHA512, token.token_id, "x").first())


def test_the_authenticator_marks_the_principal_token_authenticated_and_ends_the_session():
    manager = tokens(expiry_time_ms=5000)
    token = created(manager)
    password = base64.b64encode(manager.hmac(token.token_id)).decode()
    clock = {"ms": T0 + 1000}
    authenticator = SaslServerAuthenticator(
        ["SCRAM-SHA-512"], lambda m: ScramServer(SHA512, lambda u, mech: None, manager.login, lambda: clock["ms"]),
        lambda m: 0, 1 << 20, 30.0, 0.0, lambda v: True)
    authenticator.handshake(1, "SCRAM-SHA-512", 0.0)
    client = ScramClient(SHA512, token.token_id, password, token_auth=True)
    code, _, first, _ = authenticator.authenticate(1, client.first(), 0.0)
    code, _, final, lifetime_ms = authenticator.authenticate(1, client.final(first), 0.0)
    assert (code, lifetime_ms) == (ErrorCode.NONE, 4000)
    assert authenticator.principal == ALICE and authenticator.principal.token_authenticated


# --- storage --------------------------------------------------------------------------------------

def test_the_zookeeper_znode_is_kafka_39s():
    info = zk_data.DelegationTokenInfo("tok", "User%3Aalice", "User%3Abob", ("User%3Acarol",), 1, 3, 2)
    data = zk_data.encode_delegation_token(info)
    assert json.loads(data) == {"version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Abob",
                                "renewers": ["User%3Acarol"], "issueTimestamp": 1, "maxTimestamp": 3,
                                "expiryTimestamp": 2, "tokenId": "tok"}
    assert zk_data.decode_delegation_token(data) == info
    # Version 1 and 2 znodes have no requester: the owner requested it.
    old = b'{"version":1,"owner":"User%3Aalice","renewers":[],"issueTimestamp":1,"maxTimestamp":3,' \
          b'"expiryTimestamp":2,"tokenId":"t"}'
    assert zk_data.decode_delegation_token(old).token_requester == "User%3Aalice"
    assert zk_data.decode_delegation_token(b"") is None


def test_the_image_keeps_tokens_across_a_restart(tmp_path):
    image = MetadataImage.load(tmp_path, "cluster")
    token = TokenInformation("tok", ALICE, BOB, (CAROL,), 1, 3, 2)
    image.set_delegation_token("tok", token.to_json())
    image.set_delegation_token("gone", TokenInformation("gone", ALICE, ALICE, (), 1, 3, 2).to_json())
    image.set_delegation_token("gone", None)
    reloaded = MetadataImage.load(tmp_path, "cluster")
    assert [TokenInformation.from_json(t) for t in reloaded.delegation_tokens.values()] == [token]
