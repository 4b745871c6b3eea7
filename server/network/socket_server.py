"""Sockets: listeners, per-connection frame reading, and response writing with writev and sendfile.

A connection reads one size-prefixed frame into one buffer (`recv_into`, no copies), hands it to
the request handler and writes the response before reading the next: Kafka answers the requests of
a connection in order, and a client may pipeline several (an acks=all produce waiting for its
followers is the exception: in_order_responses.py). A response may carry holes: file ranges
of log segments, which go to the socket with `os.sendfile`, never through Python - except on TLS
connections, where the bytes must be encrypted in user space and are read from the file instead,
and small ranges, which are read and sent with the bytes around them in one writev -
and records in memory, which go with the bytes around them in one `os.writev`, never copied.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket as _stdlib_socket
import ssl
import struct
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from ...client.connection import receive_into, write_all
from ...client.framing import frame_memory, give_back_frame, resized
from ...wire.codec import piece_size
from .connection_quotas import TooManyConnections

if TYPE_CHECKING:
    from ..security.authenticator import Authenticator

log = logging.getLogger("samsa.network")
_SIZE = struct.Struct(">i")
_READ_AHEAD = 16 * 1024  # one read takes a small request whole, size prefix and all
# Read-ahead buffers of connections gone idle, for the next one that has data: a new bytearray is
# zeroed, 16 KiB of memset per request on a connection that idles between requests.
_spare_buffers: list[bytearray] = []
_MAX_SPARE_BUFFERS = 64
_TLS_FILE_CHUNK = 1 << 16
# A file range smaller than this is read (pread) and goes in the writev of the bytes around it: a
# sendfile between two writevs is three sends, each pushing a segment to the peer (and waking it),
# where a follower's or a consumer's fetch of a few small batches per partition had one sendfile and
# one writev per partition. pread and one writev cost less up to about 16 KiB (1 KiB: 3.4-3.9
# against 5.1-6.0 us of CPU on loopback, 64 KiB: 14-16 against 9-15).
_SENDFILE_MIN = 16 << 10
_FAIR_SHARE = 4 << 20  # bytes one sendfile loop may send without letting other tasks run
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024  # buffers one writev takes
# While the rest of a large frame is awaited, the socket wakes the broker only once this many of its
# bytes (or all of them) are there (SO_RCVLOWAT; the kernel caps it at half the receive buffer).
_RECEIVE_LOW_WATER = 64 << 10


class ConnectionClosed(Exception):
    pass


def _read_slice(piece) -> bytes:
    """A small file range's bytes, read now (as sendfile would have sent them now)."""
    data = os.pread(piece.fd, piece.size, piece.position)
    if len(data) != piece.size:
        raise ConnectionClosed("segment file shrank before it was sent")
    return data


@dataclass
class Endpoint:
    listener: str
    host: str | None  # None: every interface (a listener such as PLAINTEXT://:9092)
    port: int
    security_protocol: str


class Connection:
    """One client socket: frames in, responses out."""

    def __init__(self, sock: trio.socket.SocketType, listener: Endpoint, connection_id: str) -> None:
        self.sock = sock
        self.listener = listener
        self.id = connection_id
        # Raises OSError when the peer is already gone (reset before it was accepted): the cheapest
        # way to drop it, before it costs a task (accept()'s address would not tell).
        peer = sock.getpeername()
        self.client_host, self.client_port = peer[0], peer[1]
        self._fd = sock.fileno()  # waited on as an int: trio would look a socket's fileno up each time
        # Bytes read ahead of the current frame; allocated while data flows, dropped when idle.
        self._buffer: bytearray | None = None
        self._start = self._end = 0
        self._waits = 0  # times a read waited for the kernel: each wait is a checkpoint
        self._low_water = 1  # the socket's SO_RCVLOWAT
        self._frame: bytearray | None = None  # the last frame larger than the read-ahead, for reuse
        self.tls: trio.SSLStream | None = None
        # Set by the listener's security (server/network/listeners.py) once TLS is up, before the
        # first frame is read.
        self.authenticator: Authenticator
        # KIP-511: the client software's name and version its ApiVersions (v3+) gave, None until then
        # (Kafka's ClientInformation of the channel: client-metrics subscriptions may match on them).
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        self.muted_until = 0.0  # trio time before which no request is read (a quota's throttle)
        # While waiting for a request: the trio time it must come by (idle or authentication
        # timeout), past which the broker cancels `idle_scope` (entered while the connection is served).
        self.idle_deadline = math.inf
        self.idle_scope = trio.CancelScope()

    async def start_tls(self, context: ssl.SSLContext) -> None:
        """Complete a server-side TLS handshake; from then on every byte goes through TLS."""
        stream = trio.SSLStream(trio.SocketStream(self.sock), context, server_side=True)
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as e:
            # trio keeps the alert OpenSSL wrote (unknown CA, no certificate, ...) to itself: send it,
            # best effort, so the client learns why rather than guessing at a closed socket.
            alert = getattr(getattr(stream, "_outgoing", None), "read", bytes)()
            if alert:
                try:
                    os.write(self._fd, alert)
                except OSError:
                    pass
            raise ConnectionClosed(f"TLS handshake failed: {e.__cause__ or e}") from e
        self.tls = stream

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER) if it presented one the trust store accepts."""
        return self.tls.getpeercert(binary_form=True) if self.tls is not None else None

    # The socket is read and written with plain non-blocking system calls, waiting on trio only
    # when the kernel has nothing: trio's socket methods pass through its scheduler on every call,
    # which is most of a small request's cost. A frame read without waiting for the kernel ends
    # with a checkpoint, so that a pipelining client yields once per frame to the others.

    async def _wait_readable(self) -> None:
        self._waits += 1
        await trio.lowlevel.wait_readable(self._fd)

    async def _fill(self, wanted: int) -> bytearray:
        """Read ahead until `wanted` (at most _READ_AHEAD) unread bytes are buffered; the buffer."""
        unread = self._end - self._start
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = _take_buffer()
        elif self._start:
            buffer[:unread] = buffer[self._start:self._end]
            self._start, self._end = 0, unread
        view = memoryview(buffer)
        while self._end < wanted:
            try:
                n = os.readv(self._fd, (view[self._end:],))
            except BlockingIOError:
                if self._end == 0:  # an idle connection holds no buffer
                    view.release()
                    _give_back_buffer(buffer)
                    self._buffer = None
                    self._give_back_frame()
                    await self._wait_readable()
                    buffer = self._buffer = _take_buffer()
                    view = memoryview(buffer)
                else:
                    await self._wait_readable()
                continue
            if n == 0:
                raise ConnectionClosed()
            self._end += n
        return buffer

    async def read_frame(self, max_size: int, limit_name: str = "socket.request.max.bytes",
                         yielded: bool = False) -> bytearray:
        """The next request frame body. Raises ConnectionClosed at EOF; ValueError on a bad size
        (before allocating anything for it). `yielded`: the task passed through the scheduler
        since it read the previous frame (that request parked)."""
        if self.tls is not None:
            return await _read_tls_frame(self.tls, max_size, limit_name)
        waits = self._waits
        frame = await self._read_frame(max_size, limit_name)
        if self._waits == waits and not yielded:
            # It was all there: yield once per frame all the same, unless the request before it
            # did (a parked fetch or acks=all produce, whose client often has its next request in
            # the socket by then: a third of the frames in the 16-partition end-to-end case).
            await trio.lowlevel.checkpoint()
        return frame

    async def _read_frame(self, max_size: int, limit_name: str) -> bytearray:
        buffer = self._buffer
        if buffer is None or self._end - self._start < 4:
            buffer = await self._fill(4)
        (size,) = _SIZE.unpack_from(buffer, self._start)
        if size < 0 or size > max_size:
            raise ValueError(f"frame size {size} is outside 0..{max_size} ({limit_name})")
        self._start += 4
        if size <= _READ_AHEAD and self._end - self._start < size:
            buffer = await self._fill(size)
        unread = self._end - self._start
        if unread >= size:
            frame = buffer[self._start:self._start + size]
            self._start += size
            return frame
        # A large frame: what was read ahead, then the rest straight into the frame.
        frame = _LargeFrameMemory.allocate(size, unread, self._large_frame)
        frame[:unread] = memoryview(buffer)[self._start:self._end]
        self._start = self._end = 0
        try:
            await self._read_rest(frame, unread, size)
        finally:
            _LargeFrameMemory.release(frame)
        return frame

    async def _read_rest(self, frame: bytearray, got: int, size: int) -> None:
        """Read a large frame's bytes after its first `got`, straight into it, as they arrive
        (a 1 MB request comes in several reads). The budget of unreceived bytes learns what
        arrived before each wait: only then do other connections look at it."""
        counted = got

        def before_wait(got: int) -> None:
            nonlocal counted
            _LargeFrameMemory.received(frame, got - counted)
            counted = got
            self._waits += 1
            self._set_low_water(min(size - got, _RECEIVE_LOW_WATER))

        while got < size:
            if got == len(frame):  # a frame beyond the budget: grow with what arrived
                resized(frame, min(size, 2 * got))
            with memoryview(frame) as view:
                try:
                    got = await receive_into(self._fd, view, got, before_wait)
                except EOFError:
                    raise ConnectionClosed() from None
        _LargeFrameMemory.received(frame, got - counted)
        self._set_low_water(1)

    def _set_low_water(self, n: int) -> None:
        """Wake for this socket once `n` bytes are readable. Bytes of a large frame arrive in
        pieces as small as the client's writes (librdkafka's, or TCP segments when the client is
        slower than the broker); each wake is a pass through trio's scheduler, which costs more
        than the read itself (issue 16: 1 MB frames sent in 16 KiB pieces cost 6-9 ms of broker
        CPU per MB, 3 with a 64 KiB low-water mark)."""
        if n != self._low_water:
            self._low_water = n
            self.sock.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_RCVLOWAT, n)

    def _large_frame(self, size: int) -> bytearray:
        """A buffer of `size` bytes for a frame larger than the read-ahead: the memory of an
        earlier large frame no request refers to any more (this connection's last, or one an idle
        connection gave back), else a new one. A new 1 MB bytearray costs a memset and, once
        glibc has handed the memory back to the kernel, a page fault per 4 KiB (system time): a
        producer's 1 MB requests paid that on every request (issue 16)."""
        # Referenced only by this attribute (and getrefcount's argument): no request, memoryview
        # or slice of the previous frame is alive, so its bytes can be overwritten.
        previous_free = self._frame is not None and sys.getrefcount(self._frame) == 2
        frame = self._frame = frame_memory(self._frame, size, previous_free)
        return frame

    def _give_back_frame(self) -> None:
        """While the connection idles, its last large frame serves others (if nothing holds it:
        the local and getrefcount's argument)."""
        frame, self._frame = self._frame, None
        if frame is not None and sys.getrefcount(frame) == 2:
            give_back_frame(frame)

    async def send(self, data) -> None:
        if self.tls is not None:
            await _tls_send(self.tls, data)
            return
        await write_all(self._fd, data)

    async def send_response(self, buffer) -> None:
        """Send an encoded response: a FrameBuffer's buffers by writev, its file slices (fd,
        position, size) by sendfile, those under _SENDFILE_MIN read into the writev."""
        if not getattr(buffer, "holes", None):
            await self.send(buffer)
            return
        buffers = []
        for piece in buffer.pieces():
            if isinstance(piece, (bytes, bytearray, memoryview)):
                buffers.append(piece)
                continue
            if piece.size < _SENDFILE_MIN:
                buffers.append(_read_slice(piece))
                continue
            await self.send_buffers(buffers)
            buffers = []
            await self.sendfile(piece.fd, piece.position, piece.size)
        await self.send_buffers(buffers)

    async def send_buffers(self, buffers: list) -> None:
        """Send buffers in order, gathered into as few writev calls as the socket takes."""
        if self.tls is not None:
            for data in buffers:
                await _tls_send(self.tls, data)
            return
        first = unyielded = 0
        while first < len(buffers):
            try:
                sent = os.writev(self._fd, buffers[first:first + _IOV_MAX])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._fd)
                unyielded = 0
                continue
            unyielded += sent
            while sent:
                size = piece_size(buffers[first])
                if sent < size:  # a partial write: the rest of this buffer goes next
                    buffers[first] = memoryview(buffers[first]).cast("B")[sent:]
                    break
                sent -= size
                first += 1
            while first < len(buffers) and not piece_size(buffers[first]):
                first += 1
            if first < len(buffers) and unyielded >= _FAIR_SHARE:  # as sendfile does
                await trio.lowlevel.checkpoint()
                unyielded = 0

    async def sendfile(self, fd: int, offset: int, count: int) -> None:
        if self.tls is not None:
            await _send_file_by_reading(self.tls, fd, offset, count)
            return
        # A partial sendfile means the send buffer filled, but on a fast peer the kernel has often
        # freed it again (ACKs) by the time the call returns: retry at once, and wait on trio only
        # when the kernel says EAGAIN. Yielding after every partial write (socket.send.buffer.bytes,
        # 100 KB by default, takes five of them per 1 MB fetch) cost a scheduler pass each.
        unyielded = 0
        while count > 0:
            try:
                sent = os.sendfile(self._fd, fd, offset, count)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._fd)
                unyielded = 0
                continue
            if sent == 0:
                # The file is shorter than the range (truncated underneath us): the frame is now
                # unrecoverable for this client, so close rather than send a short frame.
                raise ConnectionClosed("segment file shrank during sendfile")
            offset += sent
            count -= sent
            unyielded += sent
            if count and unyielded >= _FAIR_SHARE:
                await trio.lowlevel.checkpoint()  # a peer that drains as fast as we send must not starve the rest
                unyielded = 0

    def close(self) -> None:
        self.sock.close()


# --- TLS: through trio's SSLStream, whose buffering stands in for a connection's read-ahead ---

async def _read_tls_frame(tls: trio.SSLStream, max_size: int, limit_name: str) -> bytearray:
    header = await _tls_receive_exactly(tls, 4)
    (size,) = _SIZE.unpack(header)
    if size < 0 or size > max_size:
        raise ValueError(f"frame size {size} is outside 0..{max_size} ({limit_name})")
    return await _tls_receive_exactly(tls, size)


async def _tls_receive_exactly(tls: trio.SSLStream, size: int) -> bytearray:
    frame = bytearray()
    try:
        while len(frame) < size:
            data = await tls.receive_some(size - len(frame))
            if not data:
                raise ConnectionClosed()
            frame += data
    except trio.BrokenResourceError as e:
        raise ConnectionClosed(str(e.__cause__ or e)) from e
    return frame


async def _tls_send(tls: trio.SSLStream, data) -> None:
    try:
        await tls.send_all(data)
    except trio.BrokenResourceError as e:
        raise ConnectionClosed(str(e.__cause__ or e)) from e


async def _send_file_by_reading(tls: trio.SSLStream, fd: int, offset: int, count: int) -> None:
    # os.sendfile cannot write to a TLS stream: read the range and encrypt it, a chunk at a time.
    while count > 0:
        chunk = os.pread(fd, min(count, _TLS_FILE_CHUNK), offset)
        if not chunk:
            raise ConnectionClosed("segment file shrank while sending it")
        await _tls_send(tls, chunk)
        offset += len(chunk)
        count -= len(chunk)


class _LargeFrameMemory:
    """Memory of large frames allocated before their bytes arrived, broker-wide. A client sending a
    large request sends it at once, so its frame gets one buffer of the announced size while the
    bytes announced and not yet received stay under UNRECEIVED_BUDGET. Past it, a frame's buffer
    starts at what was read ahead and doubles as bytes arrive, at most twice what was received: a
    thousand clients announcing 100 MB frames and sending a byte a second (slowloris) hold memory for
    the bytes they sent, where buffers of the announced size would be a hundred gigabytes (bytearray
    zeroes what it allocates). Kafka allocates the announced size unless queued.max.request.bytes
    bounds it; Samsa bounds what is allocated ahead of the bytes instead."""

    UNRECEIVED_BUDGET = 64 << 20
    unreceived = 0
    _reserved: dict[int, int] = {}  # id(frame) -> its bytes counted in `unreceived`

    @classmethod
    def allocate(cls, size: int, unread: int, frame_of: Callable[[int], bytearray]) -> bytearray:
        """A buffer for a frame of `size` bytes, `unread` of them already read: `frame_of(size)`
        within the budget, else one that grows as the bytes arrive."""
        ahead = size - unread
        if cls.unreceived + ahead <= cls.UNRECEIVED_BUDGET:
            frame = frame_of(size)
            cls.unreceived += ahead
            cls._reserved[id(frame)] = ahead
            return frame
        return bytearray(max(unread, _READ_AHEAD))

    @classmethod
    def received(cls, frame: bytearray, n: int) -> None:
        reserved = cls._reserved.get(id(frame))
        if reserved is not None:
            cls._reserved[id(frame)] = reserved - n
            cls.unreceived -= n

    @classmethod
    def release(cls, frame: bytearray) -> None:
        """The frame is complete, or its connection closed before it was."""
        reserved = cls._reserved.pop(id(frame), None)
        if reserved is not None:
            cls.unreceived -= reserved


def _take_buffer() -> bytearray:
    return _spare_buffers.pop() if _spare_buffers else bytearray(_READ_AHEAD)


def _give_back_buffer(buffer: bytearray) -> None:
    if len(_spare_buffers) < _MAX_SPARE_BUFFERS:
        _spare_buffers.append(buffer)


async def open_listener(endpoint: Endpoint, buffer_sizes: tuple[int, int] = (-1, -1)) -> trio.socket.SocketType:
    """The listening socket, with the options its accepted sockets inherit set before it listens:
    the kernel accepts connections from then on, before the accept loop runs (a client connecting
    while the broker starts kept Nagle's algorithm for the connection's life: 40 ms per response
    sent in several writes, a header, a file range and the rest, waiting for its delayed ACK)."""
    host = endpoint.host or "0.0.0.0"
    family = _stdlib_socket.AF_INET6 if ":" in host else _stdlib_socket.AF_INET
    sock = trio.socket.socket(family, _stdlib_socket.SOCK_STREAM)
    sock.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_REUSEADDR, 1)
    _set_accepted_socket_options(sock, buffer_sizes)
    await sock.bind((host, endpoint.port))
    sock.listen(1024)
    return sock


async def serve_listener(sock: trio.socket.SocketType, endpoint: Endpoint,
                         handler: Callable[[Connection], Awaitable[None]], nursery: trio.Nursery,
                         quotas=None) -> None:
    """Accept connections until cancelled; each runs `handler` in its own task in `nursery`.

    `quotas` (server.network.connection_quotas.ConnectionQuotas) counts connections: the accept
    loop waits while the broker or listener is full or over its connection creation rate, and
    closes one its address has no room for.
    """
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
        counter += 1
        try:
            conn = Connection(client, endpoint, f"{endpoint.listener}-{counter}")
        except OSError:
            client.close()  # peer already gone
            continue
        if quotas is None:
            nursery.start_soon(handler, conn)
            continue
        try:
            await quotas.inc(endpoint.listener, conn.client_host)
        except TooManyConnections as e:
            log.info("%s", e)
            conn.close()
            continue
        nursery.start_soon(_counted, handler, conn, quotas)


def _set_accepted_socket_options(sock: trio.socket.SocketType, buffer_sizes: tuple[int, int]) -> None:
    """Options every accepted socket gets (TCP_NODELAY; socket.send.buffer.bytes and
    socket.receive.buffer.bytes unless -1), set once on the listening socket: Linux copies them
    into each socket it accepts, where setting them per connection cost three system calls of a
    connection's setup (10,000 connections opened and closed, issue 17). The receive buffer must
    be set before the handshake anyway: it decides the window scale the SYN-ACK announces."""
    sock.setsockopt(_stdlib_socket.IPPROTO_TCP, _stdlib_socket.TCP_NODELAY, 1)
    send_buffer, receive_buffer = buffer_sizes
    if send_buffer > 0:
        sock.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_SNDBUF, send_buffer)
    if receive_buffer > 0:
        sock.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_RCVBUF, receive_buffer)


async def _counted(handler: Callable[[Connection], Awaitable[None]], conn: Connection, quotas) -> None:
    try:
        await handler(conn)
    finally:
        quotas.dec(conn.listener.listener, conn.client_host)
