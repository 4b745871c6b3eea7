"""Consumer group records (consumer_group_records.py) in Kafka's `__consumer_offsets` layouts.

A key starts with its record type as an int16 (Kafka's coordinator-key api key, the "version" of
the old keys), then the key fields unflexible; a value starts with its version (0) as an int16,
then the fields in the flexible encoding (compact strings and arrays, tagged fields after every
struct). From Kafka's group-coordinator schemas as of 4.0:

    3 ConsumerGroupMetadataKey              group string
      ConsumerGroupMetadataValue            epoch int32
    4 ConsumerGroupPartitionMetadataKey     group string
      ConsumerGroupPartitionMetadataValue   topics [topic_id uuid, topic_name string, num_partitions int32,
                                                    partition_metadata [partition int32, racks [string]]]
    5 ConsumerGroupMemberMetadataKey        group string, member_id string
      ConsumerGroupMemberMetadataValue      instance_id string?, rack_id string?, client_id string,
                                            client_host string, subscribed_topic_names [string],
                                            subscribed_topic_regex string?, rebalance_timeout_ms int32,
                                            server_assignor string?
    6 ConsumerGroupTargetAssignmentMetadataKey  group string
      ConsumerGroupTargetAssignmentMetadataValue    assignment_epoch int32
    7 ConsumerGroupTargetAssignmentMemberKey    group string, member_id string
      ConsumerGroupTargetAssignmentMemberValue  topic_partitions [topic_id uuid, partitions [int32]]
    8 ConsumerGroupCurrentMemberAssignmentKey   group string, member_id string
      ConsumerGroupCurrentMemberAssignmentValue member_epoch int32, previous_member_epoch int32, state int8,
                                                assigned_partitions [topic_id uuid, partitions [int32]],
                                                partitions_pending_revocation (the same)

Tagged fields newer versions add (a metadata hash, classic member metadata, ...) are skipped when
read. Racks are not tracked: the partition metadata is written empty, as Kafka 4.0 writes it when
it knows no racks.
"""

from __future__ import annotations

from uuid import UUID

from .consumer_group_records import (
    Assignment, ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue, CoordinatorRecord,
    MemberState, TopicMetadata,
)
from .group_records import key_type
from .record_codec import RecordFormatError, RecordReader, RecordWriter

__all__ = ["CONSUMER_GROUP_RECORD_TYPES", "encode_record", "decode_record"]


_KEY_TYPES: dict[type, int] = {
    ConsumerGroupMetadataKey: 3, ConsumerGroupPartitionMetadataKey: 4, ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6, ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
}
_KEYS_BY_TYPE = {record_type: cls for cls, record_type in _KEY_TYPES.items()}
CONSUMER_GROUP_RECORD_TYPES = tuple(sorted(_KEYS_BY_TYPE))
_VALUE_VERSION = 0


class _ValueWriter(RecordWriter):
    def __init__(self) -> None:
        super().__init__(_VALUE_VERSION, flexible=True)

    def uuid(self, v: UUID) -> None:
        self.out += v.bytes

    def strings(self, values) -> None:
        self.array(len(values))
        for s in values:
            self.string(s)

    def assignment(self, assignment: Assignment) -> None:
        self.array(len(assignment))
        for topic_id, partitions in sorted(assignment.items()):
            self.uuid(topic_id)
            self.array(len(partitions))
            for p in sorted(partitions):
                self.int32(p)
            self.end_struct()


class _ValueReader(RecordReader):
    def __init__(self, data: bytes, what: str) -> None:
        super().__init__(data, what)
        if self.version != _VALUE_VERSION:
            raise RecordFormatError(f"unknown {what} version {self.version}")
        self.flexible = True

    def uuid(self) -> UUID:
        return UUID(bytes=self._take(16).tobytes())

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.array()))

    def assignment(self) -> dict[UUID, frozenset[int]]:
        result = {}
        for _ in range(self.array()):
            topic_id = self.uuid()
            result[topic_id] = frozenset(self.int32() for _ in range(self.array()))
            self.skip_tagged_fields()
        return result


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    key, value = record
    k = RecordWriter(_KEY_TYPES[type(key)], flexible=False)
    k.string(key.group_id)
    if hasattr(key, "member_id"):
        k.string(key.member_id)
    return bytes(k.out), None if value is None else _encode_value(value)


def _encode_value(value) -> bytes:
    w = _ValueWriter()
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.array(len(value.topics))
        for topic in value.topics:
            w.uuid(topic.topic_id)
            w.string(topic.topic_name)
            w.int32(topic.num_partitions)
            w.array(0)  # partition metadata: no racks
            w.end_struct()
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.strings(value.subscribed_topic_names)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        w.assignment(value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        w.assignment(value.assigned_partitions)
        w.assignment(value.partitions_pending_revocation)
    else:
        raise TypeError(f"not a consumer group record value: {value!r}")
    w.end_struct()
    return bytes(w.out)


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """A record of one of CONSUMER_GROUP_RECORD_TYPES (RecordFormatError when it is not one)."""
    cls = _KEYS_BY_TYPE.get(key_type(key))
    if cls is None:
        raise RecordFormatError(f"not a consumer group record: type {key_type(key)}")
    k = RecordReader(key, cls.__name__)
    decoded_key = cls(k.string(), k.string()) if cls in _MEMBER_KEYS else cls(k.string())
    return CoordinatorRecord(decoded_key, None if value is None else _decode_value(cls, value))


_MEMBER_KEYS = (ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                ConsumerGroupCurrentMemberAssignmentKey)


def _decode_value(key_cls: type, data: bytes):
    r = _ValueReader(data, key_cls.__name__.replace("Key", "Value"))
    if key_cls is ConsumerGroupMetadataKey:
        value = ConsumerGroupMetadataValue(r.int32())
    elif key_cls is ConsumerGroupPartitionMetadataKey:
        topics = []
        for _ in range(r.array()):
            topic_id, name, partitions = r.uuid(), r.string(), r.int32()
            for _ in range(r.array()):  # racks, not used
                r.int32()
                r.strings()
                r.skip_tagged_fields()
            r.skip_tagged_fields()
            topics.append(TopicMetadata(topic_id, name, partitions))
        value = ConsumerGroupPartitionMetadataValue(tuple(topics))
    elif key_cls is ConsumerGroupMemberMetadataKey:
        value = ConsumerGroupMemberMetadataValue(
            instance_id=r.nullable_string(), rack_id=r.nullable_string(), client_id=r.string(),
            client_host=r.string(), subscribed_topic_names=r.strings(), subscribed_topic_regex=r.nullable_string(),
            rebalance_timeout_ms=r.int32(), server_assignor=r.nullable_string())
    elif key_cls is ConsumerGroupTargetAssignmentMetadataKey:
        value = ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    elif key_cls is ConsumerGroupTargetAssignmentMemberKey:
        value = ConsumerGroupTargetAssignmentMemberValue(r.assignment())
    else:
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=r.int32(), previous_member_epoch=r.int32(), state=MemberState.from_value(r.int8()),
            assigned_partitions=r.assignment(), partitions_pending_revocation=r.assignment())
    r.skip_tagged_fields()
    return value
