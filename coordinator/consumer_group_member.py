"""A consumer group member (Kafka's ConsumerGroupMember) and its reconciliation engine (Kafka's
CurrentAssignmentBuilder).

Reconciliation moves a member from its current assignment towards its target assignment in steps
that never let two members own a partition at once:

1. STABLE at epoch e, target at epoch t > e: partitions no longer in the target are revoked first.
   The member stays at epoch e in UNREVOKED_PARTITIONS until a heartbeat no longer lists them.
2. With nothing left to revoke, the member moves to epoch t and gets the target partitions that are
   free; a partition another member still owns (at any epoch) stays unreleased: the member is
   UNRELEASED_PARTITIONS at epoch t until its previous owner lets it go.
3. With everything assigned, the member is STABLE at epoch t.

Each partition the member has or is revoking keeps the epoch at which the member got it (the target
epoch of the step that assigned it): an offset commit at an older epoch may only name partitions
the member got at that epoch or before (Kafka's ConsumerGroup.createAssignmentEpochValidator).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from uuid import UUID

from ..wire.coordinator_records.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions,
)
from ..wire.coordinator_records.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue

__all__ = ["Assignment", "AssignmentEpochs", "ConsumerGroupMember", "MemberState", "assignment_of", "is_subset",
           "owned_from_request", "reconcile", "topic_partitions"]

# A member's partitions: {topic_id: frozenset(partitions)}.
Assignment = Mapping[UUID, frozenset[int]]
# The epoch at which a member got each of its partitions: {topic_id: {partition: epoch}}.
AssignmentEpochs = Mapping[UUID, Mapping[int, int]]


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


def topic_partitions(assignment: Assignment, cls) -> list:
    """An assignment as a list of `cls(topic_id, partitions)` (a record's or a response's TopicPartitions)."""
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items())]


def assignment_of(topic_partitions_) -> dict[UUID, frozenset[int]]:
    """The assignment of a record's TopicPartitions."""
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions_}


def _record_topic_partitions(assignment: Assignment, epochs: AssignmentEpochs,
                             default_epoch: int) -> list[TopicPartitions]:
    """A member's partitions as ConsumerGroupCurrentMemberAssignmentValue's TopicPartitions, each
    with the epoch it was assigned at (AssignmentEpochs, tagged: the same length as Partitions); one
    without (a member built without them) at `default_epoch`, what replaying the record would say."""
    out = []
    for topic_id, ps in sorted(assignment.items()):
        partitions, known = sorted(ps), epochs.get(topic_id, {})
        out.append(TopicPartitions(topic_id=topic_id, partitions=partitions,
                                   assignment_epochs=[known.get(p, default_epoch) for p in partitions]))
    return out


def _first(*epochs: int | None) -> int:
    return next(e for e in epochs if e is not None)


def _record_epochs(default_epoch: int, *topic_partitions_lists) -> dict[UUID, dict[int, int]]:
    """The assignment epochs of a record's TopicPartitions (Kafka's Utils.assignmentFromTopicPartitions):
    a record without them (written before they existed), or with a list of another length, gives
    every partition the record's member epoch (0 when negative)."""
    default_epoch = max(default_epoch, 0)
    epochs: dict[UUID, dict[int, int]] = {}
    for tp in (tp for tps in topic_partitions_lists for tp in tps):
        given = tp.assignment_epochs
        if given is not None and len(given) == len(tp.partitions):
            epochs.setdefault(tp.topic_id, {}).update(zip(tp.partitions, given))
        else:
            epochs.setdefault(tp.topic_id, {}).update((p, default_epoch) for p in tp.partitions)
    return epochs


# Kafka's ConsumerGroupHeartbeatRequest epochs with a meaning of their own.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    # The epoch at which the member got each partition it has or is revoking (Kafka keeps them in
    # assignedPartitions' and partitionsPendingRevocation's maps; kept apart here so that both stay
    # plain assignments for the assignor, the responses and the records' partition lists).
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def with_epoch(self, epoch: int, **changes) -> ConsumerGroupMember:
        """Kafka's Builder.updateMemberEpoch: the current epoch becomes the previous one. What the
        member keeps assigned keeps its assignment epoch, what it now revokes too; a partition new
        to its assignment (one it was revoking included) is assigned at `epoch`, the target epoch
        CurrentAssignmentBuilder moves it to when it assigns partitions."""
        moved = replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)
        epochs: dict[UUID, dict[int, int]] = {}
        for topic_id, ps in moved.assigned_partitions.items():
            epochs[topic_id] = {p: _first(self.assignment_epoch(topic_id, p), epoch) for p in ps}
        for topic_id, ps in moved.partitions_pending_revocation.items():
            epochs.setdefault(topic_id, {}).update(
                (p, _first(self.assignment_epoch(topic_id, p), self.pending_revocation_epoch(topic_id, p), epoch))
                for p in ps)
        return replace(moved, assignment_epochs=epochs)

    def assignment_epoch(self, topic_id: UUID, partition: int) -> int | None:
        """The epoch at which the member got a partition it has (Kafka's assignmentEpoch)."""
        if partition not in self.assigned_partitions.get(topic_id, frozenset()):
            return None
        return self.assignment_epochs.get(topic_id, {}).get(partition)

    def pending_revocation_epoch(self, topic_id: UUID, partition: int) -> int | None:
        """The epoch at which the member got a partition it is revoking (Kafka's pendingRevocationEpoch)."""
        if partition not in self.partitions_pending_revocation.get(topic_id, frozenset()):
            return None
        return self.assignment_epochs.get(topic_id, {}).get(partition)

    # --- records ---------------------------------------------------------------------------------

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
            client_host=self.client_host, subscribed_topic_names=list(self.subscribed_topic_names),
            subscribed_topic_regex=self.subscribed_topic_regex, rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor)

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch, state=self.state,
            assigned_partitions=_record_topic_partitions(self.assigned_partitions, self.assignment_epochs,
                                                         max(self.member_epoch, 0)),
            partitions_pending_revocation=_record_topic_partitions(self.partitions_pending_revocation,
                                                                   self.assignment_epochs, max(self.member_epoch, 0)))

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return replace(self, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                       client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
                       subscribed_topic_regex=value.subscribed_topic_regex,
                       rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor)

    def with_assignment(self, value: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerGroupMember:
        return replace(self, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                       state=MemberState.from_value(value.state),
                       assigned_partitions=assignment_of(value.assigned_partitions),
                       partitions_pending_revocation=assignment_of(value.partitions_pending_revocation),
                       assignment_epochs=_record_epochs(value.member_epoch, value.assigned_partitions,
                                                        value.partitions_pending_revocation))


def owned_from_request(topic_partitions) -> dict[UUID, frozenset[int]] | None:
    """The TopicPartitions of a heartbeat request as an assignment (None stays None: not sent)."""
    if topic_partitions is None:
        return None
    owned: dict[UUID, set[int]] = {}
    for tp in topic_partitions:
        owned.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {t: frozenset(ps) for t, ps in owned.items()}


def is_subset(owned: Assignment | None, assignment: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assignment.get(t, frozenset()) for t, ps in owned.items())


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still owns one of `partitions`; not knowing (None) counts as owning."""
    if owned is None:
        return True
    return any(ps & partitions.get(t, frozenset()) for t, ps in owned.items())


def _nonempty(assignment: Mapping[UUID, Iterable[int]]) -> dict[UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              subscribed_topic_ids: frozenset[UUID], owner_epoch: Callable[[UUID, int], int],
              owned: Assignment | None) -> ConsumerGroupMember:
    """The member's next state towards `target` (Kafka's CurrentAssignmentBuilder.build).

    `owner_epoch(topic_id, partition)` is the epoch of the member that owns the partition now
    (assigned or pending revocation), -1 when nobody does; `owned` is what the member reported in
    this heartbeat (None when it did not report). A member in the UNKNOWN state must own nothing.
    """
    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                                    owner_epoch, owned)
        return _drop_unsubscribed(member, subscribed_topic_ids, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return _drop_unsubscribed(member, subscribed_topic_ids, owned)
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                                owner_epoch, owned)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                                owner_epoch, owned)
    # A state written by a newer version: start over (the group has fenced the member unless it
    # reported owning nothing).
    return _next_assignment(member, target_epoch, target_epoch, target, subscribed_topic_ids, owner_epoch, owned)


def _drop_unsubscribed(member: ConsumerGroupMember, subscribed: frozenset[UUID],
                       owned: Assignment | None) -> ConsumerGroupMember:
    """Partitions of topics the member no longer subscribes to go to revocation at once, without
    waiting for a new target assignment (Kafka's updateCurrentAssignment)."""
    dropped = {t: ps for t, ps in member.assigned_partitions.items() if t not in subscribed}
    if not dropped:
        return member
    assigned = {t: ps for t, ps in member.assigned_partitions.items() if t in subscribed}
    pending = dict(member.partitions_pending_revocation)
    for t, ps in dropped.items():
        pending[t] = pending.get(t, frozenset()) | ps
    if _owns_any(owned, pending):
        return member.with_epoch(member.member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                                 assigned_partitions=assigned, partitions_pending_revocation=pending)
    return member.with_epoch(member.member_epoch, assigned_partitions=assigned)


def _next_assignment(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
                     subscribed: frozenset[UUID], owner_epoch: Callable[[UUID, int], int],
                     owned: Assignment | None) -> ConsumerGroupMember:
    current = member.assigned_partitions
    was_pending = member.partitions_pending_revocation
    assigned: dict[UUID, set[int]] = {}
    revoking: dict[UUID, set[int]] = {}
    to_assign: dict[UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        have = current.get(topic_id, frozenset())
        assigned[topic_id] = set(have & wanted)
        revoking[topic_id] = set(have - wanted)
        missing = set(wanted - have)
        # A partition still owned by someone else is not ours yet, unless the one owning it is us
        # (pending revocation, being handed back): only one member ever owns a partition.
        held = {p for p in missing
                if owner_epoch(topic_id, p) != -1 and p not in was_pending.get(topic_id, frozenset())}
        unreleased |= bool(held)
        to_assign[topic_id] = missing - held
    revoking_ = _nonempty(revoking)
    if revoking_ and _owns_any(owned, revoking_):
        return member.with_epoch(member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                                 assigned_partitions=_nonempty(assigned), partitions_pending_revocation=revoking_)
    for topic_id, ps in to_assign.items():
        assigned[topic_id] |= ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned_partitions=_nonempty(assigned),
                             partitions_pending_revocation={})
