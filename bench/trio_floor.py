"""The trio floor: the ceiling's protocol (bench/ceiling.py) served the way Samsa serves a socket, and
nothing else. One trio task per connection reads each frame with non-blocking reads into one reused
buffer, waits on trio when the kernel has nothing (with SO_RCVLOWAT at 64 KiB while a large frame
arrives, as server/network/socket_server.py does), and checks each produced batch's CRC-32C, as Kafka and Samsa
do; responses go out with blocking writes. What a broker built on trio pays per request beyond the
ceiling's system calls is what this pays: Samsa's cost above it is Samsa's own (bench/README.md,
"Where a Produce request's CPU goes").

    python bench/trio_floor.py PORT DATA_DIR

It serves the produce and requests sections of bench/run.py: a Fetch that would wait for data
answers at once, since a wait here would hold every connection's reads.
"""

from __future__ import annotations

import socket
import struct
import sys

import crc32c
import trio

from ceiling import I32, Ceiling, Partition

try:  # Samsa's batch CRC: the folded one (wire/_crc32c.c) where this CPU can run it
    from samsa.wire.records import crc32c as _crc32c
except ImportError:
    _crc32c = crc32c.crc32c

_CRC = struct.Struct(">I")
_CRC_AT, _CRC_FROM = 17, 21  # a v2 batch's CRC-32C field, and where the bytes it covers start
_LOW_WATER = 64 << 10


class CheckedPartition(Partition):
    def append(self, batch: memoryview) -> int:
        if _crc32c(batch[_CRC_FROM:]) != _CRC.unpack_from(batch, _CRC_AT)[0]:
            raise ValueError("corrupt batch")  # the ceiling's client never sends one
        return super().append(batch)


class TrioFloor(Ceiling):
    partition_class = CheckedPartition

    def __init__(self, host: str, port: int, data_dir: str) -> None:
        super().__init__(host, port, data_dir)
        self.appended = _NoWait()

    async def serve_trio_connection(self, sock: socket.socket) -> None:
        """Frames read without blocking (MSG_DONTWAIT: the socket stays blocking for the ceiling's
        sendall and sendfile), into one buffer reused for every frame."""
        size_buf, buffer = bytearray(4), bytearray()
        receiver = _Receiver(sock)
        try:
            while True:
                if not await receiver.receive(memoryview(size_buf)):
                    return
                (size,) = I32.unpack(size_buf)
                if size > len(buffer):
                    buffer = bytearray(size)
                view = memoryview(buffer)[:size]
                if not await receiver.receive(view):
                    return
                self.handle(sock, view)
        except OSError:
            pass
        finally:
            sock.close()


class _Receiver:
    """Fills a buffer from the socket as server/network/socket_server.py does: what the kernel has, then a trio
    wait, woken (SO_RCVLOWAT) once 64 KiB or the rest of the frame is there."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.fd, self.low_water = sock, sock.fileno(), 1

    async def receive(self, view: memoryview) -> bool:
        got, size = 0, len(view)
        while got < size:
            try:
                n = self.sock.recv_into(view[got:], size - got, socket.MSG_DONTWAIT)
            except BlockingIOError:
                self._set_low_water(min(size - got, _LOW_WATER))
                await trio.lowlevel.wait_readable(self.fd)
                continue
            if n == 0:
                return False
            got += n
        self._set_low_water(1)
        return True

    def _set_low_water(self, n: int) -> None:
        if n != self.low_water:
            self.low_water = n
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, n)


class _NoWait:
    """The ceiling's fetch waits on a threading.Condition for appends; here it never waits."""

    def __enter__(self):
        return self

    def __exit__(self, *_) -> None:
        pass

    def notify_all(self) -> None:
        pass

    def wait(self, timeout: float) -> None:
        pass


async def serve(port: int, data_dir: str) -> None:
    server = TrioFloor("127.0.0.1", port, data_dir)
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", port))
    listener.listen(1024)
    server.port = listener.getsockname()[1]
    print(f"listening on 127.0.0.1:{server.port}", flush=True)
    async with trio.open_nursery() as nursery:
        while True:
            accepted, _ = await listener.accept()
            sock = socket.socket(fileno=accepted.detach())
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Kafka's socket buffer sizes, as Samsa and the ceiling use.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 102400)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 102400)
            nursery.start_soon(server.serve_trio_connection, sock)


def main() -> None:
    trio.run(serve, int(sys.argv[1]), sys.argv[2])


if __name__ == "__main__":
    main()
