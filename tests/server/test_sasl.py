"""SASL over loopback, as Kafka's SaslServerAuthenticator behaves: PLAIN and SCRAM in SaslAuthenticate
requests (handshake v1) and as raw tokens (v0), their errors, what is served before authentication,
the frame bound and the deadline for unauthenticated clients, and KIP-368 re-authentication."""

from __future__ import annotations

import pytest
from trio.testing import MockClock

from samsa.client.scram import ScramClient, ScramMechanism
from samsa.server.network.listeners import AUTHENTICATION_TIMEOUT_S
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from security_helpers import (
    PLAIN_JAAS, SIZE, ApiVersions, Metadata, SaslAuthenticate, SaslHandshake, authenticate, closed, config, handshake,
    plain_token, raw_token, record_principals, run, sasl_plain, sasl_scram,
)
from loopback import Client, create_topic_request, one_batch, produce_request

AlterScram = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def sasl_config(tmp_path, mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", **props):
    return config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **{
        "sasl.enabled.mechanisms": mechanisms,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, **props})


async def add_scram_user(port: int, user: str, password: str, mechanisms=SCRAM, iterations: int = 4096):
    """AlterUserScramCredentials over the PLAINTEXT listener, salting as clients do."""
    admin = await Client.connect(port)
    for name in mechanisms:  # one request each: Kafka refuses a user named twice in one request
        mechanism = ScramMechanism.from_name(name)
        salt = b"salt-of-" + user.encode()
        upsertion = AlterScram.ScramCredentialUpsertion(
            name=user, mechanism=mechanism.type_id, iterations=iterations, salt=salt,
            salted_password=mechanism.salted_password(password, salt, iterations))
        response = await admin.call(AlterScram(deletions=[], upsertions=[upsertion]), 0)
        assert [r.error_code for r in response.results] == [ErrorCode.NONE]
    await admin.stream.aclose()


def test_plain_authenticates_and_the_principal_is_the_user(tmp_path):
    async def scenario(broker, ports):
        seen = record_principals(broker)
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await client.call(ApiVersions(), 0)).error_code == ErrorCode.NONE
        hello = await handshake(client, "PLAIN")
        assert (hello.error_code, sorted(hello.mechanisms)) == (ErrorCode.NONE, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        done = await authenticate(client, plain_token("alice", "alice-secret"))
        assert (done.error_code, done.error_message, done.session_lifetime_ms) == (ErrorCode.NONE, None, 0)
        assert (await client.call(Metadata(topics=[]), 12)).brokers
        await client.call(ApiVersions(), 0)
        assert [str(p) for p in seen] == ["User:ANONYMOUS", "User:alice"]

    run(sasl_config(tmp_path), scenario)


@pytest.mark.parametrize("user, password, message", [
    ("alice", "wrong", "Authentication failed: Invalid username or password"),
    ("nobody", "x", "Authentication failed: Invalid username or password"),
    ("", "x", "Authentication failed: username not specified"),
    ("alice", "", "Authentication failed: password not specified"),
])
def test_plain_failures_answer_then_close(tmp_path, user, password, message):
    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        failed = await sasl_plain(client, user, password)
        assert (failed.error_code, failed.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        assert await closed(client)

    run(sasl_config(tmp_path), scenario)


def test_plain_authorization_id_must_be_the_user(tmp_path):
    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        await handshake(client, "PLAIN")
        failed = await authenticate(client, plain_token("alice", "alice-secret", authzid="admin"))
        assert failed.error_message == ("Authentication failed: Client requested an authorization id that is "
                                        "different from username")

    run(sasl_config(tmp_path), scenario)


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_scram_authenticates_with_credentials_from_alter_user_scram_credentials(tmp_path, mechanism, version):
    async def scenario(broker, ports):
        await add_scram_user(ports["PLAINTEXT"], "alice", "alice-secret")
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        done = await sasl_scram(client, mechanism, "alice", "alice-secret", version)
        assert done.error_code == ErrorCode.NONE
        assert (await client.call(Metadata(topics=[]), 12)).brokers

    run(sasl_config(tmp_path), scenario)


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("nobody", "alice-secret")])
@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_bad_credentials_get_kafkas_message_and_close(tmp_path, mechanism, user, password):
    async def scenario(broker, ports):
        await add_scram_user(ports["PLAINTEXT"], "alice", "alice-secret")
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        failed = await sasl_scram(client, mechanism, user, password)
        assert (failed.error_code, failed.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
        assert await closed(client)

    run(sasl_config(tmp_path), scenario)


def test_scram_credential_of_another_mechanism_does_not_count(tmp_path):
    async def scenario(broker, ports):
        await add_scram_user(ports["PLAINTEXT"], "alice", "alice-secret", mechanisms=("SCRAM-SHA-512",))
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        failed = await sasl_scram(client, "SCRAM-SHA-256", "alice", "alice-secret")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED

    run(sasl_config(tmp_path), scenario)


def test_handshake_v0_exchanges_raw_tokens(tmp_path):
    async def scenario(broker, ports):
        await add_scram_user(ports["PLAINTEXT"], "bob", "bob-secret")
        plain = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await handshake(plain, "PLAIN", version=0)).error_code == ErrorCode.NONE
        assert await raw_token(plain, plain_token("alice", "alice-secret")) == b""
        assert (await plain.call(Metadata(topics=[]), 12)).brokers

        scram = await Client.connect(ports["SASL_PLAINTEXT"])
        await handshake(scram, "SCRAM-SHA-256", version=0)
        exchange = ScramClient(ScramMechanism.SCRAM_SHA_256, "bob", "bob-secret")
        exchange.verify(await raw_token(scram, exchange.final(await raw_token(scram, exchange.first()))))
        assert (await scram.call(Metadata(topics=[]), 12)).brokers

        # A bad raw token gets no answer, only a closed connection.
        refused = await Client.connect(ports["SASL_PLAINTEXT"])
        await handshake(refused, "PLAIN", version=0)
        assert await raw_token(refused, plain_token("alice", "nope")) is None

    run(sasl_config(tmp_path), scenario)


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(tmp_path):
    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        refused = await handshake(client, "GSSAPI")
        assert (refused.error_code, refused.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512", "PLAIN"])
        assert await closed(client)

    run(sasl_config(tmp_path, mechanisms="SCRAM-SHA-512,PLAIN"), scenario)


@pytest.mark.parametrize("served, refused", [
    ([], "Metadata"),                        # straight to Metadata
    (["ApiVersions"], "Metadata"),
    (["ApiVersions"], "ApiVersions"),        # ApiVersions is served once
    ([], "SaslAuthenticate"),                # tokens before a handshake
    (["ApiVersions", "PLAIN"], "Metadata"),  # a request in the middle of the exchange
])
def test_before_authentication_only_the_sasl_apis_are_served(tmp_path, served, refused):
    requests = {"ApiVersions": (ApiVersions(), 0), "PLAIN": (SaslHandshake(mechanism="PLAIN"), 1),
                "SaslAuthenticate": (SaslAuthenticate(auth_bytes=b"x"), 1), "Metadata": (Metadata(topics=[]), 12)}

    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        for name in served:
            assert (await client.call(*requests[name])).error_code == ErrorCode.NONE
        await client.send_raw(_encode(*requests[refused]))
        assert await closed(client)

    run(sasl_config(tmp_path), scenario)


def _encode(message, version):
    from samsa.wire.protocol import encode_request
    return encode_request(message, version, 99, "test")


def test_sasl_apis_after_authentication_are_illegal_sasl_state(tmp_path):
    async def scenario(broker, ports):
        for port in (ports["PLAINTEXT"], ports["SASL_PLAINTEXT"]):
            client = await Client.connect(port)
            if port == ports["SASL_PLAINTEXT"]:
                await sasl_plain(client, "alice", "alice-secret")
            assert (await handshake(client, "PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE
            late = await authenticate(client, b"x")
            assert (late.error_code, late.error_message) == (
                ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
            assert (await client.call(Metadata(topics=[]), 12)).brokers  # still open

    run(sasl_config(tmp_path), scenario)


def test_a_frame_beyond_sasl_server_max_receive_size_before_authentication_closes(tmp_path):
    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        await client.send_raw(SIZE.pack(524_289))  # the size alone: nothing is read or allocated for it
        assert await closed(client)
        # Once authenticated, socket.request.max.bytes applies.
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        await sasl_plain(client, "alice", "alice-secret")
        await client.call(create_topic_request("big"), 5)
        big = await client.call(produce_request("big", one_batch([b"v" * 600_000])), 9)
        assert big.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    run(sasl_config(tmp_path), scenario)


def test_unauthenticated_clients_are_closed_at_the_deadline(tmp_path):
    clock = MockClock()

    async def scenario(broker, ports):
        idle = await Client.connect(ports["SASL_PLAINTEXT"])
        halfway = await Client.connect(ports["SASL_PLAINTEXT"])
        await halfway.call(ApiVersions(), 0)
        await handshake(halfway, "SCRAM-SHA-256")
        done = await Client.connect(ports["SASL_PLAINTEXT"])
        await sasl_plain(done, "alice", "alice-secret")
        clock.jump(AUTHENTICATION_TIMEOUT_S + 1)
        assert await closed(idle)
        assert await closed(halfway)
        assert (await done.call(Metadata(topics=[]), 12)).brokers

    run(sasl_config(tmp_path), scenario, clock=clock)


# --- KIP-368 re-authentication ------------------------------------------------------------------


def reauth_config(tmp_path, reauth_ms=10_000):
    # No close delay after a failed authentication: a MockClock would never let it pass.
    return sasl_config(tmp_path, **{"connections.max.reauth.ms": str(reauth_ms),
                                    "connection.failed.authentication.delay.ms": "0"})


def test_session_lifetime_and_reauthentication(tmp_path):
    clock = MockClock()

    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_plain(client, "alice", "alice-secret", version=1)).session_lifetime_ms == 10_000
        clock.jump(9)
        again = await sasl_plain(client, "alice", "alice-secret", version=1)
        assert (again.error_code, again.session_lifetime_ms) == (ErrorCode.NONE, 10_000)
        clock.jump(9)  # 18 s after the first login, 9 after the second: still valid
        assert (await client.call(Metadata(topics=[]), 12)).brokers
        clock.jump(0.9)
        assert (await client.call(Metadata(topics=[]), 12)).brokers
        clock.jump(0.2)  # past the renewed session's end without re-authenticating
        await client.send_raw(_encode(Metadata(topics=[]), 12))
        assert await closed(client)

    run(reauth_config(tmp_path), scenario, clock=clock)


def test_reauthentication_rules(tmp_path):
    clock = MockClock()

    async def scenario(broker, ports):
        await add_scram_user(ports["PLAINTEXT"], "alice", "alice-secret")
        port = ports["SASL_PLAINTEXT"]
        # Another principal: refused with Kafka's message, then closed.
        client = await Client.connect(port)
        await sasl_plain(client, "alice", "alice-secret")
        clock.jump(2)
        failed = await sasl_plain(client, "bob", "bob-secret")
        assert (failed.error_code, failed.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication from User.alice: User.bob")
        assert await closed(client)
        # Another mechanism: the handshake succeeds, the next token closes the connection.
        client = await Client.connect(port)
        await sasl_plain(client, "alice", "alice-secret")
        clock.jump(2)
        assert (await handshake(client, "SCRAM-SHA-256")).error_code == ErrorCode.NONE
        await client.send_raw(_encode(SaslAuthenticate(auth_bytes=ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "x").first()), 2))
        assert await closed(client)
        # Twice within a second: the second handshake is an ordinary, illegal one.
        client = await Client.connect(port)
        await sasl_scram(client, "SCRAM-SHA-512", "alice", "alice-secret")
        clock.jump(2)
        assert (await sasl_scram(client, "SCRAM-SHA-512", "alice", "alice-secret")).error_code == ErrorCode.NONE
        clock.jump(0.5)
        assert (await handshake(client, "SCRAM-SHA-512")).error_code == ErrorCode.ILLEGAL_SASL_STATE

    run(reauth_config(tmp_path), scenario, clock=clock)


def test_without_max_reauth_sessions_do_not_expire(tmp_path):
    clock = MockClock()

    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_plain(client, "alice", "alice-secret")).session_lifetime_ms == 0
        clock.jump(100_000)
        assert (await handshake(client, "PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert (await client.call(Metadata(topics=[]), 12)).brokers

    run(sasl_config(tmp_path, **{"connections.max.idle.ms": str(10**9)}), scenario, clock=clock)


def test_reauth_ms_per_listener_and_mechanism(tmp_path):
    async def scenario(broker, ports):
        await add_scram_user(ports["PLAINTEXT"], "alice", "alice-secret")
        plain = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_plain(plain, "alice", "alice-secret")).session_lifetime_ms == 5_000
        scram = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_scram(scram, "SCRAM-SHA-256", "alice", "alice-secret")).session_lifetime_ms == 7_000

    run(sasl_config(tmp_path, **{"listener.name.sasl_plaintext.connections.max.reauth.ms": "7000",
                                 "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000"}), scenario)


# --- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize("props, key, message", [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms", "GSSAPI"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI"},
     "listener.name.sasl_plaintext.sasl.enabled.mechanisms", "not supported"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": None}, "listener.name.sasl_plaintext.plain.sasl.jaas.config",
     "needs its users"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule required user_a=\"b\""},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config", "semi-colon"),
    ({"principal.builder.class": "com.example.MyBuilder"}, "principal.builder.class", "only"),
])
def test_bad_sasl_configs_name_the_key(tmp_path, props, key, message):
    from samsa.server.broker import Broker
    from samsa.server.config.kafka_config import ConfigError

    base = {"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}
    merged = {k: v for k, v in {**base, **props}.items() if v is not None}
    with pytest.raises(ConfigError) as raised:
        Broker(config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **merged))
    assert raised.value.name == key
    assert message in str(raised.value)


def test_plain_users_may_come_from_sasl_jaas_config(tmp_path):
    async def scenario(broker, ports):
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        assert (await sasl_plain(client, "bob", "bob-secret")).error_code == ErrorCode.NONE

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
               **{"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS}), scenario)


def test_sasl_ssl_needs_tls_and_sasl(tmp_path):
    from tls_certs import make_certificates
    from security_helpers import client_context, tls_client

    certs = make_certificates(tmp_path / "certs")

    async def scenario(broker, ports):
        # ssl.client.auth=required broker-wide does not apply to SASL_SSL (only its listener prefix would)
        client = await tls_client(ports["SASL_SSL"], client_context(certs.ca))
        assert (await sasl_plain(client, "alice", "alice-secret")).error_code == ErrorCode.NONE
        assert (await client.call(Metadata(topics=[]), 12)).brokers

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", **{
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server), "ssl.client.auth": "required",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}), scenario)
