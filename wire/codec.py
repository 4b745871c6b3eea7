"""Runtime support for the generated message codecs in wire/messages/.

The generator (tools/gen_messages.py) writes one decode and one encode function per struct and per
distinct version layout; they inline the common cases (fixed-width runs through one precompiled
`struct`, one-byte varints) and call into this module for the rest. Every failure while decoding or
encoding is turned into a CodecError at the message boundary (`Message.decode`/`Message.encode`),
so the generated code never checks what Python already checks for it.

The generated modules also describe each layout as a field program (wire/program.py). When the C
extension `samsa.wire._speedups` is built, `install` compiles those and `Message.decode`,
`decode_from` and `encode` run in C, building the same objects and bytes; the pure functions stay the
fallback (`_pure_decode_from`, `_pure_encode`), and the environment variable SAMSA_PURE=1 forces them.
"""

from __future__ import annotations

import builtins
import os
import struct
import uuid
from collections.abc import Callable, Sequence
from functools import cache
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple, Protocol

from . import program
from .exceptions import CodecError, CorruptRecordError, UnsupportedVersionError

if TYPE_CHECKING:
    from ._speedups import MessageCodec

ZERO_UUID = uuid.UUID(int=0)
_UUID = uuid.UUID
_new = object.__new__

# Exceptions that bad bytes or bad values surface as inside generated code.
_DECODE_FAILURES = (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError, OverflowError)
_ENCODE_FAILURES = (struct.error, AttributeError, TypeError, ValueError, OverflowError, UnicodeEncodeError)

_S_I8 = struct.Struct(">b")
_S_I16 = struct.Struct(">h")
_S_I32 = struct.Struct(">i")


class _Default:
    """Marks an argument left out of a generated __init__ whose default is mutable."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()


# --- varints -----------------------------------------------------------------------------------
# The one implementation of both kinds: unsigned LEB128 (the flexible versions' compact lengths and
# tags) and zigzag LEB128 on top of it (lengths and deltas inside record batches).

def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 as Kafka writes it (at most 5 bytes for an int32)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise CodecError("unsigned varint is longer than 5 bytes")


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 of an int64 (at most 10 bytes)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CodecError("unsigned varlong is longer than 10 bytes")


_UVARINT_SMALL = [bytes([i]) for i in range(128)]


def uvarint(n: int) -> bytes:
    if n < 128:
        if n < 0:
            raise CodecError(f"unsigned varint cannot hold {n}")
        return _UVARINT_SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zigzag varint (int32) at `pos` -> (value, position after it). At most 5 bytes, like Java's
    ByteUtils.readVarint, which also drops bits past the 32nd. Record data: CorruptRecordError."""
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    second = buf[pos + 1]
    if second < 0x80:  # two bytes: record sizes and lengths up to 8 KiB, most timestamp deltas
        result = (byte & 0x7F) | (second << 7)
        return (result >> 1) ^ -(result & 1), pos + 2
    try:
        result, pos = read_uvarint(buf, pos)
    except CodecError:
        raise CorruptRecordError("varint is longer than 5 bytes") from None
    result &= 0xFFFFFFFF
    return (result >> 1) ^ -(result & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Zigzag varlong (int64) at `pos` -> (value, position after it). At most 10 bytes."""
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    second = buf[pos + 1]
    if second < 0x80:  # two bytes: record sizes and lengths up to 8 KiB, most timestamp deltas
        result = (byte & 0x7F) | (second << 7)
        return (result >> 1) ^ -(result & 1), pos + 2
    try:
        result, pos = read_uvarlong(buf, pos)
    except CodecError:
        raise CorruptRecordError("varlong is longer than 10 bytes") from None
    result &= 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1), pos


def write_varint(value: int) -> bytes:
    """Zigzag varint of an int32."""
    zigzag = (value << 1) ^ (value >> 31)
    if zigzag >> 32:
        raise CodecError(f"{value} does not fit a varint (int32)")
    if zigzag < 128:  # most lengths and deltas: no call
        return _UVARINT_SMALL[zigzag]
    return uvarint(zigzag)


def write_varlong(value: int) -> bytes:
    """Zigzag varlong of an int64."""
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag >> 64:
        raise CodecError(f"{value} does not fit a varlong (int64)")
    if zigzag < 128:  # most lengths and deltas: no call
        return _UVARINT_SMALL[zigzag]
    return uvarint(zigzag)


# --- strings, bytes, arrays --------------------------------------------------------------------

def check_length(buf, pos: int, n: int) -> int:
    """End position of an n-byte field at pos; refuses lengths running past the frame."""
    end = pos + n
    if end > len(buf):
        raise CodecError(f"field length {n} runs past the end of the data")
    return end


def check_count(buf, pos: int, n: int, what: str) -> None:
    """An array of n elements needs at least n bytes (as Kafka checks): bounds what a count can cost."""
    if n > len(buf) - pos:
        raise CodecError(f"{what}: array length {n} exceeds the remaining {len(buf) - pos} bytes")


def null_error(what: str):
    return CodecError(f"non-nullable field {what} was serialized as null")


def tag_overrun(what: str):
    return CodecError(f"tagged field {what} runs past the size its tag gives it")


@cache
def short_arrays(code: str, count: int) -> tuple[struct.Struct, ...]:
    """Precompiled structs for 0..count-1 elements of one fixed-width type: the generated code
    reads short arrays with `short_arrays(code, count)[n].unpack_from`, which checks the bounds."""
    return tuple(struct.Struct(f">{n}{code}") for n in range(count))


def read_fixed_array(buf, pos: int, n: int, code: str, size: int) -> tuple[list, int]:
    if n == 0:
        return [], pos
    end = pos + n * size
    if end > len(buf):
        raise CodecError(f"array of {n} elements runs past the end of the data")
    return list(struct.unpack_from(f">{n}{code}", buf, pos)), end


def write_fixed_array(out: bytearray, values, code: str) -> None:
    if values:
        out += struct.pack(f">{len(values)}{code}", *values)


def read_uuid_array(buf, pos: int, n: int) -> tuple[list, int]:
    end = pos + 16 * n
    if end > len(buf):
        raise CodecError(f"array of {n} uuids runs past the end of the data")
    return [uuid_from(buf[p:p + 16]) for p in range(pos, end, 16)], end


_set = object.__setattr__
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown


def uuid_from(raw) -> uuid.UUID:
    """UUID(bytes=raw) at a third of the cost: fills the two slots UUID.__init__ would, without
    its argument checks (raw is always 16 bytes here)."""
    value = _new(_UUID)
    _set(value, "int", int.from_bytes(raw, "big"))
    _set(value, "is_safe", _UNKNOWN_SAFETY)
    return value


# --- records -----------------------------------------------------------------------------------

# Bytes-like records of at least this many bytes are referenced by a FrameBuffer, not copied into
# it: the socket takes them from where they are, in the same writev as the bytes around them. Below
# it one copy costs less than the hole (its tuple, and two more buffers for the sender): measured
# even at 16 to 24 KiB with the records in cache, lower when they are not (wire/README.md, "Numbers").
REFERENCE_MIN = 16 * 1024


class FileSlice(Protocol):
    """A records value that stays in its file until sent (storage's FileRecords, sent by sendfile)."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...

    def read_bytes(self) -> bytes: ...


# What a frame is sent as: buffers, and file slices between them.
Piece = bytes | bytearray | memoryview | FileSlice


class FrameBuffer(bytearray):
    """An encode target that leaves the bytes of records fields out of itself, as holes.

    A records value that is a file slice (fd, position, size: sent with sendfile) is always a hole;
    a bytes-like one of REFERENCE_MIN bytes or more is a hole that refers to it (it must not change
    until the frame is sent). `holes` lists (position, value) in order; a hole's length is written
    into the frame as if its bytes were there. `pieces()` is the whole frame, in order.
    """

    __slots__ = ("holes",)

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.holes: list[tuple[int, Piece]] = []

    def pieces(self) -> list[Piece]:
        """The frame as the socket sends it: buffers (this one's bytes around the holes, and the
        records referenced) and file slices, in order. Without holes, this buffer alone."""
        if not self.holes:
            return [self]
        view = memoryview(self)
        pieces: list[Piece] = []
        start = 0
        for pos, value in self.holes:
            if pos > start:
                pieces.append(view[start:pos])
            pieces.append(value)
            start = pos
        if start < len(self):
            pieces.append(view[start:])
        return pieces


_BYTES_LIKE = (bytes, bytearray, memoryview)


def piece_size(piece: Piece) -> int:
    """The bytes a piece of a frame carries: a buffer's length, or a file slice's size."""
    if type(piece) is memoryview:
        return piece.nbytes
    return len(piece) if isinstance(piece, (bytes, bytearray)) else piece.size


def write_records(out: bytearray, value, compact: bool, nullable: bool, what: str) -> None:
    if value is None:
        if not nullable:
            raise null_error(what)
        out += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    n = len(value) if isinstance(value, _BYTES_LIKE) else value.size
    if compact:
        out += uvarint(n + 1)
    else:
        out += _S_I32.pack(n)
    if isinstance(value, _BYTES_LIKE):
        if n >= REFERENCE_MIN and isinstance(out, FrameBuffer):
            out.holes.append((len(out), value))
        else:
            out += value
    elif isinstance(out, FrameBuffer):
        out.holes.append((len(out), value))
    else:
        # A plain bytearray target: materialise the slice (tests, small copies).
        out += value.read_bytes()


# --- tagged fields -----------------------------------------------------------------------------

def read_unknown_tag(buf, pos: int, tag: int, size: int, unknown: list | None) -> tuple[list, int]:
    end = check_length(buf, pos, size)
    if unknown is None:
        unknown = []
    unknown.append((tag, bytes(buf[pos:end])))
    return unknown, end


def write_tags(out: bytearray, known: Sequence[tuple[int, bytes | bytearray]],
               unknown: list[tuple[int, bytes]] | None) -> None:
    """Tagged fields in ascending tag order: count, then tag, size, data for each."""
    fields = sorted([*known, *unknown], key=lambda tf: tf[0]) if unknown else known
    out += uvarint(len(fields))
    for tag, data in fields:
        out += uvarint(tag)
        out += uvarint(len(data))
        out += data


# --- structs and messages ----------------------------------------------------------------------

class FieldInfo(NamedTuple):
    """What the schema says of one field: lets tests and tools walk any message generically."""

    name: str  # the attribute
    type: str  # Kafka's type: "int32", "string", "[]int32", "[]SomeStruct", ...
    versions: tuple[int, int]  # inclusive
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None  # versions in which the field is tagged
    # the generated class of a struct or struct-array field (`builtins.`: the field `type` hides the builtin here)
    struct: builtins.type[Struct] | None

    def in_version(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    def tagged_in(self, version: int) -> bool:
        return self.tagged is not None and self.tagged[0] <= version <= self.tagged[1]

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")


class Struct:
    """Base of every generated struct: fields in __slots__, compared and printed by value."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _schema: tuple[FieldInfo, ...] = ()
    # The field values to compare, read off the class and called with the struct: not a method (no
    # self bound), an attrgetter once the fields are known.
    _values: Callable[[Struct], object] = staticmethod(lambda struct: ())

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls._fields:
            # One C-level call gathers the fields: encoders compare tagged structs with their default.
            cls._values = attrgetter(*cls._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values(self) == self._values(other)

    # No __hash__: a class that defines __eq__ alone gets __hash__ = None (mutable, so unhashable).

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict:
        def plain(v):
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v

        return {f: plain(getattr(self, f)) for f in self._fields}


class Message(Struct):
    """A top-level request, response, header or data message with per-version codecs."""

    __slots__ = ()
    API_KEY: int | None = None
    MESSAGE_TYPE: str = ""
    VALID_VERSIONS: tuple[int, int] = (0, 0)
    FLEXIBLE_VERSIONS: tuple[int, int] | None = None
    # The versions of VALID_VERSIONS the newest Kafka no longer defines, kept from an older Kafka's
    # schema because Samsa still serves them (tools/gen_messages.py).
    REMOVED_VERSIONS: tuple[int, int] | None = None
    _decoders: tuple = ()
    _encoders: tuple = ()
    _accel: MessageCodec | None = None  # the compiled field programs when the C codec is in use

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        fv = cls.FLEXIBLE_VERSIONS
        return fv is not None and fv[0] <= version <= fv[1]

    @classmethod
    def check_version(cls, version: int) -> None:
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise UnsupportedVersionError(f"{cls.__name__} has no version {version} (valid: {lo}-{hi})")

    @classmethod
    def _pure_decode(cls, buf, version: int, pos: int = 0):
        """Decode one message; records fields come back as memoryviews into `buf`."""
        message, _ = cls._pure_decode_from(buf, version, pos)
        return message

    decode = _pure_decode

    @classmethod
    def _pure_decode_from(cls, buf, version: int, pos: int = 0):
        """Decode one message at `pos`; returns (message, position after it)."""
        index = version - cls.VALID_VERSIONS[0]
        if index < 0 or version > cls.VALID_VERSIONS[1]:
            cls.check_version(version)
        view = buf if type(buf) is memoryview else memoryview(buf)
        try:
            message, end = cls._decoders[index](view, pos)
        except CodecError:
            raise
        except _DECODE_FAILURES as e:
            raise CodecError(f"cannot decode {cls.__name__} v{version}: {e}") from e
        if end > len(view):
            raise CodecError(f"cannot decode {cls.__name__} v{version}: a field runs past the end of the data")
        return message, end

    decode_from = _pure_decode_from

    def _pure_encode(self, version: int, out: bytearray | None = None) -> bytearray:
        """Append this message at `version` to `out` (a new bytearray by default) and return it."""
        self.check_version(version)
        if out is None:
            out = bytearray()
        try:
            self._encoders[version - self.VALID_VERSIONS[0]](self, out)
        except UnsupportedVersionError as e:
            raise UnsupportedVersionError(f"{type(self).__name__} v{version}: {e}") from None
        except CodecError:
            raise
        except _ENCODE_FAILURES as e:
            raise CodecError(f"cannot encode {type(self).__name__} v{version}: {e}") from e
        return out

    encode = _pure_encode


def cannot_carry(struct_name: str, field: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"{struct_name} cannot carry a non-default {field} at this version: the field is not in it"
    )


# --- the C codec -------------------------------------------------------------------------------

# What configure() takes and the module offers, as _speedups.c's INTERFACE: a build from older
# sources (a checkout that was not rebuilt) is refused rather than called wrongly.
_INTERFACE = 2


def _speedups_refused() -> str | None:
    """Why the C extension is not used; None when it is."""
    if os.environ.get("SAMSA_PURE", "") not in ("", "0"):
        return "SAMSA_PURE is set"
    try:
        from . import _speedups
    except ImportError as e:
        return f"samsa.wire._speedups is not built ({e}): pip install -e . or python setup.py build_ext --inplace"
    if getattr(_speedups, "OPCODES", None) != program.OPCODES or getattr(_speedups, "INTERFACE", 1) != _INTERFACE:
        return "samsa.wire._speedups was built from other sources: rebuild it"
    return None


SPEEDUPS_MISSING = _speedups_refused()
ACCELERATED = SPEEDUPS_MISSING is None

if ACCELERATED:
    from . import _speedups  # bound only here: everything that uses it asks ACCELERATED first

    _speedups.configure(CodecError, UnsupportedVersionError, _UUID, _UNKNOWN_SAFETY, FrameBuffer, Struct,
                        REFERENCE_MIN)
    Message.encode = _speedups.encode_method(Message)


def install(cls: type[Message], programs: dict, roots: tuple[str, ...]) -> None:
    """Give a generated message its C codec (when built): `roots` names its layout per version."""
    if ACCELERATED:
        layouts = _speedups.compile(programs)
        accel = cls._accel = _speedups.MessageCodec(cls.__name__, cls.VALID_VERSIONS[0],
                                                    tuple(layouts[r] for r in roots))
        # Plain attributes, not classmethods: no bound method is made per call.
        cls.decode = accel.decode
        cls.decode_from = accel.decode_from
