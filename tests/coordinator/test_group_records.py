"""`__consumer_offsets` records in Kafka's layouts, and the group -> partition mapping."""

import struct

import pytest
from samsa.coordinator.group_coordinator import java_string_hash, partition_for
from samsa.coordinator.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_commit_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    key_type,
)


def s16(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_commit_key_is_version_1_group_topic_partition():
    key = encode_offset_commit_key(OffsetCommitKey("g", "topic", 7))
    assert key == b"\x00\x01" + s16("g") + s16("topic") + b"\x00\x00\x00\x07"
    assert key_type(key) == 1
    assert decode_offset_commit_key(key) == OffsetCommitKey("g", "topic", 7)
    assert decode_offset_commit_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", "topic", 7)  # v0


def test_offset_commit_value_v3_bytes():
    value = encode_offset_commit_value(OffsetCommitValue(42, "meta", 1700000000000, leader_epoch=5))
    assert value == (b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 5) + s16("meta")
                     + struct.pack(">q", 1700000000000))


@pytest.mark.parametrize("version, body, expected", [
    (0, struct.pack(">q", 1) + s16("m") + struct.pack(">q", 100), OffsetCommitValue(1, "m", 100)),
    (1, struct.pack(">q", 1) + s16("m") + struct.pack(">qq", 100, 200),
     OffsetCommitValue(1, "m", 100, expire_timestamp=200)),
    (2, struct.pack(">q", 1) + s16("m") + struct.pack(">q", 100), OffsetCommitValue(1, "m", 100)),
    (3, struct.pack(">qi", 1, 9) + s16("m") + struct.pack(">q", 100), OffsetCommitValue(1, "m", 100, leader_epoch=9)),
    # v4: compact string (length + 1), then tagged fields (one unknown tag, skipped)
    (4, struct.pack(">qi", 1, 9) + b"\x02m" + struct.pack(">q", 100) + b"\x01\x05\x02zz",
     OffsetCommitValue(1, "m", 100, leader_epoch=9)),
])
def test_offset_commit_values_of_every_version_decode(version, body, expected):
    assert decode_offset_commit_value(struct.pack(">h", version) + body) == expected


def test_an_expiring_commit_is_written_as_v1():
    value = OffsetCommitValue(1, "", 100, expire_timestamp=500)
    assert encode_offset_commit_value(value)[:2] == b"\x00\x01"
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


def test_group_metadata_key_is_version_2():
    key = encode_group_metadata_key(GroupMetadataKey("my-group"))
    assert key == b"\x00\x02" + s16("my-group") and key_type(key) == 2
    assert decode_group_metadata_key(key) == GroupMetadataKey("my-group")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_values_round_trip_at_every_version(version):
    member = MemberMetadataValue("m-1", "client", "/127.0.0.1", 10_000, b"sub", b"assign",
                                 rebalance_timeout=30_000 if version >= 1 else 10_000,
                                 group_instance_id="i-1" if version >= 3 else None)
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 1234 if version >= 2 else -1, [member])
    encoded = encode_group_metadata_value(value, version)
    assert encoded[:2] == struct.pack(">h", version)
    assert decode_group_metadata_value(encoded) == value


def test_group_metadata_value_v3_bytes_for_an_empty_group():
    value = encode_group_metadata_value(GroupMetadataValue("consumer", 2, None, None, 99, []))
    assert value == (b"\x00\x03" + s16("consumer") + struct.pack(">i", 2) + b"\xff\xff" + b"\xff\xff"
                     + struct.pack(">q", 99) + struct.pack(">i", 0))


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x00\x03\x00", b"\x00\x09" + b"\x00" * 30])
def test_malformed_values_are_refused(bad):
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(bad)


def test_java_string_hash_code():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00  # two UTF-16 code units
    assert java_string_hash("consumer-group-with-a-long-name") == _java_hash_reference("consumer-group-with-a-long-name")


def _java_hash_reference(s: str) -> int:
    h = 0
    for ch in s:
        h = (h * 31 + ord(ch)) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def test_partition_for_uses_kafkas_utils_abs():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # abs(Integer.MIN_VALUE) is 0 in Kafka's Utils.abs
    negative = next(g for g in (f"consumer-group-{i}" for i in range(1000)) if java_string_hash(g) < 0)
    assert partition_for(negative, 50) == -java_string_hash(negative) % 50
