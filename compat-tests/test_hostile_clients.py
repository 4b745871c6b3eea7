"""Hostile and careless clients (issue 17): a frame sent a byte at a time, a thousand idle
connections, a client that never reads its responses, a flood of tiny requests, ten thousand
connections opened and closed. Through each, a well-behaved client on the same broker is answered,
and on Samsa the broker's resident memory stays under 300 MB and its open files come back down.
(Latency under these loads is measured in bench/, never asserted here.)

Kafka runs the same scenarios as the oracle of what a client sees, but for the slowloris one, which
runs its heap out; its memory is the JVM heap's, bounded by -Xmx, so only Samsa's resident memory is
checked."""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time

import pytest
from compat_util import wait_for
from wire_client import WireClient

from samsa.wire.protocol import encode_request, message_class

ApiVersionsRequest = message_class("ApiVersionsRequest")
MetadataRequest = message_class("MetadataRequest")

MAX_RSS_MB = 300
CLIENTS_SEEN_WITHIN = 15.0  # seconds: a liveness bound (a broker that stopped serving), not a latency figure


@pytest.fixture(scope="module", autouse=True)
def many_open_files():
    """This process opens a thousand sockets at once: the soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def resident_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def assert_bounded(broker) -> None:
    if broker.kind == "samsa":
        rss = resident_mb(broker.proc.pid)
        assert rss < MAX_RSS_MB, f"the broker's resident memory is {rss:.0f} MB"


def assert_served(broker) -> None:
    """A well-behaved client connects and gets ApiVersions and Metadata answered."""
    with WireClient(broker.host, broker.port, "well-behaved", timeout=CLIENTS_SEEN_WITHIN) as client:
        assert client.call(ApiVersionsRequest(), 0).error_code == 0
        metadata = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 4)
        assert [b.port for b in metadata.brokers] == [broker.port]


def connect(broker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=CLIENTS_SEEN_WITHIN)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST: no TIME_WAIT pile-up
    return sock


@pytest.mark.samsa_only("Kafka allocates each frame's announced size when its size arrives "
                        "(queued.max.request.bytes is unbounded by default): 300 announced 100 MB frames ran its "
                        "heap out (java.lang.OutOfMemoryError, and it served no one after)")
def test_slowloris_frames_hold_no_memory_they_have_not_received(broker):
    """Three hundred connections each announce a frame of 100 MB (under socket.request.max.bytes)
    and then send a byte a second: a broker that allocated what a frame announces before its
    bytes arrive would need 30 GB."""
    slow = [connect(broker) for _ in range(300)]
    try:
        for sock in slow:
            sock.sendall(struct.pack(">i", 100_000_000))
        for _ in range(3):
            for sock in slow:
                sock.sendall(b"\x00")
            assert_served(broker)
            assert_bounded(broker)
            time.sleep(1)  # the slowloris' own pace: a byte a second
    finally:
        for sock in slow:
            sock.close()
    assert_served(broker)


def test_a_thousand_idle_connections(broker):
    before = open_files(broker.proc.pid) if broker.kind == "samsa" else 0
    idle = [connect(broker) for _ in range(1000)]
    try:
        assert_served(broker)
        assert_bounded(broker)
    finally:
        for sock in idle:
            sock.close()
    if broker.kind == "samsa":
        wait_for(lambda: open_files(broker.proc.pid) <= before + 5, CLIENTS_SEEN_WITHIN,
                 what="the broker to close the idle connections' sockets")
    assert_served(broker)


def test_a_client_that_never_reads_its_responses(broker):
    """Requests are pipelined until the client's send blocks; the broker stops reading from it once
    its responses are not taken (TCP pushes back) instead of queueing them without bound."""
    request = encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 4, 1, "never-reads")
    sock = connect(broker)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(2.0)
    sent = 0
    try:
        while sent < 200_000:
            sock.sendall(request)
            sent += 1
    except (TimeoutError, socket.timeout):
        pass  # the broker stopped reading: backpressure reached the client
    try:
        assert sent < 200_000, "the broker read 200,000 requests whose responses nobody read"
        assert_served(broker)
        assert_bounded(broker)
    finally:
        sock.close()
    assert_served(broker)


def test_a_flood_of_tiny_requests(broker):
    """One client sends 20,000 ApiVersions requests back to back and reads every answer, while
    another client is served."""
    count = 20_000
    frames = b"".join(bytes(encode_request(ApiVersionsRequest(), 0, i, "flood")) for i in range(count))
    sock = connect(broker)
    answers = bytearray()

    def read_all() -> None:
        expected = None
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return
            answers.extend(chunk)
            if expected is None:
                (size,) = struct.unpack_from(">i", answers)
                expected = (4 + size) * count  # every ApiVersions v0 answer has the same size
            if len(answers) >= expected:
                return

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        sock.sendall(frames)
        assert_served(broker)
        reader.join(60)
        assert not reader.is_alive(), f"{len(answers)} bytes of answers to {count} requests"
    finally:
        sock.close()
    assert_bounded(broker)


def test_ten_thousand_connections_opened_and_closed(broker):
    before = open_files(broker.proc.pid) if broker.kind == "samsa" else 0
    for i in range(10_000):
        sock = connect(broker)
        if i % 2:  # half of them say something first
            sock.sendall(encode_request(ApiVersionsRequest(), 0, 1, "churn"))
        sock.close()
    assert_served(broker)
    assert_bounded(broker)
    if broker.kind == "samsa":
        wait_for(lambda: open_files(broker.proc.pid) <= before + 5, CLIENTS_SEEN_WITHIN,
                 what="the broker to close the closed connections' sockets")
