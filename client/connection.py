"""A connection to a broker over trio: one request at a time (`call`), or several in flight
(`send`, then `receive` for each), each answered within the connection's timeout or the connection
is given up (BrokerUnreachable).

A response is read straight into one buffer of its size (`readv`, no copies), the memory of the
previous response once nothing refers to it (framing.FrameReader): a follower's fetch responses
are up to replica.fetch.response.max.bytes each, and reading them in 64 KiB chunks appended to a
buffer, then copied out, cost the follower more than appending the records (issue 16).
"""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import Callable
from typing import Any

import trio

from ..wire.codec import Message
from .errors import BrokerUnreachable
from .framing import FrameReader, Requests

_BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class BrokerConnection:
    """`await BrokerConnection.connect(host, port, client_id, timeout_ms)`, then `call`. A
    `timeout_ms` of None waits for each response as long as it takes (tests that run on trio's
    MockClock, and a caller that bounds its calls itself: a replica fetcher)."""

    def __init__(self, stream: trio.abc.Stream, client_id: str | None, timeout_ms: int | None) -> None:
        self.stream = stream
        self._requests = Requests(client_id)
        self._frames = FrameReader()
        self._timeout = math.inf if timeout_ms is None else timeout_ms / 1000
        # Read by its descriptor unless TLS must decrypt the bytes first.
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str | None, timeout_ms: int,
                      ssl_context: ssl.SSLContext | None = None, timed_calls: bool = True) -> BrokerConnection:
        """A connection to host:port, over TLS with `ssl_context` (the broker's name checked as
        the context says); BrokerUnreachable when none is made within `timeout_ms`. Each call is
        then answered within `timeout_ms` too, unless `timed_calls` is False (the caller bounds
        its calls itself)."""
        with trio.move_on_after(timeout_ms / 1000):
            try:
                stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
                if ssl_context is not None:
                    stream = trio.SSLStream(stream, ssl_context, server_hostname=host)
                    await stream.do_handshake()
            except OSError as e:
                raise BrokerUnreachable(f"cannot connect to {host}:{port}: {e}") from e
            except (trio.BrokenResourceError, ssl.SSLError) as e:
                raise BrokerUnreachable(f"TLS handshake with {host}:{port} failed: {e.__cause__ or e}") from e
            return cls(stream, client_id, timeout_ms if timed_calls else None)
        tls = "TLS " if ssl_context is not None else ""
        raise BrokerUnreachable(f"no {tls}connection to {host}:{port} within {timeout_ms} ms")

    @property
    def client_id(self) -> str | None:
        return self._requests.client_id

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def call(self, message: Message, version: int) -> Any:
        """The response to `message`, sent at `version`."""
        if self._timeout == math.inf:  # no cancel scope at all: a few microseconds a call
            return await self._exchange(message, version)
        with trio.move_on_after(self._timeout):
            return await self._exchange(message, version)
        raise BrokerUnreachable(f"no response to {type(message).__name__} within {self._timeout * 1000:.0f} ms")

    async def _exchange(self, message: Message, version: int) -> Any:
        try:
            await self._write(self._requests.encode(message, version))
            # The answer cannot be there yet: wait for it before the first read (one failed read
            # less per call), which also makes every call a checkpoint.
            frame = await self._read_frame(wait_first=True)
        except _BROKEN as e:
            raise BrokerUnreachable(str(e)) from e
        correlation_id, response = self._requests.decode(frame)
        if correlation_id != self._requests.correlation_id:  # the answer to an earlier call that timed out
            raise BrokerUnreachable(f"correlation id {correlation_id} answers request "
                                    f"{self._requests.correlation_id}")
        return response

    async def send(self, message: Message, version: int) -> None:
        """Send `message` without waiting for its response: `receive` returns the responses in the
        order of the requests (a client pipelining its requests)."""
        await self._send(self._requests.encode(message, version))
        await trio.lowlevel.checkpoint()  # a loop of sends still lets other tasks run

    async def receive(self) -> Any:
        """The response to the oldest request `send` sent and no `receive` has returned."""
        with trio.move_on_after(self._timeout):
            try:
                frame = await self._read_frame()
            except _BROKEN as e:
                raise BrokerUnreachable(str(e)) from e
            return self._requests.decode(frame)[1]
        raise BrokerUnreachable(f"no response within {self._timeout * 1000:.0f} ms")

    async def send_without_response(self, message: Message, version: int) -> None:
        """Write a request the broker does not answer (Produce with acks=0), without waiting:
        `call` would wait for a response that never comes."""
        await self._send(self._requests.encode(message, version, expect_response=False))
        await trio.lowlevel.checkpoint()

    async def _send(self, frame: bytearray) -> None:
        try:
            await self._write(frame)
        except _BROKEN as e:
            raise BrokerUnreachable(str(e)) from e

    async def _write(self, frame: bytearray) -> None:
        """Write the whole frame: plain non-blocking writes, waiting on trio only when the socket's
        buffer is full (a replica fetcher sends a request per fetch: trio's send_all, a checkpoint
        and a yield to the scheduler for every one, cost more than the write)."""
        if self._fd is None:
            await self.stream.send_all(frame)
            return
        await write_all(self._fd, frame)

    async def _read_frame(self, wait_first: bool = False) -> memoryview:
        """The next frame's body. Only the frame is read, never bytes after it. `wait_first`: wait
        until the socket is readable before reading (an answer just asked for)."""
        if wait_first and self._fd is not None:
            await trio.lowlevel.wait_readable(self._fd)
        await self._receive_exactly(self._frames.size_view)
        view = self._frames.body()
        await self._receive_exactly(view)
        return view

    async def _receive_exactly(self, view: memoryview) -> None:
        # Plain non-blocking reads, waiting on trio only when the kernel has nothing (as the
        # broker's own connections read): a large response takes a few reads, not one per 64 KiB.
        if self._fd is not None:
            try:
                await receive_into(self._fd, view, 0)
            except EOFError:
                raise BrokerUnreachable("the broker closed the connection") from None
            return
        got = 0
        while got < len(view):
            data = await self.stream.receive_some(len(view) - got)
            if not data:
                raise BrokerUnreachable("the broker closed the connection")
            view[got:got + len(data)] = data
            got += len(data)


async def write_all(fd: int, data) -> None:
    """Write all of `data` to the non-blocking socket `fd`, waiting on trio only when its send
    buffer is full. The broker's connections write their responses with it too."""
    view = memoryview(data)
    while view:
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        view = view[sent:]


async def receive_into(fd: int, view: memoryview, got: int, before_wait: Callable[[int], None] | None = None) -> int:
    """Fill `view` from its byte `got` on from the non-blocking socket `fd`, each read taking what
    the kernel has (`readv`, no copies), waiting on trio only when it has nothing (after
    `before_wait(got)`). Returns len(view); raises EOFError when the peer closes first. The
    broker's connections read their frames with it too."""
    end = len(view)
    while got < end:
        try:
            with view[got:] as free:
                n = os.readv(fd, (free,))
        except BlockingIOError:
            if before_wait is not None:
                before_wait(got)
            await trio.lowlevel.wait_readable(fd)
            continue
        if n == 0:
            raise EOFError()
        got += n
    return got
