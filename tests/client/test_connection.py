"""A BrokerConnection (client/connection.py: a broker's connection to another, the tools' and the
tests') reads each response straight into one buffer of its size, the previous response's memory
once nothing refers to it, over a real loopback socket."""

from __future__ import annotations

import os

import trio
import trio.testing

from samsa.client.connection import BrokerConnection
from samsa.client.framing import Requests
from samsa.wire.protocol import decode_request, encode_request, encode_response, message_class

FetchRequest = message_class("FetchRequest")
FetchResponse = message_class("FetchResponse")
VERSION = 12


def fetch_response(records: bytes) -> FetchResponse:
    partition = FetchResponse.PartitionData(partition_index=0, records=records)
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])])


async def answered_in_turn(records: list[bytes], check) -> None:
    """A BrokerConnection whose peer answers each request with the next of `records` in a Fetch
    response (sent in small pieces, as a busy peer's bytes arrive); `check(connection)` runs the
    requests."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    connection = BrokerConnection(await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1]), "test", 60_000)
    server, _ = await listener.accept()
    listener.close()

    async def peer():
        stream = trio.SocketStream(server)
        for correlation_id, data in enumerate(records, 1):
            size = int.from_bytes(await receive(stream, 4), "big")
            await receive(stream, size)
            frame = bytes(encode_response(fetch_response(data), VERSION, correlation_id))
            for at in range(0, len(frame), 70_000):
                await stream.send_all(frame[at:at + 70_000])
                await trio.sleep(0)

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer)
                await check(connection)
    finally:
        await connection.aclose()
        server.close()


async def receive(stream: trio.SocketStream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        assert chunk
        data += chunk
    return bytes(data)


async def fetched(connection: BrokerConnection):
    response = await connection.call(FetchRequest(max_wait_ms=0, topics=[]), VERSION)
    return response.responses[0].partitions[0].records


def test_responses_are_read_into_the_previous_one_s_memory_once_nothing_refers_to_it():
    sizes = [500_000, 499_000, 20, 501_000, 500_500]
    records = [os.urandom(n) for n in sizes]

    async def check(connection: BrokerConnection):
        first = await fetched(connection)
        assert bytes(first) == records[0]
        second = await fetched(connection)  # `first` still refers to its frame: new memory
        assert bytes(second) == records[1] and second.obj is not first.obj
        assert bytes(first) == records[0], "a response still referenced was overwritten"
        del first, second
        small = await fetched(connection)
        assert bytes(small) == records[2]
        del small
        fourth = await fetched(connection)
        assert bytes(fourth) == records[3]
        reused = id(fourth.obj)
        del fourth
        fifth = await fetched(connection)  # the fourth's memory, resized in place
        # (`reused` is the connection's own frame, alive all along: its id cannot have been reused.)
        assert bytes(fifth) == records[4] and id(fifth.obj) == reused

    trio.run(answered_in_turn, records, check)


def test_a_request_larger_than_the_socket_buffer_goes_out_whole_and_every_call_is_a_checkpoint():
    """Requests are written straight to the socket, waiting for room when its buffer is full; a
    call still lets other tasks run, even when its answer is already there when it reads."""
    ProduceRequest = message_class("ProduceRequest")
    ProduceResponse = message_class("ProduceResponse")
    records = os.urandom(6 << 20)  # several times what a loopback socket buffers

    async def main():
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        connection = BrokerConnection(await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1]), "test",
                                      60_000)
        server, _ = await listener.accept()
        listener.close()
        received = []

        async def peer():
            stream = trio.SocketStream(server)
            for correlation_id, response in enumerate((ProduceResponse(responses=[]), fetch_response(b"")), 1):
                size = int.from_bytes(await receive(stream, 4), "big")
                received.append(await receive(stream, size))
                await stream.send_all(bytes(encode_response(response, 9 if correlation_id == 1 else VERSION,
                                                            correlation_id)))

        request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
        try:
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(peer)
                    with trio.testing.assert_checkpoints():
                        await connection.call(request, 9)
                    with trio.testing.assert_checkpoints():
                        await fetched(connection)
        finally:
            await connection.aclose()
            server.close()
        _, produced = decode_request(received[0])
        assert bytes(produced.topic_data[0].partition_data[0].records) == records

    trio.run(main)


def test_a_request_frame_is_what_the_codec_encodes_for_its_correlation_id():
    """Requests keeps each (api key, version)'s header and only sets the correlation id."""
    requests = Requests("broker-1-fetcher-0")
    fetch = FetchRequest(replica_id=1, max_wait_ms=500, min_bytes=1, topics=[])
    for version, correlation_id in ((12, 1), (12, 2), (4, 3), (12, 4)):
        assert requests.encode(fetch, version) == encode_request(fetch, version, correlation_id, "broker-1-fetcher-0")
    anonymous = Requests(None)
    assert anonymous.encode(fetch, 12) == encode_request(fetch, 12, 1, None)
