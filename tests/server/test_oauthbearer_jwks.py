"""SASL/OAUTHBEARER with Kafka's OAuthBearerValidatorCallbackHandler (KIP-768): the listener's
config as Kafka reads it, its refusals at startup in Kafka's words, tokens validated over loopback
against a JWKS file and a JWKS served over HTTP (server/security/jwks.py), and the key set's
refreshes (a MockClock and a fetch function stand in for time and the endpoint)."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest
import trio
import trio.testing

from samsa.server.config.kafka_config import ConfigError
from samsa.server.config.system_properties import system_property
from samsa.server.security.jwks import JwksEndpoint, JwksFile, JwksUnavailable, validate_url
from samsa.server.security.jwt_validator import BrokerJwtOptions, UnresolvableKey
from samsa.server.security.oauthbearer import IllegalToken
from samsa.wire.errors import ErrorCode

from jwt_keys import SigningKey, claims, jwks
from loopback import Client
from security_helpers import ApiVersions, authenticate, config, handshake, record_principals, run
from test_oauthbearer import initial_response

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
PREFIX = "listener.name.sasl_plaintext.oauthbearer."
KEY = SigningKey("key-1")
ALLOWED = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def jwks_config(tmp_path, url: str, **props):
    return config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **{
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        PREFIX + "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        PREFIX + "sasl.server.callback.handler.class": HANDLER,
        PREFIX + "sasl.oauthbearer.jwks.endpoint.url": url,
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": "https://issuer.example",
        **props})


@pytest.fixture
def jwks_file(tmp_path, monkeypatch):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(KEY))
    url = f"file://{path}"
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1g -D{ALLOWED}=https://elsewhere.example,{url}")
    return url


def test_kafka_opts_carries_the_system_property():
    assert system_property(ALLOWED, "", {"KAFKA_OPTS": f"-Da=b '-D{ALLOWED}=x,y' -D{ALLOWED}=z"}) == "z"
    assert system_property(ALLOWED, "none", {}) == "none"


async def login(port: int, token: str):
    client = await Client.connect(port)
    assert (await handshake(client, "OAUTHBEARER")).error_code == ErrorCode.NONE
    return client, await authenticate(client, initial_response(token))


async def refused_with_invalid_token(port: int, token: str) -> None:
    client, challenge = await login(port, token)
    assert (challenge.error_code, challenge.auth_bytes) == (ErrorCode.NONE, b'{"status":"invalid_token"}')
    failed = await authenticate(client, b"\x01")
    assert (failed.error_code, failed.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                         '{"status":"invalid_token"}')


def test_tokens_are_validated_against_a_jwks_file(tmp_path, jwks_file):
    async def scenario(broker, ports):
        seen = record_principals(broker)
        port = ports["SASL_PLAINTEXT"]
        now = time.time()
        client, done = await login(port, KEY.sign(claims(now, exp=int(now) + 60)))
        assert (done.error_code, done.error_message) == (ErrorCode.NONE, None)
        assert 55_000 < done.session_lifetime_ms <= 60_000  # the token's expiry (KIP-368)
        await client.call(ApiVersions(), 0)
        assert [str(p) for p in seen] == ["User:alice"]
        await refused_with_invalid_token(port, KEY.sign(claims(now, iat=int(now) - 600, exp=int(now) - 60)))
        await refused_with_invalid_token(port, SigningKey("key-1").sign(claims(now)))  # bad signature
        await refused_with_invalid_token(port, SigningKey("key-2").sign(claims(now)))  # unknown kid
        await refused_with_invalid_token(port, KEY.sign(claims(now, aud="elsewhere")))

    run(jwks_config(tmp_path, jwks_file), scenario)


def test_connections_max_reauth_ms_bounds_the_session(tmp_path, jwks_file):
    async def scenario(broker, ports):
        now = time.time()
        _, done = await login(ports["SASL_PLAINTEXT"], KEY.sign(claims(now, exp=int(now) + 600)))
        assert (done.error_code, done.session_lifetime_ms) == (ErrorCode.NONE, 10_000)

    run(jwks_config(tmp_path, jwks_file, **{"connections.max.reauth.ms": "10000"}), scenario)


class JwksHandler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def jwks_server(monkeypatch):
    handler = type("Handler", (JwksHandler,), {"body": jwks(KEY).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    monkeypatch.setenv("KAFKA_OPTS", f"-D{ALLOWED}={url}")
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def test_tokens_are_validated_against_a_jwks_endpoint(tmp_path, jwks_server):
    async def scenario(broker, ports):
        now = time.time()
        _, done = await login(ports["SASL_PLAINTEXT"], KEY.sign(claims(now)))
        assert done.error_code == ErrorCode.NONE
        await refused_with_invalid_token(ports["SASL_PLAINTEXT"], SigningKey("key-1").sign(claims(now)))

    run(jwks_config(tmp_path, jwks_server), scenario)


@pytest.fixture
def https_jwks_server(tmp_path, monkeypatch):
    import ssl

    from tls_certs import make_certificates

    certs = make_certificates(tmp_path / "certs")
    handler = type("Handler", (JwksHandler,), {"body": jwks(KEY).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certs.server))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"https://localhost:{server.server_address[1]}/jwks.json"
    monkeypatch.setenv("KAFKA_OPTS", f"-D{ALLOWED}={url}")
    try:
        yield url, certs
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_endpoint_is_trusted_through_the_login_modules_ssl_options(tmp_path, https_jwks_server):
    from samsa.server.broker import Broker

    url, certs = https_jwks_server
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            f'ssl.truststore.location="{certs.ca}";')

    async def scenario(broker, ports):
        _, done = await login(ports["SASL_PLAINTEXT"], KEY.sign(claims(time.time())))
        assert done.error_code == ErrorCode.NONE

    run(jwks_config(tmp_path, url, **{PREFIX + "sasl.jaas.config": jaas}), scenario)
    # Without them the system's CAs do not know the endpoint's: the broker does not start.
    with pytest.raises(BaseException) as raised:
        trio.run(Broker(jwks_config(tmp_path, url)).run)
    assert "CERTIFICATE_VERIFY_FAILED" in str(sole(raised.value))
    # A trust store that cannot be read stops the broker at once, naming the JAAS config.
    missing = jaas.replace(str(certs.ca), str(tmp_path / "missing.pem"))
    error = startup_error(tmp_path, url, **{PREFIX + "sasl.jaas.config": missing})
    assert error.name == PREFIX + "sasl.jaas.config" and "ssl.truststore.location" in str(error)


def sole(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        (error,) = error.exceptions
    return error


def test_a_broker_whose_jwks_endpoint_does_not_answer_does_not_start(tmp_path, monkeypatch):
    from samsa.server.broker import Broker

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/jwks.json"  # nothing listens there
    monkeypatch.setenv("KAFKA_OPTS", f"-D{ALLOWED}={url}")
    broker = Broker(jwks_config(tmp_path, url))
    with pytest.raises(BaseException) as raised:
        trio.run(broker.run)
    error = sole(raised.value)
    assert isinstance(error, ConfigError) and "Could not refresh JWKS" in str(error)


def startup_error(tmp_path, url: str, **props) -> ConfigError:
    from samsa.server.broker import Broker

    with pytest.raises(ConfigError) as raised:
        Broker(jwks_config(tmp_path, url, **props))
    return raised.value


def test_the_configuration_is_refused_in_kafkas_words(tmp_path, jwks_file, monkeypatch):
    error = startup_error(tmp_path, jwks_file, **{"sasl.oauthbearer.expected.audience": ""})
    assert error.name == "sasl.oauthbearer.expected.audience" and "allow.unverified.audience" in str(error)
    error = startup_error(tmp_path, jwks_file, **{"sasl.oauthbearer.expected.issuer": ""})
    assert error.name == "sasl.oauthbearer.expected.issuer" and "allow.unverified.issuer" in str(error)
    error = startup_error(tmp_path, "")
    assert error.name == PREFIX + "sasl.oauthbearer.jwks.endpoint.url" and "requires" in str(error)
    missing = jwks_file.replace("jwks.json", "missing.json")
    monkeypatch.setenv("KAFKA_OPTS", f"-D{ALLOWED}={missing}")
    assert "doesn't exist" in str(startup_error(tmp_path, missing))
    error = startup_error(tmp_path, jwks_file)
    assert "Update the system property 'org.apache.kafka.sasl.oauthbearer.allowed.urls'" in str(error)
    monkeypatch.delenv("KAFKA_OPTS")
    assert "allowed.urls" in str(startup_error(tmp_path, jwks_file))
    error = startup_error(tmp_path, jwks_file, **{PREFIX + "sasl.server.callback.handler.class": "com.example.Mine"})
    assert error.name == PREFIX + "sasl.server.callback.handler.class"


def test_unverified_audience_and_issuer_may_be_allowed(tmp_path, jwks_file):
    from samsa.server.broker import Broker

    Broker(jwks_config(tmp_path, jwks_file, **{
        "sasl.oauthbearer.expected.audience": "", "sasl.oauthbearer.allow.unverified.audience": "true",
        "sasl.oauthbearer.expected.issuer": "", "sasl.oauthbearer.allow.unverified.issuer": "true"}))


def test_validate_url():
    assert validate_url("k", "https://idp/jwks", "x, https://idp/jwks").netloc == "idp"
    with pytest.raises(ConfigError, match="invalid protocol"):
        validate_url("k", "ftp://idp/jwks", "ftp://idp/jwks")
    with pytest.raises(ConfigError, match="missing the protocol"):
        validate_url("k", "/etc/jwks.json", "/etc/jwks.json")


OPTIONS = BrokerJwtOptions(expected_audiences=frozenset({"kafka"}), expected_issuer="https://issuer.example")


def test_a_jwks_file_is_read_again_when_it_changes(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(KEY))
    source = JwksFile("k", validate_url("k", f"file://{path}", f"file://{path}"))
    other = SigningKey("key-2")
    now_ms = int(time.time() * 1000)

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(source.run)
            assert source.validate(KEY.sign(claims(now_ms / 1000)), OPTIONS, now_ms).principal == "alice"
            path.write_text(jwks(KEY, other))
            changed = source.changed
            with pytest.raises(UnresolvableKey):  # and the file is looked at again at once
                source.validate(other.sign(claims(now_ms / 1000)), OPTIONS, now_ms)
            await changed.wait()
            assert source.validate(other.sign(claims(now_ms / 1000)), OPTIONS, now_ms).principal == "alice"
            path.write_text("not json")
            changed = source.changed
            await changed.wait()  # within FILE_CHECK_INTERVAL_S
            with pytest.raises(IllegalToken, match="no JWKS"):  # refused until the file reads again
                source.validate(KEY.sign(claims(now_ms / 1000)), OPTIONS, now_ms)
            nursery.cancel_scope.cancel()

    trio.run(main)


class Endpoint:
    """What the JWKS endpoint answers, attempt by attempt (a JwksUnavailable is a failed fetch)."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.fetched = 0
        self.fetch_event = trio.Event()

    async def fetch(self, url: str) -> str:
        self.fetched += 1
        self.fetch_event.set()
        self.fetch_event = trio.Event()
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, JwksUnavailable):
            raise answer
        return answer


async def fetches(endpoint: Endpoint, n: int) -> None:
    while endpoint.fetched < n:
        await endpoint.fetch_event.wait()


def run_endpoint(endpoint: Endpoint, scenario, **settings) -> None:
    source = JwksEndpoint("k", validate_url("k", "https://idp/jwks", "https://idp/jwks"),
                          settings.get("refresh_ms", 3_600_000), settings.get("backoff_ms", 100),
                          settings.get("backoff_max_ms", 10_000), fetch=endpoint.fetch,
                          clock=lambda: int(trio.current_time() * 1000))

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(source.run)
            await scenario(source)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_endpoint_is_refreshed_every_refresh_ms_and_for_an_unknown_kid():
    other = SigningKey("key-2")
    endpoint = Endpoint(jwks(KEY), jwks(KEY), jwks(KEY, other))

    async def scenario(source):
        now_ms = int(time.time() * 1000)
        assert endpoint.fetched == 1
        start = trio.current_time()
        await fetches(endpoint, 2)
        assert trio.current_time() - start == pytest.approx(60.0)  # refresh.ms
        token = other.sign(claims(now_ms / 1000))
        with pytest.raises(UnresolvableKey):
            source.validate(token, OPTIONS, now_ms)
        before = trio.current_time()
        await fetches(endpoint, 3)
        assert trio.current_time() == before  # brought forward
        assert source.validate(token, OPTIONS, now_ms).principal == "alice"
        # A kid asked for within the minute does not bring another refresh forward.
        third = SigningKey("key-3").sign(claims(now_ms / 1000))
        with pytest.raises(UnresolvableKey):
            source.validate(third, OPTIONS, now_ms)
        await fetches(endpoint, 4)
        with pytest.raises(UnresolvableKey):
            source.validate(third, OPTIONS, now_ms)
        assert not source._wake.is_set()

    run_endpoint(endpoint, scenario, refresh_ms=60_000)


def test_a_failed_refresh_is_retried_with_backoff_then_keeps_the_keys():
    down = JwksUnavailable("down")
    endpoint = Endpoint(jwks(KEY), down, down, down, down, down, down)

    async def scenario(source):
        keys = source.keys
        start = trio.current_time()
        await fetches(endpoint, 2)
        assert trio.current_time() - start == pytest.approx(1.0)
        # 100, 200, 400 ms between attempts, then the rest of the 1000 ms budget (300 ms).
        await fetches(endpoint, 5)
        assert trio.current_time() - start == pytest.approx(1.0 + 0.7)
        await fetches(endpoint, 6)
        assert trio.current_time() - start == pytest.approx(2.0)
        assert source.keys is keys

    run_endpoint(endpoint, scenario, refresh_ms=1_000, backoff_ms=100, backoff_max_ms=1_000)


def test_refresh_settings_are_checked():
    url = validate_url("k", "https://idp/jwks", "https://idp/jwks")
    with pytest.raises(ConfigError, match="must be positive"):
        JwksEndpoint("k", url, 0, 100, 10_000)
    with pytest.raises(ConfigError, match="less than retryBackoffMs"):
        JwksEndpoint("k", url, 1000, 100, 10)
