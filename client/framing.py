"""The protocol's framing without I/O, for every transport of a connection (connection.py's trio
stream, blocking.py's socket): requests numbered by correlation id and remembered until answered,
and response frames read into reused memory.

A frame is a 4-byte big-endian size, then that many bytes. A transport reads a response as
`FrameReader` says: the size into `size_view`, then the body into the memoryview `body()` returns;
`Requests.decode` matches it with the oldest request in flight.

Frame memory is shared with the broker's own connections (server/network/socket_server.py): a
large frame is read into the memory of an earlier one once nothing refers to it, or into a spare
one an idle connection gave back. A new 1 MB bytearray costs a memset and, once glibc has handed
the memory back to the kernel, a page fault per 4 KiB: a follower reading its fetch responses into
new memory, or a producer's 1 MB requests read so, paid that on every frame (issue 16).
"""

from __future__ import annotations

import struct
import sys
from collections import deque
from typing import Any

from ..wire.codec import Message
from ..wire.protocol import RequestHeader, decode_response, request_header_version
from .errors import BrokerUnreachable

SIZE = struct.Struct(">i")
_CORRELATION_AT = 8  # after the size, the api key and the version, in every request header version

# Frames given back by connections gone idle: the next large frame is read into one of them instead
# of fresh memory.
_spare_frames: list[bytearray] = []
_MAX_SPARE_FRAMES = 4
_MAX_SPARE_FRAME_BYTES = 8 << 20  # a rare huge frame's memory is not kept once its connection idles
_ZEROS = memoryview(bytes(256 << 10))  # what a reused frame grows by (never written: the zero page)


class Requests:
    """A connection's requests in flight, oldest first: each is framed with the next correlation id,
    and each response frame is decoded as the answer to the oldest (Kafka answers a connection's
    requests in order)."""

    def __init__(self, client_id: str | None) -> None:
        self.client_id = client_id
        self.correlation_id = 0  # the last request's
        self._in_flight: deque[tuple[int, int, int]] = deque()  # (correlation id, api key, version)
        # The frame's start up to the body for each (api key, version), correlation id 0: only the
        # id changes from one request to the next (a replica fetcher sends one per fetch round).
        self._headers: dict[tuple[int, int], bytes] = {}

    def encode(self, message: Message, version: int, expect_response: bool = True) -> bytearray:
        """The frame of `message` at `version`, size prefix included; with expect_response=False
        (Produce with acks=0) no response is awaited for it."""
        api_key = message.API_KEY
        if api_key is None:
            raise TypeError(f"{type(message).__name__} is not a request")
        self.correlation_id += 1
        if expect_response:
            self._in_flight.append((self.correlation_id, api_key, version))
        header = self._headers.get((api_key, version))
        if header is None:
            start = bytearray(b"\0\0\0\0")
            RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=0,
                          client_id=self.client_id).encode(request_header_version(api_key, version), start)
            header = self._headers[(api_key, version)] = bytes(start)
        out = bytearray(header)
        SIZE.pack_into(out, _CORRELATION_AT, self.correlation_id)
        message.encode(version, out)
        SIZE.pack_into(out, 0, len(out) - 4)
        return out

    def decode(self, frame) -> tuple[int, Any]:
        """(correlation id, response) of a response frame body, decoded as the answer to the oldest
        request in flight; BrokerUnreachable when it carries another correlation id. The response
        is Any to a type checker: its class is the generated one of the request's API."""
        if not self._in_flight:
            raise BrokerUnreachable("a response to no request")
        expected, api_key, version = self._in_flight.popleft()
        correlation_id, response = decode_response(frame, api_key, version)
        if correlation_id != expected:
            raise BrokerUnreachable(f"correlation id {correlation_id} answers request {expected}")
        return correlation_id, response


class FrameReader:
    """Where a connection reads its next frame: the size into `size_view`, then the body into
    `body()`, the memory of the previous frame once nothing refers to it."""

    def __init__(self) -> None:
        self._size = bytearray(4)
        self.size_view = memoryview(self._size)
        self._frame: bytearray | None = None  # the last frame's memory, read into again once free

    def body(self) -> memoryview:
        """The memory for the body of the frame whose size `size_view` holds; BrokerUnreachable for
        a negative size."""
        (size,) = SIZE.unpack(self._size)
        if size < 0:
            raise BrokerUnreachable(f"the broker sent a frame of {size} bytes")
        # Only this attribute and getrefcount's argument refer to the last frame: no response,
        # records or memoryview of it is alive, so its bytes can be overwritten.
        previous_free = self._frame is not None and sys.getrefcount(self._frame) == 2
        frame = self._frame = frame_memory(self._frame, size, previous_free)
        return memoryview(frame)


# --- frame memory, shared with the broker's connections ---


def fits(frame: bytearray, size: int) -> bool:
    """Whether `frame` resizes to `size` in place: its allocation holds `size` and a trailing NUL,
    and is under twice `size` (beyond which a bytearray shrinking to `size` reallocates)."""
    return size < frame.__alloc__() <= 2 * size


def resized(frame: bytearray, size: int) -> bytearray:
    """`frame` at `size` bytes: in place when it `fits` (no realloc, no copy of its contents). Grown
    from a shared run of zeros: `bytes(n)` would be fresh memory each time (for a producer's
    requests, whose sizes vary by a few hundred KB, an mmap and its page faults per request)."""
    if size < len(frame):
        del frame[size:]
    while size > len(frame):
        frame += _ZEROS[:size - len(frame)]
    return frame


def take_frame(size: int) -> bytearray:
    """A buffer of `size` bytes: a spare frame that fits, else a new one."""
    for i, frame in enumerate(_spare_frames):
        if fits(frame, size):
            del _spare_frames[i]
            return resized(frame, size)
    # Headroom for the next frames of about this size (del trims the length, keeps the memory).
    frame = bytearray(size + (size >> 4))
    del frame[size:]
    return frame


def give_back_frame(frame: bytearray) -> None:
    """A frame nothing refers to any more (the caller checked), kept for the next large frame unless
    enough are kept or it is huge."""
    if len(_spare_frames) < _MAX_SPARE_FRAMES and frame.__alloc__() <= _MAX_SPARE_FRAME_BYTES:
        _spare_frames.append(frame)


def frame_memory(previous: bytearray | None, size: int, previous_free: bool) -> bytearray:
    """A buffer of `size` bytes to read a frame into: `previous` (an earlier frame of the caller's)
    resized in place when nothing else refers to it (`previous_free`) and it fits, else a spare
    frame or a new one."""
    if previous is not None and previous_free and fits(previous, size):
        return resized(previous, size)
    return take_frame(size)
