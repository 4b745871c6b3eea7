"""The share group of KIP-932 (Kafka's ShareGroup and the share-group half of its
GroupMetadataManager), sans I/O.

Members heartbeat (ShareGroupHeartbeat) and the coordinator assigns with the `simple` assignor
(assignors.py), which lets several members consume one partition: there is no revocation, a member
takes its target assignment at once. Epochs as in consumer groups: the group epoch is bumped when a
subscription changes, a member leaves or the subscribed topics' metadata changes (its hash), or
when share partitions got initialized that the target assignment lacks; the target assignment is
recomputed at most every `share.assignment.interval.ms` (Kafka 4.4's assignment interval).

Share partitions are assigned only once their state is initialized in the share coordinator (the
persister's InitializeShareGroupState): a heartbeat that subscribes to partitions not yet
initialized records them as initializing (ShareGroupStatePartitionMetadata) and returns what to
initialize; the server calls the persister and reports back (`initialize_state`, or
`uninitialize_state` on failure), and the next heartbeat assigns them. Initializing entries older
than `group.share.initialize.retry.interval.ms` are asked for again.

Every change is one of Kafka's records (wire/coordinator_records/share_group_*), applied by
`replay` as it is made and again at load.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from uuid import UUID

from ..wire.coordinator_record import CoordinatorRecord, encode_record
from ..wire.coordinator_records.share_group_current_member_assignment_key import ShareGroupCurrentMemberAssignmentKey
from ..wire.coordinator_records.share_group_member_metadata_key import ShareGroupMemberMetadataKey
from ..wire.coordinator_records.share_group_metadata_key import ShareGroupMetadataKey
from ..wire.coordinator_records.share_group_metadata_value import ShareGroupMetadataValue
from ..wire.coordinator_records.share_group_state_partition_metadata_key import ShareGroupStatePartitionMetadataKey
from ..wire.coordinator_records.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue, TopicInfo, TopicPartitionsInfo,
)
from ..wire.coordinator_records.share_group_target_assignment_member_key import ShareGroupTargetAssignmentMemberKey
from ..wire.coordinator_records.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue, TopicPartition,
)
from ..wire.coordinator_records.share_group_target_assignment_metadata_key import (
    ShareGroupTargetAssignmentMetadataKey,
)
from ..wire.coordinator_records.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue,
)
from ..wire.errors import ErrorCode
from ..wire.messages import share_group_describe_response as described
from ..wire.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponsePartition as AlterPartition,
)
from ..wire.messages.alter_share_group_offsets_response import AlterShareGroupOffsetsResponseTopic as AlterTopic
from ..wire.messages.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponseTopic as DeleteTopic
from ..wire.messages.share_group_heartbeat_response import Assignment as HeartbeatAssignment
from ..wire.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from ..wire.messages.share_group_heartbeat_response import TopicPartitions as HeartbeatTopicPartitions
from .actions import Record
from .assignors import MemberSpec, SimpleAssignor
from .consumer_group import TopicsImage
from .consumer_group_member import Assignment, assignment_of, topic_partitions
from .group import Group, GroupError, GroupType, OffsetExpirationCondition, RequestInfo
from .share_group_member import ShareGroupMember, reconcile

__all__ = ["SHARE_GROUP_RECORD_TYPES", "SHARE_PROTOCOL_TYPE", "InitValue", "ShareGroup", "ShareGroupState",
           "ShareInitRequest", "metadata_hash", "validate_heartbeat_request"]

SHARE_PROTOCOL_TYPE = "share"
SIMPLE_ASSIGNOR = SimpleAssignor()
# The records of __consumer_offsets a share group writes and replays, by record type (10 to 15).
SHARE_GROUP_RECORD_TYPES = tuple(key.API_KEY for key in (
    ShareGroupMemberMetadataKey, ShareGroupMetadataKey, ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey, ShareGroupCurrentMemberAssignmentKey, ShareGroupStatePartitionMetadataKey))

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class InitValue:
    """A topic's share partitions in one state of initialization (Kafka's ShareGroup.InitMapValue);
    `timestamp` is when the coordinator learnt of it (the retry of an initialization counts from it)."""

    name: str
    partitions: frozenset[int]
    timestamp: int


@dataclass(frozen=True)
class ShareInitRequest:
    """What a heartbeat asks the server to initialize through the persister: the start offset of each
    share partition (-1: by share.auto.offset.reset, 0: a partition added to a known topic), at the
    group epoch as the state epoch (Kafka's InitializeShareGroupStateParameters)."""

    group_id: str
    group_epoch: int
    partitions: Mapping[UUID, Mapping[int, int]]  # topic id -> partition -> start offset

    def topic_partitions(self) -> dict[UUID, frozenset[int]]:
        return {t: frozenset(ps) for t, ps in self.partitions.items()}


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat_request(request) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (GroupCoordinatorService) and the checks
    before it: INVALID_REQUEST for what needs no group."""
    if request.member_id == "":
        raise GroupError(ErrorCode.INVALID_REQUEST)  # Kafka's answer carries no message
    if _blank(request.member_id):
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if _blank(request.group_id):
        raise GroupError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if _blank(request.rack_id):
        raise GroupError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not request.subscribed_topic_names:
            raise GroupError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def metadata_hash(names: Iterable[str], topics: TopicsImage) -> int:
    """A hash of the subscribed topics as they exist (id, name, partition count): the group epoch is
    bumped when it changes. Kafka hashes the same fields with XXH3; this is BLAKE2b, so a Kafka
    broker reading these records sees another hash and bumps the epoch once."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        info = topics.by_name.get(name)
        if info is None:
            continue
        encoded = name.encode()
        digest.update(info.topic_id.bytes + struct.pack(">i", len(encoded)) + encoded
                      + struct.pack(">i", info.num_partitions))
    if digest.digest() == hashlib.blake2b(digest_size=8).digest():
        return 0  # no subscribed topic exists: Kafka's hash of nothing
    return struct.unpack(">q", digest.digest())[0]


def _combine(base: Mapping[UUID, InitValue], added: Mapping[UUID, InitValue]) -> dict[UUID, InitValue]:
    """Kafka's combineInitMaps: the partitions of both; name and timestamp of `added` where it has the topic."""
    result = {}
    for topic_id in set(base) | set(added):
        old, new = base.get(topic_id), added.get(topic_id)
        partitions = (old.partitions if old else frozenset()) | (new.partitions if new else frozenset())
        if new is not None:
            result[topic_id] = InitValue(new.name, partitions, new.timestamp)
        else:
            assert old is not None
            result[topic_id] = InitValue(old.name, partitions, old.timestamp)
    return result


@dataclass
class _Subscriptions:
    counts: dict[str, int] = field(default_factory=dict)  # topic name -> members subscribed to it

    def names(self) -> set[str]:
        return set(self.counts)


class ShareGroup(Group):
    type = GroupType.SHARE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1  # Kafka's ModernGroup starts at epoch 1
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # ShareGroupStatePartitionMetadata (None: the group has no such record).
        self.initializing: dict[UUID, InitValue] = {}
        self.initialized: dict[UUID, InitValue] = {}
        self.deleting: dict[UUID, str] = {}
        self.has_state_metadata = False
        # The subscribed topics' metadata must be hashed again (new group, loaded group, topic change).
        self.metadata_refresh = True
        self._session_deadline: dict[str, int] = {}

    # --- what the group looks like -----------------------------------------------------------------

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type(self) -> str:
        return SHARE_PROTOCOL_TYPE

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self, replacing: ShareGroupMember | None = None,
                               removing: str | None = None) -> dict[str, int]:
        """Topic name -> how many members subscribe to it, with `replacing` in place of its old self
        and without member `removing` (Kafka's computeSubscribedTopicNames)."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.member_id == removing or (replacing is not None and member.member_id == replacing.member_id):
                continue
            for name in member.subscribed_topic_names:
                counts[name] = counts.get(name, 0) + 1
        if replacing is not None:
            for name in replacing.subscribed_topic_names:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def describe(self, topics: TopicsImage) -> described.DescribedGroup:
        def assignment(partitions: Assignment) -> described.Assignment:
            return described.Assignment(topic_partitions=[
                described.TopicPartitions(topic_id=t, topic_name=topics.by_id[t].name, partitions=sorted(ps))
                for t, ps in sorted(partitions.items()) if t in topics.by_id])

        members = [described.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
            assignment=assignment(m.assigned_partitions)) for m in self.members.values()]
        return described.DescribedGroup(
            group_id=self.group_id, group_state=self.state_name, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch, assignor_name=SIMPLE_ASSIGNOR.name, members=members)

    # --- offsets and deletion (the coordinator's shared APIs) ------------------------------------------

    def _not_a_consumer_group(self) -> GroupError:
        return GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               request: RequestInfo, transactional: bool = False) -> None:
        raise self._not_a_consumer_group()

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int, request: RequestInfo) -> None:
        raise self._not_a_consumer_group()

    def validate_offset_delete(self) -> None:
        raise self._not_a_consumer_group()

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        return None  # a share group has no offsets of its own in __consumer_offsets

    def should_expire(self) -> bool:
        return False  # Kafka's ShareGroup.shouldExpire: deleted only by DeleteGroups

    def tombstones(self) -> list[Record]:
        """The records that delete the (empty) group, in Kafka's order (createGroupTombstoneRecords)."""
        g = self.group_id
        records: list[CoordinatorRecord] = []
        records += [CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(g, m), None) for m in self.members]
        records += [CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(g, m), None) for m in self.members]
        records.append(CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(g), None))
        records += [CoordinatorRecord(ShareGroupMemberMetadataKey(g, m), None) for m in self.members]
        records.append(CoordinatorRecord(ShareGroupStatePartitionMetadataKey(g), None))
        records.append(CoordinatorRecord(ShareGroupMetadataKey(g), None))
        return [encode_record(r) for r in records]

    # --- heartbeats ----------------------------------------------------------------------------------

    def heartbeat(self, request, *, client_id: str, client_host: str, now_ms: int, topics: TopicsImage,
                  max_size: int, heartbeat_interval_ms: int, assignment_interval_ms: int,
                  initialize_retry_interval_ms: int,
                  ) -> tuple[ShareGroupHeartbeatResponse, list[CoordinatorRecord], ShareInitRequest | None]:
        """A ShareGroupHeartbeat already checked by `validate_heartbeat_request` (not a leave):
        (the response, the records to append, what to initialize). The group has applied the
        records; a refused request (GroupError) changes nothing."""
        member_id, epoch = request.member_id, request.member_epoch
        if len(self.members) >= max_size and member_id not in self.members:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The share group has reached its maximum capacity of {max_size} members.")
        member = self.members.get(member_id)
        if member is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {self.group_id}.")
            member = ShareGroupMember(member_id)
        else:
            self._check_member_epoch(member, epoch)
        updated = replace(
            member, rack_id=member.rack_id if request.rack_id is None else request.rack_id,
            subscribed_topic_names=(member.subscribed_topic_names if request.subscribed_topic_names is None
                                    else frozenset(request.subscribed_topic_names)),
            client_id=client_id, client_host=client_host)

        # Every check is done: from here on the group changes, one record at a time.
        records: list[CoordinatorRecord] = []
        bump = False
        if updated != member or member_id not in self.members:
            self._emit(records, ShareGroupMemberMetadataKey(self.group_id, member_id), updated.metadata_value(),
                       now_ms)
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        group_epoch = self.group_epoch
        if self.assignment_epoch >= group_epoch:
            bump |= self._initialized_assignment_pending()
        names = self.subscribed_topic_names(replacing=updated)
        if bump or self.metadata_refresh:
            new_hash = metadata_hash(names, topics)
            if new_hash != self.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                self._emit(records, ShareGroupMetadataKey(self.group_id), ShareGroupMetadataValue(group_epoch, new_hash),
                           now_ms)
            self.metadata_refresh = False
        target_epoch, target = self._maybe_update_target_assignment(records, group_epoch, updated, names, now_ms,
                                                                    topics, assignment_interval_ms)
        current = self.members.get(member_id, updated)
        final = current
        if bump or not current.is_reconciled_to(target_epoch):
            subscribed = frozenset(info.topic_id for name in current.subscribed_topic_names
                                   if (info := topics.by_name.get(name)) is not None)
            final = reconcile(current, target_epoch, target, subscribed, bump)
            if final != current:
                self._emit(records, ShareGroupCurrentMemberAssignmentKey(self.group_id, member_id),
                           final.assignment_value(), now_ms)
        response = ShareGroupHeartbeatResponse(member_id=member_id, member_epoch=final.member_epoch,
                                               heartbeat_interval_ms=heartbeat_interval_ms)
        if (epoch == JOIN_GROUP_MEMBER_EPOCH or request.subscribed_topic_names is not None
                or final.assigned_partitions != member.assigned_partitions):
            response.assignment = HeartbeatAssignment(
                topic_partitions=topic_partitions(final.assigned_partitions, HeartbeatTopicPartitions))
        init = self._maybe_initialize(records, group_epoch, set(names), now_ms, topics, initialize_retry_interval_ms)
        return response, records, init

    def _check_member_epoch(self, member: ShareGroupMember, epoch: int) -> None:
        """Kafka's throwIfShareGroupMemberEpochIsInvalid: epoch 0 always rejoins."""
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            return
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch "
                             f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch and epoch != member.previous_member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch "
                             f"({epoch}) than the one known by the group coordinator ({member.member_epoch}), and it "
                             f"does not match the previous member epoch ({member.previous_member_epoch}). The member "
                             "must abandon all its partitions and rejoin.")

    def leave(self, member_id: str, now_ms: int, topics: TopicsImage) -> tuple[ShareGroupHeartbeatResponse,
                                                                                  list[CoordinatorRecord]]:
        """A heartbeat with epoch -1 (Kafka's shareGroupLeave): the member goes at once."""
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                             f"{self.group_id}.")
        return (ShareGroupHeartbeatResponse(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH),
                self.fence(member_id, now_ms, topics))

    def fence(self, member_id: str, now_ms: int, topics: TopicsImage) -> list[CoordinatorRecord]:
        """Remove the member (Kafka's shareGroupFenceMember): its records go, the group epoch is
        bumped, and the last member leaving closes the target assignment at that epoch."""
        records: list[CoordinatorRecord] = []
        g = self.group_id
        last = len(self.members) == 1
        new_hash = metadata_hash(self.subscribed_topic_names(removing=member_id), topics)
        for key in (ShareGroupCurrentMemberAssignmentKey(g, member_id), ShareGroupTargetAssignmentMemberKey(g, member_id),
                    ShareGroupMemberMetadataKey(g, member_id)):
            self._emit(records, key, None, now_ms)
        epoch = self.group_epoch + 1
        self._emit(records, ShareGroupMetadataKey(g), ShareGroupMetadataValue(epoch, new_hash), now_ms)
        if last:
            self._emit(records, ShareGroupTargetAssignmentMetadataKey(g),
                       ShareGroupTargetAssignmentMetadataValue(epoch, 0), now_ms)
        self._session_deadline.pop(member_id, None)
        return records

    # --- the steps of a heartbeat --------------------------------------------------------------------

    def _emit(self, records: list[CoordinatorRecord], key, value, now_ms: int) -> None:
        record = CoordinatorRecord(key, value)
        self.replay(record, now_ms)
        records.append(record)

    def _initialized_assignment_pending(self) -> bool:
        """Kafka's initializedAssignmentPending: share partitions got initialized for a subscribed
        topic that the target assignment does not hold in full."""
        if not self.members or not self.initialized:
            return False
        names = self.subscribed_topic_names()
        if not names:
            return False
        assigned: dict[UUID, set[int]] = {}
        for assignment in self.target_assignment.values():
            for topic_id, partitions in assignment.items():
                assigned.setdefault(topic_id, set()).update(partitions)
        return any(value.name in names and assigned.get(topic_id) != set(value.partitions)
                   for topic_id, value in self.initialized.items())

    def _maybe_update_target_assignment(self, records, group_epoch: int, updated: ShareGroupMember,
                                        names: Mapping[str, int], now_ms: int, topics: TopicsImage,
                                        interval_ms: int) -> tuple[int, Assignment]:
        """(target epoch, the member's target): a new one computed if the group epoch moved and the
        assignment interval has passed since the last, else the last one (Kafka's
        maybeUpdateTargetAssignment)."""
        if (self.assignment_epoch >= group_epoch
                or not (self.assignment_timestamp == 0 or interval_ms == 0
                        or now_ms >= self.assignment_timestamp + interval_ms)):
            return self.assignment_epoch, self.target_assignment.get(updated.member_id, {})
        members = dict(self.members)
        members[updated.member_id] = updated
        specs = {}
        counts: dict[UUID, int] = {}
        for member_id, member in members.items():
            ids = []
            for name in member.subscribed_topic_names:
                info = topics.by_name.get(name)
                if info is not None:
                    ids.append(info.topic_id)
                    counts[info.topic_id] = info.num_partitions
            specs[member_id] = MemberSpec(frozenset(ids), self.target_assignment.get(member_id, {}))
        assignable = {topic_id: value.partitions for topic_id, value in self.initialized.items()}
        new_target = SIMPLE_ASSIGNOR.assign(specs, counts, assignable)
        for member_id in sorted(specs):
            if new_target[member_id] != self.target_assignment.get(member_id):
                self._emit(records, ShareGroupTargetAssignmentMemberKey(self.group_id, member_id),
                           ShareGroupTargetAssignmentMemberValue(topic_partitions(new_target[member_id],
                                                                                  TopicPartition)), now_ms)
        self._emit(records, ShareGroupTargetAssignmentMetadataKey(self.group_id),
                   ShareGroupTargetAssignmentMetadataValue(group_epoch, now_ms), now_ms)
        return group_epoch, new_target[updated.member_id]

    def _maybe_initialize(self, records, group_epoch: int, names: set[str], now_ms: int, topics: TopicsImage,
                          retry_interval_ms: int) -> ShareInitRequest | None:
        """The subscribed share partitions neither initialized nor initializing (recently): recorded
        as initializing, returned for the server to initialize (Kafka's
        maybeCreateInitializeShareGroupStateRequest)."""
        if not names or not topics.by_name:
            return None
        recent = {t: v for t, v in self.initializing.items() if now_ms - v.timestamp < retry_interval_ms}
        already = _combine(self.initialized, recent)
        changes: dict[UUID, InitValue] = {}
        for name in sorted(names):
            info = topics.by_name.get(name)
            if info is None:
                continue
            have = already[info.topic_id].partitions if info.topic_id in already else frozenset()
            if not have or len(have) < info.num_partitions:
                changes[info.topic_id] = InitValue(name, frozenset(range(info.num_partitions)) - have, now_ms)
        if not changes:
            return None
        known = set(self.initialized) | set(self.initializing) if self.has_state_metadata else set()
        deleting = {t: n for t, n in self.deleting.items() if t not in changes}
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id),
                   self._state_metadata_value(_combine(self.initializing, changes), self.initialized, deleting), now_ms)
        return ShareInitRequest(self.group_id, group_epoch, {
            topic_id: {p: (0 if topic_id in known else -1) for p in sorted(value.partitions)}
            for topic_id, value in sorted(changes.items())})

    @staticmethod
    def _state_metadata_value(initializing: Mapping[UUID, InitValue], initialized: Mapping[UUID, InitValue],
                              deleting: Mapping[UUID, str]) -> ShareGroupStatePartitionMetadataValue:
        def infos(values: Mapping[UUID, InitValue]) -> list[TopicPartitionsInfo]:
            return [TopicPartitionsInfo(topic_id=t, topic_name=v.name, partitions=sorted(v.partitions))
                    for t, v in sorted(values.items())]

        return ShareGroupStatePartitionMetadataValue(
            initializing_topics=infos(initializing), initialized_topics=infos(initialized),
            deleting_topics=[TopicInfo(topic_id=t, topic_name=n) for t, n in sorted(deleting.items())])

    # --- initialization reported back, deletion, topics ------------------------------------------------

    def initialize_state(self, partitions: Mapping[UUID, Iterable[int]], now_ms: int,
                         topics: TopicsImage) -> list[CoordinatorRecord]:
        """The persister initialized these share partitions: they are assignable (Kafka's
        initializeShareGroupState)."""
        if not partitions:
            return []
        enriched = {t: InitValue(topics.by_id[t].name if t in topics.by_id else "<UNKNOWN>", frozenset(ps), now_ms)
                    for t, ps in partitions.items()}
        records: list[CoordinatorRecord] = []
        if not self.has_state_metadata:
            value = self._state_metadata_value({}, enriched, {})
        else:
            initializing = {}
            for topic_id, init in self.initializing.items():
                left = init.partitions - frozenset(partitions.get(topic_id, ()))
                if left:
                    initializing[topic_id] = replace(init, partitions=left)
            value = self._state_metadata_value(initializing, _combine(self.initialized, enriched), self.deleting)
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id), value, now_ms)
        return records

    def uninitialize_state(self, partitions: Mapping[UUID, Iterable[int]], now_ms: int) -> list[CoordinatorRecord]:
        """The persister failed to initialize them: no longer initializing, asked for again by the
        next heartbeat (Kafka's uninitializeShareGroupState)."""
        if not self.has_state_metadata or not self.initializing or not partitions:
            return []
        initializing = {}
        for topic_id, init in self.initializing.items():
            left = init.partitions - frozenset(partitions.get(topic_id, ()))
            if left:
                initializing[topic_id] = replace(init, partitions=left)
        records: list[CoordinatorRecord] = []
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id),
                   self._state_metadata_value(initializing, self.initialized, self.deleting), now_ms)
        return records

    # --- admin: AlterShareGroupOffsets, DeleteShareGroupOffsets ------------------------------------

    def alter_offsets(self, topics: Iterable[tuple[str, Iterable[tuple[int, int]]]], now_ms: int,
                      image: TopicsImage) -> tuple[list[AlterTopic], list[CoordinatorRecord], ShareInitRequest | None]:
        """AlterShareGroupOffsets of an empty group (Kafka's GroupMetadataManager.alterShareGroupOffsets):
        for each (topic, [(partition, start offset)]), the partitions' results, the partitions of
        existing topics recorded as initializing (no longer deleting), and what the server must
        initialize through the persister at those start offsets, at the group epoch as state epoch."""
        if self.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP, ErrorCode.NON_EMPTY_GROUP.message)
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        results: list[AlterTopic] = []
        initializing: dict[UUID, InitValue] = {}
        offsets: dict[UUID, dict[int, int]] = {}
        for name, partitions in topics:
            partitions = list(partitions)
            info = image.by_name.get(name)
            if info is None:
                results.append(AlterTopic(topic_name=name, partitions=[
                    AlterPartition(partition_index=p, error_code=unknown, error_message=unknown.message)
                    for p, _ in partitions]))
                continue
            responses = []
            for partition, start_offset in partitions:
                if partition < info.num_partitions:
                    responses.append(AlterPartition(partition_index=partition, error_code=ErrorCode.NONE))
                    offsets.setdefault(info.topic_id, {})[partition] = start_offset
                else:
                    responses.append(AlterPartition(partition_index=partition, error_code=unknown,
                                                    error_message=unknown.message))
            initializing[info.topic_id] = InitValue(name, frozenset(p for p, _ in partitions
                                                                    if p < info.num_partitions), now_ms)
            results.append(AlterTopic(topic_name=name, topic_id=info.topic_id, partitions=responses))
        records: list[CoordinatorRecord] = []
        if initializing:  # Kafka's addInitializingTopicsRecords
            if not self.has_state_metadata:
                value = self._state_metadata_value(initializing, {}, {})
            else:
                combined = _combine(self.initializing, initializing)
                value = self._state_metadata_value(
                    combined, self.initialized, {t: n for t, n in self.deleting.items() if t not in combined})
            self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id), value, now_ms)
        init = ShareInitRequest(self.group_id, self.group_epoch, offsets) if offsets else None
        return results, records, init

    def delete_offsets(self, names: Iterable[str], now_ms: int, image: TopicsImage,
                       ) -> tuple[list[DeleteTopic], list[CoordinatorRecord], dict[UUID, list[int]]]:
        """The first step of DeleteShareGroupOffsets of an empty group (Kafka's
        sharePartitionsEligibleForOffsetDeletion): the topics refused, the record that moves the
        initialized ones to deleting, and the share partitions whose state the persister must
        delete (those initialized, or every partition of a topic already deleting)."""
        self.validate_delete_group()
        errors: list[DeleteTopic] = []
        to_delete: dict[UUID, list[int]] = {}
        if not self.has_state_metadata:
            return errors, [], to_delete
        initialized = dict(self.initialized)
        deleting = dict(self.deleting)
        for name in names:
            info = image.by_name.get(name)
            if info is None:
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                errors.append(DeleteTopic(topic_name=name, error_code=unknown, error_message=unknown.message))
            elif info.topic_id in initialized:
                to_delete[info.topic_id] = sorted(initialized.pop(info.topic_id).partitions)
                deleting[info.topic_id] = name
            elif info.topic_id in deleting:
                to_delete[info.topic_id] = list(range(info.num_partitions))
            else:
                errors.append(DeleteTopic(topic_name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          error_message="There is no offset information to delete."))
        records: list[CoordinatorRecord] = []
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id),
                   self._state_metadata_value(self.initializing, initialized, deleting), now_ms)
        return errors, records, to_delete

    def offsets_deleted(self, topic_ids: Iterable[UUID], now_ms: int) -> list[CoordinatorRecord]:
        """The persister deleted these topics' share partitions: they are no longer deleting
        (Kafka's completeDeleteShareGroupOffsets)."""
        if not self.has_state_metadata:
            return []
        gone = set(topic_ids)
        records: list[CoordinatorRecord] = []
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id), self._state_metadata_value(
            self.initializing, self.initialized, {t: n for t, n in self.deleting.items() if t not in gone}), now_ms)
        return records

    def prepare_delete(self, now_ms: int, topics: TopicsImage) -> tuple[list[CoordinatorRecord], dict[UUID, list[int]]]:
        """Before DeleteGroups deletes the group: every share partition it has state for moves to
        deleting (one record), and is returned for the persister to delete (Kafka's
        shareGroupBuildPartitionDeleteRequest)."""
        if not self.has_state_metadata:
            return [], {}
        candidates = _combine(self.initialized, self.initializing)
        for topic_id in self.deleting:
            info = topics.by_id.get(topic_id)
            if info is not None:  # deleted topics' state went with them
                candidates = _combine(candidates, {topic_id: InitValue(info.name, frozenset(range(info.num_partitions)),
                                                                       -1)})
        records: list[CoordinatorRecord] = []
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id),
                   self._state_metadata_value({}, {}, {t: v.name for t, v in candidates.items()}), now_ms)
        return records, {t: sorted(v.partitions) for t, v in sorted(candidates.items())}

    def on_topics_deleted(self, topic_ids: set[UUID], now_ms: int) -> list[CoordinatorRecord]:
        """Deleted topics leave the state metadata (Kafka's maybeCleanupShareGroupState)."""
        if not (topic_ids & (set(self.initializing) | set(self.initialized) | set(self.deleting))):
            return []
        records: list[CoordinatorRecord] = []
        self._emit(records, ShareGroupStatePartitionMetadataKey(self.group_id), self._state_metadata_value(
            {t: v for t, v in self.initializing.items() if t not in topic_ids},
            {t: v for t, v in self.initialized.items() if t not in topic_ids},
            {t: n for t, n in self.deleting.items() if t not in topic_ids}), now_ms)
        return records

    # --- time ----------------------------------------------------------------------------------------

    def touch(self, member_id: str, deadline_ms: int) -> None:
        self._session_deadline[member_id] = deadline_ms

    def expired_members(self, now_ms: int) -> list[str]:
        return [m for m, deadline in self._session_deadline.items() if deadline <= now_ms and m in self.members]

    def next_deadline(self) -> int | None:
        return min(self._session_deadline.values(), default=None)

    def on_loaded(self, now_ms: int, session_timeout_ms: int) -> None:
        """After replaying the group at startup: every member gets a full session, the metadata is
        hashed again at the next heartbeat, initializations count from now (Kafka's onLoaded)."""
        for member_id in self.members:
            self._session_deadline[member_id] = now_ms + session_timeout_ms
        self.metadata_refresh = True
        self.initializing = {t: replace(v, timestamp=now_ms) for t, v in self.initializing.items()}

    # --- replay --------------------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord, now_ms: int = 0) -> None:
        """Apply one record of this group (from a heartbeat, or from __consumer_offsets at load)."""
        key, value = record.key, record.value
        if isinstance(key, ShareGroupMetadataKey):
            if value is not None:
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif isinstance(key, ShareGroupMemberMetadataKey):
            if value is None:
                self.members.pop(key.member_id, None)
                self._session_deadline.pop(key.member_id, None)
            else:
                member = self.members.get(key.member_id) or ShareGroupMember(key.member_id)
                self.members[key.member_id] = member.with_metadata(value)
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            if value is None:
                self.assignment_epoch, self.assignment_timestamp = -1, 0
            else:
                self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = assignment_of(value.topic_partitions)
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            current = self.members.get(key.member_id)
            if current is None and value is None:
                return
            member = current or ShareGroupMember(key.member_id)
            if value is None:
                self.members[key.member_id] = replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                      previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                      assigned_partitions={})
            else:
                self.members[key.member_id] = member.with_assignment(value)
        elif isinstance(key, ShareGroupStatePartitionMetadataKey):
            if value is None:
                self.initializing, self.initialized, self.deleting = {}, {}, {}
                self.has_state_metadata = False
            else:
                self.has_state_metadata = True
                self.initializing = {t.topic_id: InitValue(t.topic_name, frozenset(t.partitions), now_ms)
                                     for t in value.initializing_topics}
                self.initialized = {t.topic_id: InitValue(t.topic_name, frozenset(t.partitions), now_ms)
                                    for t in value.initialized_topics}
                self.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}
        else:
            raise TypeError(f"not a share group record: {key!r}")
