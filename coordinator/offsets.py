"""Committed offsets, by group, topic and partition (the store of Kafka's OffsetMetadataManager).

The offsets of a group live apart from the group object: a group's metadata record and its offset
records are separate keys of `__consumer_offsets`, and a group can be replaced (reloaded, deleted)
without touching its offsets. This module keeps the map, converts to and from the records, and
decides which offsets have expired; the request logic is in GroupCoordinator.

Offsets committed in a transaction (TxnOffsetCommit) are pending, by producer id, until the
transaction's marker: COMMIT makes them committed, unless a plain commit of the same partition
came later in the log; ABORT drops them. Writes are numbered in log order for that comparison (what
Kafka's recordOffset does).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..wire.coordinator_record import GROUP_COORDINATOR, decode_key, decode_value, encode_key, encode_value
from ..wire.coordinator_records.offset_commit_key import OffsetCommitKey
from ..wire.coordinator_records.offset_commit_value import OffsetCommitValue
from .actions import Record
from .group import Group

# The record types of offset commits: Kafka 0.8.2's (LegacyOffsetCommitKey) and every later one's
# (OffsetCommitKey). Their keys are alike, and so are the values of both (OffsetCommitValue v0 is
# LegacyOffsetCommitValue).
OFFSET_COMMIT_RECORD_TYPES = (0, OffsetCommitKey.API_KEY)


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1  # -1: unknown
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: the group's retention applies (no OffsetCommit v2-v4 retention time)

    def to_record_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(offset=self.offset, leader_epoch=self.leader_epoch, metadata=self.metadata,
                                 commit_timestamp=self.commit_timestamp, expire_timestamp=self.expire_timestamp)

    @property
    def record_version(self) -> int:
        """v4 (Kafka 4's, flexible, with the topic id OffsetCommit v10+ gives: none from the versions
        Samsa serves), or v1 when the commit expires at a time the client chose (Kafka's choice too)."""
        return 1 if self.expire_timestamp >= 0 else 4

    @classmethod
    def from_record_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp)


def offset_commit_record(group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> Record:
    return (encode_key(OffsetCommitKey(group=group_id, topic=topic, partition=partition)),
            encode_value(offset.to_record_value(), offset.record_version))


def offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return encode_key(OffsetCommitKey(group=group_id, topic=topic, partition=partition)), None


_Key = tuple[str, str, int]  # group, topic, partition


class OffsetMetadataManager:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Producer id -> (group, topic, partition) -> (write order, offset): open transactions' offsets.
        self._pending: dict[int, dict[_Key, tuple[int, OffsetAndMetadata]]] = {}
        self._open_txns_by_group: dict[str, set[int]] = {}
        self._write_order = itertools.count()
        self._written_at: dict[_Key, int] = {}  # when each committed offset was written

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get(topic, {}).get(partition)

    def group_offsets(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        """topic -> partition -> offset; empty for a group without offsets. Not to be mutated."""
        return self._offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._offsets

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._offsets))

    def put(self, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata,
            written_at: int | None = None) -> None:
        self._offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset
        self._written_at[(group_id, topic, partition)] = next(self._write_order) if written_at is None else written_at

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        """Delete the offset (a tombstone), and any an open transaction holds for the partition."""
        self._written_at.pop((group_id, topic, partition), None)
        for producer_id in self._open_txns_by_group.get(group_id, ()):
            self._pending.get(producer_id, {}).pop((group_id, topic, partition), None)
        topics = self._offsets.get(group_id)
        if topics is None or topics.get(topic, {}).pop(partition, None) is None:
            return False
        if not topics[topic]:
            del topics[topic]
            if not topics:
                del self._offsets[group_id]
        return True

    def remove_group(self, group_id: str) -> int:
        """Drop the group's offsets, pending ones included; returns how many were committed."""
        topics = self._offsets.pop(group_id, {})
        for topic, partitions in topics.items():
            for partition in partitions:
                self._written_at.pop((group_id, topic, partition), None)
        for producer_id in self._open_txns_by_group.pop(group_id, set()):
            pending = self._pending.get(producer_id, {})
            for key in [key for key in pending if key[0] == group_id]:
                del pending[key]
        return sum(len(partitions) for partitions in topics.values())

    def partitions_of(self, group_id: str) -> list[tuple[str, int]]:
        """The partitions the group has an offset for, committed or pending."""
        committed = [(topic, partition) for topic, partitions in self.group_offsets(group_id).items()
                     for partition in partitions]
        pending = {(topic, partition) for producer_id in self._open_txns_by_group.get(group_id, ())
                   for g, topic, partition in self._pending.get(producer_id, {}) if g == group_id}
        return committed + sorted(pending - set(committed))

    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        """One offset commit record, in log order: a later record replaces, a tombstone deletes
        (pending offsets of the partition too); a transactional one (`producer_id`) is pending."""
        k = decode_key(GROUP_COORDINATOR, key)
        if value is None:
            self.remove(k.group, k.topic, k.partition)
            return
        offset = OffsetAndMetadata.from_record_value(decode_value(OffsetCommitValue, value)[0])
        if producer_id >= 0:
            self.put_pending(producer_id, k.group, k.topic, k.partition, offset)
        else:
            self.put(k.group, k.topic, k.partition, offset)

    # -- offsets of open transactions
    def put_pending(self, producer_id: int, group_id: str, topic: str, partition: int,
                    offset: OffsetAndMetadata) -> None:
        self._pending.setdefault(producer_id, {})[(group_id, topic, partition)] = (next(self._write_order), offset)
        self._open_txns_by_group.setdefault(group_id, set()).add(producer_id)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return any((group_id, topic, partition) in self._pending.get(producer_id, {})
                   for producer_id in self._open_txns_by_group.get(group_id, ()))

    def has_open_transactions(self, group_id: str) -> bool:
        return bool(self._open_txns_by_group.get(group_id))

    def complete_transaction(self, producer_id: int, commit: bool,
                             group_filter: Callable[[str], bool] = lambda group_id: True) -> list[str]:
        """The transaction's marker: its pending offsets of the groups `group_filter` accepts are
        committed (or dropped, for ABORT). Returns the groups that gained committed offsets."""
        pending = self._pending.get(producer_id)
        if not pending:
            return []
        done = [key for key in pending if group_filter(key[0])]
        committed_groups = []
        for key in done:
            written_at, offset = pending.pop(key)
            group_id = key[0]
            if commit and self._written_at.get(key, -1) < written_at:
                self.put(*key, offset, written_at=written_at)
                committed_groups.append(group_id)
        if not pending:
            del self._pending[producer_id]
        for group_id in {key[0] for key in done}:
            if not any(key[0] == group_id for key in pending):
                open_txns = self._open_txns_by_group.get(group_id, set())
                open_txns.discard(producer_id)
                if not open_txns:
                    self._open_txns_by_group.pop(group_id, None)
        return sorted(set(committed_groups))

    def expired(self, group: Group, now_ms: int, retention_ms: int) -> tuple[list[tuple[str, int]], bool]:
        """(the offsets of `group` that have expired, whether that is all of them), as Kafka's
        cleanupExpiredOffsets: offsets of topics the group consumes never expire; a group without
        offsets counts as all expired, so that an empty one can go."""
        offsets = self._offsets.get(group.group_id)
        if offsets is None:
            return [], True
        condition = group.offset_expiration_condition()
        if condition is None:
            return [], False
        expired = []
        all_expired = True
        for topic, partitions in offsets.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for partition, offset in partitions.items():
                # An offset a transaction is about to replace does not expire yet.
                if (condition.is_expired(offset, now_ms, retention_ms)
                        and not self.has_pending(group.group_id, topic, partition)):
                    expired.append((topic, partition))
                else:
                    all_expired = False
        # A group with open transactions stays.
        return expired, all_expired and not self.has_open_transactions(group.group_id)
