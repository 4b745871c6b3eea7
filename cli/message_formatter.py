"""How `samsa consume` prints a record as text: Kafka's DefaultMessageFormatter (the console
consumer's), configured by the same properties (`--property`/`--formatter-property`,
`--formatter-config`): print.timestamp, print.partition, print.offset, print.delivery,
print.epoch, print.headers, print.key, print.value (default true), key.separator (tab), line.separator (newline),
headers.separator (comma), null.literal ("null"), and key.deserializer, value.deserializer,
headers.deserializer for the serialization classes of kafka-clients that a Python program can
stand in for (DESERIALIZERS); another class is refused, where Kafka would load it.

The fields come in Kafka 4.4's order: `CreateTime:1700000000000<SEP>Partition:0<SEP>Offset:5<SEP>
Delivery:NOT_PRESENT<SEP>Epoch:NOT_PRESENT<SEP>h1:v1,h2:v2<SEP>key<SEP>value<LINE>`. A null key, value or header value prints the null literal,
which a deserializer is given as the bytes, as Kafka does.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from decimal import Decimal

from ..wire.records import LOG_APPEND_TIME
from . import BAD_USAGE, CommandError
from .record_io import OutputRecord

SERIALIZATION = "org.apache.kafka.common.serialization."


class SerializationError(Exception):
    """A deserializer refused the bytes (Kafka's SerializationException)."""


class FormatError(Exception):
    """A record that could not be printed; `written` is what the formatter had written of its line
    before the failure (Kafka's formatter writes field by field, so its output has it too)."""

    def __init__(self, cause: SerializationError, written: bytes) -> None:
        super().__init__(str(cause))
        self.written = written


def _fixed_size(name: str, size: int, fmt: str) -> Callable[[bytes], str]:
    def deserialize(data: bytes) -> str:
        if len(data) != size:
            raise SerializationError(f"Size of data received by {name} is not {size}")
        (number,) = struct.unpack(fmt, data)
        return java_number(number)
    return deserialize


def _boolean(data: bytes) -> str:
    if len(data) != 1:
        raise SerializationError("Size of data received by BooleanDeserializer is not 1")
    if data not in (b"\x00", b"\x01"):
        raise SerializationError("Unexpected byte received by BooleanDeserializer: " + str(data[0] - 256 * (data[0] > 127)))
    return "true" if data == b"\x01" else "false"


def _uuid(data: bytes) -> str:
    try:
        return str(uuid.UUID(data.decode("utf-8", "replace")))
    except ValueError:
        raise SerializationError("Error parsing data into UUID") from None


def _bytes_text(data: bytes) -> str:
    """org.apache.kafka.common.utils.Bytes.toString: printable ASCII but the backslash as itself,
    every other byte as \\xHH."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}" for b in data)


# A deserializer: the record's bytes to the text Kafka's formatter prints (the deserialized
# object's toString()). ByteArrayDeserializer's object prints as "[B@<hash>" in Kafka; here the bytes.
DESERIALIZERS: dict[str, Callable[[bytes], str] | None] = {
    SERIALIZATION + "StringDeserializer": lambda data: data.decode("utf-8", "replace"),
    SERIALIZATION + "ByteArrayDeserializer": None,
    SERIALIZATION + "BytesDeserializer": _bytes_text,
    SERIALIZATION + "ShortDeserializer": _fixed_size("ShortDeserializer", 2, ">h"),
    SERIALIZATION + "IntegerDeserializer": _fixed_size("IntegerDeserializer", 4, ">i"),
    SERIALIZATION + "LongDeserializer": _fixed_size("LongDeserializer", 8, ">q"),
    SERIALIZATION + "FloatDeserializer": _fixed_size("FloatDeserializer", 4, ">f"),
    SERIALIZATION + "DoubleDeserializer": _fixed_size("DoubleDeserializer", 8, ">d"),
    SERIALIZATION + "BooleanDeserializer": _boolean,
    SERIALIZATION + "UUIDDeserializer": _uuid,
}


def java_number(number: int | float) -> str:
    """An integer as Java prints it; a float as Java's Float/Double.toString: the shortest digits
    that read back as the same value, plain between 10^-3 and 10^7, else d.dddE<n>."""
    if isinstance(number, int):
        return str(number)
    if number != number:
        return "NaN"
    if number in (float("inf"), float("-inf")):
        return "Infinity" if number > 0 else "-Infinity"
    sign = "-" if str(number).startswith("-") else ""
    if number == 0:
        return sign + "0.0"
    digits, exponent = _shortest_digits(abs(number))
    scientific = len(digits) - 1 + exponent  # number = d.ddd x 10^scientific
    if -3 <= scientific < 7:
        if scientific >= 0:
            whole = digits[:scientific + 1].ljust(scientific + 1, "0")
            return f"{sign}{whole}.{digits[scientific + 1:] or '0'}"
        return f"{sign}0.{'0' * (-scientific - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{scientific}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """Digits (no trailing zeros) and exponent: value = int(digits) x 10^exponent, shortest for a
    double (repr's) or, when the value is a float32's, for a float32."""
    single = struct.unpack(">f", struct.pack(">f", value))[0] == value
    text = repr(value)
    if single:
        for precision in range(1, 10):
            candidate = f"{value:.{precision - 1}e}"
            if struct.unpack(">f", struct.pack(">f", float(candidate)))[0] == value:
                text = candidate
                break
    _, digit_tuple, exponent = Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)
    return "".join(map(str, digit_tuple)), exponent


def deserializer(name: str | None) -> Callable[[bytes], str] | None:
    """The stand-in for a Java class name (None for none, or raw bytes); CommandError (exit 2)
    for a class this tool cannot run."""
    if name is None:
        return None
    name = name.strip()
    if name not in DESERIALIZERS:
        known = ", ".join(sorted(n.removeprefix(SERIALIZATION) for n in DESERIALIZERS))
        raise CommandError(f"cannot use the deserializer {name}: samsa consume knows {SERIALIZATION}"
                           f"{{{known}}}", BAD_USAGE)
    return DESERIALIZERS[name]


def _flag(props: dict[str, str], name: str, default: bool) -> bool:
    return props[name].strip().lower() == "true" if name in props else default


class MessageFormatter:
    """`format(record)`: the record's line; FormatError when a deserializer refuses its bytes."""

    def __init__(self, props: dict[str, str] | None = None) -> None:
        props = props or {}
        self.print_timestamp = _flag(props, "print.timestamp", False)
        self.print_partition = _flag(props, "print.partition", False)
        self.print_offset = _flag(props, "print.offset", False)
        self.print_delivery = _flag(props, "print.delivery", False)
        self.print_epoch = _flag(props, "print.epoch", False)
        self.print_headers = _flag(props, "print.headers", False)
        self.print_key = _flag(props, "print.key", False)
        self.print_value = _flag(props, "print.value", True)
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.null_literal = props.get("null.literal", "null").encode()
        self.key_deserializer = deserializer(props.get("key.deserializer"))
        self.value_deserializer = deserializer(props.get("value.deserializer"))
        self.headers_deserializer = deserializer(props.get("headers.deserializer"))

    def _bytes(self, data: bytes | None, deserialize: Callable[[bytes], str] | None) -> bytes:
        data = self.null_literal if data is None else bytes(data)
        return data if deserialize is None else deserialize(data).encode("utf-8", "surrogateescape")

    def format(self, record: OutputRecord) -> bytes:
        out = bytearray()
        # Each field is followed by the key separator when a later field is printed; the value
        # (or, without it, the last field) by the line separator.
        later = [self.print_partition, self.print_offset, self.print_delivery, self.print_epoch, self.print_headers,
                 self.print_key, self.print_value]

        def separator(index: int) -> None:
            out.extend(self.key_separator if any(later[index:]) else self.line_separator)

        try:
            if self.print_timestamp:
                kind = "LogAppendTime" if record.timestamp_type == LOG_APPEND_TIME else "CreateTime"
                out.extend(f"{kind}:{record.timestamp}".encode())
                separator(0)
            if self.print_partition:
                out.extend(b"Partition:%d" % record.partition)
                separator(1)
            if self.print_offset:
                out.extend(b"Offset:%d" % record.offset)
                separator(2)
            # Kafka's console consumer hands its formatter copies of the records without their delivery
            # count (share groups only) and leader epoch: both print as absent.
            if self.print_delivery:
                out.extend(b"Delivery:NOT_PRESENT")
                separator(3)
            if self.print_epoch:
                out.extend(b"Epoch:NOT_PRESENT")
                separator(4)
            if self.print_headers:
                if not record.headers:
                    out.extend(b"NO_HEADERS")
                for n, (key, value) in enumerate(record.headers):
                    out.extend(key.encode("utf-8", "surrogateescape") + b":")
                    out.extend(self._bytes(value, self.headers_deserializer))
                    if n < len(record.headers) - 1:
                        out.extend(self.headers_separator)
                separator(5)
            if self.print_key:
                out.extend(self._bytes(record.key, self.key_deserializer))
                separator(6)
            if self.print_value:
                out.extend(self._bytes(record.value, self.value_deserializer))
                out.extend(self.line_separator)
        except SerializationError as e:
            raise FormatError(e, bytes(out)) from None
        return bytes(out)
