"""Record batches (message format v2) and legacy message sets (v0, v1).

The hot paths (produce append, fetch, recovery) only ever touch the 61-byte batch header: it is
parsed with `struct`, the CRC32C is checked over the bytes as they are, and offsets are assigned
by rewriting `baseOffset` in place. Records are decoded only where a feature needs them
(compaction, down-conversion, tests).

Layout (implementation.html, "Record Batch"):
    baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
    attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
    producerId int64, producerEpoch int16, baseSequence int32, recordsCount int32
The CRC covers everything from `attributes` to the end of the batch.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c as _crc32c

from .exceptions import CorruptRecordError

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

_pack_q = struct.Struct(">q").pack_into
_pack_i = struct.Struct(">i").pack_into
_pack_I = struct.Struct(">I").pack_into


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
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_batch_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at `pos`. Raises CorruptRecordError if the bytes are not a v2 batch."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch header is truncated")
    header = BatchHeader._make(BATCH_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"expected magic 2, found {header.magic}")
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    return header


def batch_crc(buf, pos: int, header: BatchHeader) -> int:
    """CRC32C of the batch at `pos` as it is stored (attributes to the end)."""
    end = pos + header.size
    return _crc32c.crc32c(memoryview(buf)[pos + CRC_START:end])


def is_crc_valid(buf, pos: int, header: BatchHeader) -> bool:
    return len(buf) - pos >= header.size and batch_crc(buf, pos, header) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets to a batch in place; baseOffset lies outside the CRC, so it stays valid."""
    _pack_q(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """partitionLeaderEpoch lies outside the CRC too."""
    _pack_i(buf, pos + PARTITION_LEADER_EPOCH_POS, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp: int) -> None:
    """Stamp LogAppendTime: set the timestamp-type bit and maxTimestamp, then recompute the CRC."""
    struct.pack_into(">h", buf, pos + ATTRIBUTES_POS, header.attributes | TIMESTAMP_TYPE_BIT)
    _pack_q(buf, pos + MAX_TIMESTAMP_POS, timestamp)
    _pack_I(buf, pos + CRC_POS, _crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + header.size]))


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
