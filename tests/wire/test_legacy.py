import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from samsa.wire.compression import CompressionType, compress, decompress, xxh32
from samsa.wire.exceptions import CorruptRecordError, DecompressionError, UnsupportedVersionError
from samsa.wire.legacy import (
    NO_TIMESTAMP_TYPE, LegacyMessage, UnsupportedCompressionTypeError, build_message_set, down_convert,
    iter_entries, iter_messages, unwrap, up_convert,
)
from samsa.wire.records import (
    CREATE_TIME, LOG_APPEND_TIME, Record, build_batch, build_control_batch, decode_batch,
)

LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]
MAGICS = [0, 1]


def entry(offset: int, magic: int, attributes: int, timestamp: int, key, value, *, crc: int | None = None) -> bytes:
    """A legacy entry written by hand from the format description, independent of the code under test."""
    def nullable(data):
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += nullable(key) + nullable(value)
    checksum = zlib.crc32(body) if crc is None else crc
    return struct.pack(">qiI", offset, 4 + len(body), checksum) + body


def msg(offset, timestamp, key, value):
    return LegacyMessage(offset, 1, 0, timestamp, key, value)


MESSAGES = [
    msg(10, 1_500_000_000_000, b"k1", b"v1"),
    msg(11, 1_500_000_000_007, None, b"null key"),
    msg(12, 1_499_999_999_999, b"null value", None),
    msg(13, 1_500_000_000_003, b"", b""),
]


def plain(messages, magic):
    """(offset, timestamp, key, value) as a reader of format `magic` sees them."""
    return [(m.offset, m.timestamp if magic else -1, m.key, m.value) for m in messages]


# --- layout --------------------------------------------------------------------------------------

def test_hand_built_layouts_match():
    assert build_message_set([msg(5, 77, b"k", b"val")], magic=0) == entry(5, 0, 0, -1, b"k", b"val")
    assert build_message_set([msg(5, 77, None, b"val")], magic=1) == entry(5, 1, 0, 77, None, b"val")
    assert entry(5, 0, 0, -1, b"k", b"val").hex() == (
        "0000000000000005" "00000012" f"{zlib.crc32(bytes.fromhex('0000000000016b0000000376616c')):08x}"
        "00" "00" "00000001" "6b" "00000003" "76616c"
    )


def test_reads_hand_built_messages():
    stream = entry(3, 0, 0, -1, None, b"a") + entry(4, 1, 0, 1234, b"k", None) + entry(5, 1, 0x08, 99, b"", b"")
    assert list(iter_messages(stream)) == [
        LegacyMessage(3, 0, 0, -1, None, b"a"),
        LegacyMessage(4, 1, 0, 1234, b"k", None),
        LegacyMessage(5, 1, 0x08, 99, b"", b""),
    ]
    assert [m.timestamp_type for m in iter_messages(stream)] == [NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME]


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_round_trip(magic, codec):
    stream = build_message_set(MESSAGES, magic=magic, compression=codec)
    read = list(iter_messages(stream))
    assert plain(read, magic) == plain(MESSAGES, magic)
    assert {m.magic for m in read} == {magic}
    entries = list(iter_entries(stream))
    assert len(entries) == (1 if codec else len(MESSAGES))
    assert entries[-1].compression == codec


def test_v1_wrapper_holds_relative_inner_offsets():
    stream = build_message_set(MESSAGES, magic=1, compression=CompressionType.GZIP)
    [wrapper] = iter_entries(stream)
    assert wrapper.offset == 13  # the last inner offset
    assert wrapper.timestamp == 1_500_000_000_007  # the largest inner timestamp
    assert wrapper.key is None
    inner = list(iter_entries(decompress(CompressionType.GZIP, wrapper.value)))
    assert [m.offset for m in inner] == [0, 1, 2, 3]


def test_v0_wrapper_holds_absolute_inner_offsets():
    stream = build_message_set(MESSAGES, magic=0, compression=CompressionType.SNAPPY)
    [wrapper] = iter_entries(stream)
    inner = list(iter_entries(decompress(CompressionType.SNAPPY, wrapper.value)))
    assert wrapper.offset == 13 and [m.offset for m in inner] == [10, 11, 12, 13]


def wrap(inner_set: bytes, *, offset: int, magic: int = 1, codec=CompressionType.GZIP, timestamp: int = 0,
         type_bit: int = 0) -> bytes:
    return entry(offset, magic, codec | type_bit, timestamp, None, compress(codec, inner_set))


def test_wrapper_offset_zero_means_inner_offsets_as_they_are():
    inner = entry(0, 1, 0, 5, None, b"a") + entry(1, 1, 0, 6, None, b"b")
    assert [m.offset for m in iter_messages(wrap(inner, offset=0))] == [0, 1]
    assert [m.offset for m in iter_messages(wrap(inner, offset=41))] == [40, 41]


def test_wrapper_offset_below_last_inner_offset_is_corrupt():
    inner = entry(0, 1, 0, 5, None, b"a") + entry(2, 1, 0, 6, None, b"b")
    with pytest.raises(CorruptRecordError):
        list(iter_messages(wrap(inner, offset=1)))


def test_log_append_time_wrapper_gives_its_timestamp_to_inner_messages():
    inner = entry(0, 1, 0, 5, None, b"a") + entry(1, 1, 0, 6, None, b"b")
    read = list(iter_messages(wrap(inner, offset=1, timestamp=999, type_bit=0x08)))
    assert [(m.timestamp, m.timestamp_type) for m in read] == [(999, LOG_APPEND_TIME)] * 2
    create_time = list(iter_messages(wrap(inner, offset=1, timestamp=999)))
    assert [(m.timestamp, m.timestamp_type) for m in create_time] == [(5, CREATE_TIME), (6, CREATE_TIME)]


def test_build_with_log_append_time():
    stream = build_message_set(MESSAGES, magic=1, compression=CompressionType.LZ4,
                               timestamp_type=LOG_APPEND_TIME, log_append_time=4242)
    [wrapper] = iter_entries(stream)
    assert wrapper.attributes == CompressionType.LZ4 | 0x08 and wrapper.timestamp == 4242
    assert {(m.timestamp, m.timestamp_type) for m in iter_messages(stream)} == {(4242, LOG_APPEND_TIME)}


def test_magic_0_lz4_uses_the_old_header_checksum():
    stream = build_message_set(MESSAGES, magic=0, compression=CompressionType.LZ4)
    [wrapper] = iter_entries(stream)
    frame = wrapper.value
    assert frame[6] == (xxh32(frame[:6]) >> 8) & 0xFF
    assert plain(iter_messages(stream), 0) == plain(MESSAGES, 0)


def test_build_refuses_zstd_and_other_magics():
    with pytest.raises(UnsupportedCompressionTypeError):
        build_message_set(MESSAGES, magic=1, compression=CompressionType.ZSTD)
    with pytest.raises(UnsupportedVersionError):
        build_message_set(MESSAGES, magic=2)


# --- differential: kafka-python ------------------------------------------------------------------

def build_with_kafka_python(magic, codec, messages) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for m in messages:
        assert builder.append(m.offset, timestamp=m.timestamp, key=m.key, value=m.value) is not None
    return bytes(builder.build())


def read_with_kafka_python(buf) -> list[tuple]:
    rows = []
    for batch in MemoryRecords(bytes(buf)):
        assert batch.validate_crc()
        rows.extend((r.offset, r.timestamp if r.timestamp is not None else -1, r.key, r.value) for r in batch)
    return rows


# kafka-python needs the xxhash package for magic 0 lz4, which is not installed; our own tests
# above cover that checksum.
KAFKA_PYTHON_CASES = [(m, c) for m in MAGICS for c in LEGACY_CODECS if (m, c) != (0, CompressionType.LZ4)]
ZERO_BASED = [m._replace(offset=i) for i, m in enumerate(MESSAGES)]


@pytest.mark.parametrize("magic, codec", KAFKA_PYTHON_CASES)
def test_kafka_python_message_sets_read(magic, codec):
    # kafka-python writes one message per builder when uncompressed, or one wrapper (offset 0).
    if codec:
        stream = build_with_kafka_python(magic, codec, ZERO_BASED)
    else:
        stream = b"".join(build_with_kafka_python(magic, codec, [m]) for m in ZERO_BASED)
    assert plain(iter_messages(stream), magic) == plain(ZERO_BASED, magic)


@pytest.mark.parametrize("magic, codec", KAFKA_PYTHON_CASES)
def test_our_message_sets_read_with_kafka_python(magic, codec):
    stream = build_message_set(MESSAGES, magic=magic, compression=codec)
    assert read_with_kafka_python(stream) == plain(MESSAGES, magic)


# --- corruption ----------------------------------------------------------------------------------

@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_every_bit_flip_after_the_framing_is_caught(magic, codec):
    stream = build_message_set(MESSAGES[:2], magic=magic, compression=codec)
    if not codec:
        stream = build_message_set(MESSAGES[:1], magic=magic)
    for pos in range(8, len(stream)):
        for bit in range(8):
            flipped = bytearray(stream)
            flipped[pos] ^= 1 << bit
            with pytest.raises(CorruptRecordError):
                list(iter_messages(bytes(flipped)))


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_truncation_at_every_position(magic, codec):
    stream = build_message_set(MESSAGES if codec else MESSAGES[:1], magic=magic, compression=codec)
    for cut in range(1, len(stream)):
        with pytest.raises(CorruptRecordError):
            list(iter_messages(stream[:cut]))


def test_truncated_inner_message_set_is_caught():
    inner = build_message_set(MESSAGES, magic=1)
    for cut in (1, 11, 12, 30, len(inner) - 1):
        with pytest.raises(CorruptRecordError):
            list(iter_messages(wrap(inner[:cut], offset=3)))


@pytest.mark.parametrize("stream", [
    entry(0, 1, 0, 0, b"k", b"v", crc=12345),  # wrong CRC
    entry(0, 2, 0, 0, b"k", b"v"),  # magic 2 is not a legacy message
    entry(0, 1, CompressionType.GZIP, 0, None, None),  # compressed wrapper without a value
    entry(0, 1, CompressionType.ZSTD, 0, None, compress(CompressionType.ZSTD, entry(0, 1, 0, 0, None, b"x"))),
    entry(0, 1, 5, 0, None, b"x"),  # unknown codec
    wrap(b"", offset=0),  # wrapper around nothing
    wrap(build_message_set(MESSAGES, magic=1, compression=CompressionType.GZIP), offset=5),  # nested compression
    wrap(entry(0, 0, 0, 0, None, b"x"), offset=0, magic=1),  # inner magic differs from the wrapper's
    wrap(entry(0, 1, 0, 0, None, b"x"), offset=0, codec=CompressionType.SNAPPY)[:-3] + b"abc",  # bad CRC again
    struct.pack(">qi", 0, -4) + bytes(20),  # negative size
    struct.pack(">qi", 0, 10) + bytes(10),  # smaller than any message
])
def test_malformed_message_sets(stream):
    with pytest.raises(CorruptRecordError):
        list(iter_messages(stream))


def with_valid_crc(offset: int, body: bytes) -> bytes:
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("body", [
    b"\x01\x00" + bytes(8) + struct.pack(">i", -2) + struct.pack(">i", 0),  # key length -2
    b"\x01\x00" + bytes(8) + struct.pack(">i", -1) + struct.pack(">i", 5) + b"abc",  # value past the end
    b"\x01\x00" + bytes(8) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"ab",  # bytes after the value
    b"\x00\x00" + struct.pack(">i", 100) + bytes(8),  # key past the end (magic 0)
])
def test_malformed_messages_behind_a_valid_crc(body):
    with pytest.raises(CorruptRecordError):
        list(iter_messages(with_valid_crc(0, body)))


def test_bomb_inside_a_wrapper_is_refused():
    inner = build_message_set([msg(0, 0, None, bytes(4 * 1024 * 1024))], magic=1)
    with pytest.raises(DecompressionError):
        list(iter_messages(wrap(inner, offset=0), max_decompressed=1024 * 1024))


def test_unwrap_of_a_plain_message_is_itself():
    [message] = iter_entries(entry(7, 1, 0, 1, b"k", b"v"))
    assert unwrap(message) == [message]


# --- up-conversion -------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_up_convert_magic_1_keeps_timestamps_and_codec(codec):
    batch = up_convert(build_message_set(MESSAGES, magic=1, compression=codec))
    header, records = decode_batch(batch)
    assert header.compression == codec
    assert header.timestamp_type == CREATE_TIME
    assert (header.producer_id, header.base_sequence, header.is_transactional) == (-1, -1, False)
    assert header.base_timestamp == MESSAGES[0].timestamp
    assert header.max_timestamp == max(m.timestamp for m in MESSAGES)
    assert [(header.record_offset(r), header.record_timestamp(r), r.key, r.value, r.headers) for r in records] == [
        (i, m.timestamp, m.key, m.value, []) for i, m in enumerate(MESSAGES)
    ]


def test_up_convert_magic_0_has_no_timestamps():
    header, records = decode_batch(up_convert(build_message_set(MESSAGES, magic=0, compression=CompressionType.GZIP)))
    assert header.base_timestamp == header.max_timestamp == -1
    assert {r.timestamp_delta for r in records} == {0}
    assert [(r.key, r.value) for r in records] == [(m.key, m.value) for m in MESSAGES]


def test_up_convert_with_another_codec_and_several_wrappers():
    stream = (build_message_set(MESSAGES[:2], magic=1, compression=CompressionType.SNAPPY)
              + build_message_set(MESSAGES[2:3], magic=1)
              + build_message_set(MESSAGES[3:], magic=1, compression=CompressionType.GZIP))
    header, records = decode_batch(up_convert(stream, compression=CompressionType.ZSTD))
    assert header.compression == CompressionType.ZSTD
    assert [r.offset_delta for r in records] == [0, 1, 2, 3]
    assert [(r.key, r.value) for r in records] == [(m.key, m.value) for m in MESSAGES]
    assert decode_batch(up_convert(stream))[0].compression == CompressionType.SNAPPY


def test_up_convert_of_nothing():
    assert up_convert(b"") == b""


@pytest.mark.parametrize("magic, codec", KAFKA_PYTHON_CASES)
def test_up_convert_kafka_python_message_sets(magic, codec):
    stream = build_with_kafka_python(magic, codec, ZERO_BASED) if codec else b"".join(
        build_with_kafka_python(magic, codec, [m]) for m in ZERO_BASED)
    header, records = decode_batch(up_convert(stream))
    assert [(header.record_timestamp(r), r.key, r.value) for r in records] == [
        (m.timestamp if magic else -1, m.key, m.value) for m in ZERO_BASED
    ]


# --- down-conversion -----------------------------------------------------------------------------

V2_RECORDS = [
    Record(0, 0, b"k0", b"v0", [("dropped", b"header")]),
    Record(1, 10, None, b"v1", []),
    Record(2, 5, b"k2", None, []),
]


def v2(codec=CompressionType.NONE, base_offset=100, **kwargs) -> bytes:
    return build_batch(V2_RECORDS, base_offset=base_offset, compression=codec, base_timestamp=2_000, **kwargs)


EXPECTED_V1 = [(100, 2_000, b"k0", b"v0"), (101, 2_010, None, b"v1"), (102, 2_005, b"k2", None)]


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_down_convert(magic, codec):
    converted = down_convert(v2(codec), magic)
    expected = [(o, t if magic else -1, k, v) for o, t, k, v in EXPECTED_V1]
    assert plain(iter_messages(converted), magic) == expected
    entries = list(iter_entries(converted))
    if codec:
        [wrapper] = entries
        assert (wrapper.compression, wrapper.offset, wrapper.magic) == (codec, 102, magic)
    else:
        assert [(e.compression, e.magic) for e in entries] == [(0, magic)] * 3
    if (magic, codec) != (0, CompressionType.LZ4):
        assert read_with_kafka_python(converted) == expected


def test_down_convert_keeps_log_append_time():
    converted = down_convert(v2(CompressionType.GZIP, timestamp_type=LOG_APPEND_TIME, max_timestamp=9_999), 1)
    [wrapper] = iter_entries(converted)
    assert wrapper.timestamp_type == LOG_APPEND_TIME and wrapper.timestamp == 9_999
    assert {(m.timestamp, m.timestamp_type) for m in iter_messages(converted)} == {(9_999, LOG_APPEND_TIME)}


def test_down_convert_skips_control_batches_and_a_partial_tail():
    data = v2(base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = build_control_batch("COMMIT", 7, 0, 1, base_offset=3, timestamp=5)
    later = v2(CompressionType.SNAPPY, base_offset=4)
    stream = data + marker + later
    converted = down_convert(stream + later[:40], 1)
    assert [m.offset for m in iter_messages(converted)] == [0, 1, 2, 4, 5, 6]
    assert down_convert(stream + later[:10], 1) == converted


def test_down_convert_drops_records_before_the_fetch_offset_of_uncompressed_batches_only():
    assert [m.offset for m in iter_messages(down_convert(v2(), 1, first_offset=101))] == [101, 102]
    assert [m.offset for m in iter_messages(down_convert(v2(CompressionType.GZIP), 1, first_offset=101))] \
        == [100, 101, 102]
    assert down_convert(v2(), 1, first_offset=500) == b""


def test_down_convert_refuses_zstd():
    with pytest.raises(UnsupportedCompressionTypeError):
        down_convert(v2(CompressionType.ZSTD), 1)


def test_down_convert_checks_the_batches():
    corrupt = bytearray(v2())
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        down_convert(bytes(corrupt), 1)
    with pytest.raises(UnsupportedVersionError):
        down_convert(v2(), 2)


def test_down_convert_passes_older_entries_and_converts_newer_legacy_ones():
    v0 = build_message_set(MESSAGES[:2], magic=0, compression=CompressionType.GZIP)
    v1 = build_message_set(MESSAGES[2:], magic=1)
    assert down_convert(v0 + v1, 1) == v0 + v1
    converted = down_convert(v0 + v1, 0)
    assert converted.startswith(v0)
    assert {m.magic for m in iter_messages(converted)} == {0}
    assert plain(iter_messages(converted), 0) == plain(MESSAGES, 0)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_down_then_up_conversion_keeps_the_data(codec):
    header, records = decode_batch(up_convert(down_convert(v2(codec), 1)))
    assert [(header.record_timestamp(r), r.key, r.value) for r in records] == [
        (t, k, v) for _, t, k, v in EXPECTED_V1
    ]
