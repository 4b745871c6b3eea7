"""Legacy message sets (magic 0 and 1), and conversion between them and v2 record batches.

Produce v0-2 carries message sets, which the broker up-converts to a v2 batch before appending;
Fetch v0-3 must answer with message sets, down-converted from the stored v2 batches.

A message set is a sequence of entries: offset int64, size int32, then a message of `size` bytes:
    crc uint32 (CRC32 of everything after it), magic int8, attributes int8,
    timestamp int64 (magic 1 only), key bytes, value bytes      (bytes: int32 length, -1 = null)
Attribute bits 0-2 are the codec, bit 3 (magic 1) the timestamp type. A compressed message is a
wrapper: its value is a compressed message set of uncompressed inner messages. The wrapper's offset
is that of the last inner message; with magic 1 the inner offsets are relative (0, 1, ...), with
magic 0 they are absolute. A magic 1 wrapper with LogAppendTime gives its timestamp to every inner
message.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from construct import (
    Bytes, ConstructError, FocusedSeq, If, Int8sb, Int8ub, Int32sb, Int64sb, Rebuild, Struct,
    Terminated, this,
)

from .compression import DEFAULT_MAX_DECOMPRESSED, CompressionType, compress, decompress
from .exceptions import CorruptRecordError, UnsupportedVersionError
from .records import (
    BATCH_HEADER_SIZE, COMPRESSION_MASK, CREATE_TIME, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC_POS,
    NO_TIMESTAMP, OFFSET_LENGTH, TIMESTAMP_TYPE_BIT, Record, build_batch, decode_batch, parse_batch_header, peek_magic,
)

NO_TIMESTAMP_TYPE = -1  # what magic 0 messages have
_CRC_SIZE = 4
# Smallest message (null key and value) per magic, counted after the offset and size fields.
_MIN_MESSAGE_SIZE = {0: 14, 1: 22}


class UnsupportedCompressionTypeError(UnsupportedVersionError):
    """Data that a message format cannot carry: zstd in magic 0/1 (UNSUPPORTED_COMPRESSION_TYPE)."""


class LegacyMessage(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME


_NULLABLE_BYTES = FocusedSeq(
    "data",
    "length" / Rebuild(Int32sb, lambda ctx: -1 if ctx.data is None else len(ctx.data)),
    "data" / If(this.length != -1, Bytes(this.length)),
)

# The message after its CRC: the bytes the CRC covers.
_MESSAGE_BODY = Struct(
    "magic" / Int8sb,
    "attributes" / Int8ub,
    "timestamp" / If(this.magic == 1, Int64sb),
    "key" / _NULLABLE_BYTES,
    "value" / _NULLABLE_BYTES,
    Terminated,
)
_CRC = struct.Struct(">I")


def _parse_message(offset: int, message: bytes) -> LegacyMessage:
    """One message (the `size` bytes after offset and size), checked against its CRC."""
    if len(message) < _CRC_SIZE + 1:
        raise CorruptRecordError(f"message of {len(message)} bytes is too short")
    magic = message[_CRC_SIZE]
    if magic not in _MIN_MESSAGE_SIZE:
        raise CorruptRecordError(f"message at offset {offset} has magic {magic}, expected 0 or 1")
    if len(message) < _MIN_MESSAGE_SIZE[magic]:
        raise CorruptRecordError(f"message of {len(message)} bytes is too short for magic {magic}")
    (stored_crc,) = _CRC.unpack_from(message)
    body = memoryview(message)[_CRC_SIZE:]
    if zlib.crc32(body) != stored_crc:
        raise CorruptRecordError(f"message at offset {offset} fails its CRC")
    try:
        fields = _MESSAGE_BODY.parse(body)
    except ConstructError as exc:
        raise CorruptRecordError(f"malformed message at offset {offset}: {exc}") from None
    timestamp = NO_TIMESTAMP if fields.timestamp is None else fields.timestamp
    return LegacyMessage(offset, magic, fields.attributes, timestamp, fields.key, fields.value)


def _entry_size(buf, pos: int) -> int:
    """Bytes the legacy entry at `pos` takes, framing included; -1 if the entry is incomplete."""
    if len(buf) - pos < LOG_OVERHEAD:
        return -1
    _, size = OFFSET_LENGTH.unpack_from(buf, pos)
    if size < 0:
        raise CorruptRecordError(f"negative message size {size}")
    total = LOG_OVERHEAD + size
    return total if pos + total <= len(buf) else -1


def iter_entries(buf, pos: int = 0) -> Iterator[LegacyMessage]:
    """The top-level messages of a complete message set, wrappers still compressed."""
    buf = bytes(buf)
    while pos < len(buf):
        size = _entry_size(buf, pos)
        if size < 0:
            raise CorruptRecordError("message set ends in a truncated message")
        offset, _ = OFFSET_LENGTH.unpack_from(buf, pos)
        yield _parse_message(offset, buf[pos + LOG_OVERHEAD:pos + size])
        pos += size


def unwrap(wrapper: LegacyMessage, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper with absolute offsets and effective timestamps,
    or [wrapper] itself if it is not compressed."""
    codec = wrapper.compression
    if codec == CompressionType.NONE:
        return [wrapper]
    if codec == CompressionType.ZSTD:
        raise CorruptRecordError("zstd is not allowed in a legacy message")
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed message at offset {wrapper.offset} has a null value")
    inner_set = decompress(codec, wrapper.value, max_decompressed, legacy_lz4_checksum=wrapper.magic == 0)
    inner = list(iter_entries(inner_set))
    if not inner:
        raise CorruptRecordError(f"compressed message at offset {wrapper.offset} holds no messages")
    for message in inner:
        if message.magic != wrapper.magic:
            raise CorruptRecordError(f"inner message magic {message.magic} differs from wrapper magic {wrapper.magic}")
        if message.compression != CompressionType.NONE:
            raise CorruptRecordError("inner messages must not be compressed")
    if wrapper.magic == 0:
        return inner

    if wrapper.offset == 0:  # some librdkafka versions leave the wrapper offset at 0 on produce
        base_offset = 0
    else:
        base_offset = wrapper.offset - inner[-1].offset
        if base_offset < 0:
            raise CorruptRecordError(
                f"wrapper offset {wrapper.offset} is below its last inner offset {inner[-1].offset}")
    log_append_time = wrapper.timestamp_type == LOG_APPEND_TIME
    # Inner messages take the wrapper's timestamp type, and its timestamp with LogAppendTime.
    type_bit = wrapper.attributes & TIMESTAMP_TYPE_BIT
    return [
        message._replace(
            offset=base_offset + message.offset,
            attributes=(message.attributes & ~TIMESTAMP_TYPE_BIT) | type_bit,
            timestamp=wrapper.timestamp if log_append_time else message.timestamp,
        )
        for message in inner
    ]


def iter_messages(buf, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[LegacyMessage]:
    """Every message of a complete message set, compressed wrappers opened."""
    for entry in iter_entries(buf):
        yield from unwrap(entry, max_decompressed=max_decompressed)


def _message_entry(offset: int, magic: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    body = _MESSAGE_BODY.build(dict(
        magic=magic, attributes=attributes, timestamp=timestamp if magic == 1 else None, key=key, value=value,
    ))
    return OFFSET_LENGTH.pack(offset, _CRC_SIZE + len(body)) + _CRC.pack(zlib.crc32(body)) + body


def build_message_set(messages: Iterable[LegacyMessage], *, magic: int, compression: int = CompressionType.NONE,
                      timestamp_type: int = CREATE_TIME, log_append_time: int = NO_TIMESTAMP,
                      compression_level: int | None = None) -> bytes:
    """Write the offset, timestamp, key and value of each message in format `magic`, as Kafka's
    MemoryRecordsBuilder does: one entry per message, or a single compressed wrapper around them.
    The messages' own magic and attributes are not used. With LogAppendTime (magic 1 only) every
    timestamp becomes `log_append_time`."""
    if magic not in _MIN_MESSAGE_SIZE:
        raise UnsupportedVersionError(f"legacy message sets have magic 0 or 1, not {magic}")
    compression = CompressionType(compression)
    if compression is CompressionType.ZSTD:
        raise UnsupportedCompressionTypeError(f"zstd cannot be carried in magic {magic} messages")
    messages = list(messages)
    type_bit = TIMESTAMP_TYPE_BIT if magic == 1 and timestamp_type == LOG_APPEND_TIME else 0

    def timestamp_of(message: LegacyMessage) -> int:
        if magic == 0:
            return NO_TIMESTAMP
        return log_append_time if type_bit else message.timestamp

    if compression is CompressionType.NONE or not messages:
        return b"".join(
            _message_entry(m.offset, magic, type_bit, timestamp_of(m), m.key, m.value) for m in messages
        )
    first_offset = messages[0].offset
    inner_set = b"".join(
        _message_entry(m.offset - first_offset if magic == 1 else m.offset, magic, type_bit,
                       timestamp_of(m), m.key, m.value)
        for m in messages
    )
    wrapper_value = compress(compression, inner_set, level=compression_level, legacy_lz4_checksum=magic == 0)
    if type_bit:
        wrapper_timestamp = log_append_time
    else:
        wrapper_timestamp = max((timestamp_of(m) for m in messages), default=NO_TIMESTAMP)
    return _message_entry(messages[-1].offset, magic, compression | type_bit, wrapper_timestamp, None, wrapper_value)


def up_convert(message_set: bytes | bytearray | memoryview, *, compression: int | None = None,
               max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """One v2 batch holding every message of a produced message set, timestamps kept (magic 0
    has none: NO_TIMESTAMP). Offsets become 0, 1, ...: the broker assigns the real ones.
    `compression` defaults to the codec the producer used."""
    entries = list(iter_entries(message_set))
    if not entries:
        return b""
    if compression is None:
        compression = next((e.compression for e in entries if e.compression), CompressionType.NONE)
    messages = [m for entry in entries for m in unwrap(entry, max_decompressed=max_decompressed)]
    base_timestamp = messages[0].timestamp
    records = [
        Record(index, message.timestamp - base_timestamp, message.key, message.value, [])
        for index, message in enumerate(messages)
    ]
    return build_batch(
        records,
        compression=compression,
        base_timestamp=base_timestamp,
        max_timestamp=max(message.timestamp for message in messages),
    )


def down_convert(batches: bytes, magic: int, *, first_offset: int = 0,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Stored batches rewritten as a message set of format `magic`, as Kafka's
    RecordsUtil.downConvert does: headers are dropped, control batches skipped, each compressed
    batch becomes one wrapper, and records of uncompressed batches below `first_offset` are left
    out (old clients take every uncompressed message they get as one they asked for). Entries
    already in a format no newer than `magic` are copied; a truncated last batch is ignored, as
    a fetch may end in one. zstd raises UnsupportedCompressionTypeError."""
    if magic not in _MIN_MESSAGE_SIZE:
        raise UnsupportedVersionError(f"legacy message sets have magic 0 or 1, not {magic}")
    out = []
    pos = 0
    end = len(batches)
    while end - pos > MAGIC_POS:
        batch_magic = peek_magic(batches, pos)
        if batch_magic == 2:
            if end - pos < BATCH_HEADER_SIZE:
                break
            size = parse_batch_header(batches, pos).size
            if pos + size > end:
                break
            out.append(_down_convert_batch(batches, pos, magic, first_offset, max_decompressed))
        else:
            size = _entry_size(batches, pos)
            if size < 0:
                break
            if batch_magic <= magic:
                out.append(bytes(batches[pos:pos + size]))
            else:
                out.append(_down_convert_entry(batches[pos:pos + size], magic, max_decompressed))
        pos += size
    return b"".join(out)


def _down_convert_batch(buf, pos: int, magic: int, first_offset: int, max_decompressed: int) -> bytes:
    header, records = decode_batch(buf, pos, max_decompressed=max_decompressed)
    if header.is_control:
        return b""
    if header.compression == CompressionType.ZSTD:
        raise UnsupportedCompressionTypeError("zstd batches cannot be down-converted to magic 0 or 1")
    messages = [
        LegacyMessage(header.record_offset(r), magic, 0, header.record_timestamp(r), r.key, r.value)
        for r in records
    ]
    if header.compression == CompressionType.NONE:
        messages = [m for m in messages if m.offset >= first_offset]
    return build_message_set(
        messages,
        magic=magic,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        log_append_time=header.max_timestamp,
    )


def _down_convert_entry(entry: bytes, magic: int, max_decompressed: int) -> bytes:
    """A magic 1 entry rewritten as magic 0."""
    offset, _ = OFFSET_LENGTH.unpack_from(entry)
    wrapper = _parse_message(offset, entry[LOG_OVERHEAD:])
    messages = unwrap(wrapper, max_decompressed=max_decompressed)
    return build_message_set(messages, magic=magic, compression=wrapper.compression)
