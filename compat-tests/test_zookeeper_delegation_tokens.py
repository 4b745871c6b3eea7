"""Delegation tokens in a ZooKeeper cluster: two Samsa brokers and a Kafka 3.9 broker share
/delegation_token as Kafka 3.9 keeps it. A token created through one Samsa broker logs in to the
other and to Kafka; one created through Kafka logs in to Samsa; a token expired through Samsa is
gone from every broker (the token_change notifications); the znode Samsa writes is one Kafka reads."""

from __future__ import annotations

import base64
import json

import pytest
from compat_util import wait_for
from server_process import HOST
from test_delegation_tokens import SHA512, TokenBroker, create, login, start_with_sasl_listener
from test_zookeeper_cluster import zk_reader
from wire_client import WireClient

from samsa.wire import zk_data
from samsa.wire.protocol import ApiKey, request_class

pytest.importorskip("kazoo.client")

AlterScram = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
ExpireToken = request_class(ApiKey.EXPIRE_DELEGATION_TOKEN)

CHROOT = "/kafka/tokens"
T = 30
SECRET = "cluster-token-secret"
SALT = b"a fixed salt"


def start(factory, connect: str, broker_id: int, kafka: bool = False) -> TokenBroker:
    def settings(port: int, sasl_port: int) -> dict:
        return {"zookeeper.connect": connect, "broker.id": broker_id, "delegation.token.secret.key": SECRET,
                "listeners": f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl_port}",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                # Kafka 3.9 wants a login module for the listener's mechanism, even with nothing in it.
                **({"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"} if kafka else {})}
    return start_with_sasl_listener(
        lambda: factory.kafka39(connect, start=False) if kafka else factory(start=False), settings)


def token_login(setup: TokenBroker, token) -> bool:
    try:
        login(setup, token.token_id, base64.b64encode(bytes(token.hmac)).decode(), token_auth=True).close()
    except AssertionError:
        return False
    return True


def test_a_token_created_on_one_broker_logs_in_to_the_others(kafka39_factory):
    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT
    kafka = start(kafka39_factory, connect, 0, kafka=True)
    first, second = start(kafka39_factory, connect, 1), start(kafka39_factory, connect, 2)
    with WireClient(HOST, first.broker.port) as client:  # alice's credential, in /config/users/alice
        answer = client.call(AlterScram(deletions=[], upsertions=[AlterScram.ScramCredentialUpsertion(
            name="alice", mechanism=SHA512.type_id, iterations=4096, salt=SALT,
            salted_password=SHA512.salted_password("alice-secret", SALT, 4096))]), 0)
        assert answer.results[0].error_code == 0, answer
    brokers = (kafka, first, second)
    for setup in brokers:
        wait_for(lambda s=setup: login(s, "alice", "alice-secret"), T, what="alice's login")

    def created(setup):
        with login(setup, "alice", "alice-secret") as client:
            token = client.call(create(), 3)
        assert token.error_code == 0, token
        return token

    by_samsa, by_kafka = created(first), created(kafka)
    for setup in brokers:
        for token in (by_samsa, by_kafka):
            wait_for(lambda s=setup, t=token: token_login(s, t), T, what="the token's login")

    with zk_reader(connect) as client:
        data, _ = client.get(zk_data.delegation_token_path(by_samsa.token_id))
    assert json.loads(data) == {
        "version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aalice", "renewers": [],
        "issueTimestamp": by_samsa.issue_timestamp_ms, "maxTimestamp": by_samsa.max_timestamp_ms,
        "expiryTimestamp": by_samsa.expiry_timestamp_ms, "tokenId": by_samsa.token_id}

    # Expired through the second Samsa broker: no broker takes it any more.
    with login(second, "alice", "alice-secret") as client:
        assert client.call(ExpireToken(hmac=bytes(by_kafka.hmac), expiry_time_period_ms=-1), 2).error_code == 0
    for setup in brokers:
        wait_for(lambda s=setup: not token_login(s, by_kafka), T, what="the expired token refused")
    assert token_login(second, by_samsa)
