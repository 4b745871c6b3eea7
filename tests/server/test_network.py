"""Response writing over a real loopback socket: a FrameBuffer's referenced records and file slices
arrive in frame order, byte for byte, through partial writes of a small send buffer; and frame
reading: large frames' memory reused, a frame read ahead served after a checkpoint."""

from __future__ import annotations

import os
import socket

import trio
import trio.testing

from samsa.server.network.socket_server import Connection, Endpoint
from samsa.storage.file_records import FileRecords
from samsa.wire.codec import REFERENCE_MIN, FrameBuffer
from samsa.wire.protocol import encode_response, message_class

FetchResponse = message_class("FetchResponse")


def fetch_response(records: list) -> FetchResponse:
    partitions = [FetchResponse.PartitionData(partition_index=i, records=r) for i, r in enumerate(records)]
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=partitions)])


async def connected_pair() -> tuple[Connection, trio.SocketStream]:
    """A server Connection and the client stream at its other end, over loopback."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1])
    server, _ = await listener.accept()
    listener.close()
    return Connection(server, Endpoint("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"), "test"), client


async def send_and_receive(response, version: int, send_buffer: int | None = None) -> FrameBuffer:
    """Send `response` encoded into a FrameBuffer from a server Connection and check that the client
    reads exactly the bytes a plain bytearray encoding holds; the FrameBuffer sent."""
    conn, client = await connected_pair()
    if send_buffer is not None:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    frame = encode_response(response, version, 7, FrameBuffer())
    expected = bytes(encode_response(response, version, 7))  # every byte copied in, file slices read
    try:
        with trio.fail_after(60):  # a byte lost would leave the reader waiting
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.send_response, frame)
                assert await receive_exactly(client, len(expected)) == expected
    finally:
        conn.close()
        await client.aclose()
    return frame


async def receive_exactly(stream: trio.SocketStream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        assert chunk, "the connection closed early"
        data += chunk
        await trio.lowlevel.checkpoint()  # let the sender run into a full socket buffer now and then
    return bytes(data)


def test_referenced_records_and_file_slices_are_sent_in_frame_order(tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(300_000))
    log = FileRecords.open(path)
    large, mutable_large = os.urandom(REFERENCE_MIN * 5), bytearray(os.urandom(REFERENCE_MIN))
    view = memoryview(b"-" + os.urandom(REFERENCE_MIN * 2))[1:]
    # A file slice under 16 KiB is read and goes in the writev of the bytes around it.
    records = [large, log.slice(1000, 200_000), b"small", mutable_large, None, view, log.slice(250_000, 50_000),
               log.slice(10, 1000), log.slice(299_000, 5000)]
    try:
        # A send buffer far smaller than the frame: writev and sendfile return short.
        frame = trio.run(send_and_receive, fetch_response(records), 16, 4096)
    finally:
        log.close()
    assert [type(h) for _, h in frame.holes] == [bytes, FileRecords, bytearray, memoryview, FileRecords,
                                                 FileRecords, FileRecords]


def test_a_frame_of_more_buffers_than_one_writev_takes():
    chunks = [bytes([i % 256]) * REFERENCE_MIN for i in range(1100)]
    frame = trio.run(send_and_receive, fetch_response(chunks), 12)
    assert len(frame.pieces()) > 2 * 1024  # IOV_MAX on Linux: three writevs at least


def frame_of(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_large_frames_are_read_into_the_previous_one_s_memory_once_nothing_refers_to_it():
    async def main():
        conn, client = await connected_pair()
        bodies = [os.urandom(300_000), os.urandom(299_000), os.urandom(301_000), os.urandom(300_500)]
        try:
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.send_all, b"".join(frame_of(b) for b in bodies))
                    first = await conn.read_frame(1 << 20)
                    assert first == bodies[0]
                    address = id(first)
                    held = memoryview(first)[10:20]  # a request still using the first frame
                    second = await conn.read_frame(1 << 20)
                    assert second == bodies[1] and second is not first
                    assert first == bodies[0], "a frame still referenced was overwritten"
                    del held, first, second
                    third = await conn.read_frame(1 << 20)  # the second's memory, larger in place
                    assert third == bodies[2]
                    reused = id(third)
                    del third
                    fourth = await conn.read_frame(1 << 20)
                    assert fourth == bodies[3] and id(fourth) == reused
                    assert address != reused
        finally:
            conn.close()
            await client.aclose()
    trio.run(main)


def test_an_idle_connection_gives_its_large_frame_to_the_next_connection():
    async def main():
        first_conn, first_client = await connected_pair()
        second_conn, second_client = await connected_pair()
        body = os.urandom(200_000)
        try:
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(first_client.send_all, frame_of(body))
                    frame = await first_conn.read_frame(1 << 20)
                address = id(frame)
                del frame
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(first_conn.read_frame, 1 << 20)  # idles: nothing to read
                    await trio.testing.wait_all_tasks_blocked()
                    nursery.start_soon(second_client.send_all, frame_of(body[::-1]))
                    frame = await second_conn.read_frame(1 << 20)
                    assert frame == body[::-1] and id(frame) == address
                    nursery.cancel_scope.cancel()
        finally:
            for conn in (first_conn, second_conn):
                conn.close()
            for client in (first_client, second_client):
                await client.aclose()
    trio.run(main)


def test_accepted_sockets_get_the_listening_socket_options():
    """Even a connection the kernel accepted before the accept loop ran (a client connecting while
    the broker starts)."""
    from samsa.server.network.socket_server import open_listener, serve_listener

    async def main():
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")
        listener = await open_listener(endpoint, (65536, 32768))
        accepted: list[Connection] = []
        got_one = trio.Event()

        async def handler(conn: Connection) -> None:
            accepted.append(conn)
            got_one.set()

        client = await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_listener, listener, endpoint, handler, nursery)
            with trio.fail_after(10):
                await got_one.wait()
            nursery.cancel_scope.cancel()
        conn, = accepted
        assert (conn.client_host, conn.client_port) == client.socket.getsockname()
        assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        # Linux doubles what it is given (bookkeeping overhead).
        assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * 65536
        assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * 32768
        conn.close()
        await client.aclose()
        listener.close()

    trio.run(main)


def test_a_frame_already_read_ahead_costs_a_checkpoint_unless_the_task_yielded_since_the_last_one():
    # Fairness between connections: a pipelining client yields once per frame to the others, but
    # a request that parked (a long poll, an acks=all produce) already yielded.
    async def main():
        conn, client = await connected_pair()
        try:
            with trio.fail_after(60):
                await client.send_all(b"".join(frame_of(body) for body in (b"a", b"b", b"c")))
                assert await conn.read_frame(1024) == b"a"  # all three read ahead
                with trio.testing.assert_checkpoints():
                    assert await conn.read_frame(1024) == b"b"
                with trio.testing.assert_no_checkpoints():
                    assert await conn.read_frame(1024, yielded=True) == b"c"
        finally:
            conn.close()
            await client.aclose()
    trio.run(main)
