"""Record conversion on a leader append (Kafka's LogValidator): what a Produce request carried, parsed
once, reaches the log as one v2 batch in the topic's codec. Legacy message sets are built with
kafka-python, an implementation independent of ours."""

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from storage_helpers import make_batch, small_config

from samsa.storage.errors import (
    CorruptRecordException, InvalidRecordException, RecordTooLargeException, UnsupportedForMessageFormatException,
)
from samsa.storage.log import Log
from samsa.storage.log_config import LONG_MAX
from samsa.storage.log_validator import convert_to_topic_format, parse_produced_records
from samsa.wire import records as wire_records
from samsa.wire.errors import ErrorCode
from samsa.wire.records import CompressionType, Record, build_batch, build_control_batch, decode_batch

NOW = 1_700_000_000_000
MESSAGES = [(b"k0", b"v0" * 50, NOW), (None, b"v1" * 50, NOW + 1), (b"k2", None, NOW + 2)]


def open_log(tmp_path, clock, **overrides) -> Log:
    # Records of NOW (2023) against a test clock near 0: no bound on future timestamps.
    config = small_config(**{"message_timestamp_after_max_ms": LONG_MAX, **overrides})
    return Log.open(tmp_path / "topic-0", config, clock_ms=clock)


def message_set(magic: int, codec: int = CompressionType.NONE, messages=MESSAGES) -> bytearray:
    """A v0/v1 message set as an old producer sends it: offsets 0, 1, ... (one wrapper if compressed)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for offset, (key, value, timestamp) in enumerate(messages):
        assert builder.append(offset, timestamp=timestamp, key=key, value=value) is not None
    return bytearray(builder.build())


def stored(log: Log) -> list[tuple[wire_records.BatchHeader, list[Record]]]:
    data = log.read(0, 1 << 20).records.read_bytes()
    return [decode_batch(data, position) for position, _ in wire_records.iter_batch_headers(data)]


def produce(log: Log, records) -> object:
    return log.append_as_leader(parse_produced_records(records))


# -- the hot path: nothing converted

@pytest.mark.parametrize("topic_codec, codec", [
    ("producer", CompressionType.NONE), ("producer", CompressionType.LZ4), ("uncompressed", CompressionType.NONE),
    ("zstd", CompressionType.ZSTD),
])
def test_a_batch_in_the_topic_format_is_appended_as_it_came(tmp_path, clock, topic_codec, codec, monkeypatch):
    def no_decoding(*args, **kwargs):
        raise AssertionError("records decoded on the hot path")
    monkeypatch.setattr(wire_records, "decode_batch", no_decoding)
    batch = bytearray(build_batch([Record(i, i, b"k", b"v" * 100, []) for i in range(2)], compression=codec,
                                  base_timestamp=NOW))
    produced = parse_produced_records(batch)
    converted, header = convert_to_topic_format(produced, small_config(compression_type=topic_codec))
    assert converted is batch and header is produced.header

    log = open_log(tmp_path, clock, compression_type=topic_codec)
    assert produce(log, batch).last_offset == 1
    monkeypatch.undo()
    (header, _), = stored(log)
    assert header.compression == codec


def test_parse_reads_the_magic_and_the_v2_header_once(tmp_path):
    batch = bytearray(build_batch([Record(0, 0, b"k", b"v", [])], producer_id=7, producer_epoch=0, base_sequence=0,
                                  is_transactional=True))
    produced = parse_produced_records(batch)
    assert (produced.magic, produced.header.producer_id, produced.is_transactional) == (2, 7, True)
    legacy = parse_produced_records(message_set(1))
    assert (legacy.magic, legacy.header, legacy.is_transactional) == (1, None, False)


# -- up-conversion of message format v0 and v1

@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                                   CompressionType.LZ4])
def test_message_format_v1_is_stored_as_one_v2_batch_in_its_codec(tmp_path, clock, codec):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch([NOW]))  # offsets go on from the log end
    info = produce(log, message_set(1, codec))
    assert (info.first_offset, info.last_offset, info.record_count, info.max_timestamp) == (1, 3, 3, NOW + 2)
    (_, _), (header, records) = stored(log)
    assert (header.magic, header.compression, header.base_offset, header.records_count) == (2, codec, 1, 3)
    assert [(r.key, r.value, header.record_timestamp(r)) for r in records] == MESSAGES


def test_message_format_v0_has_no_timestamps(tmp_path, clock):
    log = open_log(tmp_path, clock)
    info = produce(log, message_set(0, CompressionType.GZIP))
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (0, 2, -1)
    (header, records), = stored(log)
    assert header.compression == CompressionType.GZIP
    assert [(r.key, r.value, header.record_timestamp(r)) for r in records] == [(k, v, -1) for k, v, _ in MESSAGES]


@pytest.mark.parametrize("topic_codec, codec", [("lz4", CompressionType.LZ4), ("uncompressed", CompressionType.NONE),
                                                ("zstd", CompressionType.ZSTD)])
def test_a_legacy_message_set_is_converted_to_the_topic_codec(tmp_path, clock, topic_codec, codec):
    log = open_log(tmp_path, clock, compression_type=topic_codec)
    produce(log, message_set(1, CompressionType.GZIP))
    (header, records), = stored(log)
    assert header.compression == codec
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _ in MESSAGES]


def test_a_legacy_message_set_is_validated_after_conversion(tmp_path, clock):
    compacted = open_log(tmp_path, clock, cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordException) as refused:
        produce(compacted, message_set(1))
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in refused.value.record_errors] == [1]

    small = Log.open(tmp_path / "small-0", small_config(max_message_bytes=100), clock_ms=clock)
    with pytest.raises(RecordTooLargeException):
        produce(small, message_set(1))
    assert compacted.log_end_offset == small.log_end_offset == 0


# -- recompression of v2 batches

@pytest.mark.parametrize("codec, topic_codec, target", [
    (CompressionType.NONE, "gzip", CompressionType.GZIP),
    (CompressionType.ZSTD, "uncompressed", CompressionType.NONE),
    (CompressionType.LZ4, "snappy", CompressionType.SNAPPY),
])
def test_a_batch_in_another_codec_is_recompressed_to_the_topic_codec(tmp_path, clock, codec, topic_codec, target):
    log = open_log(tmp_path, clock, compression_type=topic_codec)
    batch = bytearray(build_batch([Record(i, i, b"k", bytes([i]) * 100, [(f"h{i}", b"x")]) for i in range(4)],
                                  compression=codec, base_timestamp=NOW, producer_id=3, producer_epoch=1,
                                  base_sequence=0))
    info = produce(log, batch)
    assert (info.first_offset, info.last_offset) == (0, 3)
    (header, records), = stored(log)
    assert header.compression == target
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.max_timestamp) == (3, 1, 0, NOW + 3)
    assert [(r.offset_delta, r.key, r.value, r.headers) for r in records] == [
        (i, b"k", bytes([i]) * 100, [(f"h{i}", b"x")]) for i in range(4)]
    assert log.last_producer_entry(3).last_seq == 3


def test_an_uncompressed_control_batch_stays_uncompressed(tmp_path):
    marker = bytearray(build_control_batch("COMMIT", 1, 0, 0, 0, NOW))
    converted, header = convert_to_topic_format(parse_produced_records(marker), small_config(compression_type="gzip"))
    assert converted is marker and header.compression == CompressionType.NONE


# -- records that cannot be converted: Kafka's error codes

def corrupt_crc(records: bytearray, position: int) -> bytearray:
    records[position] ^= 0xFF
    return records


@pytest.mark.parametrize("records, topic_codec", [
    (corrupt_crc(message_set(1), -1), "producer"),  # a message's CRC32
    (corrupt_crc(message_set(0, CompressionType.GZIP), -1), "producer"),  # the wrapper's CRC32
    (message_set(1)[:-3], "producer"),  # a truncated message set
    (corrupt_crc(bytearray(build_batch([Record(0, 0, b"k", b"v", [])])), -1), "gzip"),  # CRC32C, to recompress
    (corrupt_crc(bytearray(build_batch([Record(0, 0, b"k", b"v", [])])), -1), "producer"),  # CRC32C, as it is
    (bytearray(16), "producer"),  # ends before its magic byte
    (bytearray(build_batch([])[:40]), "producer"),  # a v2 header cut short
])
def test_records_that_do_not_decode_are_corrupt(tmp_path, clock, records, topic_codec):
    log = open_log(tmp_path, clock, compression_type=topic_codec)
    with pytest.raises(CorruptRecordException) as refused:
        produce(log, records)
    assert refused.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_a_batch_to_recompress_keeps_the_client_checks(tmp_path, clock):
    log = open_log(tmp_path, clock, compression_type="gzip")
    with pytest.raises(InvalidRecordException, match="baseOffset"):
        produce(log, bytearray(build_batch([Record(0, 0, b"k", b"v", [])], base_offset=5)))
    with pytest.raises(InvalidRecordException, match="control records"):
        produce(log, bytearray(build_batch([Record(0, 0, b"\0\0\0\0", b"\0\0\0\0\0\0", [])], is_control=True,
                                           producer_id=1, producer_epoch=0, compression=CompressionType.LZ4)))
    assert log.log_end_offset == 0


def test_only_produced_records_are_converted(tmp_path, clock):
    # The broker's own writes reach the log as v2 batches: a legacy message set there is refused.
    log = open_log(tmp_path, clock)
    with pytest.raises(UnsupportedForMessageFormatException):
        log.append_as_leader(message_set(1))
    assert produce(log, message_set(1)).last_offset == 2
