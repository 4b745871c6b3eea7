"""Authentication with real clients: confluent-kafka (librdkafka) and kafka-python over SASL_SSL with
SCRAM-SHA-512 and SCRAM-SHA-256, over SASL_PLAINTEXT with PLAIN, and over mutual TLS; kcat over
SSL. SCRAM users are made with confluent-kafka's AdminClient (alter_user_scram_credentials) over
the broker's PLAINTEXT listener; certificates are made by the test (tests/server/tls_certs.py).
A wrong password gets Kafka's authentication error; an ACL naming the authenticated principal
shows that the broker knows who is on the other end.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from compat_util import confluent_admin, confluent_consume_all, create_acls, create_topic
from conftest import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "server"))
from tls_certs import make_certificates  # noqa: E402


T = 20.0
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_carol="carol-secret" user_dave="dave-secret";')
SCRAM_USERS = {"SCRAM-SHA-512": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret")}
ALICE_DN = "CN=alice,OU=Engineering,O=Samsa Test"


class SecureBroker:
    def __init__(self, broker, certs, ports):
        self.broker, self.certs, self.ports = broker, certs, ports
        self.client_cert, self.client_key = certs.client("alice", [("O", "Samsa Test"), ("OU", "Engineering"),
                                                                   ("CN", "alice")])
        self.other_cert, self.other_key = certs.client("eve", [("O", "Samsa Test"), ("CN", "eve")])

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def broker_settings(port: int, ports: dict[str, int], certs, **extra) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}," + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        **extra,
    }


def start_secure_broker(pool, tmp_path, **extra) -> SecureBroker:
    certs = make_certificates(tmp_path / "certs")
    broker = pool(start=False)
    ports = {name: free_port() for name in ("SASL_SSL", "SASL_PLAINTEXT", "SSL")}
    broker.overrides.update(broker_settings(broker.port, ports, certs, **extra))
    broker.start()
    return SecureBroker(broker, certs, ports)


@pytest.fixture(scope="module")
def secure(tmp_path_factory, broker_kind):
    from conftest import BrokerPool
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    pool = BrokerPool(tmp_path_factory, f"secure-{broker_kind}", broker_kind)
    try:
        setup = start_secure_broker(pool, tmp_path_factory.mktemp("secure"))
        admin = confluent_admin(setup.broker.bootstrap)
        upsertions = [UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")),
                                                                             8192), password.encode())
                      for m, (user, password) in SCRAM_USERS.items()]
        for future in admin.alter_user_scram_credentials(upsertions, request_timeout=T).values():
            assert future.result(T) is None
        yield setup
    finally:
        pool.close()


def sasl_conf(mechanism: str, user: str, password: str, secure: SecureBroker) -> dict:
    listener = "SASL_PLAINTEXT" if mechanism == "PLAIN" else "SASL_SSL"
    conf = {"bootstrap.servers": secure.bootstrap(listener), "security.protocol": listener,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(secure.certs.ca)
    return conf


def tls_conf(secure: SecureBroker, cert: Path, key: Path) -> dict:
    return {"bootstrap.servers": secure.bootstrap("SSL"), "security.protocol": "SSL",
            "ssl.ca.location": str(secure.certs.ca), "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key)}


def confluent_round_trip(conf: dict, topic: str, n: int = 20) -> None:
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": "all", "message.timeout.ms": 15000})
    values = [f"value-{i}".encode() * (i + 1) for i in range(n)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(T) == 0
    got = confluent_consume_all(conf["bootstrap.servers"], topic, {0: n}, extra=conf)[0]
    assert [m.value() for m in got] == values


def kafka_python_conf(conf: dict) -> dict:
    """confluent-kafka's settings in kafka-python's words."""
    out = {"bootstrap_servers": conf["bootstrap.servers"], "security_protocol": conf["security.protocol"]}
    if "sasl.mechanism" in conf:
        out.update(sasl_mechanism=conf["sasl.mechanism"], sasl_plain_username=conf["sasl.username"],
                   sasl_plain_password=conf["sasl.password"])
    if "ssl.ca.location" in conf:
        out.update(ssl_cafile=conf["ssl.ca.location"], ssl_check_hostname=True)
    if "ssl.certificate.location" in conf:
        out.update(ssl_certfile=conf["ssl.certificate.location"], ssl_keyfile=conf["ssl.key.location"])
    return out


def kafka_python_round_trip(conf: dict, topic: str, n: int = 20) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    settings = kafka_python_conf(conf)
    producer = KafkaProducer(acks="all", **settings)
    values = [f"kp-{i}".encode() * (i + 1) for i in range(n)]
    for value in values:
        producer.send(topic, value, partition=0)
    producer.flush(T)
    producer.close(T)
    consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=int(T * 1000), **settings)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == n:
                break
        assert got == values
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_sasl_produce_and_consume(secure, topic_name, mechanism, client):
    user, password = SCRAM_USERS.get(mechanism, ("carol", "carol-secret"))
    create_topic(secure.broker.bootstrap, topic_name)
    conf = sasl_conf(mechanism, user, password, secure)
    (confluent_round_trip if client == "confluent" else kafka_python_round_trip)(conf, topic_name)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_mutual_tls_produce_and_consume(secure, topic_name, client):
    create_topic(secure.broker.bootstrap, topic_name)
    conf = tls_conf(secure, secure.client_cert, secure.client_key)
    (confluent_round_trip if client == "confluent" else kafka_python_round_trip)(conf, topic_name)


def test_scram_users_are_described(secure):
    from confluent_kafka.admin import ScramMechanism

    admin = confluent_admin(secure.broker.bootstrap)
    futures = admin.describe_user_scram_credentials(["alice", "bob"], request_timeout=T)
    assert {user: [(info.mechanism, info.iterations) for info in future.result(T).scram_credential_infos]
            for user, future in futures.items()} == {"alice": [(ScramMechanism.SCRAM_SHA_512, 8192)],
                                                  "bob": [(ScramMechanism.SCRAM_SHA_256, 8192)]}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_wrong_password_gets_the_authentication_error(secure, mechanism):
    from confluent_kafka import KafkaError, Producer

    user = SCRAM_USERS.get(mechanism, ("carol",))[0]
    errors = []
    producer = Producer({**sasl_conf(mechanism, user, "not-the-password", secure),
                         "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce("anything", b"v")
    # The refusal reaches error_cb through poll() within a moment: no need to wait (as flush would)
    # for the record to time out.
    deadline = time.monotonic() + 8
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.1)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    expected = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
    assert expected in auth[0].str()


@pytest.mark.samsa_only(
    "on Kafka, kafka-python 3.0.12 logs the refusal only when it reads it before the close: Kafka sends "
    "the SaslAuthenticate error once connection.failed.authentication.delay.ms has passed and closes at "
    "once, and kafka-python's transport drops what it read in the same pass as the EOF (under load it "
    "logged 'socket disconnected' at every attempt); Samsa closes that delay after the refusal")
def test_wrong_password_with_kafka_python(secure, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    settings = kafka_python_conf(sasl_conf("SCRAM-SHA-512", "alice", "nope", secure))
    # kafka-python retries its bootstrap, then times out: after 10 s, not its default 30 (the
    # refusal comes at the first attempt, within a second or two)
    with pytest.raises(KafkaError):
        KafkaProducer(max_block_ms=3000, bootstrap_timeout_ms=10_000, **settings)
    assert ("SaslAuthenticationFailedError: Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-512") in caplog.text


def test_a_certificate_the_broker_does_not_trust_is_refused(secure, tmp_path):
    from confluent_kafka import KafkaError, Producer

    stranger = make_certificates(tmp_path / "stranger").client("eve", [("CN", "eve")])
    errors, reports = [], []
    producer = Producer({**tls_conf(secure, *stranger), "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("anything", b"v", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(8) == 0
    assert reports[0] is not None and reports[0].code() == KafkaError._MSG_TIMED_OUT
    assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for e in errors), errors


def test_acls_see_the_authenticated_principal(secure, topic_name):
    """Only alice (by SCRAM, and by her certificate's name) may write the topic; dave (PLAIN) and eve
    (another certificate) are refused."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    create_topic(secure.broker.bootstrap, topic_name)
    admin = confluent_admin(secure.broker.bootstrap)
    bindings = [AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, principal, "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW) for principal in ("User:alice", f"User:{ALICE_DN}")]
    create_acls(admin, bindings, T)

    def produce(conf):
        reports = []
        producer = Producer({**conf, "message.timeout.ms": 10000})
        producer.produce(topic_name, b"v", on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(T) == 0
        return reports[0]

    assert produce(sasl_conf("SCRAM-SHA-512", "alice", "alice-secret", secure)) is None
    assert produce(tls_conf(secure, secure.client_cert, secure.client_key)) is None
    assert produce(sasl_conf("PLAIN", "dave", "dave-secret", secure)).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(tls_conf(secure, secure.other_cert, secure.other_key)).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (compat-tests/install.sh)")
def test_kcat_over_mutual_tls(secure, topic_name):
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={secure.certs.ca}",
           "-X", f"ssl.certificate.location={secure.client_cert}", "-X", f"ssl.key.location={secure.client_key}"]
    create_topic(secure.broker.bootstrap, topic_name)
    base = ["kcat", "-b", secure.bootstrap("SSL"), *tls]
    subprocess.run([*base, "-P", "-t", topic_name, "-p", "0"], input=b"one\ntwo\nthree\n", check=True, timeout=30,
                   capture_output=True)
    out = subprocess.run([*base, "-C", "-t", topic_name, "-p", "0", "-e", "-q"], check=True, timeout=30,
                         capture_output=True).stdout
    assert out.split() == [b"one", b"two", b"three"]


@pytest.mark.slow
def test_librdkafka_reauthenticates_before_its_session_expires(broker_factory, tmp_path, topic_name):
    """connections.max.reauth.ms=3000: a producer working for 8 seconds re-authenticates on its
    connections (KIP-368) instead of being cut off, and every message is delivered."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    setup = start_secure_broker(broker_factory, tmp_path, **{"connections.max.reauth.ms": "3000"})
    admin = confluent_admin(setup.broker.bootstrap)
    upsertion = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                             b"alice-secret")
    admin.alter_user_scram_credentials([upsertion], request_timeout=T)["alice"].result(T)
    create_topic(setup.broker.bootstrap, topic_name)
    conf = sasl_conf("SCRAM-SHA-512", "alice", "alice-secret", setup)
    producer = Producer({**conf, "linger.ms": 5, "message.timeout.ms": 15000})
    sent, failed = 0, []
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        producer.produce(topic_name, b"v", partition=0, on_delivery=lambda err, msg: err and failed.append(err))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(T) == 0
    assert failed == []
    assert "session expired" not in setup.broker.output()
    got = confluent_consume_all(conf["bootstrap.servers"], topic_name, {0: sent}, extra=conf)[0]
    assert len(got) == sent
