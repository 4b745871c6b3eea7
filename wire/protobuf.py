"""A reader of the protocol buffers wire format (enough for OTLP, KIP-714's telemetry payload):
a message is a run of (field number, wire type, value); a reader of one message type picks the
fields it knows and skips the rest, as protobuf's own parsers do.

Values come as the wire carries them: VARINT and I64/I32 as unsigned ints, LEN as a memoryview
(a nested message, a string, bytes or a packed repeated field). The helpers below turn them into
doubles, signed ints, strings and packed lists.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")


class ProtobufError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def fields(data: bytes | memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """The (field number, wire type, value) of each field of one message, in order."""
    buf = memoryview(data)
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        value: int | memoryview
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire_type == I64:
            if pos + 8 > end:
                raise ProtobufError("truncated 64-bit field")
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire_type == LEN:
            size, pos = read_varint(buf, pos)
            if pos + size > end:
                raise ProtobufError(f"field {number}: {size} bytes announced, {end - pos} left")
            value, pos = buf[pos:pos + size], pos + size
        elif wire_type == I32:
            if pos + 4 > end:
                raise ProtobufError("truncated 32-bit field")
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire_type} (groups are not read)")
        yield number, wire_type, value


def as_double(raw: int) -> float:
    """An I64 field's bits as an IEEE double."""
    return _DOUBLE.unpack(_FIXED64.pack(raw))[0]


def as_int64(raw: int) -> int:
    """A VARINT int64 or an I64 sfixed64 as a signed value (two's complement)."""
    raw &= 0xFFFFFFFFFFFFFFFF
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def as_string(value: memoryview) -> str:
    return bytes(value).decode("utf-8", errors="replace")


def packed_fixed64(value: int | memoryview) -> list[int]:
    """A repeated fixed64 field: packed (one LEN) or, from old writers, one I64 per element."""
    if isinstance(value, int):
        return [value]
    if len(value) % 8:
        raise ProtobufError("packed fixed64 field not a multiple of 8 bytes")
    return [_FIXED64.unpack_from(value, i)[0] for i in range(0, len(value), 8)]


def packed_double(value: int | memoryview) -> list[float]:
    return [as_double(raw) for raw in packed_fixed64(value)]
