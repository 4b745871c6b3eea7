"""The encoding of coordinator records (the keys and values of `__consumer_offsets` and
`__transaction_state`): an int16 version, then the fields in Kafka's protocol types, in the
flexible encoding (compact lengths, tagged fields) from a schema's flexible versions on. The record
modules (group_records.py, transaction_log.py) write their layouts with these by hand."""

from __future__ import annotations

import struct

from ..wire.codec import read_uvarint, uvarint

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not follow its layout."""


class RecordWriter:
    """Writes a record key or value: its int16 version, then fields in the protocol's encoding
    (the flexible one from a schema's flexibleVersions on)."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.out = bytearray(_H.pack(version))
        self.flexible = flexible

    def int8(self, v: int) -> None:
        self.out += _B.pack(v)

    def int16(self, v: int) -> None:
        self.out += _H.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I.pack(v)

    def int64(self, v: int) -> None:
        self.out += _Q.pack(v)

    def length(self, n: int | None, wide: bool = False) -> None:
        """A length or count: -1 (None) for null; compact (n + 1, unsigned varint) when flexible."""
        if self.flexible:
            self.out += uvarint(0 if n is None else n + 1)
        else:
            self.out += (_I if wide else _H).pack(-1 if n is None else n)

    def string(self, s: str | None) -> None:
        data = None if s is None else s.encode()
        self.length(None if data is None else len(data))
        if data is not None:
            self.out += data

    def bytes_(self, b: bytes) -> None:
        self.length(len(b), wide=True)
        self.out += b

    def array(self, n: int) -> None:
        self.length(n, wide=True)

    def end_struct(self) -> None:
        if self.flexible:
            self.out += b"\x00"  # no tagged fields


class RecordReader:
    """Reads what RecordWriter writes; RecordFormatError for anything truncated or malformed."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.what = what
        if len(self.data) < 2:
            raise RecordFormatError(f"{what}: {len(self.data)} bytes, too short for a version")
        self.version = _H.unpack_from(self.data, 0)[0]
        self.pos = 2
        self.flexible = False

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RecordFormatError(f"{self.what} v{self.version} is truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def int8(self) -> int:
        return _B.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _H.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _Q.unpack(self._take(8))[0]

    def length(self, wide: bool = False) -> int | None:
        if self.flexible:
            n = self._uvarint()
            return None if n == 0 else n - 1
        n = (_I if wide else _H).unpack(self._take(4 if wide else 2))[0]
        return None if n < 0 else n

    def nullable_string(self) -> str | None:
        n = self.length()
        if n is None:
            return None
        try:
            return self._take(n).tobytes().decode()
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"{self.what} v{self.version}: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError(f"{self.what} v{self.version}: null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.length(wide=True)
        return b"" if n is None else self._take(n).tobytes()

    def array(self) -> int:
        n = self.length(wide=True)
        return 0 if n is None else n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        count = self._uvarint()
        for _ in range(count):
            self._uvarint()  # tag
            self._take(self._uvarint())

    def _uvarint(self) -> int:
        try:
            n, self.pos = read_uvarint(self.data, self.pos)
        except (IndexError, ValueError) as e:
            raise RecordFormatError(f"{self.what} v{self.version}: bad varint: {e}") from None
        return n
