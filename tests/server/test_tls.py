"""TLS listeners over loopback: key and trust stores in PEM and PKCS12, mutual TLS and the
principal it gives, Fetch's file ranges and in-memory records sent through TLS, and key store errors
found at startup."""

from __future__ import annotations

import time

import pytest
import trio

from samsa.server.broker import Broker
from samsa.server.config.kafka_config import ConfigError
from samsa.wire import legacy, records
from samsa.wire.errors import ErrorCode

from security_helpers import ApiVersions, client_context, closed, config, record_principals, run, tls_client
from loopback import create_topic_request, fetch_request, produce_request
from tls_certs import make_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def ssl_config(tmp_path, certs, **props):
    values = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
              "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}
    values.update(props)
    return config(tmp_path, "SSL://127.0.0.1:0", **values)


def test_produce_and_fetch_over_tls_send_the_log_through_tls(tmp_path, certs):
    values = [b"x" * 50_000, b"y" * 200_000, b"z"]  # more than one read chunk of the segment file

    async def scenario(broker, ports):
        client = await tls_client(ports["SSL"], client_context(certs.ca))
        assert (await client.call(create_topic_request("t"), 5)).topics[0].error_code == ErrorCode.NONE
        batch = records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)],
                                    base_timestamp=int(time.time() * 1000))
        produced = await client.call(produce_request("t", batch), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        fetched = await client.call(fetch_request("t", 0), 12)
        partition = fetched.responses[0].partitions[0]
        _, batch = records.decode_batch(bytes(partition.records))
        got = [r.value for r in batch]
        assert got == values
        # A Fetch v3 client gets the batch down-converted in memory (message format v1), records the
        # response refers to rather than holds: they go through TLS as well.
        old = await client.call(fetch_request("t", 0), 3)
        assert [m.value for m in legacy.iter_messages(bytes(old.responses[0].partitions[0].records))] == values

    run(ssl_config(tmp_path, certs), scenario)


def tls_run(tmp_path, certs, scenario, **props):
    """Run `scenario(broker, ports, principals)` on an SSL listener; `principals` fills with the
    principal of every ApiVersions request served."""
    async def wrapped(broker, ports):
        await scenario(broker, ports, record_principals(broker))

    run(ssl_config(tmp_path, certs, **props), wrapped)


def test_without_client_auth_the_principal_is_anonymous(tmp_path, certs):
    async def scenario(broker, ports, seen):
        client = await tls_client(ports["SSL"], client_context(certs.ca, *certs.client("alice", [("CN", "alice")])))
        assert (await client.call(ApiVersions(), 0)).error_code == ErrorCode.NONE
        assert [str(p) for p in seen] == ["User:ANONYMOUS"]

    tls_run(tmp_path, certs, scenario)


def mutual_tls_run(tmp_path, certs, scenario, **props):
    tls_run(tmp_path, certs, scenario, **{"ssl.client.auth": "required", **props})


def test_mutual_tls_principal_is_the_certificate_distinguished_name(tmp_path, certs):
    async def scenario(broker, ports, seen):
        cert = certs.client("alice", [("C", "SE"), ("O", "Samsa, Inc."), ("OU", "Engineering"), ("CN", "alice")])
        client = await tls_client(ports["SSL"], client_context(certs.ca, *cert))
        await client.call(ApiVersions(), 0)
        assert [str(p) for p in seen] == ["User:CN=alice,OU=Engineering,O=Samsa\\, Inc.,C=SE"]

    mutual_tls_run(tmp_path, certs, scenario)


def test_required_client_auth_refuses_clients_without_a_trusted_certificate(tmp_path, certs):
    async def scenario(broker, ports, seen):
        for cert in (None, certs.client("mallory", [("CN", "mallory")], ca_signed=False)):
            context = client_context(certs.ca, *(cert or (None, None)))
            try:
                client = await tls_client(ports["SSL"], context)
                await client.send_raw(b"\0\0\0\0")
                assert await closed(client)
            except trio.BrokenResourceError:
                pass  # refused during the handshake (TLS 1.2)
        assert seen == []

    mutual_tls_run(tmp_path, certs, scenario)


def test_principal_mapping_rules(tmp_path, certs):
    async def scenario(broker, ports, seen):
        for name, attributes in (("svc", [("OU", "ServiceUsers"), ("CN", "Payments")]),
                                 ("carol", [("OU", "People"), ("CN", "carol")])):
            client = await tls_client(ports["SSL"], client_context(certs.ca, *certs.client(name, attributes)))
            await client.call(ApiVersions(), 0)
        assert [p.name for p in seen] == ["payments", "CN=carol,OU=People"]

    mutual_tls_run(tmp_path, certs, scenario,
                   **{"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers$/$1/L,DEFAULT"})


def test_a_refused_handshake_tells_the_client_why(tmp_path, certs):
    """The broker sends OpenSSL's alert before it closes (server/network/socket_server.py's start_tls reads it from
    trio's SSLStream), so the client's error names the reason, not an unexpected EOF."""
    async def scenario(broker, ports, seen):
        with pytest.raises(trio.BrokenResourceError) as refused:
            # TLS 1.2 refuses during the handshake, TLS 1.3 after it: at the first read.
            client = await tls_client(ports["SSL"], client_context(certs.ca))
            await client.send_raw(b"\0\0\0\0")
            await client.read_frame()
        assert "alert" in str(refused.value.__cause__), refused.value.__cause__

    mutual_tls_run(tmp_path, certs, scenario)


def test_requested_client_auth_takes_clients_with_or_without_certificates(tmp_path, certs):
    async def scenario(broker, ports, seen):
        for cert in (None, certs.client("dave", [("CN", "dave")])):
            client = await tls_client(ports["SSL"], client_context(certs.ca, *(cert or (None, None))))
            await client.call(ApiVersions(), 0)
        assert [p.name for p in seen] == ["ANONYMOUS", "CN=dave"]

    mutual_tls_run(tmp_path, certs, scenario, **{"ssl.client.auth": "requested"})


@pytest.mark.parametrize("store", ["pkcs12", "inline", "encrypted-key", "listener-prefixed"])
def test_key_store_forms(tmp_path, certs, store):
    if store == "pkcs12":
        props = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs.server_p12),
                 "ssl.keystore.password": "store-secret", "ssl.truststore.location": None,
                 "ssl.truststore.certificates": certs.ca.read_text()}
    elif store == "inline":
        props = {"ssl.keystore.location": None, "ssl.keystore.key": certs.server_key.read_text(),
                 "ssl.keystore.certificate.chain": certs.server_chain.read_text()}
    elif store == "encrypted-key":
        props = {"ssl.keystore.location": str(certs.server_encrypted), "ssl.key.password": "key-secret"}
    else:
        props = {"ssl.keystore.location": None,
                 "listener.name.ssl.ssl.keystore.location": str(certs.server)}
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}
    merged = {k: v for k, v in {**base, **props}.items() if v is not None}

    async def scenario(broker, ports):
        client = await tls_client(ports["SSL"], client_context(certs.ca))
        assert (await client.call(ApiVersions(), 0)).error_code == ErrorCode.NONE

    run(config(tmp_path, "SSL://127.0.0.1:0", **merged), scenario)


@pytest.mark.parametrize("props, key, message", [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "not supported"),
    ({"ssl.keystore.location": "/nonexistent/server.pem"}, "ssl.keystore.location", "No such file"),
    ({"ssl.keystore.location": "{encrypted}"}, "ssl.keystore.location", "Cannot load"),
    ({"ssl.keystore.location": "{encrypted}", "ssl.key.password": "wrong"}, "ssl.keystore.location", "Cannot load"),
    ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols", "supported protocols"),
    ({"ssl.cipher.suites": "NO_SUCH_CIPHER"}, "ssl.cipher.suites", "None of the cipher suites"),
    ({"listener.name.ssl.ssl.client.auth": "sometimes"}, "listener.name.ssl.ssl.client.auth", "String must be one of"),
    ({"ssl.principal.mapping.rules": "RULE:x/y/,NONSENSE"}, "ssl.principal.mapping.rules", "Invalid rule"),
])
def test_bad_tls_configs_name_the_key(tmp_path, certs, props, key, message):
    props = {k: v.replace("{encrypted}", str(certs.server_encrypted)) for k, v in props.items()}
    with pytest.raises(ConfigError) as raised:
        Broker(ssl_config(tmp_path, certs, **props))
    assert raised.value.name == key
    assert message in str(raised.value)


def test_cipher_suites_in_java_names_narrow_tls12(tmp_path, certs):
    from samsa.server.network.listener_config import ListenerConfig
    from samsa.server.network.tls import server_context

    cfg = ssl_config(tmp_path, certs, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    context = server_context(ListenerConfig(cfg, "SSL"), "SSL")
    names = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES128-GCM-SHA256"}
