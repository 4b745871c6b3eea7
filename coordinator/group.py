"""What every type of group offers the shared parts of the coordinator (Kafka's `Group` interface).

The coordinator keeps groups of several types in one map by id: classic groups (JoinGroup and
SyncGroup, coordinator/classic_group.py) and, with KIP-848, consumer groups (ConsumerGroupHeartbeat) and,
with KIP-932, share groups (ShareGroupHeartbeat). Offsets, ListGroups, DeleteGroups, OffsetDelete and offset retention work on any group through this
interface only; everything that depends on how a type rebalances lives with that type.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..wire.coordinator_record import GROUP_COORDINATOR, decode_record
from ..wire.errors import ErrorCode
from .actions import Actions, Record

if TYPE_CHECKING:
    from .offsets import OffsetAndMetadata

log = logging.getLogger(__name__)


# Makes the unique part of a new member id: a random UUID on the broker (as Kafka makes them), a
# counter in tests. Injected, so that the coordinator stays deterministic.
NewMemberUuid = Callable[[], str]
# The topics among these that a request's sender may DESCRIBE.
DescribableTopics = Callable[[Iterable[str]], set[str]]
# Kafka's CommitPartitionValidator: checks one partition of an offset commit, (topic, partition),
# raising GroupError if the member may not commit it (a member committing at an older epoch).
CommitPartitionValidator = Callable[[str, int], None]


class GroupType:
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"


@dataclass(frozen=True)
class RequestInfo:
    """Who sent a request, as far as the coordinator cares (Kafka's RequestContext, trimmed)."""

    api_version: int
    client_id: str = ""
    client_host: str = ""
    # None: every topic (no authorizer). What a regex subscription may match (Kafka's
    # TopicRegexResolver resolves with the context of the heartbeat that asks).
    describable: DescribableTopics | None = field(default=None, compare=False)


class GroupError(Exception):
    """A request refused with a protocol error code (Kafka's ApiException for groups)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message  # for the responses that carry one (ErrorMessage)


@dataclass(frozen=True)
class OffsetExpirationCondition:
    """When an offset of a group expires: `base(offset)` is the time its retention counts from."""

    base: Callable[[OffsetAndMetadata], int]

    def is_expired(self, offset: OffsetAndMetadata, now_ms: int, retention_ms: int) -> bool:
        if offset.expire_timestamp >= 0:
            # Committed with OffsetCommit v2-v4's retention time: that expiry holds, as in Kafka.
            return now_ms >= offset.expire_timestamp
        return now_ms - self.base(offset) >= retention_ms


class Group(ABC):
    group_id: str
    type: str

    @property
    @abstractmethod
    def state_name(self) -> str:
        """The state as ListGroups and DescribeGroups name it (Kafka's toString: "Stable", ...)."""

    @property
    @abstractmethod
    def protocol_type(self) -> str:
        """ListGroups' ProtocolType: "consumer", "connect", ... or "" for a group without one."""

    @abstractmethod
    def is_empty(self) -> bool:
        """No members: the group may be deleted, and expires when its offsets do."""

    def is_simple_group(self) -> bool:
        """A classic group of offsets only, which a consumer or streams group may replace."""
        return False

    def is_in_states(self, states: set[str]) -> bool:
        """ListGroups' states filter, compared without case as Kafka does."""
        return self.state_name.lower() in states

    @abstractmethod
    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               request: RequestInfo, transactional: bool = False,
                               ) -> CommitPartitionValidator | None:
        """Raise GroupError unless this member may commit offsets now (`transactional`: with
        TxnOffsetCommit, which a producer may send for a group it is not a member of); a validator
        where each partition must be checked too (None: every partition may be committed)."""

    @abstractmethod
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int, request: RequestInfo) -> None:
        """Raise GroupError unless this member may fetch offsets (OffsetFetch v9+ names one)."""

    @abstractmethod
    def validate_delete_group(self) -> None:
        """Raise GroupError (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND) unless DeleteGroups may delete it."""

    @abstractmethod
    def validate_offset_delete(self) -> None:
        """Raise GroupError unless OffsetDelete may delete offsets of this group."""

    @abstractmethod
    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Members consume the topic: its offsets neither expire nor may be deleted."""

    @abstractmethod
    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        """How this group's offsets expire now, or None when they do not."""

    def should_expire(self) -> bool:
        """Whether offset retention may delete the group once it is empty and has no offsets left
        (Kafka's Group.shouldExpire); share groups go only by DeleteGroups."""
        return True

    @abstractmethod
    def tombstones(self) -> list[Record]:
        """The records that delete this group from `__consumer_offsets` (not its offsets)."""


class GroupTypeManager(ABC):
    """The code that runs one type of group; the coordinator calls it where a type must decide.

    A manager registers the record types (key versions) it replays at load time; it is told when a
    group of its type was loaded, deleted, or got an offset commit, and when the coordinator stops.
    """

    group_type: str
    record_types: tuple[int, ...] = ()

    @abstractmethod
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of `record_types` read from `__consumer_offsets` at load time."""

    @abstractmethod
    def on_loaded(self, group: Group, now_ms: int, out: Actions) -> None:
        """The load finished: start what a live group needs (session timers, ...)."""

    def on_offset_commit(self, group: Group, member_id: str, now_ms: int) -> None:
        """A member's offset commit was accepted (classic members keep their session with it).
        By default nothing: the group type's sessions are kept by its heartbeats alone."""
        return

    @abstractmethod
    def on_deleted(self, group: Group, now_ms: int) -> None:
        """The group is gone (DeleteGroups, expiry): drop its timers."""

    def unload(self, out: Actions) -> None:
        """The coordinator stops: answer every parked request (Kafka answers NOT_COORDINATOR).
        By default nothing: the group type parks no requests."""
        return


def replay_group_record(manager: Any, key: bytes, value: bytes | None, metadata_key: type,
                        new_group: Callable[[str], Group], replaces_simple_group: bool = False) -> None:
    """Replay one record of a consumer, share or streams group (its `manager`'s `coordinator`,
    `group(id)` and `group_type`): a tombstone of the group's `metadata_key` deletes the group; the
    first record of a new group id makes it with `new_group`; a record of an id another type of
    group holds is skipped (a group id is one group; Kafka's replay throws), unless
    `replaces_simple_group` and that group is a classic group of offsets only, which the new group
    replaces (Kafka's getOrMaybeCreatePersistedConsumerGroup and its streams twin)."""
    record = decode_record(GROUP_COORDINATOR, key, value)
    group_id = record.key.group_id
    group = manager.group(group_id)
    if isinstance(record.key, metadata_key) and value is None:
        if group is not None:
            del manager.coordinator.groups[group_id]
        return
    if group is None:
        if value is None:
            return  # a tombstone of a group already gone
        existing = manager.coordinator.groups.get(group_id)
        if existing is not None and not (replaces_simple_group and existing.is_simple_group()):
            log.warning("Skipping a %s group record of group %s, which is of another type", manager.group_type, group_id)
            return
        group = new_group(group_id)
        manager.coordinator.add_group(group)
    group.replay(record)


def describe_groups(manager: Any, group_ids: list[str], described_group: Callable[..., Any]) -> list[Any]:
    """ConsumerGroupDescribe's and ShareGroupDescribe's answer, group by group (Kafka's
    GroupMetadataManager.consumerGroupDescribe / shareGroupDescribe): `manager` is the type's
    GroupTypeManager (its `coordinator`, `group(id)`, `topics` and `group_type`), `described_group`
    the response's DescribedGroup class."""
    coordinator = manager.coordinator
    described = []
    for group_id in group_ids:
        if not coordinator.active:
            described.append(described_group(group_id=group_id, error_code=coordinator.inactive_error))
        elif not group_id:
            described.append(described_group(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID))
        elif (group := manager.group(group_id)) is not None:
            described.append(group.describe(manager.topics))
        else:
            message = (f"Group {group_id} not found." if group_id not in coordinator.groups
                       else f"Group {group_id} is not a {manager.group_type} group.")
            described.append(described_group(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                             error_message=message))
    return described


def member_committing_at_an_older_epoch(members: dict, member_of: Callable[[str], Any], member_id: str,
                                        group_instance_id: str | None, epoch: int, request: RequestInfo,
                                        transactional: bool, protocol: str) -> Any | None:
    """The checks Kafka's ConsumerGroup and StreamsGroup validateOffsetCommit share: None when the
    commit may name any partition (an empty group committed to from outside, a producer's
    TxnOffsetCommit for a group it is not in, a member at its own epoch); GroupError when it may
    not commit; else the member (`member_of(member_id)`), which commits at an older epoch, so each
    partition is to be checked against its assignment."""
    if epoch < 0 and not members:
        return None  # the admin client, or a consumer outside group management, on an empty group
    if transactional and epoch == -1 and member_id == "" and group_instance_id is None:
        return None  # a producer committing for a group it is not a member of
    member = member_of(member_id)
    if not transactional and request.api_version < 9:
        raise GroupError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used "
                         f"by members using the {protocol} group protocol")
    if epoch == member.member_epoch:
        return None
    if epoch > member.member_epoch:
        raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch {epoch} is newer than current "
                         f"member epoch {member.member_epoch}.")
    return member
