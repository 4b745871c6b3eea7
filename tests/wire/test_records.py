import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from samsa.wire.exceptions import CodecError, CorruptRecordError
from samsa.wire.codec import read_varint, read_varlong, write_varint, write_varlong
from samsa.wire.records import (
    BATCH_HEADER, BATCH_HEADER_SIZE, CONTROL_BIT, CRC_START, DELETE_HORIZON_BIT, LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, CompressionType, ControlRecord, ControlRecordType, Record,
    build_batch, build_control_batch, decode_batch, iter_records, parse_batch_header, parse_control_record,
    recompress_batch, set_base_offset_and_leader_epoch, set_log_append_time,
)

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c is not CompressionType.NONE]

SAMPLE = [
    Record(0, 0, b"key", b"value", []),
    Record(1, 5, None, b"null key", []),
    Record(2, -3, b"null value", None, []),
    Record(3, 7, b"", b"", [("h1", b"v1"), ("", b""), ("null", None), ("\u00fcnicode \u2603", b"\x00\xff")]),
    Record(4, 1 << 40, None, None, [("k", b"x" * 300)]),
]


# --- varints -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, encoded", [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804"),
    (2**31 - 1, "feffffff0f"), (-2**31, "ffffffff0f"),
])
def test_varint_known_encodings(value, encoded):
    assert write_varint(value).hex() == encoded
    assert read_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


@pytest.mark.parametrize("value, encoded", [
    (0, "00"), (-1, "01"), (2**63 - 1, "feffffffffffffffff01"), (-2**63, "ffffffffffffffffff01"),
])
def test_varlong_known_encodings(value, encoded):
    assert write_varlong(value).hex() == encoded
    assert read_varlong(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


@given(st.integers(-2**31, 2**31 - 1))
def test_varint_round_trip(value):
    encoded = b"\xaa" + write_varint(value) + b"\xbb"
    assert read_varint(encoded, 1) == (value, len(encoded) - 1)


@given(st.integers(-2**63, 2**63 - 1))
def test_varlong_round_trip(value):
    encoded = write_varlong(value)
    assert read_varlong(encoded, 0) == (value, len(encoded))


def test_overlong_varints_are_corrupt():
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80\x80\x80\x80\x80\x00", 0)
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\x80" * 10 + b"\x00", 0)


def test_fifth_varint_byte_wraps_like_java():
    # Java keeps the low 32 bits of the fifth byte's contribution.
    assert read_varint(b"\xfe\xff\xff\xff\x7f", 0) == (2**31 - 1, 5)


def test_out_of_range_values_are_refused():
    for bad in (2**31, -2**31 - 1):
        with pytest.raises(CodecError):
            write_varint(bad)
    for bad in (2**63, -2**63 - 1):
        with pytest.raises(CodecError):
            write_varlong(bad)


# --- round trips ---------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec):
    batch = build_batch(SAMPLE, base_offset=1000, compression=codec, base_timestamp=1_700_000_000_000)
    header, records = decode_batch(batch)
    assert records == SAMPLE
    assert header.compression == codec
    assert header.base_offset == 1000
    assert header.records_count == len(SAMPLE)
    assert header.last_offset_delta == 4
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_000 + (1 << 40)
    assert header.size == len(batch)
    assert [header.record_offset(r) for r in records] == [1000, 1001, 1002, 1003, 1004]
    assert header.record_timestamp(records[1]) == 1_700_000_000_005


@pytest.mark.parametrize("codec", CODECS)
def test_empty_batch(codec):
    batch = build_batch([], compression=codec, base_offset=7, last_offset_delta=3, base_timestamp=50)
    header, records = decode_batch(batch)
    assert records == []
    assert (header.records_count, header.last_offset_delta, header.max_timestamp) == (0, 3, 50)
    assert header.compression == CompressionType.NONE  # nothing to compress, as in Kafka
    assert read_with_kafka_python(batch) == []


def test_empty_batch_records_section_is_not_read():
    header, records = decode_batch(batch_with_payload(b"not even compressed", 0, CompressionType.ZSTD))
    assert records == [] and header.compression == CompressionType.ZSTD


def test_header_fields_and_attribute_bits():
    batch = build_batch(
        SAMPLE[:1], base_offset=42, producer_id=9000, producer_epoch=3, base_sequence=17,
        is_transactional=True, partition_leader_epoch=12, timestamp_type=LOG_APPEND_TIME,
        base_timestamp=10, max_timestamp=99, compression=CompressionType.LZ4,
    )
    header, _ = decode_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9000, 3, 17)
    assert header.partition_leader_epoch == 12
    assert header.attributes == CompressionType.LZ4 | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.record_timestamp(SAMPLE[0]) == 99  # LogAppendTime: the batch's maxTimestamp


def test_delete_horizon_bit():
    header, _ = decode_batch(build_batch(SAMPLE, base_timestamp=5000, has_delete_horizon=True))
    assert header.attributes == DELETE_HORIZON_BIT
    assert header.has_delete_horizon and header.base_timestamp == 5000


def test_no_timestamp_default():
    header, _ = decode_batch(build_batch([Record(0, 0, b"k", b"v", [])]))
    assert header.base_timestamp == header.max_timestamp == -1


def test_invalid_utf8_header_keys_keep_their_bytes():
    raw_key = b"\xff\xfebad"
    batch = bytearray(build_batch([Record(0, 0, None, None, [("XXXXX", b"v")])]))
    start = batch.index(b"XXXXX")
    batch[start:start + 5] = raw_key
    fix_crc(batch)
    _, records = decode_batch(batch)
    rebuilt = build_batch(records)
    assert rebuilt == bytes(batch)


def test_out_of_range_header_field_is_a_codec_error():
    with pytest.raises(CodecError):
        build_batch(SAMPLE, producer_epoch=40000)


records_strategy = st.lists(
    st.tuples(
        st.integers(-2**40, 2**40),
        st.none() | st.binary(max_size=64),
        st.none() | st.binary(max_size=64),
        st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=16)), max_size=4),
    ),
    max_size=20,
).map(lambda rows: [Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_strategy, codec=st.sampled_from(CODECS), base_timestamp=st.integers(0, 2**41),
       base_offset=st.integers(0, 2**62))
def test_generated_records_round_trip(records, codec, base_timestamp, base_offset):
    batch = build_batch(records, compression=codec, base_timestamp=base_timestamp, base_offset=base_offset)
    header, decoded = decode_batch(batch)
    assert decoded == records
    assert header.base_offset == base_offset
    # And kafka-python, an independent decoder, reads the same.
    assert read_with_kafka_python(batch) == [
        (base_offset + r.offset_delta, base_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
        for r in records
    ]


def test_iter_records_over_several_batches_stops_at_a_partial_tail():
    first = build_batch(SAMPLE[:2], base_offset=0)
    second = build_batch(SAMPLE[2:], base_offset=2, compression=CompressionType.GZIP)
    stream = first + second + second[:30]
    pairs = list(iter_records(stream))
    assert [r for _, r in pairs] == SAMPLE
    assert [h.record_offset(r) for h, r in pairs] == [0, 1, 4, 5, 6]


def test_set_log_append_time_then_decode():
    batch = bytearray(build_batch(SAMPLE, base_timestamp=100))
    set_log_append_time(batch, 0, parse_batch_header(batch), 777)
    header, records = decode_batch(batch)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert {header.record_timestamp(r) for r in records} == {777}


def test_base_offset_and_leader_epoch_stamped_in_one_write_keep_the_batch_valid():
    batch = bytearray(build_batch(SAMPLE, base_timestamp=100))
    header = parse_batch_header(batch)
    set_base_offset_and_leader_epoch(batch, 0, header, 1 << 40, 7)
    stamped = parse_batch_header(batch)
    assert stamped == header._replace(base_offset=1 << 40, partition_leader_epoch=7)
    assert stamped == header.with_base_offset_and_leader_epoch(1 << 40, 7)
    assert type(header.with_base_offset_and_leader_epoch(1, 2)).__name__ == "BatchHeader"
    assert crc32c.crc32c(bytes(batch[CRC_START:])) == stamped.crc  # both fields lie outside the CRC
    assert [r.value for r in decode_batch(batch)[1]] == [r.value for r in SAMPLE]


# --- differential: kafka-python builds, we decode ------------------------------------------------

def build_with_kafka_python(codec, rows, *, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                            transactional=False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 30,
    )
    for offset, timestamp, key, value, headers in rows:
        assert builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


def read_with_kafka_python(buf) -> list[tuple]:
    rows = []
    for batch in MemoryRecords(bytes(buf)):
        assert batch.validate_crc()
        rows.extend((r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch)
    return rows


# Compressible values, so kafka-python keeps the codec instead of falling back to none.
KAFKA_PYTHON_ROWS = [
    (0, 1_600_000_000_000, b"key-0", b"value " * 50, []),
    (1, 1_600_000_000_010, None, b"value " * 60, [("trace", b"abc"), ("empty", None)]),
    (2, 1_599_999_999_990, b"key-2", None, []),
    (3, 1_600_000_000_005, b"", b"value " * 10, [("\u00e9", b"")]),
]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_built_batches_decode(codec):
    batch = build_with_kafka_python(codec, KAFKA_PYTHON_ROWS, producer_id=77, producer_epoch=2, base_sequence=5,
                                    transactional=True)
    header, records = decode_batch(batch)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 2, 5)
    assert header.is_transactional
    assert header.max_timestamp == 1_600_000_000_010
    assert [(header.record_offset(r), header.record_timestamp(r), r.key, r.value, r.headers) for r in records] \
        == KAFKA_PYTHON_ROWS


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_kafka_python(codec):
    base = KAFKA_PYTHON_ROWS[0][1]
    records = [Record(off, ts - base, k, v, h) for off, ts, k, v, h in KAFKA_PYTHON_ROWS]
    batch = build_batch(records, compression=codec, base_timestamp=base, base_offset=500)
    expected = [(500 + off, ts, k, v, h) for off, ts, k, v, h in KAFKA_PYTHON_ROWS]
    assert read_with_kafka_python(batch) == expected
    batch_view = next(iter(MemoryRecords(batch)))
    assert batch_view.compression_type == codec
    assert batch_view.max_timestamp == 1_600_000_000_010


# --- control batches -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind, type_id", [("COMMIT", 1), ("ABORT", 0)])
def test_control_batch_layout(kind, type_id):
    batch = build_control_batch(kind, producer_id=4000, producer_epoch=6, coordinator_epoch=21,
                                base_offset=300, timestamp=1234, partition_leader_epoch=3)
    header, records = decode_batch(batch)
    assert header.attributes == TRANSACTIONAL_BIT | CONTROL_BIT
    assert (header.base_offset, header.producer_id, header.producer_epoch) == (300, 4000, 6)
    assert (header.base_sequence, header.partition_leader_epoch) == (-1, 3)
    assert (header.base_timestamp, header.max_timestamp, header.records_count) == (1234, 1234, 1)
    [record] = records
    assert record.key == struct.pack(">hh", 0, type_id)
    assert record.value == struct.pack(">hi", 0, 21)
    assert parse_control_record(record) == ControlRecord(ControlRecordType[kind], 0, 21)
    # kafka-python sees the same marker.
    [control] = list(next(iter(MemoryRecords(batch))))
    assert (control.type, control.offset, control.timestamp) == (type_id, 300, 1234)


def test_parse_control_record_tolerates_newer_versions_and_unknown_types():
    newer = Record(0, 0, struct.pack(">hh", 3, 1) + b"extra", struct.pack(">hi", 1, 8) + b"more", [])
    assert parse_control_record(newer) == ControlRecord(ControlRecordType.COMMIT, 3, 8)
    unknown = Record(0, 0, struct.pack(">hh", 0, 5), b"anything", [])
    assert parse_control_record(unknown) == ControlRecord(ControlRecordType.UNKNOWN, 0, None)


@pytest.mark.parametrize("key, value", [
    (None, b"\x00\x00\x00\x00\x00\x01"),
    (b"\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01"),
    (struct.pack(">hh", -1, 1), b"\x00\x00\x00\x00\x00\x01"),
    (struct.pack(">hh", 0, 1), None),
    (struct.pack(">hh", 0, 0), b"\x00\x00\x00"),
    (struct.pack(">hh", 0, 0), struct.pack(">hi", -2, 1)),
])
def test_malformed_control_records(key, value):
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(0, 0, key, value, []))


def test_control_batch_kind_must_be_a_marker():
    with pytest.raises(KeyError):
        build_control_batch("PREPARE", 1, 1, 1, 0, 0)
    with pytest.raises(ValueError):
        build_control_batch(ControlRecordType.UNKNOWN, 1, 1, 1, 0, 0)


# --- recompression -------------------------------------------------------------------------------

@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompress_keeps_everything_but_the_codec(source, target):
    original = build_batch(
        SAMPLE, base_offset=123, compression=source, producer_id=5, producer_epoch=1, base_sequence=9,
        is_transactional=True, partition_leader_epoch=4, timestamp_type=LOG_APPEND_TIME,
        base_timestamp=1000, max_timestamp=5000, has_delete_horizon=True,
    )
    stream = b"\x00" * 13 + original
    recompressed = recompress_batch(stream, 13, target)
    before, records_before = decode_batch(original)
    after, records_after = decode_batch(recompressed)
    assert records_after == records_before
    assert after.compression == target
    for field in ("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp", "max_timestamp",
                  "producer_id", "producer_epoch", "base_sequence", "records_count"):
        assert getattr(after, field) == getattr(before, field), field
    assert after.attributes & ~0x07 == before.attributes & ~0x07


# --- corruption ----------------------------------------------------------------------------------

def fix_crc(batch: bytearray, pos: int = 0) -> None:
    header = parse_batch_header(batch, pos)
    struct.pack_into(">I", batch, pos + 17, crc32c.crc32c(bytes(batch[pos + CRC_START:pos + header.size])))


def batch_with_payload(payload: bytes, count: int, codec: int = 0) -> bytes:
    """A batch whose header and CRC are right around an arbitrary records section."""
    fields = [0, BATCH_HEADER_SIZE - 12 + len(payload), -1, 2, 0, codec, max(count - 1, 0), 0, 0, -1, -1, -1, count]
    batch = bytearray(BATCH_HEADER.pack(*fields) + payload)
    fix_crc(batch)
    return bytes(batch)


@pytest.mark.parametrize("codec", CODECS)
def test_every_single_bit_flip_is_caught(codec):
    batch = build_batch(SAMPLE[:3], compression=codec, base_timestamp=5)
    for pos in range(8, len(batch)):
        if 12 <= pos < 16:
            continue  # partitionLeaderEpoch is outside the CRC on purpose
        for bit in range(8):
            flipped = bytearray(batch)
            flipped[pos] ^= 1 << bit
            with pytest.raises(CorruptRecordError):
                decode_batch(flipped)


def test_fields_outside_the_crc_may_change():
    batch = bytearray(build_batch(SAMPLE))
    batch[0] ^= 0x40  # baseOffset
    batch[13] ^= 0x01  # partitionLeaderEpoch
    decode_batch(batch)


@pytest.mark.parametrize("codec", CODECS)
def test_truncation_at_every_position(codec):
    batch = build_batch(SAMPLE, compression=codec)
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut])


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_records_behind_a_consistent_header(codec):
    """The header and CRC agree with the shortened data: the records themselves must be caught."""
    from samsa.wire.compression import compress
    from samsa.wire.records import encode_records
    payload = encode_records(SAMPLE)
    for cut in range(len(payload)):
        data = payload[:cut]
        if codec:
            data = compress(codec, data)
        with pytest.raises(CorruptRecordError):
            decode_batch(batch_with_payload(data, len(SAMPLE), codec))


def record_bytes(body: bytes) -> bytes:
    return write_varint(len(body)) + body


GOOD_BODY = b"\x00" + write_varlong(0) + write_varint(0) + write_varint(1) + b"k" + write_varint(1) + b"v" + write_varint(0)


@pytest.mark.parametrize("payload, count", [
    (record_bytes(GOOD_BODY), 2),  # fewer records than counted
    (record_bytes(GOOD_BODY) * 2, 1),  # bytes left after the counted records
    (record_bytes(GOOD_BODY) + b"\x00", 1),
    (write_varint(len(GOOD_BODY) + 1) + GOOD_BODY + b"\x00", 1),  # record longer than its fields
    (write_varint(len(GOOD_BODY) - 1) + GOOD_BODY, 1),  # record shorter than its fields
    (write_varint(-5) + GOOD_BODY, 1),  # negative record size
    (record_bytes(b"\x00\x00\x00" + write_varint(-2) + write_varint(0) + write_varint(0)), 1),  # key length -2
    (record_bytes(b"\x00\x00\x00" + write_varint(0) + write_varint(-7) + write_varint(0)), 1),  # value length -7
    (record_bytes(b"\x00\x00\x00\x01\x01" + write_varint(-1)), 1),  # negative header count
    (record_bytes(b"\x00\x00\x00\x01\x01" + write_varint(1) + write_varint(-1) + write_varint(0)), 1),  # null header key
    (record_bytes(b"\x00\x00\x00\x01\x01" + write_varint(1) + b"\x02h" + write_varint(-3)), 1),  # header value -3
    (record_bytes(b"\x00\x00\x00\x01\x01" + write_varint(2**30)), 1),  # header count past the record
    (record_bytes(b"\x00\x00\x00" + write_varint(1000) + b"k\x01\x00"), 1),  # key past the record
    (record_bytes(b"\x00" + b"\xff" * 11), 1),  # timestamp varlong longer than 10 bytes
    (record_bytes(b"\x00\x00" + b"\xff" * 6), 1),  # offset varint longer than 5 bytes
    (b"\xff\xff\xff\xff\xff\xff", 1),  # record size varint longer than 5 bytes
])
def test_malformed_records_behind_a_valid_crc(payload, count):
    with pytest.raises(CorruptRecordError):
        decode_batch(batch_with_payload(payload, count))


def test_negative_record_count():
    with pytest.raises(CorruptRecordError):
        decode_batch(batch_with_payload(b"", -1))


def test_unknown_codec_id():
    with pytest.raises(CorruptRecordError):
        decode_batch(batch_with_payload(b"abc", 1, codec=6))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_records_only_ever_raise_corrupt_record_error(data):
    payload = bytearray(build_batch(SAMPLE)[BATCH_HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_batch(batch_with_payload(bytes(payload), len(SAMPLE)))
    except CorruptRecordError:
        pass


def test_a_large_batch_round_trips():
    # Speed is bench/'s business (bench/codec.py); here only that 10,000 records survive intact.
    records = [Record(i, i, b"key-%d" % i, b"v" * 100, [("h", b"x")]) for i in range(10_000)]
    header, decoded = decode_batch(build_batch(records))
    assert decoded == records
