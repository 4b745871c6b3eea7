"""Coordinator records: wire/coordinator_record.py frames the generated codecs (of Kafka's own
schemas, read from its jars; their freshness test is in test_messages.py) as Kafka's
CoordinatorRecordSerde does."""

from __future__ import annotations

import struct

import pytest

from samsa.wire.coordinator_record import (
    GROUP_COORDINATOR, SHARE_COORDINATOR, TRANSACTION_COORDINATOR, CoordinatorRecord, RecordFormatError,
    decode_key, decode_record, decode_value, encode_record, record_classes, record_type,
)
from samsa.wire.coordinator_records import RECORD_TYPES
from samsa.wire.coordinator_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from samsa.wire.coordinator_records.consumer_group_metadata_value import ConsumerGroupMetadataValue
from samsa.wire.coordinator_records.offset_commit_value import OffsetCommitValue

def test_every_record_type_has_its_key_and_value():
    assert {0, 1, 2, 3, 8} <= set(RECORD_TYPES[GROUP_COORDINATOR])
    assert set(RECORD_TYPES[TRANSACTION_COORDINATOR]) == {0}
    for coordinator, types in RECORD_TYPES.items():
        for record_type_, _ in types.items():
            key_class, value_class = record_classes(coordinator, record_type_)
            assert key_class.API_KEY == value_class.API_KEY == record_type_
            assert (key_class.MESSAGE_TYPE, value_class.MESSAGE_TYPE) == ("coordinator-key", "coordinator-value")
    assert record_classes(SHARE_COORDINATOR, 0)[0].__name__ == "ShareSnapshotKey"


def test_a_key_is_its_record_type_then_the_key_at_version_0():
    record = CoordinatorRecord(ConsumerGroupMetadataKey(group_id="g"), ConsumerGroupMetadataValue(epoch=5))
    key, value = encode_record(record)
    assert key == b"\x00\x03" + b"\x00\x01g" and record_type(key) == 3
    assert value == b"\x00\x00" + (5).to_bytes(4, "big") + b"\x00"  # version 0, Epoch, no tagged fields
    assert decode_record(GROUP_COORDINATOR, key, value) == record
    assert decode_record(GROUP_COORDINATOR, key, None) == CoordinatorRecord(record.key, None)


def test_unknown_tagged_fields_of_newer_kafkas_are_skipped():
    value = b"\x00\x04" + struct.pack(">qi", 1, 9) + b"\x02m" + struct.pack(">q", 100) + b"\x01\x05\x02zz"
    decoded, version = decode_value(OffsetCommitValue, value)
    assert version == 4
    assert (decoded.offset, decoded.leader_epoch, decoded.metadata, decoded.commit_timestamp) == (1, 9, "m", 100)


@pytest.mark.parametrize("key", [b"", b"\x00", b"\x00\x63\x00\x01g", b"\x00\x03\x00\x05g"])
def test_malformed_or_unknown_keys_are_refused(key):
    with pytest.raises(RecordFormatError):
        decode_key(GROUP_COORDINATOR, key)


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x00\x03\x00", b"\x00\x09" + b"\x00" * 30])
def test_malformed_values_are_refused(bad):
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitValue, bad)
