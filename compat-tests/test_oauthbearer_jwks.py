"""SASL/OAUTHBEARER with JWT validation against a JWKS (KIP-768), the same on Samsa and on Kafka 4.4:
both brokers configured as Kafka's docs say (OAuthBearerValidatorCallbackHandler, a `file:` JWKS
URL allowed through the system property org.apache.kafka.sasl.oauthbearer.allowed.urls in
KAFKA_OPTS, an expected audience and issuer), keys and tokens made here (cryptography, PyJWT).

Three tokens: a good one (produced and consumed), an expired one and one with a bad signature
(refused with Kafka's `{"status":"invalid_token"}`). Kafka's Java client 4.4 logs in with each
through its OAuthBearerLoginCallbackHandler and a token file (sasl.oauthbearer.token.endpoint.url=
file:..., one JVM for the three), librdkafka (confluent-kafka) through its oauth_cb.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import jwt
import pytest
from compat_util import confluent_consume_all
from conftest import free_port
from cryptography.hazmat.primitives.asymmetric import rsa
from test_java_client import RUN_TIMEOUT, java_client  # noqa: F401 (the fixture)

T = 20.0
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
ISSUER, AUDIENCE = "https://issuer.samsa.test", "kafka-cluster"
CASES = ("good", "expired", "bad_signature")
INVALID_TOKEN = '{"status":"invalid_token"}'


@dataclass
class OAuthBroker:
    broker: object
    sasl_bootstrap: str
    tokens: dict[str, str]  # by case
    token_files: dict[str, Path]


def make_tokens(directory: Path) -> tuple[Path, dict[str, str]]:
    """The JWKS (one RSA key, kid `k1`) and a token per case."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks_path = directory / "jwks.json"
    jwks_path.write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    now = int(time.time())

    def sign(private, issued: int, expires: int) -> str:
        claims = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": issued, "exp": expires, "scope": "kafka"}
        return jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})

    return jwks_path, {
        "good": sign(key, now, now + 3600),
        "expired": sign(key, now - 3600, now - 600),  # well past the 30 s of clock skew
        "bad_signature": sign(impostor, now, now + 3600),
    }


@pytest.fixture(scope="module")
def oauth(tmp_path_factory, module_broker_factory) -> OAuthBroker:
    directory = tmp_path_factory.mktemp("oauth")
    jwks_path, tokens = make_tokens(directory)
    token_files = {}
    for case, token in tokens.items():
        token_files[case] = directory / f"{case}.jwt"
        token_files[case].write_text(token)
    broker = module_broker_factory(start=False)
    sasl_port = free_port()
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    broker.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        prefix + "sasl.jaas.config": LOGIN,
        prefix + "sasl.server.callback.handler.class": HANDLER,
        prefix + "sasl.oauthbearer.jwks.endpoint.url": jwks_path.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    })
    broker.env["KAFKA_OPTS"] = f"-D{ALLOWED_URLS}={jwks_path.as_uri()}"
    broker.start()
    return OAuthBroker(broker, f"127.0.0.1:{sasl_port}", tokens, token_files)


def test_java_client(oauth, java_client):  # noqa: F811 (the fixture)
    """One JVM logs in with each token file in turn."""
    prefix = f"java-oauth-{uuid.uuid4().hex[:8]}"
    urls = {case: path.as_uri() for case, path in oauth.token_files.items()}
    command = [java_client[0], f"-D{ALLOWED_URLS}={','.join(urls.values())}", *java_client[1:]]
    done = subprocess.run([*command, "oauth", oauth.sasl_bootstrap, prefix], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT,
                          env={**os.environ, "OAUTH_TOKENS": ",".join(f"{c}={u}" for c, u in urls.items())})
    assert done.returncode == 0, f"JavaClient oauth exited {done.returncode}:\n{done.stderr[-6000:]}"
    outcomes = {d.pop("case"): d for d in map(json.loads, done.stdout.splitlines()) if d.pop("check") == "oauth"}
    assert outcomes == {
        "good": {"offsets": [0, 1, 2], "read": ["k-0", "k-1", "k-2"]},
        "expired": {"error": "SaslAuthenticationException", "message": INVALID_TOKEN},
        "bad_signature": {"error": "SaslAuthenticationException", "message": INVALID_TOKEN},
    }


@pytest.mark.parametrize("case", CASES)
def test_librdkafka(oauth, case):
    from confluent_kafka import KafkaError, Producer

    token = oauth.tokens[case]
    errors: list = []
    # librdkafka takes no token past the lifetime its callback states: that one is always ahead,
    # whatever the token's own exp says (the broker reads that).
    conf = {"bootstrap.servers": oauth.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _config: (token, time.time() + 3600, "alice"),
            "error_cb": errors.append}
    producer = Producer({**conf, "message.timeout.ms": 10_000})
    topic = f"librdkafka-oauth-{case}-{uuid.uuid4().hex[:8]}"
    delivered: list = []
    for i in range(3):
        producer.produce(topic, f"v-{i}".encode(), partition=0, on_delivery=lambda err, _msg: delivered.append(err))
    producer.flush(T)
    if case == "good":
        assert delivered == [None] * 3 and errors == []
        got = confluent_consume_all(oauth.sasl_bootstrap, topic, {0: 3}, extra=conf)[0]
        assert [m.value() for m in got] == [b"v-0", b"v-1", b"v-2"]
    else:
        assert len(delivered) == 3 and all(err is not None for err in delivered)
        authentication = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert authentication and all(INVALID_TOKEN in e.str() for e in authentication), errors
