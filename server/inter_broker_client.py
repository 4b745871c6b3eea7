"""A connection from this broker to another, for the requests brokers send each other (Kafka's
NetworkClient as the replica fetcher uses it): one request at a time, each answered within
`replica.socket.timeout.ms` or the connection is given up."""

from __future__ import annotations

import struct

import trio

from ..wire.codec import Message
from ..wire.protocol import decode_response, encode_request

_SIZE = struct.Struct(">i")


class BrokerUnreachable(Exception):
    """The other broker closed the connection, did not answer in time, or cannot be reached."""


class BrokerConnection:
    def __init__(self, stream: trio.SocketStream, client_id: str, timeout_ms: int) -> None:
        self._stream = stream
        self._client_id = client_id
        self._timeout = timeout_ms / 1000
        self._buffer = bytearray()
        self._correlation_id = 0

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str, timeout_ms: int) -> BrokerConnection:
        with trio.move_on_after(timeout_ms / 1000):
            try:
                return cls(await trio.open_tcp_stream(host, port), client_id, timeout_ms)
            except OSError as e:
                raise BrokerUnreachable(f"cannot connect to {host}:{port}: {e}") from e
        raise BrokerUnreachable(f"no connection to {host}:{port} within {timeout_ms} ms")

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def call(self, message: Message, version: int) -> Message:
        self._correlation_id += 1
        with trio.move_on_after(self._timeout):
            try:
                await self._stream.send_all(encode_request(message, version, self._correlation_id, self._client_id))
                frame = await self._read_frame()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                raise BrokerUnreachable(str(e)) from e
            correlation_id, response = decode_response(frame, message.API_KEY, version)
            if correlation_id != self._correlation_id:
                raise BrokerUnreachable(f"correlation id {correlation_id} answers request {self._correlation_id}")
            return response
        raise BrokerUnreachable(f"no response to {type(message).__name__} within {self._timeout * 1000:.0f} ms")

    async def send_without_response(self, message: Message, version: int) -> None:
        """Write a request the broker does not answer (Produce with acks=0), without waiting:
        `call` would wait for a response that never comes."""
        self._correlation_id += 1
        try:
            await self._stream.send_all(encode_request(message, version, self._correlation_id, self._client_id))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            raise BrokerUnreachable(str(e)) from e

    async def _read_frame(self) -> memoryview:
        buffer = self._buffer
        while True:
            if len(buffer) >= 4:
                (size,) = _SIZE.unpack_from(buffer)
                if len(buffer) >= 4 + size:
                    frame = bytearray(buffer[4:4 + size])
                    del buffer[:4 + size]
                    return memoryview(frame)
            chunk = await self._stream.receive_some(1 << 16)
            if not chunk:
                raise BrokerUnreachable("the broker closed the connection")
            buffer += chunk
