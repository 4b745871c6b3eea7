"""The protobuf wire-format reader: every wire type, signed and packed values, and malformed input."""

from __future__ import annotations

import struct

import pytest

from samsa.wire.protobuf import (
    I32, I64, LEN, VARINT, ProtobufError, as_double, as_int64, as_string, fields, packed_double, packed_fixed64,
)


def test_fields_of_every_wire_type_in_order():
    data = (b"\x08\x96\x01"  # 1: varint 150
            + b"\x11" + struct.pack("<d", 2.5)  # 2: I64
            + b"\x1a\x03abc"  # 3: LEN
            + b"\x25" + struct.pack("<I", 7))  # 4: I32
    parsed = [(n, t, bytes(v) if isinstance(v, memoryview) else v) for n, t, v in fields(data)]
    assert parsed[0] == (1, VARINT, 150)
    assert parsed[1][:2] == (2, I64) and as_double(parsed[1][2]) == 2.5
    assert parsed[2] == (3, LEN, b"abc")
    assert parsed[3] == (4, I32, 7)


def test_signed_strings_and_packed_values():
    assert as_int64((1 << 64) - 5) == -5
    assert as_int64(5) == 5
    assert as_string(memoryview("zürich".encode())) == "zürich"
    packed = memoryview(struct.pack("<QQ", 1, 2))
    assert packed_fixed64(packed) == [1, 2]
    assert packed_fixed64(3) == [3]  # an unpacked element
    assert packed_double(memoryview(struct.pack("<dd", 0.5, 1.5))) == [0.5, 1.5]


@pytest.mark.parametrize("data", [
    b"\x08",  # a varint cut short
    b"\x0a\x05ab",  # a length past the end
    b"\x09\x00\x00",  # a 64-bit field cut short
    b"\x0b",  # a group (wire type 3)
    b"\x00\x01",  # field number 0
    b"\x08" + b"\xff" * 11,  # a varint of 11 bytes
    b"\x0a\x02\x00",
    b"\x0d\x00",
])
def test_malformed_messages_are_protobuf_errors(data):
    with pytest.raises(ProtobufError):
        list(fields(data))
    with pytest.raises(ValueError):  # what callers catch
        list(fields(data))


def test_packed_fixed64_must_be_whole_elements():
    with pytest.raises(ProtobufError):
        packed_fixed64(memoryview(b"\x00" * 9))
