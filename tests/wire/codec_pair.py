"""The C codec (samsa.wire._speedups) held against the pure one: the same objects, the same bytes, the
same CodecError subclass for bad input. Shared by test_speedups.py, test_fuzz.py and fuzz_codec.py.

With the extension absent both sides are the pure codec, so the checks still run (and pass trivially):
the tests that need the extension skip themselves with `codec.SPEEDUPS_MISSING` as the reason.
"""

from __future__ import annotations

import uuid

from samsa.wire.codec import Struct
from samsa.wire.exceptions import CodecError

# Bytes after the end of the data the decoder is given: reading them would change the outcome.
TRAILER = b"\x7f\xff\xff\xff" * 4


def same(a, b, one_buffer: bool = True) -> bool:
    """Equal and of the same types all the way down, unknown tagged fields included (Struct.__eq__
    compares values only: b"x" == memoryview(b"x")); memoryviews into the same buffer if `one_buffer`."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Struct):
        return all(same(getattr(a, f), getattr(b, f), one_buffer) for f in (*a._fields, "_unknown_tagged"))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, one_buffer) for x, y in zip(a, b))
    if isinstance(a, memoryview):
        return a.tobytes() == b.tobytes() and (a.obj is b.obj or not one_buffer)
    if isinstance(a, float):
        return a.hex() == b.hex() or (a != a and b != b)
    if isinstance(a, uuid.UUID):
        return a == b and a.is_safe == b.is_safe
    return a == b


def outcome(fn, *args):
    """("ok", result) or ("error", the CodecError subclass); anything else escapes (a crash)."""
    try:
        return "ok", fn(*args)
    except CodecError as e:
        return "error", type(e)


def assert_same_outcome(c, pure, what: str) -> None:
    assert c[0] == pure[0], f"{what}: the C codec gives {c}, the pure one {pure}"
    if c[0] == "error":
        assert c[1] is pure[1], f"{what}: the C codec raises {c[1].__name__}, the pure one {pure[1].__name__}"
    else:
        assert same(c[1], pure[1]), f"{what}: the C codec gives\n{c[1]!r}\nthe pure one\n{pure[1]!r}"


def check_decode(cls, data: bytes, version: int, pos: int = 0):
    """Decode `data` with both codecs; they must agree. Returns the C codec's outcome."""
    c = outcome(cls.decode_from, data, version, pos)
    assert_same_outcome(c, outcome(cls._pure_decode_from, data, version, pos),
                        f"{cls.__name__} v{version} decoding {bytes(data[:64]).hex()}")
    bounded = memoryview(bytes(data) + TRAILER)[:len(data)]
    c_bounded = outcome(cls.decode_from, bounded, version, pos)
    if c[0] == "ok" and c_bounded[0] == "ok":
        assert same(c[1], c_bounded[1], one_buffer=False), "decoding read past the end of the data"
    else:
        assert c[0] == c_bounded[0], f"{cls.__name__} v{version}: decoding read past the end of the data"
    return c


def check_encode(message, version: int):
    """Encode with both codecs; the same bytes or the same CodecError subclass. Returns the bytes or None."""
    c = outcome(lambda: bytes(message.encode(version)))
    pure = outcome(lambda: bytes(message._pure_encode(version)))
    assert_same_outcome(c, pure, f"{type(message).__name__} v{version} encoding {message!r}")
    return c[1] if c[0] == "ok" else None
