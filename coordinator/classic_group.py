"""A classic group (JoinGroup/SyncGroup protocol): its members, state and generation.

Kafka's ClassicGroup and ClassicGroupMember (GroupMetadata and MemberMetadata before Kafka 3.7).
This module is the data and its invariants: the state machine's legal transitions, the protocol
vote, static member bookkeeping, the record it is stored as. What happens on requests and timeouts
is in classic_group_manager.py.

States (Kafka's ClassicGroupState):

    Empty                no members; offsets may still be committed with generation -1
    PreparingRebalance   members (re)join; their JoinGroup requests are parked until all have
    CompletingRebalance  JoinGroup answered; waiting for the leader's SyncGroup with the assignment
    Stable               assignment handed out; heartbeats keep members in
    Dead                 deleted or unloaded; nothing more happens to it

    PreparingRebalance  <- Empty, Stable, CompletingRebalance
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Empty               <- PreparingRebalance
    Dead                <- any
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from ..wire.coordinator_record import encode_key, encode_value
from ..wire.coordinator_records.group_metadata_key import GroupMetadataKey
from ..wire.coordinator_records.group_metadata_value import GroupMetadataValue, MemberMetadata
from ..wire.errors import ErrorCode
from .actions import Record, Ticket
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from .group import Group, GroupError, GroupType, OffsetExpirationCondition, RequestInfo

log = logging.getLogger("samsa.coordinator.group")


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = ClassicGroupState

# Kafka writes GroupMetadataValue v3, the last version before the flexible ones.
GROUP_METADATA_VALUE_VERSION = 3

VALID_PREVIOUS_STATES = {
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    EMPTY: {PREPARING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}


class ParkedRequest(NamedTuple):
    """A JoinGroup or SyncGroup waiting for the group: whom to answer, at which version."""

    ticket: Ticket
    request: RequestInfo


@dataclass(eq=False)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's preference order
    assignment: bytes = b""
    awaiting_join: ParkedRequest | None = None
    awaiting_sync: ParkedRequest | None = None
    # Joined but not yet through a rebalance: it has no session yet, only the new-member join timeout.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """The same protocols with the same metadata, in the same order: rejoining changes nothing."""
        return self.supported_protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {candidates}")

    def has_satisfied_heartbeat(self) -> bool:
        """A session timeout expires a member unless it is waiting on the group (join or sync)."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(eq=False)
class ClassicGroup(Group):
    group_id: str
    # When the group entered its state; None for a group loaded from a record without it (v0, v1).
    current_state_timestamp: int | None
    state: ClassicGroupState = EMPTY
    previous_state: ClassicGroupState | None = None
    protocol_type: str = ""  # "" until the first member joins (and for a "simple" offsets-only group)
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED, not yet rejoined
    pending_sync_members: set[str] = field(default_factory=set)
    num_awaiting_join: int = 0
    supported_protocols: Counter = field(default_factory=Counter)  # protocol -> members supporting it
    # The topics the members consume (protocol type "consumer"), None when unknown.
    subscribed_topics: set[str] | None = None
    # A member joined during the initial rebalance delay: the delay is extended (Kafka's InitialDelayedJoin).
    new_member_added: bool = False

    type = GroupType.CLASSIC

    # --- the Group interface --------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.state is EMPTY

    def is_simple_group(self) -> bool:
        """Offsets only: no member ever joined, none is about to (Kafka's isSimpleGroup)."""
        return not self.protocol_type and self.is_empty() and not self.pending_members

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               request: RequestInfo, transactional: bool = False) -> None:
        if self.state is DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_or_epoch < 0 and self.state is EMPTY:
            return  # the admin client, or a consumer managing its own assignment
        if generation_or_epoch >= 0 or member_id or group_instance_id is not None:
            self.validate_member(member_id, group_instance_id, "txn-offset-commit" if transactional else "offset-commit")
            if generation_or_epoch != self.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        elif self.state is not EMPTY and not transactional:
            # Without member id and generation (OffsetCommit v0), only an empty group takes commits.
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is COMPLETING_REBALANCE and not transactional:
            # The member has this generation's JoinGroup response but not its assignment yet.
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int, request: RequestInfo) -> None:
        if self.state is DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")

    def validate_delete_group(self) -> None:
        if self.state is DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")
        if self.state is not EMPTY:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def validate_offset_delete(self) -> None:
        if self.state is DEAD:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")
        if self.state is not EMPTY and not self.uses_consumer_protocol:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            # Unknown subscriptions: a consumer group may be reading it; other protocols do not read topics.
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics

    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        if not self.protocol_type:
            # A "simple" group, using Kafka only to store offsets: each expires from its commit.
            return OffsetExpirationCondition(lambda offset: offset.commit_timestamp)
        if self.state is EMPTY:
            # Retention counts from when the group became empty (KIP-211), or from the commit for a
            # group stored without that time.
            became_empty = self.current_state_timestamp
            if became_empty is None:
                return OffsetExpirationCondition(lambda offset: offset.commit_timestamp)
            return OffsetExpirationCondition(lambda offset: became_empty)
        if self.uses_consumer_protocol and self.subscribed_topics is not None and self.state is STABLE:
            # Offsets of topics no member consumes any more expire from their commit (KIP-496).
            return OffsetExpirationCondition(lambda offset: offset.commit_timestamp)
        return None

    def tombstones(self) -> list[Record]:
        return [(encode_key(GroupMetadataKey(group=self.group_id)), None)]

    # --- membership ---------------------------------------------------------------------------

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def validate_member(self, member_id: str, group_instance_id: str | None, operation: str) -> None:
        """The member exists and, for a static member, is the instance's current member id."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if current != member_id:
                log.info("Request memberId=%s for static member with groupInstanceId=%s is fenced by current "
                         "memberId=%s during operation %s", member_id, group_instance_id, current, operation)
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)

    def add(self, member: ClassicGroupMember, awaiting_join: ParkedRequest | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.supported_protocols)
        member.awaiting_join = awaiting_join
        if awaiting_join is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.supported_protocols)
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, awaiting_join: ParkedRequest | None) -> None:
        self.supported_protocols.subtract(name for name, _ in member.supported_protocols)
        member.supported_protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.num_awaiting_join += (awaiting_join is not None) - (member.awaiting_join is not None)
        member.awaiting_join = awaiting_join

    def take_join(self, member: ClassicGroupMember) -> ParkedRequest | None:
        """The member's parked JoinGroup, which the caller answers now."""
        parked, member.awaiting_join = member.awaiting_join, None
        if parked is not None:
            self.num_awaiting_join -= 1
        return parked

    @staticmethod
    def take_sync(member: ClassicGroupMember) -> ParkedRequest | None:
        parked, member.awaiting_sync = member.awaiting_sync, None
        return parked

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
        """A static member rejoined under a new member id: same member, same assignment, new id.
        The caller has answered (fenced) whatever the old id had parked."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make some member that did the leader; False when
        the group has no leader or no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            log.info("Group leader [member.id: %s, group.instance.id: %s] failed to join before the rebalance "
                     "timeout, and the group could not proceed to the next generation because no member joined.",
                     leader.member_id, leader.group_instance_id)
            return False
        log.info("Group leader [member.id: %s, group.instance.id: %s] failed to join before the rebalance timeout, "
                 "while new leader %s was elected.", leader.member_id, leader.group_instance_id, joined.member_id)
        self.leader_id = joined.member_id
        return True

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ----------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.state is EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its preferred protocol among those all support; most votes wins
        (ties: the first voted for, in member order)."""
        if not self.members:
            raise ValueError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def compute_subscribed_topics(self) -> set[str] | None:
        if not self.uses_consumer_protocol:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = subscribed_topics(member.metadata(self.protocol_name))
            if member_topics is None:
                log.warning("Failed to parse the consumer protocol %s of group %s: the coordinator does not know "
                            "the subscribed topics.", self.protocol_name, self.group_id)
                return None
            topics |= member_topics
        return topics

    # --- generations ----------------------------------------------------------------------------

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise ValueError(f"Group {self.group_id} should be in the {sorted(s.value for s in VALID_PREVIOUS_STATES[state])} "
                             f"states before moving to {state.value} state. Instead it is in {self.state.value} state")
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, group instance id, metadata for the chosen protocol) of every member: what the
        leader gets in its JoinGroup response to compute the assignment."""
        if self.state in (DEAD, PREPARING_REBALANCE) or self.protocol_name is None:
            raise ValueError(f"cannot list member metadata of group {self.group_id} in state {self.state.value}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # --- the record -----------------------------------------------------------------------------

    def to_record(self, assignment: dict[str, bytes]) -> Record:
        """The GroupMetadata record of this generation with `assignment` (member id -> bytes)."""
        value = GroupMetadataValue(
            protocol_type=self.protocol_type, generation=self.generation_id, protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.current_state_timestamp is None else self.current_state_timestamp,
            members=[MemberMetadata(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                session_timeout=m.session_timeout_ms, rebalance_timeout=m.rebalance_timeout_ms,
                group_instance_id=m.group_instance_id,
                subscription=m.metadata(self.protocol_name) if self.protocol_name is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            ) for m in self.members.values()])
        return encode_key(GroupMetadataKey(group=self.group_id)), encode_value(value, GROUP_METADATA_VALUE_VERSION)

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A group as loaded from its last record: Empty without members, else Stable."""
        group = cls(group_id, None if value.current_state_timestamp < 0 else value.current_state_timestamp,
                    state=STABLE if value.members else EMPTY, protocol_type=value.protocol_type,
                    protocol_name=value.protocol, generation_id=value.generation)
        for m in value.members:
            group.add(ClassicGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                # v0 has no rebalance timeout: members rebalance within their session timeout.
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout < 0 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout, protocol_type=group.protocol_type,
                supported_protocols=[(value.protocol or "", m.subscription)], assignment=m.assignment))
        if value.leader in group.members:
            group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
