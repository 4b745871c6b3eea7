"""Validation, conversion and offset assignment for a leader append (Kafka's
UnifiedLog.analyzeAndValidateRecords and LogValidator).

A Produce partition's records are parsed once (`parse_produced_records`: the magic byte and the v2
batch header), and that parse serves every later step: the authorizer, transaction verification,
conversion, validation, producer state. Conversion (`convert_to_topic_format`) is Kafka's
LogValidator where it cannot work in place: a legacy message set (magic 0 or 1) is up-converted to
one v2 batch, and a batch in another codec than the topic's compression.type is recompressed. A v2
batch already in the topic's format (compression.type `producer`, the default, or its codec) is
appended as it is, no record decoded.

Everything else is decided from batch headers: sizes, magic, CRC32C, the offset range against the
record count, timestamps against message.timestamp.*.max.ms. Offsets are assigned by rewriting
baseOffset in place (outside the CRC); only LogAppendTime stamping rewrites the CRC. Records are
decoded only for a compacted topic, whose records must all have keys.
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import NamedTuple

from ..wire import legacy
from ..wire.exceptions import CodecError, CorruptRecordError
from ..wire.records import (
    ATTRIBUTES_POS, CRC_POS, LENGTH_POS, LOG_OVERHEAD, MAGIC_POS, NO_TIMESTAMP, TIMESTAMP_TYPE_BIT,
    BatchHeader, CompressionType, batch_crc, decode_batch, parse_batch_header, recompress_batch,
    set_base_offset_and_leader_epoch, set_log_append_time,
)
from .errors import (
    CorruptRecordException, InvalidRecordException, InvalidTimestampException, RecordTooLargeException,
    UnsupportedCompressionTypeException, UnsupportedForMessageFormatException,
)
from .log_config import LOG_APPEND_TIME, LogConfig

# LegacyRecord.RECORD_OVERHEAD_V0: no batch of any magic is smaller.
_MIN_RECORD_OVERHEAD = 14
_HEADER_SIZE_UP_TO_MAGIC = MAGIC_POS + 1
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
# The topic's compression.type values that name a codec (Kafka's BrokerCompressionType); the one
# left, "producer", keeps the codec the producer chose.
_TOPIC_CODECS = {codec.topic_config_name: codec for codec in CompressionType}


class AppendOrigin(Enum):
    """Who appends: client batches get the strict checks, the broker's own writes do not."""
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class ValidationResult(NamedTuple):
    batches: list[tuple[int, BatchHeader]]  # position in the input and header, offsets assigned
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int  # the last offset of the batch holding it (Kafka's shallow offset)
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    valid_bytes: int  # the input's complete batches; a partial tail is dropped, as Kafka does


class ProducedRecords(NamedTuple):
    """One partition's records as a Produce request carried them, parsed once."""
    buffer: bytearray | memoryview  # as received: offsets are assigned in place
    magic: int
    header: BatchHeader | None  # the v2 batch's header; None for a legacy message set

    @property
    def is_transactional(self) -> bool:
        return self.header is not None and self.header.is_transactional


def parse_produced_records(records: bytearray | memoryview) -> ProducedRecords:
    """The magic byte of `records` and, for message format v2, its first batch header."""
    if len(records) <= MAGIC_POS:
        raise CorruptRecordException("record data is truncated before its magic byte")
    magic = records[MAGIC_POS]
    if magic != 2:
        return ProducedRecords(records, magic, None)
    try:
        return ProducedRecords(records, magic, parse_batch_header(records))
    except CorruptRecordError as e:
        raise CorruptRecordException(str(e)) from None


def convert_to_topic_format(produced: ProducedRecords, config: LogConfig) -> tuple[bytearray | memoryview,
                                                                                   BatchHeader]:
    """The produced records as one v2 batch in the topic's codec, and its header: the bytes as they
    came when they already are one (nothing decoded), else up-converted or recompressed. A control
    batch written uncompressed stays uncompressed, as in Kafka."""
    topic_codec = _TOPIC_CODECS.get(config.compression_type)  # None for "producer": the producer's codec
    header = produced.header
    if header is None:
        if produced.magic > 2:
            raise CorruptRecordException(f"Invalid magic found in record: {produced.magic}")
        return _converted(lambda: legacy.up_convert(produced.buffer, compression=topic_codec))
    if topic_codec is None or topic_codec == header.compression or (
            header.is_control and header.compression == CompressionType.NONE):
        return produced.buffer, header
    return _converted(lambda: recompress_batch(produced.buffer, 0, topic_codec))


def _converted(convert) -> tuple[bytearray, BatchHeader]:
    """The batch `convert` builds, with Kafka's errors for records that cannot be converted."""
    try:
        batch = bytearray(convert())
        return batch, parse_batch_header(batch)
    except legacy.UnsupportedCompressionTypeError as e:
        raise UnsupportedCompressionTypeException(str(e)) from None
    except CodecError as e:  # a malformed message set or batch, a CRC mismatch, a codec failing
        raise CorruptRecordException(str(e)) from None


def analyze_batches(records, config: LogConfig, origin: AppendOrigin, topic_partition: str,
                    first_header: BatchHeader | None = None) -> list[tuple[int, BatchHeader]]:
    """The complete batches of `records`, each checked for size, magic and CRC. `first_header`:
    the first batch's, when the caller parsed it already."""
    batches = []
    end = len(records)
    position = 0
    header = first_header
    while end - position >= LOG_OVERHEAD:
        if header is None:
            header = _read_header(records, position, topic_partition)
            if header is None:
                break
        size = header.size
        if end - position < size:
            break
        if origin is AppendOrigin.CLIENT and header.base_offset != 0:
            raise InvalidRecordException(
                f"The baseOffset of the record batch in the append to {topic_partition} should be 0, "
                f"but it is {header.base_offset}")
        if size > config.max_message_bytes:
            raise RecordTooLargeException(
                f"The record batch size in the append to {topic_partition} is {size} bytes which exceeds "
                f"the maximum configured value of {config.max_message_bytes}.")
        if batch_crc(records, position, header) != header.crc:  # the whole batch is there: checked above
            raise CorruptRecordException(
                f"Record is corrupt (stored crc = {header.crc}) in topic partition {topic_partition}.")
        batches.append((position, header))
        position += size
        header = None
    return batches


def _read_header(records, position: int, topic_partition: str) -> BatchHeader | None:
    """The header of the v2 batch at `position`, or None if the batch is incomplete."""
    end = len(records)
    (length,) = _LENGTH.unpack_from(records, position + LENGTH_POS)
    if length < _MIN_RECORD_OVERHEAD:
        raise CorruptRecordException(
            f"Record size {length} is less than the minimum record overhead ({_MIN_RECORD_OVERHEAD})")
    if end - position < _HEADER_SIZE_UP_TO_MAGIC or end - position < LOG_OVERHEAD + length:
        return None
    magic = records[position + MAGIC_POS]
    if magic > 2:
        raise CorruptRecordException(f"Invalid magic found in record: {magic}")
    if magic < 2:
        raise UnsupportedForMessageFormatException(
            f"Message format v{magic} reached the log of {topic_partition}; it takes v2 batches only")
    try:
        return parse_batch_header(records, position)
    except CorruptRecordError as e:
        raise CorruptRecordException(str(e)) from None


def validate_and_assign_offsets(records, batches: list[tuple[int, BatchHeader]], *, first_offset: int,
                                config: LogConfig, now_ms: int, leader_epoch: int, origin: AppendOrigin,
                                topic_partition: str) -> ValidationResult:
    """Check the single batch of a v2 append and stamp offsets, leader epoch and, under
    LogAppendTime, the broker's time into `records` (which must be writable)."""
    if len(batches) != 1:
        raise InvalidRecordException("Compressed outer record has more than one batch")
    position, header = batches[0]
    if origin is AppendOrigin.CLIENT:
        _validate_client_batch(header, topic_partition)
    if config.compact:
        _validate_keys(records, position, header, topic_partition)

    log_append_time = config.message_timestamp_type == LOG_APPEND_TIME
    _validate_timestamps(header, config, now_ms, log_append_time)

    set_base_offset_and_leader_epoch(records, position, header, first_offset, leader_epoch)
    if log_append_time:
        set_log_append_time(records, position, header, now_ms)
        header = header._replace(attributes=header.attributes | TIMESTAMP_TYPE_BIT, max_timestamp=now_ms)
    elif header.timestamp_type:
        # A CreateTime topic keeps CreateTime: the records keep the timestamp they carried.
        _clear_log_append_time(records, position, header)
        header = header._replace(attributes=header.attributes & ~TIMESTAMP_TYPE_BIT)
    header = header.with_base_offset_and_leader_epoch(first_offset, leader_epoch)

    last_offset = header.last_offset
    if log_append_time:
        offset_of_max_timestamp = first_offset if header.compression != CompressionType.NONE else last_offset
    else:
        offset_of_max_timestamp = last_offset
    return ValidationResult(
        batches=[(position, header)],
        first_offset=first_offset,
        last_offset=last_offset,
        max_timestamp=header.max_timestamp,
        offset_of_max_timestamp=offset_of_max_timestamp,
        log_append_time=now_ms if log_append_time else NO_TIMESTAMP,
        record_count=header.records_count,
        valid_bytes=header.size,
    )


def _validate_client_batch(header: BatchHeader, topic_partition: str) -> None:
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordException(
            f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}] in topic partition "
            f"{topic_partition}")
    if header.records_count <= 0:
        raise InvalidRecordException(
            f"Invalid reported count for record batch: {header.records_count} in topic partition {topic_partition}")
    if count_from_offsets != header.records_count:
        raise InvalidRecordException(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] and count of records "
            f"{header.records_count} in topic partition {topic_partition}")
    if header.is_control:
        raise InvalidRecordException(
            f"Clients are not allowed to write control records in topic partition {topic_partition}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordException(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id} "
            f"in topic partition {topic_partition}")


def _validate_keys(records, position: int, header: BatchHeader, topic_partition: str) -> None:
    try:
        _, decoded = decode_batch(records, position)
    except CorruptRecordError as e:
        raise CorruptRecordException(f"{e} in topic partition {topic_partition}") from None
    if header.is_control:
        return
    message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    errors = [(index, message) for index, record in enumerate(decoded) if record.key is None]
    if errors:
        raise InvalidRecordException.of_records(errors)


def _validate_timestamps(header: BatchHeader, config: LogConfig, now_ms: int, log_append_time: bool) -> None:
    """Batch-level form of Kafka's per-record check: under CreateTime the batch's first timestamp
    and its max bound the records' timestamps; a producer may not claim LogAppendTime."""
    if header.timestamp_type and (log_append_time or header.max_timestamp == NO_TIMESTAMP):
        raise InvalidTimestampException(
            "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.")
    if log_append_time:
        return
    lowest = now_ms - config.message_timestamp_before_max_ms
    highest = now_ms + config.message_timestamp_after_max_ms
    candidates = (header.max_timestamp,) if header.timestamp_type else (header.base_timestamp, header.max_timestamp)
    for timestamp in candidates:
        if timestamp != NO_TIMESTAMP and not lowest <= timestamp <= highest:
            raise InvalidTimestampException(
                f"Timestamp {timestamp} of message with offset {header.base_offset} is out of range. "
                f"The timestamp should be within [{lowest}, {highest}]")


def _clear_log_append_time(records, position: int, header: BatchHeader) -> None:
    _ATTRIBUTES.pack_into(records, position + ATTRIBUTES_POS, header.attributes & ~TIMESTAMP_TYPE_BIT)
    _CRC.pack_into(records, position + CRC_POS, batch_crc(records, position, header))
