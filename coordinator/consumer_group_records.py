"""The records a consumer group (KIP-848) writes to __consumer_offsets, as plain data.

One key and one value class per record of Kafka's group coordinator (ConsumerGroupMetadataKey and
Value, ...), with Kafka's field names, so that encoding them with Kafka's layouts is a mapping of
fields. A record with value None is a tombstone. The group's state is whatever replaying its records
in order produces (`ConsumerGroup.replay`): a heartbeat's records are replayed as they are made,
and the same records rebuild the group when __consumer_offsets is loaded at startup.

Assignments are `{topic_id: frozenset(partitions)}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple
from uuid import UUID

Assignment = Mapping[UUID, frozenset[int]]


class MemberState(IntEnum):
    """Kafka's MemberState, with its record values."""

    STABLE = 0  # reconciled with the target assignment
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before it can move to the next epoch
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for partitions others still own
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    """The metadata of the topics the group subscribes to, as the last target assignment saw it."""

    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: Assignment


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


class CoordinatorRecord(NamedTuple):
    key: object
    value: object | None  # None: a tombstone
