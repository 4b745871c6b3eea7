"""KRaft metadata records: wire/metadata_record.py frames the generated codecs (of Kafka's own
schemas, from its kafka-metadata jar; their freshness test is in test_messages.py) as Kafka's
MetadataRecordSerde does."""

from __future__ import annotations

import uuid

import pytest

from samsa.wire.metadata_record import (
    MetadataRecordError, decode_metadata_record, encode_metadata_record, metadata_record_class,
)
from samsa.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from samsa.wire.metadata_records import METADATA_RECORDS
from samsa.wire.metadata_records.config_record import ConfigRecord
from samsa.wire.metadata_records.topic_record import TopicRecord


def test_every_record_type_is_indexed_by_its_api_key():
    assert {2, 3, 4, 9, 15} <= set(METADATA_RECORDS)
    for api_key in METADATA_RECORDS:
        cls = metadata_record_class(api_key)
        assert cls.API_KEY == api_key and cls.MESSAGE_TYPE == "metadata"


def test_a_value_is_frame_version_api_key_version_then_the_record():
    topic_id = uuid.UUID(int=7)
    value = encode_metadata_record(TopicRecord(name="t", topic_id=topic_id), 0)
    assert value == b"\x01\x02\x00" + b"\x02t" + topic_id.bytes + b"\x00"
    assert decode_metadata_record(value) == (TopicRecord(name="t", topic_id=topic_id), 0)
    config = ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value=None)
    assert decode_metadata_record(encode_metadata_record(config, 0)) == (config, 0)


@pytest.mark.parametrize("bad", [
    b"", b"\x01", b"\x00\x02\x00\x02t" + bytes(17),  # frame version 0: KRaft's 2.8 preview
    b"\x01\x63\x00",  # an unknown record type
    b"\x01\x02\x07\x02t" + bytes(17),  # an unknown version
    b"\x01\x02\x00\x05t",  # truncated
])
def test_what_samsa_cannot_read_is_refused(bad):
    with pytest.raises(MetadataRecordError):
        decode_metadata_record(bad)


def test_only_a_record_is_framed_as_one():
    # A data message has no api key to frame it with.
    with pytest.raises(MetadataRecordError, match="ConsumerProtocolAssignment is not a metadata record"):
        encode_metadata_record(ConsumerProtocolAssignment(), 0)
