"""Fuzzing through a live server (issue 17): requests of every API and version the broker serves,
generated from their schemas and then mutated (bits flipped, bytes inserted or deleted, lengths set
to extremes, frames cut short), each sent on its own connection to one broker. Each gets an answer
to its correlation id, or its connection closed, or (a long poll, a join) is still waiting after a
while; the broker never crashes (its task's failure fails the test), and a well-behaved client on
the same broker is answered after every frame. tests/wire/test_fuzz.py fuzzes the decoders alone;
this goes through the whole server: framing, header, authorization and the handlers.

The broker runs in its own thread (its own trio loop) for the module, so that hypothesis drives each
example with plain blocking sockets."""

from __future__ import annotations

import socket
import struct
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopback import broker_config

from samsa.server.broker import Broker
from samsa.wire.protocol import ApiKey, decode_response, encode_request, request_class

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "wire"))
from wire_strategies import message_strategy, mutated  # noqa: E402

ANSWER_WITHIN = 2.0  # seconds before a frame counts as waiting (a long poll, a join) rather than answered
ApiVersionsRequest = request_class(ApiKey.API_VERSIONS)


class BrokerThread:
    """A Broker under trio in a thread of its own: `port`, `failure` (what its task raised), stop()."""

    def __init__(self, config) -> None:
        self.config = config
        self.port = 0
        self.failure: BaseException | None = None
        self._started = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=self._run, name="fuzzed-broker", daemon=True)
        self._thread.start()
        assert self._started.wait(30), f"the broker did not start: {self.failure!r}"

    def _run(self) -> None:
        async def main():
            broker = Broker(self.config)
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(broker.run)
                    self.port = broker.endpoints[0].port
                    self._started.set()
                    await trio.sleep_forever()

        try:
            trio.run(main)
        except BaseException as e:  # noqa: B036 - reported by the test thread
            self.failure = e
            self._started.set()

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(30)


@pytest.fixture(scope="module")
def fuzzed_broker(tmp_path_factory):
    broker = BrokerThread(broker_config(tmp_path_factory.mktemp("fuzz")))
    yield broker
    broker.stop()
    assert broker.failure is None, broker.failure


@pytest.fixture(scope="module")
def served_apis(fuzzed_broker) -> list[tuple[int, int]]:
    response = call(fuzzed_broker.port, ApiVersionsRequest(), 0)
    return [(a.api_key, v) for a in response.api_keys for v in range(a.min_version, a.max_version + 1)]


def call(port: int, request, version: int):
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(encode_request(request, version, 7, "well-behaved"))
        size = struct.unpack(">i", receive(sock, 4))[0]
        correlation_id, response = decode_response(receive(sock, size), request.API_KEY, version)
        assert correlation_id == 7
        return response


def receive(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed a well-behaved client's connection"
        data += chunk
    return bytes(data)


outcomes: Counter = Counter()


@st.composite
def mutated_request(draw, apis):
    api_key, version = draw(st.sampled_from(apis))
    message = draw(message_strategy(request_class(api_key), version))
    body = bytes(encode_request(message, version, 1000, "fuzz"))[4:]
    return api_key, version, draw(mutated(body))


def test_mutated_requests_of_every_api_leave_the_broker_serving(fuzzed_broker, served_apis):
    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(mutated_request(served_apis))
    def one_frame(request):
        _, _, frame = request
        with socket.create_connection(("127.0.0.1", fuzzed_broker.port), timeout=ANSWER_WITHIN) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            try:
                head = sock.recv(4)
                outcomes["answered" if head else "closed"] += 1
            except TimeoutError:
                outcomes["waiting"] += 1
            except ConnectionResetError:
                outcomes["closed"] += 1
        assert fuzzed_broker.failure is None, fuzzed_broker.failure
        assert call(fuzzed_broker.port, ApiVersionsRequest(), 0).error_code == 0

    one_frame()
    assert outcomes["answered"] and outcomes["closed"], outcomes
