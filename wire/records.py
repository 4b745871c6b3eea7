"""Record batches (message format v2): the 61-byte header, the records inside, control records.

The hot paths (produce append, fetch, recovery) only ever touch the batch header: it is parsed with
`struct`, the CRC32C is checked over the bytes as they are, and offsets are assigned by rewriting
`baseOffset` in place. Records are decoded only where a feature needs them (compaction,
recompression, down-conversion, tests). Legacy message sets (magic 0 and 1) live in legacy.py.

Layout (implementation.html, "Record Batch"):
    baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
    attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
    producerId int64, producerEpoch int16, baseSequence int32, recordsCount int32, records
The CRC covers everything from `attributes` to the end of the batch. When the batch is compressed,
`records` is the compressed form of the concatenated records.

A record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
keyLength varint, key, valueLength varint, value, headerCount varint, then per header
keyLength varint, key (UTF-8), valueLength varint, value. Varints are zigzag LEB128; a length of
-1 stands for null.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from enum import IntEnum
from typing import NamedTuple

import crc32c as _crc32c_package

from .codec import read_varint, read_varlong, write_varint, write_varlong
from .compression import DEFAULT_MAX_DECOMPRESSED, CompressionType, compress, decompress
from .exceptions import CodecError, CorruptRecordError

try:  # CRC-32C folded with VPCLMULQDQ (wire/_crc32c.c), twice the crc32c package's speed where the CPU has it
    from ._crc32c import FAST as _FAST_CRC32C, crc32c as _folded_crc32c
except ImportError:  # not built: the crc32c package
    _FAST_CRC32C = 0
crc32c = _folded_crc32c if _FAST_CRC32C else _crc32c_package.crc32c

__all__ = [
    "BATCH_HEADER", "BATCH_HEADER_SIZE", "LOG_OVERHEAD", "OFFSET_LENGTH",
    "COMPRESSION_MASK", "TIMESTAMP_TYPE_BIT", "TRANSACTIONAL_BIT", "CONTROL_BIT", "DELETE_HORIZON_BIT",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH", "NO_TIMESTAMP",
    "CREATE_TIME", "LOG_APPEND_TIME",
    "BatchHeader", "parse_batch_header", "batch_crc", "is_crc_valid", "set_base_offset",
    "set_base_offset_and_leader_epoch", "set_log_append_time", "iter_batch_headers", "peek_magic",
    "CompressionType", "DEFAULT_MAX_DECOMPRESSED",
    "Record", "encode_records", "decode_records", "build_batch", "decode_batch", "iter_records", "recompress_batch",
    "ControlRecordType", "ControlRecord", "build_control_batch", "parse_control_record",
]

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 61
# Offsets within the header, for in-place rewrites.
BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
CRC_START = ATTRIBUTES_POS
MAX_TIMESTAMP_POS = 35
# The offset + length prefix every magic shares (legacy message sets too).
LOG_OVERHEAD = 12
OFFSET_LENGTH = struct.Struct(">qi")

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# Timestamp types (the attribute bit's two values).
CREATE_TIME = 0
LOG_APPEND_TIME = 1

_pack_q = struct.Struct(">q").pack_into
_pack_I = struct.Struct(">I").pack_into
_pack_qii = struct.Struct(">qii").pack_into
_new_header = tuple.__new__


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int  # bytes after the length field itself
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes in the log."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def has_delete_horizon(self) -> bool:
        """Set by compaction: baseTimestamp then holds the time after which tombstones may go."""
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def with_base_offset_and_leader_epoch(self, base_offset: int, epoch: int) -> BatchHeader:
        """The header as set_base_offset_and_leader_epoch leaves its batch (what _replace would
        give, without its keyword machinery: every append asks)."""
        return _new_header(BatchHeader, (base_offset, self[1], epoch, *self[3:]))

    def record_offset(self, record: Record) -> int:
        return self.base_offset + record.offset_delta

    def record_timestamp(self, record: Record) -> int:
        """With LogAppendTime every record carries the batch's maxTimestamp, whatever its delta."""
        if self.attributes & TIMESTAMP_TYPE_BIT:
            return self.max_timestamp
        return self.base_timestamp + record.timestamp_delta


def parse_batch_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at `pos`. Raises CorruptRecordError if the bytes are not a v2 batch."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch header is truncated")
    header = _new_header(BatchHeader, BATCH_HEADER.unpack_from(buf, pos))  # _make, less its length check
    if header.magic != 2:
        raise CorruptRecordError(f"expected magic 2, found {header.magic}")
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    return header


def batch_crc(buf, pos: int, header: BatchHeader) -> int:
    """CRC32C of the batch at `pos` as it is stored (attributes to the end)."""
    end = pos + header.size
    return crc32c(memoryview(buf)[pos + CRC_START:end])


def is_crc_valid(buf, pos: int, header: BatchHeader) -> bool:
    return len(buf) - pos >= header.size and batch_crc(buf, pos, header) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets to a batch in place; baseOffset lies outside the CRC, so it stays valid."""
    _pack_q(buf, pos + BASE_OFFSET_POS, base_offset)


def set_base_offset_and_leader_epoch(buf: bytearray | memoryview, pos: int, header: BatchHeader, base_offset: int,
                                     epoch: int) -> None:
    """Both of a leader's stamps in one write: baseOffset, batchLength (rewritten as it is) and
    partitionLeaderEpoch are the batch's first 16 bytes, all outside the CRC."""
    _pack_qii(buf, pos + BASE_OFFSET_POS, base_offset, header.batch_length, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp: int) -> None:
    """Stamp LogAppendTime: set the timestamp-type bit and maxTimestamp, then recompute the CRC."""
    struct.pack_into(">h", buf, pos + ATTRIBUTES_POS, header.attributes | TIMESTAMP_TYPE_BIT)
    _pack_q(buf, pos + MAX_TIMESTAMP_POS, timestamp)
    _pack_I(buf, pos + CRC_POS, batch_crc(buf, pos, header))


def iter_batch_headers(buf, pos: int = 0, end: int | None = None):
    """Yield (position, header) for each complete v2 batch in buf[pos:end]; stops at a partial tail."""
    end = len(buf) if end is None else end
    while end - pos >= BATCH_HEADER_SIZE:
        header = parse_batch_header(buf, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def peek_magic(buf, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message at `pos` (offset 16 for every format)."""
    if len(buf) - pos <= MAGIC_POS:
        raise CorruptRecordError("record data is truncated before its magic byte")
    return buf[pos + MAGIC_POS]


# --- records -------------------------------------------------------------------------------------

_BYTE = [bytes((value,)) for value in range(256)]
_NULL_LENGTH = write_varint(-1)


class Record(NamedTuple):
    """One record of a v2 batch, as stored: offset and timestamp relative to the batch's base.
    BatchHeader.record_offset / record_timestamp give the absolute values."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0  # unused by Kafka so far, kept as read


def _append_record(out: list[bytes], record: Record) -> None:
    offset_delta, timestamp_delta, key, value, headers, attributes = record
    parts = [_BYTE[attributes], write_varlong(timestamp_delta), write_varint(offset_delta)]
    if key is None:
        parts.append(_NULL_LENGTH)
    else:
        parts += (write_varint(len(key)), key)
    if value is None:
        parts.append(_NULL_LENGTH)
    else:
        parts += (write_varint(len(value)), value)
    parts.append(write_varint(len(headers)))
    for header_key, header_value in headers:
        # surrogateescape gives back the exact bytes of a key that was not valid UTF-8 when read.
        encoded_key = header_key.encode("utf-8", "surrogateescape")
        parts += (write_varint(len(encoded_key)), encoded_key)
        if header_value is None:
            parts.append(_NULL_LENGTH)
        else:
            parts += (write_varint(len(header_value)), header_value)
    out.append(write_varint(sum(map(len, parts))))
    out += parts


def encode_records(records: Sequence[Record]) -> bytes:
    """The uncompressed records section of a batch."""
    out: list[bytes] = []
    for record in records:
        _append_record(out, record)
    return b"".join(out)


def decode_records(data: bytes, count: int) -> list[Record]:
    """Exactly `count` records filling all of `data` (the uncompressed records section)."""
    records: list[Record] = []
    append = records.append
    end = len(data)
    pos = 0
    try:
        for _ in range(count):
            size, pos = read_varint(data, pos)
            record_end = pos + size
            if size < 0 or record_end > end:
                raise CorruptRecordError(f"record size {size} does not fit the batch")
            attributes = data[pos]
            timestamp_delta, pos = read_varlong(data, pos + 1)
            offset_delta, pos = read_varint(data, pos)

            length, pos = read_varint(data, pos)
            if length < 0:
                if length != -1:
                    raise CorruptRecordError(f"invalid record key length {length}")
                key = None
            else:
                key = data[pos:pos + length]
                pos += length

            length, pos = read_varint(data, pos)
            if length < 0:
                if length != -1:
                    raise CorruptRecordError(f"invalid record value length {length}")
                value = None
            else:
                value = data[pos:pos + length]
                pos += length

            header_count, pos = read_varint(data, pos)
            # Each header takes at least two bytes: this also bounds the loop on hostile counts.
            if header_count < 0 or 2 * header_count > record_end - pos:
                raise CorruptRecordError(f"invalid record header count {header_count}")
            headers = []
            for _ in range(header_count):
                length, pos = read_varint(data, pos)
                if length < 0:
                    raise CorruptRecordError("record header key is null or has a negative length")
                header_key = data[pos:pos + length].decode("utf-8", "surrogateescape")
                pos += length
                length, pos = read_varint(data, pos)
                if length < 0:
                    if length != -1:
                        raise CorruptRecordError(f"invalid record header value length {length}")
                    header_value = None
                else:
                    header_value = data[pos:pos + length]
                    pos += length
                headers.append((header_key, header_value))

            if pos != record_end:
                raise CorruptRecordError(f"record body takes {pos - record_end + size} bytes, its size says {size}")
            append(Record(offset_delta, timestamp_delta, key, value, headers, attributes))
    except IndexError:
        raise CorruptRecordError("record data is truncated") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the last of the batch's {count} records")
    return records


# --- batches -------------------------------------------------------------------------------------

def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = CREATE_TIME,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    has_delete_horizon: bool = False,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """A complete v2 batch, CRC included.

    base_timestamp defaults to NO_TIMESTAMP (-1); record timestamp deltas are relative to it.
    max_timestamp defaults to the largest record timestamp (base_timestamp if there is no record).
    has_delete_horizon marks base_timestamp as compaction's delete horizon.
    An empty batch is written uncompressed whatever `compression` says.
    last_offset_delta defaults to the last record's offset delta (0 for an empty batch; compaction
    passes the original one when it keeps an emptied batch).
    """
    if base_timestamp is None:
        base_timestamp = NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else 0
    if not records:
        # As Kafka's writeEmptyHeader: nothing to compress, and readers never decompress an empty batch.
        compression = CompressionType.NONE
    attributes = (
        CompressionType(compression)
        | (TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_BIT if is_transactional else 0)
        | (CONTROL_BIT if is_control else 0)
        | (DELETE_HORIZON_BIT if has_delete_horizon else 0)
    )
    payload = encode_records(records)
    if compression != CompressionType.NONE:
        payload = compress(compression, payload, level=compression_level)
    fields = [
        base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch, 2, 0,
        attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records),
    ]
    try:
        header = BATCH_HEADER.pack(*fields)
        fields[4] = crc32c(payload, crc32c(header[CRC_START:]))
        return BATCH_HEADER.pack(*fields) + payload
    except struct.error as exc:
        raise CodecError(f"record batch field out of range: {exc}") from None


def decode_batch(buf, pos: int = 0, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> tuple[BatchHeader, list[Record]]:
    """Check and decode the whole batch at `pos`: CorruptRecordError (DecompressionError for the
    codec's part) on truncation, a CRC mismatch or any malformed record."""
    header = parse_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(f"record batch of {header.size} bytes is truncated to {len(buf) - pos}")
    crc = batch_crc(buf, pos, header)
    if crc != header.crc:
        raise CorruptRecordError(f"record batch CRC is {crc:#010x}, header says {header.crc:#010x}")
    if header.records_count < 0:
        raise CorruptRecordError(f"invalid record count {header.records_count}")
    if header.records_count == 0:
        return header, []  # Kafka does not look at the records section of an empty batch
    payload = memoryview(buf)[pos + BATCH_HEADER_SIZE:end]
    if header.compression == CompressionType.NONE:
        data = bytes(payload)
    else:
        data = decompress(header.compression, payload, max_decompressed)
    return header, decode_records(data, header.records_count)


def iter_records(buf, pos: int = 0, end: int | None = None, *,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[tuple[BatchHeader, Record]]:
    """(header, record) for every record of every complete batch in buf[pos:end]."""
    for batch_pos, _ in iter_batch_headers(buf, pos, end):
        header, records = decode_batch(buf, batch_pos, max_decompressed=max_decompressed)
        for record in records:
            yield header, record


def recompress_batch(buf, pos: int, target_compression: int, *, compression_level: int | None = None,
                     max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """The batch at `pos` re-encoded with another codec; every other header field is kept."""
    header, records = decode_batch(buf, pos, max_decompressed=max_decompressed)
    return build_batch(
        records,
        base_offset=header.base_offset,
        compression=target_compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        has_delete_horizon=header.has_delete_horizon,
        last_offset_delta=header.last_offset_delta,
        compression_level=compression_level,
    )


# --- control records -----------------------------------------------------------------------------

class ControlRecordType(IntEnum):
    """The type in a control record's key (Java's ControlRecordType)."""

    UNKNOWN = -1  # a type this broker does not know; Kafka reads such records and ignores them
    ABORT = 0
    COMMIT = 1


class ControlRecord(NamedTuple):
    type: ControlRecordType
    version: int  # of the key
    coordinator_epoch: int | None  # from the value of COMMIT and ABORT markers


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
_CONTROL_KEY_VERSION = 0
_END_TXN_MARKER_VERSION = 0


def build_control_batch(kind: ControlRecordType | str, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, base_offset: int, timestamp: int, *,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The end-transaction marker batch ("COMMIT" or "ABORT") the broker writes for a producer."""
    kind = ControlRecordType[kind] if isinstance(kind, str) else ControlRecordType(kind)
    if kind is ControlRecordType.UNKNOWN:
        raise ValueError("an end-transaction marker is COMMIT or ABORT")
    record = Record(
        offset_delta=0,
        timestamp_delta=0,
        key=_CONTROL_KEY.pack(_CONTROL_KEY_VERSION, kind),
        value=_END_TXN_MARKER_VALUE.pack(_END_TXN_MARKER_VERSION, coordinator_epoch),
        headers=[],
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
    )


def parse_control_record(record: Record) -> ControlRecord:
    """Read a control batch's record. Newer key/value versions are accepted, as Kafka does."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    try:
        kind = ControlRecordType(type_id)
    except ValueError:
        kind = ControlRecordType.UNKNOWN
    if kind is ControlRecordType.UNKNOWN:
        return ControlRecord(kind, version, None)
    value = record.value
    if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError("end-transaction marker value is shorter than 6 bytes")
    value_version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
    if value_version < 0:
        raise CorruptRecordError(f"invalid end-transaction marker version {value_version}")
    return ControlRecord(kind, version, coordinator_epoch)
