"""The consumer group of KIP-848 (Kafka's ConsumerGroup and the consumer-group half of its
GroupMetadataManager), sans I/O.

Members heartbeat (ConsumerGroupHeartbeat); the coordinator assigns. Three epochs drive it:

- the group epoch, bumped whenever what the assignment depends on changes: a member joins or
  leaves, a subscription changes, a subscribed topic is created, deleted or grows;
- the target assignment epoch: when the group epoch is ahead, the next heartbeat runs the assignor
  (`uniform` or `range`, assignors.py) and the target assignment takes the group epoch, unless
  the last assignment is younger than the assignment interval (Kafka 4.4's
  `consumer.assignment.interval.ms`): heartbeats meanwhile keep the last target;
- each member's epoch: it reaches the target assignment epoch through reconciliation
  (consumer_group_member.reconcile), which revokes before it assigns, so that no partition is
  owned by two members at any moment.

Every change is a record (Kafka's, generated in wire/coordinator_records/) that `replay` applies; a heartbeat replays its
records as it makes them and returns them for the caller to append to __consumer_offsets, and
loading replays the same records. Time is an argument: `poll(now_ms, topics)` fences members
whose session (consumer.session.timeout.ms) or rebalance timeout (the time a member has to
revoke partitions) ran out, and `next_deadline()` says when to call it next.

Errors are Kafka's, with its messages: FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID,
UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, and, from
`validate_heartbeat_request`, INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from uuid import UUID

from ..wire.coordinator_record import CoordinatorRecord, encode_record
from ..wire.coordinator_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from ..wire.coordinator_records.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from ..wire.coordinator_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from ..wire.coordinator_records.consumer_group_metadata_value import ConsumerGroupMetadataValue
from ..wire.coordinator_records.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from ..wire.coordinator_records.consumer_group_partition_metadata_value import (
    ConsumerGroupPartitionMetadataValue, TopicMetadata,
)
from ..wire.coordinator_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from ..wire.coordinator_records.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue, TopicPartition,
)
from ..wire.coordinator_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from ..wire.coordinator_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from ..wire.errors import ErrorCode
from ..wire.messages import consumer_group_describe_response as described
from ..wire.messages.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from ..wire.messages.consumer_group_heartbeat_response import Assignment as HeartbeatAssignment
from ..wire.messages.consumer_group_heartbeat_response import TopicPartitions as HeartbeatTopicPartitions
from . import re2j
from .actions import Record
from .assignors import ASSIGNORS, MemberSpec
from .consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, Assignment,
    ConsumerGroupMember, MemberState, assignment_of, is_subset, owned_from_request, reconcile, topic_partitions,
)
from .group import (
    CommitPartitionValidator,
    DescribableTopics,
    Group,
    GroupError,
    GroupType,
    NewMemberUuid,
    OffsetExpirationCondition,
    RequestInfo,
    member_committing_at_an_older_epoch,
)

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES", "CONSUMER_PROTOCOL_TYPE", "ConsumerGroup", "ConsumerGroupConfig", "ConsumerGroupState", "TopicInfo",
    "TopicsImage", "validate_heartbeat_request",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
# The records of __consumer_offsets a consumer group writes and replays, by record type (3 to 8).
CONSUMER_GROUP_RECORD_TYPES = tuple(key.API_KEY for key in (
    ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey))
# Kafka's ConsumerGroupHeartbeatRequest.CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION (KIP-1082).
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """A consumer group's settings, with Kafka's defaults: the broker's group.consumer.*, the first
    three overridden by the group's own consumer.* configs where it has them."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    assignment_interval_ms: int = 1_000  # group.consumer.assignment.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: UUID
    num_partitions: int
    internal: bool = False


class TopicsImage:
    """The cluster's topics as groups see them. Immutable: a change is a new image."""

    def __init__(self, topics: Iterable[TopicInfo] = ()) -> None:
        self.by_name = {t.name: t for t in topics}
        self.by_id = {t.topic_id: t for t in self.by_name.values()}


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


# ConsumerGroupDescribe v1's MemberType (KIP-1099): 0 a classic-protocol member, 1 a consumer-protocol
# one; every member of a consumer group here joined with ConsumerGroupHeartbeat (no classic members
# are converted into consumer groups).
CONSUMER_MEMBER_TYPE = 1


def compile_topic_regex(regex: str) -> re.Pattern:
    """Compiled as Kafka compiles it, with RE2/J's syntax (re2j.py: a lookaround or backreference
    is refused)."""
    try:
        return re2j.compile(regex)
    except re.error as e:
        raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.") from None


def validate_heartbeat_request(request, api_version: int, assignors: Iterable[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: checks that need no group."""

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.INVALID_REQUEST, message)

    epoch = request.member_epoch
    if ((api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or epoch > 0
         or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(request.member_id)):
        raise invalid("MemberId can't be empty.")
    if _blank(request.group_id):
        raise invalid("GroupId can't be empty.")
    if _blank(request.instance_id):
        raise invalid("InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise invalid("RackId can't be empty.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if request.subscribed_topic_regex:
        compile_topic_regex(request.subscribed_topic_regex)
    assignors = tuple(assignors)
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {request.server_assignor} is not supported. "
                         f"Supported assignors: {', '.join(assignors)}.")


class ConsumerGroup(Group):
    type = GroupType.CONSUMER

    def __init__(self, group_id: str, config: ConsumerGroupConfig | Callable[[], ConsumerGroupConfig] | None = None,
                 cluster_topics: Callable[[], TopicsImage] | None = None) -> None:
        """`config`: the group's settings, or what reads them (a group config may change them at any time)."""
        self.group_id = group_id
        self._config = config if callable(config) else (lambda fixed=config or ConsumerGroupConfig(): fixed)
        # The cluster's topics now: an offset commit names topics, assignments name topic ids
        # (Kafka's broker fills in a commit's topic ids from its metadata cache).
        self._cluster_topics = cluster_topics or TopicsImage
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0  # when the target assignment was computed (0: never, or before Kafka 4.4)
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}  # topic name -> metadata
        self._partition_owner: dict[tuple[UUID, int], tuple[str, int]] = {}  # -> (member id, its epoch)
        self._session_deadline: dict[str, int] = {}
        self._rebalance_deadline: dict[str, tuple[int, int]] = {}  # member id -> (deadline, epoch)
        self._regex_image: TopicsImage | None = None
        self._resolved_regex: dict[str, frozenset[str]] = {}
        # Whose DESCRIBE rights a regex resolves with: the last heartbeat's sender (None: any topic).
        self._describable: DescribableTopics | None = None

    @property
    def config(self) -> ConsumerGroupConfig:
        return self._config()

    # --- what the group looks like -----------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type(self) -> str:
        return CONSUMER_PROTOCOL_TYPE

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscription_metadata or any(
            topic in m.subscribed_topic_names for m in self.members.values())

    def partition_owner_epoch(self, topic_id: UUID, partition: int) -> int:
        """The epoch of the member owning the partition now, -1 when nobody does."""
        owner = self._partition_owner.get((topic_id, partition))
        return -1 if owner is None else owner[1]

    def preferred_assignor(self) -> str:
        """The server assignor most members ask for; the first configured one when none does."""
        enabled = self.config.assignors
        wanted = Counter(m.server_assignor for m in self.members.values() if m.server_assignor in enabled)
        if not wanted:
            return enabled[0]
        return max(enabled, key=lambda name: (wanted[name], -enabled.index(name)))

    def describe(self, topics: TopicsImage) -> described.DescribedGroup:
        def assignment(partitions: Assignment) -> described.Assignment:
            return described.Assignment(topic_partitions=[
                described.TopicPartitions(topic_id=t, topic_name=topics.by_id[t].name, partitions=sorted(ps))
                for t, ps in sorted(partitions.items()) if t in topics.by_id])

        members = [described.Member(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            # Kafka's member has "" where no regex was ever sent (ConsumerGroupMember.Builder's default).
            subscribed_topic_regex=m.subscribed_topic_regex or "", assignment=assignment(m.assigned_partitions),
            target_assignment=assignment(self.target_assignment.get(m.member_id, {})),
            member_type=CONSUMER_MEMBER_TYPE,
        ) for m in self.members.values()]
        return described.DescribedGroup(
            group_id=self.group_id, group_state=self.state_name, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch, assignor_name=self.preferred_assignor(), members=members)

    # --- offsets and deletion (the coordinator's shared APIs) ------------------------------------------

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               request: RequestInfo, transactional: bool = False,
                               ) -> CommitPartitionValidator | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: a member commits at its epoch (OffsetCommit
        v9+); at an older one only partitions it got at that epoch or before and still has or is
        revoking: anything else is STALE_MEMBER_EPOCH, the whole commit refused."""
        member = member_committing_at_an_older_epoch(self.members, self._member_or_unknown, member_id, group_instance_id,
                                                     generation_or_epoch, request, transactional, "consumer")
        return None if member is None else self._assignment_epoch_validator(member, generation_or_epoch)

    def _assignment_epoch_validator(self, member: ConsumerGroupMember, epoch: int) -> CommitPartitionValidator:
        """Kafka's createAssignmentEpochValidator: each partition must be the member's (assigned or
        pending revocation), got at `epoch` or before. Every member of a consumer group here uses
        the consumer protocol: Kafka's ILLEGAL_GENERATION forms, for classic-protocol members of a
        consumer group, have no member to apply to."""
        topics = self._cluster_topics()

        def validate(topic: str, partition: int) -> None:
            info = topics.by_name.get(topic)
            assignment_epoch = None
            if info is not None:
                assignment_epoch = member.assignment_epoch(info.topic_id, partition)
                if assignment_epoch is None:
                    assignment_epoch = member.pending_revocation_epoch(info.topic_id, partition)
            if assignment_epoch is None:
                raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Partition {topic}-{partition} is not assigned or "
                                 "pending revocation for member.")
            if epoch < assignment_epoch:
                raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch {epoch} is older than "
                                 f"assignment epoch {assignment_epoch} for partition {topic}-{partition}.")

        return validate

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int, request: RequestInfo) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: without a member, anyone may fetch."""
        if member_id is None and member_epoch < 0:
            return
        self._check_offset_epoch(self._member_or_unknown(member_id), member_epoch)

    @staticmethod
    def _check_offset_epoch(member: ConsumerGroupMember, member_epoch: int) -> None:
        if member_epoch != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"The received member epoch {member_epoch} does not "
                             f"match the expected member epoch {member.member_epoch}.")

    def _member_or_unknown(self, member_id: str | None) -> ConsumerGroupMember:
        member = None if member_id is None else self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def validate_offset_delete(self) -> None:
        """Offsets of topics no member subscribes to may go at any time (Kafka checks nothing here)."""

    def offset_expiration_condition(self) -> OffsetExpirationCondition:
        return OffsetExpirationCondition(lambda offset: offset.commit_timestamp)

    def tombstones(self) -> list[Record]:
        """The records that delete the (empty) group, in Kafka's order."""
        g = self.group_id
        records = [CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(g), None),
                   CoordinatorRecord(ConsumerGroupPartitionMetadataKey(g), None),
                   CoordinatorRecord(ConsumerGroupMetadataKey(g), None)]
        return [encode_record(r) for r in records]

    # --- heartbeats ----------------------------------------------------------------------------------

    def heartbeat(self, request, *, client_id: str, client_host: str, now_ms: int, topics: TopicsImage,
                  new_member_uuid: NewMemberUuid, describable: DescribableTopics | None = None,
                  ) -> tuple[ConsumerGroupHeartbeatResponse, list[CoordinatorRecord]]:
        """Handle a ConsumerGroupHeartbeat already checked by `validate_heartbeat_request`;
        `new_member_uuid()` makes the id of a member that comes without one (v0); `describable`
        filters the topics its sender may DESCRIBE, which regex subscriptions resolve to from now on.

        Returns the response and the records to append; the group has already applied them. A
        refused request changes nothing: every check comes before the first record.
        """
        if describable is not None and self._describable is None:
            self._regex_image = None  # resolved for anyone so far (a group loaded, no authorizer before)
        self._describable = describable
        try:
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request, topics)
            return self._heartbeat(request, client_id, client_host, now_ms, topics, new_member_uuid)
        except GroupError as e:
            return ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message), []

    def _heartbeat(self, request, client_id, client_host, now_ms, topics, new_member_uuid):
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        config = self.config
        if len(self.members) >= config.max_size and request.member_id not in self.members:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                             f"capacity of {config.max_size} members.")
        member_id = request.member_id or new_member_uuid()
        owned = owned_from_request(request.topic_partitions)
        replaced = None
        if request.instance_id is None:
            member = self._dynamic_member(member_id, request.member_epoch, owned, joining)
        else:
            member, replaced = self._static_member(member_id, request.member_epoch, request.instance_id, owned,
                                                   joining)
        if member.state == MemberState.UNKNOWN and (owned is None or owned):
            # Written by a newer version: the member starts over, without partitions.
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                             "The member must abandon all its partitions and rejoin.")
        updated = replace(
            member,
            instance_id=member.instance_id if request.instance_id is None else request.instance_id,
            rack_id=member.rack_id if request.rack_id is None else request.rack_id,
            rebalance_timeout_ms=(member.rebalance_timeout_ms if request.rebalance_timeout_ms == -1
                                  else request.rebalance_timeout_ms),
            server_assignor=member.server_assignor if request.server_assignor is None else request.server_assignor,
            subscribed_topic_names=(member.subscribed_topic_names if request.subscribed_topic_names is None
                                    else tuple(sorted(set(request.subscribed_topic_names)))),
            subscribed_topic_regex=(member.subscribed_topic_regex if request.subscribed_topic_regex is None
                                    else request.subscribed_topic_regex),
            client_id=client_id, client_host=client_host)

        # Every check is done: from here on the group changes, one record at a time.
        records: list[CoordinatorRecord] = []
        if replaced is not None:
            self._replace_member(records, replaced, member)
        if member_id not in self.members or updated.metadata_value() != member.metadata_value():
            self._emit(records, ConsumerGroupMemberMetadataKey(self.group_id, member_id), updated.metadata_value())
        bump = (self.group_epoch == 0
                or updated.subscribed_topic_names != member.subscribed_topic_names
                or (updated.subscribed_topic_regex or None) != (member.subscribed_topic_regex or None))
        bump |= self._refresh_subscription_metadata(records, topics)
        if bump:
            self._bump_group_epoch(records)
        if self.group_epoch > self.assignment_epoch and self._may_assign(now_ms, config.assignment_interval_ms):
            self._update_target_assignment(records, topics, now_ms)
        final = self._maybe_reconcile(records, self.members[member_id], owned, now_ms, topics)
        self._session_deadline[member_id] = now_ms + config.session_timeout_ms

        response = ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=final.member_epoch,
                                                  heartbeat_interval_ms=config.heartbeat_interval_ms)
        # The assignment goes out when it changed, and to a full request (a join, or a member that
        # sends everything after an error) which may have missed it.
        full = joining or (request.rebalance_timeout_ms != -1 and owned is not None
                           and (request.subscribed_topic_names is not None
                                or request.subscribed_topic_regex is not None))
        if full or final.assigned_partitions != member.assigned_partitions:
            response.assignment = HeartbeatAssignment(
                topic_partitions=topic_partitions(final.assigned_partitions, HeartbeatTopicPartitions))
        return response, records

    def _dynamic_member(self, member_id, epoch, owned, joining) -> ConsumerGroupMember:
        member = self.members.get(member_id)
        if member is None:
            if not joining:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {self.group_id}.")
            return ConsumerGroupMember(member_id)
        self._check_member_epoch(member, epoch, owned)
        return member

    def _member_of_instance(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def _static_member(self, member_id, epoch, instance_id, owned, joining):
        """The member for `instance_id`, and the member it replaces when an instance rejoins."""
        existing = self._member_of_instance(instance_id)
        if joining:
            if existing is None:
                return self.members.get(member_id) or ConsumerGroupMember(member_id), None
            if existing.member_id == member_id:
                return existing, None  # the same instance again: a lost join response
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            # The instance is back: it takes over its previous self, assignment included, with no
            # rebalance unless its subscription changed.
            return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0), existing
        if existing is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                             f"{instance_id} was fenced by member {existing.member_id}.")
        self._check_member_epoch(existing, epoch, owned)
        return existing, None

    @staticmethod
    def _check_member_epoch(member: ConsumerGroupMember, epoch: int, owned: Assignment | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid, with KAFKA-19233: epoch 0 always rejoins."""
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            return
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member "
                             f"epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                            or not is_subset(owned, member.assigned_partitions)):
            # The previous epoch is accepted with a subset of the assignment: the response that
            # carried the new epoch may have been lost.
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member "
                             f"epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")

    def _leave(self, request, topics):
        member_id, epoch, instance_id = request.member_id, request.member_epoch, request.instance_id
        member: ConsumerGroupMember | None
        if instance_id is None:
            member = self._member_or_unknown(member_id)
        else:
            member = self._member_of_instance(instance_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} was fenced by member {member.member_id}.")
        records: list[CoordinatorRecord] = []
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member leaving for a while keeps its place (and its partitions) until its
            # session expires; what it was revoking is released now. Its partitions' assignment
            # epochs go to 0, as Kafka's resetAssignedPartitionsEpochsToZero.
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={},
                              assignment_epochs={t: dict.fromkeys(ps, 0)
                                                 for t, ps in member.assigned_partitions.items()})
            self._emit(records, ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member.member_id),
                       leaving.assignment_value())
        else:
            self._fence(records, member, topics)
        return ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=epoch), records

    # --- time ----------------------------------------------------------------------------------------

    def poll(self, now_ms: int, topics: TopicsImage) -> list[CoordinatorRecord]:
        """Fence the members whose session or rebalance timeout has run out by `now_ms`."""
        records: list[CoordinatorRecord] = []
        for member_id, deadline in list(self._session_deadline.items()):
            if deadline <= now_ms and member_id in self.members:
                self._fence(records, self.members[member_id], topics)
        for member_id, (deadline, epoch) in list(self._rebalance_deadline.items()):
            if deadline <= now_ms:
                del self._rebalance_deadline[member_id]
                member = self.members.get(member_id)
                # Only if it is still stuck in the epoch in which it had to revoke.
                if member is not None and member.member_epoch == epoch:
                    self._fence(records, member, topics)
        return records

    def next_deadline(self) -> int | None:
        deadlines = [*self._session_deadline.values(), *(d for d, _ in self._rebalance_deadline.values())]
        return min(deadlines, default=None)

    def on_loaded(self, now_ms: int) -> None:
        """After replaying the group at startup: every member gets a full session (Kafka's onLoaded)."""
        session_timeout_ms = self.config.session_timeout_ms
        for member in self.members.values():
            self._session_deadline[member.member_id] = now_ms + session_timeout_ms
            if member.state == MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_deadline[member.member_id] = (now_ms + member.rebalance_timeout_ms,
                                                              member.member_epoch)

    def on_topics_changed(self, topics: TopicsImage) -> list[CoordinatorRecord]:
        """A topic was created, deleted or grew: if the group subscribes to it, its epoch is bumped
        and the next heartbeat computes a new target assignment."""
        records: list[CoordinatorRecord] = []
        if self.members and self._refresh_subscription_metadata(records, topics):
            self._bump_group_epoch(records)
        return records

    # --- the steps of a heartbeat --------------------------------------------------------------------

    def _emit(self, records: list[CoordinatorRecord], key, value) -> None:
        record = CoordinatorRecord(key, value)
        self.replay(record)
        records.append(record)

    def _bump_group_epoch(self, records) -> None:
        self._emit(records, ConsumerGroupMetadataKey(self.group_id), ConsumerGroupMetadataValue(self.group_epoch + 1))

    def _resolve_regex(self, regex: str, topics: TopicsImage) -> frozenset[str]:
        if self._regex_image is not topics:
            self._regex_image, self._resolved_regex = topics, {}
        resolved = self._resolved_regex.get(regex)
        if resolved is None:
            # Every topic the pattern matches, internal ones too, that the sender of the heartbeat
            # that resolved it may DESCRIBE (Kafka's TopicRegexResolver). Resolved again when the
            # topics change.
            pattern = re.compile(regex)  # checked against RE2/J's syntax by the heartbeat that sent it
            matched = [name for name in topics.by_name if pattern.fullmatch(name)]
            resolved = frozenset(matched if self._describable is None else self._describable(matched))
            self._resolved_regex[regex] = resolved
        return resolved

    def _subscribed_topic_names(self, member: ConsumerGroupMember, topics: TopicsImage) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self._resolve_regex(member.subscribed_topic_regex, topics)
        return names

    def _subscribed_topic_ids(self, member: ConsumerGroupMember, topics: TopicsImage) -> frozenset[UUID]:
        metadata = self.subscription_metadata
        return frozenset(metadata[n].topic_id for n in self._subscribed_topic_names(member, topics) if n in metadata)

    def _refresh_subscription_metadata(self, records, topics: TopicsImage) -> bool:
        """Record the metadata of the subscribed topics when it changed; True if it did."""
        names = set().union(*(self._subscribed_topic_names(m, topics) for m in self.members.values()))
        metadata = {name: TopicMetadata(topic_id=info.topic_id, topic_name=name, num_partitions=info.num_partitions)
                    for name in sorted(names) if (info := topics.by_name.get(name)) is not None}
        if metadata == self.subscription_metadata:
            return False
        self._emit(records, ConsumerGroupPartitionMetadataKey(self.group_id),
                   ConsumerGroupPartitionMetadataValue(list(metadata.values())))
        return True

    def _may_assign(self, now_ms: int, interval_ms: int) -> bool:
        """Whether a new target assignment may be computed now (Kafka's canComputeNextTargetAssignment):
        the first one always, the next once `interval_ms` has passed since the last."""
        return self.assignment_timestamp == 0 or interval_ms == 0 or now_ms >= self.assignment_timestamp + interval_ms

    def _update_target_assignment(self, records, topics: TopicsImage, now_ms: int) -> None:
        specs = {m.member_id: MemberSpec(self._subscribed_topic_ids(m, topics),
                                         self.target_assignment.get(m.member_id, {}), m.instance_id, m.rack_id)
                 for m in self.members.values()}
        counts = {t.topic_id: t.num_partitions for t in self.subscription_metadata.values()}
        new_target = ASSIGNORS[self.preferred_assignor()].assign(specs, counts)
        for member_id in sorted(specs):
            if new_target[member_id] != self.target_assignment.get(member_id):
                self._emit(records, ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id),
                           ConsumerGroupTargetAssignmentMemberValue(topic_partitions(new_target[member_id],
                                                                                     TopicPartition)))
        self._emit(records, ConsumerGroupTargetAssignmentMetadataKey(self.group_id),
                   ConsumerGroupTargetAssignmentMetadataValue(self.group_epoch, assignment_timestamp=now_ms))

    def _maybe_reconcile(self, records, member: ConsumerGroupMember, owned, now_ms,
                         topics: TopicsImage) -> ConsumerGroupMember:
        if member.is_reconciled_to(self.assignment_epoch):
            return member
        updated = reconcile(member, self.assignment_epoch, self.target_assignment.get(member.member_id, {}),
                            self._subscribed_topic_ids(member, topics), self.partition_owner_epoch, owned)
        if updated == member:
            return member
        self._emit(records, ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member.member_id),
                   updated.assignment_value())
        if updated.state == MemberState.UNREVOKED_PARTITIONS:
            self._rebalance_deadline[member.member_id] = (now_ms + updated.rebalance_timeout_ms,
                                                          updated.member_epoch)
        else:
            self._rebalance_deadline.pop(member.member_id, None)
        return updated

    def _tombstone_member(self, records, member_id: str) -> None:
        g = self.group_id
        for key in (ConsumerGroupCurrentMemberAssignmentKey(g, member_id),
                    ConsumerGroupTargetAssignmentMemberKey(g, member_id),
                    ConsumerGroupMemberMetadataKey(g, member_id)):
            self._emit(records, key, None)
        self._session_deadline.pop(member_id, None)
        self._rebalance_deadline.pop(member_id, None)

    def _fence(self, records, member: ConsumerGroupMember, topics: TopicsImage) -> None:
        """Remove the member; the others are reassigned its partitions (Kafka's consumerGroupFenceMember)."""
        self._tombstone_member(records, member.member_id)
        self._refresh_subscription_metadata(records, topics)
        self._bump_group_epoch(records)

    def _replace_member(self, records, old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
        target = self.target_assignment.get(old.member_id, {})
        self._tombstone_member(records, old.member_id)
        g = self.group_id
        self._emit(records, ConsumerGroupMemberMetadataKey(g, new.member_id), new.metadata_value())
        self._emit(records, ConsumerGroupTargetAssignmentMemberKey(g, new.member_id),
                   ConsumerGroupTargetAssignmentMemberValue(topic_partitions(target, TopicPartition)))
        self._emit(records, ConsumerGroupCurrentMemberAssignmentKey(g, new.member_id), new.assignment_value())

    # --- replay --------------------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one record of this group (from a heartbeat, or from __consumer_offsets at load)."""
        key, value = record.key, record.value
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is not None:
                self.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            self.subscription_metadata = {} if value is None else {t.topic_name: t for t in value.topics}
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if value is None:
                self._remove_member(key.member_id)
            else:
                member = self.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                self._put_member(member.with_metadata(value))
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if value is None:
                self.assignment_epoch, self.assignment_timestamp = -1, 0
            else:
                self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = assignment_of(value.topic_partitions)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            member = self.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            if value is None:
                # The member is leaving: its partitions are free (its metadata tombstone follows).
                self._put_member(replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                         previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned_partitions={},
                                         partitions_pending_revocation={}, assignment_epochs={}))
            else:
                self._put_member(member.with_assignment(value))
        else:
            raise TypeError(f"not a consumer group record: {key!r}")

    def _put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release_partitions(old)
        self.members[member.member_id] = member
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    self._partition_owner[(topic_id, p)] = (member.member_id, member.member_epoch)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def _remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._release_partitions(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _release_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self._partition_owner.get((topic_id, p), ("",))[0] == member.member_id:
                        del self._partition_owner[(topic_id, p)]
