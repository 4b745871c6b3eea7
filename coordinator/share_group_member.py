"""A share group member (Kafka's ShareGroupMember) and how it moves to its target assignment
(Kafka's ShareGroupAssignmentBuilder).

Share groups do not revoke: several members may consume a partition at once, so a member takes its
target assignment as soon as there is a new one (no epoch in which it waits for another member to
let a partition go), less the topics it no longer subscribes to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from uuid import UUID

from ..wire.coordinator_records.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue, TopicPartitions,
)
from ..wire.coordinator_records.share_group_member_metadata_value import ShareGroupMemberMetadataValue
from .consumer_group_member import Assignment, MemberState, assignment_of, topic_partitions

__all__ = ["ShareGroupMember", "reconcile"]


@dataclass(frozen=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1  # Kafka's Builder starts a new member there
    state: MemberState = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned_partitions: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_assignment_epoch

    # --- records ---------------------------------------------------------------------------------

    def metadata_value(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(rack_id=self.rack_id, client_id=self.client_id,
                                             client_host=self.client_host,
                                             subscribed_topic_names=sorted(self.subscribed_topic_names))

    def assignment_value(self) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch, state=self.state,
            assigned_partitions=topic_partitions(self.assigned_partitions, TopicPartitions))

    def with_metadata(self, value: ShareGroupMemberMetadataValue) -> ShareGroupMember:
        return replace(self, rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                       subscribed_topic_names=frozenset(value.subscribed_topic_names))

    def with_assignment(self, value: ShareGroupCurrentMemberAssignmentValue) -> ShareGroupMember:
        return replace(self, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                       state=MemberState.from_value(value.state),
                       assigned_partitions=assignment_of(value.assigned_partitions))


def reconcile(member: ShareGroupMember, target_epoch: int, target: Assignment,
              subscribed_topic_ids: frozenset[UUID], subscription_changed: bool) -> ShareGroupMember:
    """The member at the target assignment (Kafka's ShareGroupAssignmentBuilder.build): a new target
    epoch moves it there at once; within the epoch, only a changed subscription changes what it has."""
    if target_epoch != member.member_epoch:
        return replace(member, state=MemberState.STABLE, member_epoch=target_epoch,
                       previous_member_epoch=member.member_epoch,
                       assigned_partitions=_subscribed(target, subscribed_topic_ids))
    if subscription_changed:
        return replace(member, assigned_partitions=_subscribed(target, subscribed_topic_ids))
    return member


def _subscribed(target: Mapping[UUID, frozenset[int]], subscribed: frozenset[UUID]) -> dict[UUID, frozenset[int]]:
    return {t: ps for t, ps in target.items() if t in subscribed}
