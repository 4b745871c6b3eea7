"""`__consumer_offsets` records in Kafka's layouts, and the group -> partition mapping."""

import struct

import pytest
from samsa.coordinator.classic_group import GROUP_METADATA_VALUE_VERSION, ClassicGroup
from samsa.coordinator.group_coordinator import java_string_hash, partition_for
from samsa.coordinator.offsets import OffsetAndMetadata, offset_commit_record
from samsa.wire.coordinator_record import (
    GROUP_COORDINATOR, RecordFormatError, decode_key, decode_value, encode_key, encode_value, record_type,
)
from samsa.wire.coordinator_records.group_metadata_key import GroupMetadataKey
from samsa.wire.coordinator_records.group_metadata_value import GroupMetadataValue, MemberMetadata
from samsa.wire.coordinator_records.legacy_offset_commit_key import LegacyOffsetCommitKey
from samsa.wire.coordinator_records.offset_commit_key import OffsetCommitKey
from samsa.wire.coordinator_records.offset_commit_value import OffsetCommitValue


def s16(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def offset_value(offset, metadata, commit_timestamp, leader_epoch=-1, expire_timestamp=-1) -> OffsetCommitValue:
    return OffsetCommitValue(offset=offset, metadata=metadata, commit_timestamp=commit_timestamp,
                             leader_epoch=leader_epoch, expire_timestamp=expire_timestamp)


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    return decode_value(OffsetCommitValue, value)[0]


def test_offset_commit_key_is_type_1_group_topic_partition():
    key = encode_key(OffsetCommitKey(group="g", topic="topic", partition=7))
    assert key == b"\x00\x01" + s16("g") + s16("topic") + b"\x00\x00\x00\x07"
    assert record_type(key) == 1
    assert decode_key(GROUP_COORDINATOR, key) == OffsetCommitKey("g", "topic", 7)
    # Type 0, Kafka 0.8.2's, has the same layout.
    assert decode_key(GROUP_COORDINATOR, b"\x00\x00" + key[2:]) == LegacyOffsetCommitKey("g", "topic", 7)


def test_offset_commit_value_v4_bytes():
    """Kafka 4's: flexible, the metadata a compact string, no tagged fields (no topic id)."""
    _, value = offset_commit_record("g", "t", 0, OffsetAndMetadata(42, leader_epoch=5, metadata="meta",
                                                                   commit_timestamp=1700000000000))
    assert value == (b"\x00\x04" + struct.pack(">q", 42) + struct.pack(">i", 5) + b"\x05meta"
                     + struct.pack(">q", 1700000000000) + b"\x00")


@pytest.mark.parametrize("version, body, expected", [
    (0, struct.pack(">q", 1) + s16("m") + struct.pack(">q", 100), offset_value(1, "m", 100)),
    (1, struct.pack(">q", 1) + s16("m") + struct.pack(">qq", 100, 200),
     offset_value(1, "m", 100, expire_timestamp=200)),
    (2, struct.pack(">q", 1) + s16("m") + struct.pack(">q", 100), offset_value(1, "m", 100)),
    (3, struct.pack(">qi", 1, 9) + s16("m") + struct.pack(">q", 100), offset_value(1, "m", 100, leader_epoch=9)),
    # v4: compact string (length + 1), then tagged fields (one unknown tag, skipped)
    (4, struct.pack(">qi", 1, 9) + b"\x02m" + struct.pack(">q", 100) + b"\x01\x05\x02zz",
     offset_value(1, "m", 100, leader_epoch=9)),
])
def test_offset_commit_values_of_every_version_decode(version, body, expected):
    assert decode_offset_commit_value(struct.pack(">h", version) + body) == expected


def test_an_expiring_commit_is_written_as_v1():
    offset = OffsetAndMetadata(1, metadata="", commit_timestamp=100, expire_timestamp=500)
    _, value = offset_commit_record("g", "t", 0, offset)
    assert value[:2] == b"\x00\x01"
    assert decode_offset_commit_value(value) == offset_value(1, "", 100, expire_timestamp=500)


def test_group_metadata_key_is_type_2():
    key = encode_key(GroupMetadataKey(group="my-group"))
    assert key == b"\x00\x02" + s16("my-group") and record_type(key) == 2
    assert decode_key(GROUP_COORDINATOR, key) == GroupMetadataKey("my-group")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_values_round_trip_at_every_version(version):
    member = MemberMetadata(member_id="m-1", client_id="client", client_host="/127.0.0.1", session_timeout=10_000,
                            subscription=b"sub", assignment=b"assign",
                            rebalance_timeout=30_000 if version >= 1 else -1,
                            group_instance_id="i-1" if version >= 3 else None)
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m-1",
                               current_state_timestamp=1234 if version >= 2 else -1, members=[member])
    encoded = encode_value(value, version)
    assert encoded[:2] == struct.pack(">h", version)
    assert decode_value(GroupMetadataValue, encoded) == (value, version)


def test_a_v0_member_rebalances_within_its_session_timeout():
    member = MemberMetadata(member_id="m-1", client_id="client", client_host="/127.0.0.1", session_timeout=10_000,
                            subscription=b"sub", assignment=b"assign")
    encoded = encode_value(GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                                              leader="m-1", members=[member]), 0)
    group = ClassicGroup.from_record("g", decode_value(GroupMetadataValue, encoded)[0])
    assert group.members["m-1"].rebalance_timeout_ms == 10_000


def test_group_metadata_value_v3_bytes_for_an_empty_group():
    value = encode_value(GroupMetadataValue(protocol_type="consumer", generation=2, protocol=None, leader=None,
                                            current_state_timestamp=99), GROUP_METADATA_VALUE_VERSION)
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
