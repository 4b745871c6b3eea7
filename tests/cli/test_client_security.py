"""--command-config against a broker with TLS and SASL listeners: PEM and PKCS12 trust stores,
SASL/PLAIN and SCRAM logins, and the broker's refusals as one line with exit 1."""

from __future__ import annotations

import pytest

from samsa.server.config.kafka_config import KafkaConfig

from broker_thread import BrokerThread
from tls_certs import make_certificates

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def ports(tmp_path_factory, certs):
    config = KafkaConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT", "log.dirs": str(tmp_path_factory.mktemp("broker") / "data"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS})
    thread = BrokerThread().start(config)
    yield thread.ports
    thread.stop()


def properties(tmp_path, **props) -> str:
    path = tmp_path / "client.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return str(path)


def jaas(user: str, password: str, module: str = "plain.PlainLoginModule") -> str:
    return f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}";'


@pytest.mark.parametrize("store", ["pem", "pkcs12"])
def test_ssl_with_a_trust_store(ports, certs, samsa, tmp_path, store):
    if store == "pem":
        config = properties(tmp_path, **{"security.protocol": "SSL", "ssl.truststore.location": certs.ca})
    else:
        config = properties(tmp_path, **{"security.protocol": "SSL", "ssl.truststore.location": certs.server_p12,
                                         "ssl.truststore.password": "store-secret"})
    code, out, err = samsa("cluster", "-b", f"localhost:{ports['SSL']}", "--command-config", config)
    assert code == 0, err
    assert "broker 0:" in out


def test_ssl_without_trusting_the_broker_is_exit_2(ports, samsa, tmp_path):
    config = properties(tmp_path, **{"security.protocol": "SSL"})  # the system's CAs only
    code, _, err = samsa("cluster", "-b", f"localhost:{ports['SSL']}", "--command-config", config)
    assert code == 2
    assert "TLS handshake with localhost:" in err and "CERTIFICATE_VERIFY_FAILED" in err


def test_sasl_ssl_plain_logs_in(ports, certs, samsa, tmp_path):
    config = properties(tmp_path, **{"security.protocol": "SASL_SSL", "ssl.truststore.location": certs.ca,
                                     "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("admin", "admin-secret")})
    code, out, err = samsa("cluster", "-b", f"localhost:{ports['SASL_SSL']}", "--command-config", config)
    assert code == 0, err


def test_a_refused_login_is_exit_1_with_the_error_name(ports, certs, samsa, tmp_path):
    config = properties(tmp_path, **{"security.protocol": "SASL_SSL", "ssl.truststore.location": certs.ca,
                                     "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("admin", "wrong")})
    code, _, err = samsa("cluster", "-b", f"localhost:{ports['SASL_SSL']}", "--command-config", config)
    assert (code, err) == (1, "samsa cluster: PLAIN login as admin: SASL_AUTHENTICATION_FAILED: "
                              "Authentication failed: Invalid username or password\n")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_scram_logs_in_as_a_user_samsa_users_created(ports, certs, samsa, tmp_path, mechanism):
    code, _, err = samsa("users", "create", "erin", "--mechanism", mechanism, "--password", "erin-secret",
                         "-b", f"127.0.0.1:{ports['PLAINTEXT']}")
    assert code == 0, err
    scram = "scram.ScramLoginModule"
    for password, expected in (("erin-secret", 0), ("wrong", 1)):
        config = properties(tmp_path, **{"security.protocol": "SASL_SSL", "ssl.truststore.location": certs.ca,
                                         "sasl.mechanism": mechanism, "sasl.jaas.config": jaas("erin", password, scram)})
        code, out, err = samsa("topics", "list", "-b", f"localhost:{ports['SASL_SSL']}", "--command-config", config)
        assert code == expected, err
    assert err == f"samsa topics: {mechanism} login as erin: SASL_AUTHENTICATION_FAILED: " \
                  f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}\n"
