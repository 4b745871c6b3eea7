"""Sockets: listeners, per-connection frame reading, and response writing with sendfile.

A connection reads one size-prefixed frame into one buffer (`recv_into`, no copies), hands it to
the request handler and writes the response before reading the next: Kafka answers the requests of
a connection in order, and a client may pipeline several. A response may carry holes (file ranges
of log segments), which go to the socket with `os.sendfile`, never through Python.
"""

from __future__ import annotations

import errno
import logging
import os
import socket as _stdlib_socket
import struct
from dataclasses import dataclass
from typing import Awaitable, Callable

import trio

log = logging.getLogger("samsa.network")
_SIZE = struct.Struct(">i")


class ConnectionClosed(Exception):
    pass


@dataclass
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str


class Connection:
    """One client socket: frames in, responses out."""

    def __init__(self, sock: trio.socket.SocketType, listener: Endpoint, connection_id: str) -> None:
        self.sock = sock
        self.listener = listener
        self.id = connection_id
        peer = sock.getpeername()
        self.client_host, self.client_port = peer[0], peer[1]
        self._header = bytearray(4)

    async def _recv_exactly(self, view: memoryview) -> None:
        got = 0
        n = len(view)
        while got < n:
            k = await self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionClosed()
            got += k

    async def read_frame(self, max_size: int) -> bytearray:
        """The next request frame body. Raises ConnectionClosed at EOF; ValueError on a bad size."""
        await self._recv_exactly(memoryview(self._header))
        (size,) = _SIZE.unpack(self._header)
        if size < 0 or size > max_size:
            raise ValueError(f"frame size {size} is outside 0..{max_size} (socket.request.max.bytes)")
        frame = bytearray(size)
        await self._recv_exactly(memoryview(frame))
        return frame

    async def send(self, data) -> None:
        view = memoryview(data)
        while view:
            sent = await self.sock.send(view)
            view = view[sent:]

    async def send_response(self, buffer) -> None:
        """Send an encoded response; holes (objects with fd, position, size) go by sendfile."""
        holes = getattr(buffer, "holes", None)
        if not holes:
            await self.send(buffer)
            return
        view = memoryview(buffer)
        start = 0
        for pos, records in holes:
            await self.send(view[start:pos])
            await self.sendfile(records.fd, records.position, records.size)
            start = pos
        await self.send(view[start:])

    async def sendfile(self, fd: int, offset: int, count: int) -> None:
        out_fd = self.sock.fileno()
        while count > 0:
            try:
                sent = os.sendfile(out_fd, fd, offset, count)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            if sent == 0:
                # The file is shorter than the range (truncated underneath us): the frame is now
                # unrecoverable for this client, so close rather than send a short frame.
                raise ConnectionClosed("segment file shrank during sendfile")
            offset += sent
            count -= sent
            if count:
                await trio.lowlevel.checkpoint()

    def close(self) -> None:
        self.sock.close()


async def open_listener(endpoint: Endpoint) -> trio.socket.SocketType:
    family = _stdlib_socket.AF_INET6 if ":" in endpoint.host else _stdlib_socket.AF_INET
    sock = trio.socket.socket(family, _stdlib_socket.SOCK_STREAM)
    sock.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_REUSEADDR, 1)
    await sock.bind((endpoint.host or "0.0.0.0", endpoint.port))
    sock.listen(1024)
    return sock


async def serve_listener(sock: trio.socket.SocketType, endpoint: Endpoint,
                         handler: Callable[[Connection], Awaitable[None]], nursery: trio.Nursery,
                         buffer_sizes: tuple[int, int] = (-1, -1)) -> None:
    """Accept connections until cancelled; each runs `handler` in its own task in `nursery`."""
    counter = 0
    while True:
        try:
            client, _ = await sock.accept()
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                log.error("accept failed (%s); pausing for 100 ms", e)
                await trio.sleep(0.1)
                continue
            raise
        client.setsockopt(_stdlib_socket.IPPROTO_TCP, _stdlib_socket.TCP_NODELAY, 1)
        send_buffer, receive_buffer = buffer_sizes
        if send_buffer > 0:
            client.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_SNDBUF, send_buffer)
        if receive_buffer > 0:
            client.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_RCVBUF, receive_buffer)
        counter += 1
        try:
            conn = Connection(client, endpoint, f"{endpoint.listener}-{counter}")
        except OSError:
            client.close()  # peer already gone
            continue
        nursery.start_soon(handler, conn)
