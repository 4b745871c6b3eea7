"""The records of `__share_group_state`: Kafka's ShareSnapshot and ShareUpdate keys and values (the
generated codecs of wire/coordinator_records/), so Kafka's tools read them and a log directory moves
between the two; and ShareGroupOffset, the state of one share partition they carry (Kafka's
ShareGroupOffset and ShareCoordinatorRecordHelpers).

A ShareSnapshot holds a share partition's whole state; a ShareUpdate only the batches one write
changed, to be combined with the snapshot before it. A tombstone (of a ShareSnapshot key) forgets
the partition. Values are written at v0, the only version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..wire import coordinator_record
from ..wire.coordinator_record import SHARE_COORDINATOR, RecordFormatError
from ..wire.coordinator_records.share_snapshot_key import ShareSnapshotKey
from ..wire.coordinator_records.share_snapshot_value import ShareSnapshotValue
from ..wire.coordinator_records.share_update_key import ShareUpdateKey
from ..wire.coordinator_records.share_update_value import ShareUpdateValue
from .actions import Record
from .share_state import PersisterStateBatch

__all__ = ["SharePartitionKey", "ShareGroupOffset", "ShareRecord", "snapshot_record", "update_record",
           "tombstone_record", "read_record", "UNINITIALIZED_DELIVERY_COMPLETE_COUNT"]

VALUE_VERSION = 0
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1


class SharePartitionKey(NamedTuple):
    """A share partition: the group and the topic partition it consumes (Kafka's SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareGroupOffset:
    """A share partition's state as the coordinator keeps it. The timestamps are a snapshot's (0 for
    the state an update alone made)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    state_batches: tuple[PersisterStateBatch, ...] = field(default=())
    create_timestamp: int = 0
    write_timestamp: int = 0

    def but(self, **changes) -> ShareGroupOffset:
        return replace(self, **changes)


class ShareRecord(NamedTuple):
    key: SharePartitionKey
    snapshot: bool  # a ShareSnapshot (or its tombstone), else a ShareUpdate
    value: ShareGroupOffset | None  # None: a tombstone


def _wire_batches(cls, batches) -> list:
    return [cls(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                delivery_count=b.delivery_count) for b in batches]


def _batches(wire_batches) -> tuple[PersisterStateBatch, ...]:
    return tuple(PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in wire_batches)


def snapshot_record(key: SharePartitionKey, offset: ShareGroupOffset) -> Record:
    """Kafka's newShareSnapshotRecord."""
    return (coordinator_record.encode_key(ShareSnapshotKey(group_id=key.group_id, topic_id=key.topic_id,
                                                           partition=key.partition)),
            coordinator_record.encode_value(ShareSnapshotValue(
                snapshot_epoch=offset.snapshot_epoch, state_epoch=offset.state_epoch,
                leader_epoch=offset.leader_epoch, start_offset=offset.start_offset,
                delivery_complete_count=offset.delivery_complete_count,
                create_timestamp=offset.create_timestamp, write_timestamp=offset.write_timestamp,
                state_batches=_wire_batches(ShareSnapshotValue.StateBatch, offset.state_batches)), VALUE_VERSION))


def update_record(key: SharePartitionKey, offset: ShareGroupOffset) -> Record:
    """Kafka's newShareUpdateRecord: no state epoch, no timestamps."""
    return (coordinator_record.encode_key(ShareUpdateKey(group_id=key.group_id, topic_id=key.topic_id,
                                                         partition=key.partition)),
            coordinator_record.encode_value(ShareUpdateValue(
                snapshot_epoch=offset.snapshot_epoch, leader_epoch=offset.leader_epoch,
                start_offset=offset.start_offset, delivery_complete_count=offset.delivery_complete_count,
                state_batches=_wire_batches(ShareUpdateValue.StateBatch, offset.state_batches)), VALUE_VERSION))


def tombstone_record(key: SharePartitionKey) -> Record:
    """Kafka's newShareStateTombstoneRecord."""
    return (coordinator_record.encode_key(ShareSnapshotKey(group_id=key.group_id, topic_id=key.topic_id,
                                                           partition=key.partition)), None)


def read_record(key: bytes, value: bytes | None) -> ShareRecord:
    """The share partition and the state a record carries; RecordFormatError for a key or value of an
    unknown type, version or layout (and for a ShareUpdate tombstone, which Kafka never writes)."""
    record = coordinator_record.decode_record(SHARE_COORDINATOR, key, value)
    k = record.key
    share_key = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    v = record.value
    if isinstance(k, ShareSnapshotKey):
        if v is None:
            return ShareRecord(share_key, True, None)
        return ShareRecord(share_key, True, ShareGroupOffset(
            v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count,
            _batches(v.state_batches), v.create_timestamp, v.write_timestamp))
    if v is None:
        raise RecordFormatError(f"a ShareUpdate tombstone for {share_key}")
    # ShareGroupOffset.fromRecord(ShareUpdateValue): state epoch 0, no timestamps.
    return ShareRecord(share_key, False, ShareGroupOffset(
        v.snapshot_epoch, 0, v.leader_epoch, v.start_offset, v.delivery_complete_count, _batches(v.state_batches)))
