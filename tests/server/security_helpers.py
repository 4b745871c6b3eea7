"""Shared by the security tests: an in-process broker with several listeners (optionally on a
MockClock), TLS and SASL clients (samsa.client's, as tests/server/loopback.py's Client), and the login steps."""

from __future__ import annotations

import contextlib
import ssl
import struct
from pathlib import Path

import trio

from samsa.client.scram import ScramClient, ScramMechanism
from samsa.server.config.kafka_config import KafkaConfig
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, run_with_broker

SIZE = struct.Struct(">i")
SaslHandshake = request_class(ApiKey.SASL_HANDSHAKE)
SaslAuthenticate = request_class(ApiKey.SASL_AUTHENTICATE)
ApiVersions = request_class(ApiKey.API_VERSIONS)
Metadata = request_class(ApiKey.METADATA)
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
              'user_bob="bob-secret";')


def config(tmp_path, listeners: str, **props) -> KafkaConfig:
    values = {"listeners": listeners, "log.dirs": str(tmp_path / "data"),
              # Kafka insists the inter-broker listener is one of them: the first, unless told.
              "inter.broker.listener.name": listeners.split("://")[0]}
    values.update(props)
    return KafkaConfig(values)


def run(config: KafkaConfig, scenario, clock=None) -> None:
    """Start a broker, run `scenario(broker, ports)` (ports by listener name), stop the broker."""

    async def guarded(broker):
        # A broker that never answers fails the test rather than hang it (in real time: a
        # MockClock's jumps would trip it).
        with trio.fail_after(60) if clock is None else contextlib.nullcontext():
            await scenario(broker, {e.listener: e.port for e in broker.endpoints})

    run_with_broker(config, guarded, clock)


def client_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


async def tls_client(port: int, context: ssl.SSLContext) -> Client:
    stream = trio.SSLStream(await trio.open_tcp_stream("127.0.0.1", port), context, server_hostname="localhost")
    await stream.do_handshake()
    return Client(stream)


async def closed(client: Client) -> bool:
    """True when the broker has closed the connection (EOF or a TLS alert)."""
    try:
        return await client.read_frame() is None
    except trio.BrokenResourceError:
        return True


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


async def handshake(client: Client, mechanism: str, version: int = 1):
    return await client.call(SaslHandshake(mechanism=mechanism), version)


async def authenticate(client: Client, token: bytes, version: int = 2):
    return await client.call(SaslAuthenticate(auth_bytes=token), version)


async def sasl_plain(client: Client, user: str, password: str, version: int = 2):
    """Handshake v1 and one PLAIN SaslAuthenticate; returns the SaslAuthenticate response."""
    assert (await handshake(client, "PLAIN")).error_code == ErrorCode.NONE
    return await authenticate(client, plain_token(user, password), version)


async def sasl_scram(client: Client, mechanism: str, user: str, password: str, version: int = 2):
    """Handshake v1 and a SCRAM exchange in SaslAuthenticate requests; returns the last response."""
    assert (await handshake(client, mechanism)).error_code == ErrorCode.NONE
    scram = ScramClient(ScramMechanism.from_name(mechanism), user, password)
    first = await authenticate(client, scram.first(), version)
    if first.error_code != ErrorCode.NONE:
        return first
    final = await authenticate(client, scram.final(first.auth_bytes), version)
    if final.error_code == ErrorCode.NONE:
        scram.verify(final.auth_bytes)
    return final


async def raw_token(client: Client, token: bytes) -> bytes | None:
    """Send a bare size-prefixed SASL token (after a v0 handshake); the bare answer, or None if closed."""
    await client.send_raw(SIZE.pack(len(token)) + token)
    return await client.read_frame()


def record_principals(broker) -> list:
    """Make every ApiVersions request note the principal it was served for."""
    from samsa.server.handlers import Handler

    seen = []
    broker.handlers = dict(broker.handlers)  # the registry is shared by every broker of the process
    original = broker.handlers[ApiKey.API_VERSIONS]

    async def recording(ctx, request):
        seen.append(ctx.principal)
        return await original.handle(ctx, request)

    broker.handlers[ApiKey.API_VERSIONS] = Handler(original.api_key, original.min_version, original.max_version,
                                                   recording)
    return seen
