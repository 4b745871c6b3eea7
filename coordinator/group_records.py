"""The records of `__consumer_offsets`: Kafka's key and value layouts, so Kafka's tools read them.

Every key and value starts with an int16 version. The key's version names the record type (Kafka
3.7+ calls it the record's api key): 0 and 1 are an offset commit (OffsetCommitKey), 2 is a classic
group's metadata (GroupMetadataKey), 3 and up are the records of KIP-848 consumer groups and later
group types, which this module does not decode (`key_type` lets their owners dispatch on them).

Layouts, from Kafka's group-coordinator schemas (OffsetCommitKey.json, OffsetCommitValue.json,
GroupMetadataKey.json, GroupMetadataValue.json); written by hand, they are small:

    OffsetCommitKey     v0, v1  group string, topic string, partition int32
    OffsetCommitValue   v0      offset int64, metadata string, commit_timestamp int64
                        v1      ... commit_timestamp int64, expire_timestamp int64
                        v2      offset int64, metadata string, commit_timestamp int64
                        v3      offset int64, leader_epoch int32, metadata string, commit_timestamp int64
                        v4      v3 in the flexible encoding (compact strings, tagged fields)
    GroupMetadataKey    v2      group string
    GroupMetadataValue  v0      protocol_type string, generation int32, protocol string?, leader string?,
                                members [member_id, client_id, client_host, session_timeout int32,
                                         subscription bytes, assignment bytes]
                        v1      members gain rebalance_timeout int32 (after client_host)
                        v2      current_state_timestamp int64 (after leader)
                        v3      members gain group_instance_id string? (after member_id)
                        v4      v3 in the flexible encoding

Values are written at the versions Kafka writes today: OffsetCommitValue v3 (v1 when the commit
carries an expire timestamp, OffsetCommit v2-v4's retention time), GroupMetadataValue v3. A value
of None is a tombstone: the key's state is deleted (and compaction eventually drops it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .record_codec import RecordFormatError, RecordReader, RecordWriter

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2

_H = struct.Struct(">h")


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only v1 carries it; -1: none


@dataclass
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1  # v1+; v0 members rebalance within their session timeout
    group_instance_id: str | None = None  # v3+


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1  # v2+
    members: list[MemberMetadataValue] = field(default_factory=list)


# --- writing --------------------------------------------------------------------------------------

def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = RecordWriter(1, False)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return bytes(w.out)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = RecordWriter(GROUP_METADATA_KEY_TYPE, False)
    w.string(key.group)
    return bytes(w.out)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v3, or v1 when the commit expires at a time the client chose (Kafka's choice too)."""
    version = 1 if value.expire_timestamp >= 0 else 3
    w = RecordWriter(version, False)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    return bytes(w.out)


def encode_group_metadata_value(value: GroupMetadataValue, version: int = 3) -> bytes:
    w = RecordWriter(version, version >= 4)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.end_struct()
    w.end_struct()
    return bytes(w.out)


# --- reading --------------------------------------------------------------------------------------

def key_type(key: bytes) -> int:
    """The record type of a key (its version): 0-1 offset commit, 2 group metadata, 3+ newer types."""
    if len(key) < 2:
        raise RecordFormatError(f"record key of {len(key)} bytes")
    return _H.unpack_from(key, 0)[0]


def decode_offset_commit_key(key: bytes) -> OffsetCommitKey:
    r = RecordReader(key, "OffsetCommitKey")
    if r.version not in OFFSET_COMMIT_KEY_TYPES:
        raise RecordFormatError(f"not an offset commit key: version {r.version}")
    return OffsetCommitKey(r.string(), r.string(), r.int32())


def decode_group_metadata_key(key: bytes) -> GroupMetadataKey:
    r = RecordReader(key, "GroupMetadataKey")
    if r.version != GROUP_METADATA_KEY_TYPE:
        raise RecordFormatError(f"not a group metadata key: version {r.version}")
    return GroupMetadataKey(r.string())


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    r = RecordReader(value, "OffsetCommitValue")
    if not 0 <= r.version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {r.version}")
    r.flexible = r.version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if r.version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if r.version == 1 else -1
    r.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    r = RecordReader(value, "GroupMetadataValue")
    version = r.version
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    group = GroupMetadataValue(r.string(), r.int32(), r.nullable_string(), r.nullable_string())
    if version >= 2:
        group.current_state_timestamp = r.int64()
    for _ in range(r.array()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        member = MemberMetadataValue(member_id, client_id, client_host, session_timeout, r.bytes_(), r.bytes_(),
                                     rebalance_timeout, instance_id)
        if member.rebalance_timeout < 0:
            member.rebalance_timeout = session_timeout
        r.skip_tagged_fields()
        group.members.append(member)
    r.skip_tagged_fields()
    return group
