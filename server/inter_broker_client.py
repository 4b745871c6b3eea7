"""A connection from this broker to another, for the requests brokers send each other (Kafka's
NetworkClient as the replica fetcher uses it): one request at a time, each answered within
`replica.socket.timeout.ms` or the connection is given up.

A response is read straight into one buffer of its size (`readv`, no copies), the memory of the
previous response once nothing refers to it: a follower's fetch responses are up to
replica.fetch.response.max.bytes each, and reading them in 64 KiB chunks appended to a buffer, then
copied out, cost the follower more than appending the records (issue 16)."""

from __future__ import annotations

import struct
import sys

import trio

from ..wire.codec import Message
from ..wire.protocol import decode_response, encode_request
from .network.socket_server import frame_memory, receive_into

_SIZE = struct.Struct(">i")


class BrokerUnreachable(Exception):
    """The other broker closed the connection, did not answer in time, or cannot be reached."""


class BrokerConnection:
    def __init__(self, stream: trio.abc.Stream, client_id: str, timeout_ms: int) -> None:
        self._stream = stream
        self._client_id = client_id
        self._timeout = timeout_ms / 1000
        # Read by its descriptor unless TLS (the command-line client's) must decrypt the bytes first.
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None
        self._size = bytearray(4)
        self._frame: bytearray | None = None  # the last response's memory, read into again once free
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
        """The next response frame's body. One request is in flight at a time, so nothing follows
        the frame on the socket."""
        await self._receive_exactly(memoryview(self._size))
        (size,) = _SIZE.unpack(self._size)
        if size < 0:
            raise BrokerUnreachable(f"the broker sent a frame of {size} bytes")
        # Only this attribute and getrefcount's argument refer to the last frame: no response,
        # records or memoryview of it is alive, so its bytes can be overwritten.
        previous_free = self._frame is not None and sys.getrefcount(self._frame) == 2
        frame = self._frame = frame_memory(self._frame, size, previous_free)
        view = memoryview(frame)
        await self._receive_exactly(view)
        return view

    async def _receive_exactly(self, view: memoryview) -> None:
        # Plain non-blocking reads, waiting on trio only when the kernel has nothing (as the
        # broker's own connections read): a large response takes a few reads, not one per 64 KiB.
        got = 0
        if self._fd is None:
            while got < len(view):
                data = await self._stream.receive_some(len(view) - got)
                if not data:
                    raise BrokerUnreachable("the broker closed the connection")
                view[got:got + len(data)] = data
                got += len(data)
            return
        try:
            await receive_into(self._fd, view, 0)
        except EOFError:
            raise BrokerUnreachable("the broker closed the connection") from None
