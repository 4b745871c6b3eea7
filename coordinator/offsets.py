"""Committed offsets, by group, topic and partition (the store of Kafka's OffsetMetadataManager).

The offsets of a group live apart from the group object: a group's metadata record and its offset
records are separate keys of `__consumer_offsets`, and a group can be replaced (reloaded, deleted)
without touching its offsets. This module keeps the map, converts to and from the records, and
decides which offsets have expired; the request logic is in GroupCoordinator.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .actions import Record
from .group import Group
from .group_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit_key,
    decode_offset_commit_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1  # -1: unknown
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: the group's retention applies (no OffsetCommit v2-v4 retention time)

    def to_record_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(self.offset, self.metadata, self.commit_timestamp, self.leader_epoch,
                                 self.expire_timestamp)

    @classmethod
    def from_record_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp)


def offset_commit_record(group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> Record:
    return (encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)),
            encode_offset_commit_value(offset.to_record_value()))


def offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)), None


class OffsetMetadataManager:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get(topic, {}).get(partition)

    def group_offsets(self, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        """topic -> partition -> offset; empty for a group without offsets. Not to be mutated."""
        return self._offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._offsets

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._offsets))

    def put(self, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self._offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        topics = self._offsets.get(group_id)
        if topics is None or topics.get(topic, {}).pop(partition, None) is None:
            return False
        if not topics[topic]:
            del topics[topic]
            if not topics:
                del self._offsets[group_id]
        return True

    def remove_group(self, group_id: str) -> int:
        topics = self._offsets.pop(group_id, {})
        return sum(len(partitions) for partitions in topics.values())

    def partitions_of(self, group_id: str) -> list[tuple[str, int]]:
        return [(topic, partition) for topic, partitions in self.group_offsets(group_id).items()
                for partition in partitions]

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One offset commit record, in log order: a later record replaces, a tombstone deletes."""
        k = decode_offset_commit_key(key)
        if value is None:
            self.remove(k.group, k.topic, k.partition)
        else:
            self.put(k.group, k.topic, k.partition, OffsetAndMetadata.from_record_value(decode_offset_commit_value(value)))

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
                if condition.is_expired(offset, now_ms, retention_ms):
                    expired.append((topic, partition))
                else:
                    all_expired = False
        return expired, all_expired
