"""The metrics endpoint's HTTP/1.1 server, on trio in the broker's nursery (prometheus_client's own
server runs in a thread). One GET per connection: the request head is read (at most
MAX_HEAD_BYTES, within HEAD_TIMEOUT_S), answered, and the connection closed (`Connection: close`),
which Prometheus and curl take as they take any HTTP/1.1 server's. What is not a well-formed
request gets 400; nothing a client sends reaches the broker beyond this connection's task."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import trio
from prometheus_client import CollectorRegistry, generate_latest

log = logging.getLogger("samsa.metrics")
MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_S = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}
_TEXT = "text/plain; charset=utf-8"
# The text format generate_latest writes, as every Prometheus version reads it.
_EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = _TEXT


class MetricsEndpoint:
    """What each path answers: /metrics the registry's exposition, /healthz and /readyz 200 or 503
    as `healthy()` and `ready()` say."""

    def __init__(self, registry: CollectorRegistry, healthy: Callable[[], bool], ready: Callable[[], bool]) -> None:
        self.registry = registry
        self.healthy = healthy
        self.ready = ready

    def respond(self, method: str, path: str) -> Response:
        if path == "/metrics":
            if method not in ("GET", "HEAD"):
                return Response(405, b"GET or HEAD\n")
            return Response(200, generate_latest(self.registry), _EXPOSITION)
        if path in ("/healthz", "/readyz"):
            if method not in ("GET", "HEAD"):
                return Response(405, b"GET or HEAD\n")
            up = self.healthy() if path == "/healthz" else self.ready()
            return Response(200, b"ok\n") if up else Response(503, b"not ready\n")
        return Response(404, b"not found\n")


def parse_request_line(head: bytes) -> tuple[str, str] | None:
    """(method, path without its query) of a request head, or None when it is not HTTP/1.x."""
    line = head.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1") or not parts[0].isalpha():
        return None
    try:
        method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        return None
    if not target.startswith("/"):
        return None
    return method, target.split("?", 1)[0]


async def read_head(stream: trio.abc.Stream) -> bytes | None:
    """The request head up to its blank line; None when the client sent too much or closed first."""
    head = bytearray()
    while b"\r\n\r\n" not in head:
        if len(head) > MAX_HEAD_BYTES:
            return None
        data = await stream.receive_some(MAX_HEAD_BYTES)
        if not data:
            return None
        head += data
    return bytes(head)


def encode_response(response: Response, with_body: bool) -> bytes:
    head = (f"HTTP/1.1 {response.status} {_REASONS[response.status]}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")
    return head + response.body if with_body else head


async def serve_connection(endpoint: MetricsEndpoint, stream: trio.SocketStream) -> None:
    try:
        async with stream:
            with trio.move_on_after(HEAD_TIMEOUT_S) as timeout:
                head = await read_head(stream)
            if timeout.cancelled_caught:
                return
            request = parse_request_line(head) if head is not None else None
            if request is None:
                response, method = Response(400, b"bad request\n"), "GET"
            else:
                method, path = request
                try:
                    response = endpoint.respond(method, path)
                except Exception:
                    log.exception("metrics endpoint: answering %s %s failed", method, path)
                    response = Response(500, b"internal error\n")
            await stream.send_all(encode_response(response, method != "HEAD"))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
        log.debug("metrics endpoint connection: %s", e)
    except Exception:  # a fault here must not end the broker's nursery
        log.exception("metrics endpoint connection failed")


async def serve_metrics(endpoint: MetricsEndpoint, host: str, port: int, *,
                        task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve `endpoint` on host:port until cancelled; started once it listens."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()
    log.info("Metrics endpoint listening on http://%s:%d/metrics", host, bound[1])
    task_status.started(bound[1])
    await trio.serve_listeners(partial(serve_connection, endpoint), listeners)
