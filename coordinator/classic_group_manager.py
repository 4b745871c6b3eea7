"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups.

Kafka's classic-group half of GroupMetadataManager (GroupCoordinator.scala before 3.7), on an
explicit clock. A rebalance goes:

1. A member joins (or leaves, or times out, or the leader rejoins): the group moves to
   PreparingRebalance and every JoinGroup is parked. From Empty the join waits
   `group.initial.rebalance.delay.ms`, extended while new members keep arriving, up to the
   rebalance timeout (Kafka's InitialDelayedJoin); otherwise it completes as soon as every known
   member has rejoined, or at the rebalance timeout, when members that did not rejoin are dropped
   (Kafka's DelayedJoin).
2. Join completes: a new generation, the protocol chosen by vote; every parked JoinGroup is
   answered, the leader's with all members' metadata. The group waits in CompletingRebalance.
3. The leader's SyncGroup brings the assignment; it is written to `__consumer_offsets` and, once
   the append succeeded, every parked SyncGroup gets its member's assignment: Stable. Members that
   do not sync within the rebalance timeout are dropped and the group rebalances (Kafka's DelayedSync).

Session timeouts run on heartbeats; a member waiting on a JoinGroup or SyncGroup response keeps its
session, except a new member, which has `NEW_MEMBER_JOIN_TIMEOUT_MS` to complete its first join.
Static members (group.instance.id) rejoin under a new member id without a rebalance; the old id
is fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..wire.coordinator_record import GROUP_COORDINATOR, decode_key, decode_value
from ..wire.coordinator_records.group_metadata_key import GroupMetadataKey
from ..wire.coordinator_records.group_metadata_value import GroupMetadataValue
from ..wire.errors import ErrorCode
from ..wire.protocol import ApiKey, response_class
from .actions import Actions, Ticket, append_error
from .classic_group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    ClassicGroupMember,
    ParkedRequest,
)
from .group import Group, GroupError, GroupType, GroupTypeManager, RequestInfo

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("samsa.coordinator.classic")

JoinGroupResponse = response_class(ApiKey.JOIN_GROUP)
SyncGroupResponse = response_class(ApiKey.SYNC_GROUP)
HeartbeatResponse = response_class(ApiKey.HEARTBEAT)
LeaveGroupResponse = response_class(ApiKey.LEAVE_GROUP)
DescribeGroupsResponse = response_class(ApiKey.DESCRIBE_GROUPS)

UNKNOWN_MEMBER_ID = ""


def join_error(request: RequestInfo, member_id: str, code: int):
    return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1,
                             protocol_name=None if request.api_version >= 7 else "", leader="", member_id=member_id)


def sync_response(code: int, assignment: bytes = b"", protocol_type: str | None = None,
                  protocol_name: str | None = None):
    return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=protocol_type,
                             protocol_name=protocol_name, assignment=assignment)


def heartbeat_response(code: int):
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


class ClassicGroupManager(GroupTypeManager):
    group_type = GroupType.CLASSIC
    record_types = (GroupMetadataKey.API_KEY,)

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self.timer = coordinator.timer

    # --- lookups ------------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    # --- JoinGroup ----------------------------------------------------------------------------

    def join_group(self, now_ms: int, ticket: Ticket, request: RequestInfo, join, out: Actions) -> None:
        group_id, member_id = join.group_id, join.member_id
        if not group_id:
            out.respond(ticket, join_error(request, member_id, ErrorCode.INVALID_GROUP_ID))
            return
        session_timeout = join.session_timeout_ms
        if not self.config.group_min_session_timeout_ms <= session_timeout <= self.config.group_max_session_timeout_ms:
            out.respond(ticket, join_error(request, member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        # JoinGroup v0 has no rebalance timeout: members had their session timeout to rejoin.
        rebalance_timeout = join.rebalance_timeout_ms if request.api_version >= 1 else session_timeout
        existing = self.coordinator.groups.get(group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            if existing.type == GroupType.SHARE:
                # Kafka's getOrMaybeCreateClassicGroup: a share group never gives way to a classic one.
                out.respond(ticket, join_error(request, member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
                return
            if not existing.is_empty():
                # A KIP-848 consumer group: classic members cannot join it (no online upgrade path yet).
                out.respond(ticket, join_error(request, member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
                return
            # An empty one gives way, its offsets kept (Kafka's maybeDeleteEmptyConsumerGroup).
            out.append(self.coordinator.partition_for(group_id), existing.tombstones(), lambda error, now_ms, out: None)
            self.coordinator._remove_group(existing, now_ms)
            existing = None
        group = existing
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                out.respond(ticket, join_error(request, member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            group = ClassicGroup(group_id, now_ms)
            self.coordinator.add_group(group)
        parked = ParkedRequest(ticket, request)
        protocols = [(p.name, bytes(p.metadata)) for p in join.protocols]
        if not self._accepts_joining_member(group, member_id):
            group.remove(member_id)
            out.respond(ticket, join_error(request, UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif group.state is DEAD:
            # Deleted meanwhile: the client rediscovers the coordinator and rejoins.
            out.respond(ticket, join_error(request, member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(join.protocol_type, {name for name, _ in protocols}):
            out.respond(ticket, join_error(request, member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(now_ms, group, parked, join, protocols, rebalance_timeout, out)
        else:
            self._join_current_member(now_ms, group, parked, join, protocols, rebalance_timeout, out)
        # Every member is in: complete the join, unless this is the group's initial (delayed) rebalance.
        if (group.state is PREPARING_REBALANCE and group.has_all_members_joined()
                and group.previous_state is not EMPTY):
            self._complete_join(now_ms, group, out)

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size: a rebalancing group counts the members that rejoined, so that the last
        ones to rejoin are the ones turned away when the limit was lowered."""
        max_size = self.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join < max_size
        return member is not None or group.size < max_size

    def _join_new_member(self, now_ms: int, group: ClassicGroup, parked: ParkedRequest, join,
                         protocols: list[tuple[str, bytes]], rebalance_timeout: int, out: Actions) -> None:
        instance_id = join.group_instance_id
        request = parked.request
        # Kafka's member ids: the client id (or group.instance.id), "-", a random UUID.
        prefix = instance_id if instance_id is not None else request.client_id
        new_member_id = f"{prefix}-{self.coordinator.new_member_uuid()}"
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                log.info("Static member with groupInstanceId=%s and unknown member id joins group %s in %s state. "
                         "Replacing previously mapped member %s with this groupInstanceId.",
                         instance_id, group.group_id, group.state_name, old_member_id)
                self._replace_static_member_and_rebalance(now_ms, group, old_member_id, new_member_id, parked, join,
                                                          protocols, rebalance_timeout, out)
                return
        elif request.api_version >= 4:
            # KIP-394: hand out the member id first, so that a client that times out and retries
            # comes back as the same member instead of leaving a defunct one behind.
            log.info("Dynamic member with unknown member id joins group %s in %s state. Created a new member id %s "
                     "and request the member to rejoin with this id.", group.group_id, group.state_name, new_member_id)
            group.add_pending_member(new_member_id)
            self._schedule_session_expiry(now_ms, group, new_member_id, join.session_timeout_ms)
            out.respond(parked.ticket, join_error(request, new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
            return
        self._add_member_and_rebalance(now_ms, group, new_member_id, parked, join, protocols, rebalance_timeout, out)

    def _join_current_member(self, now_ms: int, group: ClassicGroup, parked: ParkedRequest, join,
                             protocols: list[tuple[str, bytes]], rebalance_timeout: int, out: Actions) -> None:
        member_id, request = join.member_id, parked.request
        if member_id in group.pending_members:
            log.info("Pending dynamic member with id %s joins group %s in %s state. Adding to the group now.",
                     member_id, group.group_id, group.state_name)
            self._add_member_and_rebalance(now_ms, group, member_id, parked, join, protocols, rebalance_timeout, out)
            return
        try:
            group.validate_member(member_id, join.group_instance_id, "join-group")
        except GroupError as e:
            out.respond(parked.ticket, join_error(request, member_id, e.code))
            return
        member = group.members[member_id]
        if group.state in (EMPTY, DEAD):
            log.warning("Attempt to add rejoining member %s of group %s in unexpected group state %s",
                        member_id, group.group_id, group.state_name)
            out.respond(parked.ticket, join_error(request, member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(now_ms, group, member, protocols, rebalance_timeout,
                                              join.session_timeout_ms, parked,
                                              f"Member {member_id} joining group during PreparingRebalance", out)
        elif group.state is COMPLETING_REBALANCE and member.matches(protocols):
            # The member missed its JoinGroup response: the same answer again.
            out.respond(parked.ticket, self._join_response(group, member_id, request,
                                                           with_members=group.is_leader(member_id)))
        elif group.state is STABLE and not group.is_leader(member_id) and member.matches(protocols):
            # A follower with nothing new: it gets the current generation and syncs.
            out.respond(parked.ticket, self._join_response(group, member_id, request, with_members=False))
        else:
            # New metadata, or the leader asking for a rebalance (e.g. for topic metadata changes).
            self._update_member_and_rebalance(now_ms, group, member, protocols, rebalance_timeout,
                                              join.session_timeout_ms, parked,
                                              f"Updating metadata for member {member_id} during {group.state_name}",
                                              out)

    def _add_member_and_rebalance(self, now_ms: int, group: ClassicGroup, member_id: str, parked: ParkedRequest, join,
                                  protocols: list[tuple[str, bytes]], rebalance_timeout: int, out: Actions) -> None:
        member = ClassicGroupMember(
            member_id=member_id, group_instance_id=join.group_instance_id, client_id=parked.request.client_id,
            client_host=parked.request.client_host, rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=join.session_timeout_ms, protocol_type=join.protocol_type,
            supported_protocols=protocols, is_new=True)
        if group.state is PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, parked)
        # A new member cannot heartbeat before its first JoinGroup response, and a client that
        # gave up on the parked request would otherwise stay a member forever: it has this long.
        self._schedule_session_expiry(now_ms, group, member_id, self.config.group_new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            now_ms, group, f"Adding new member {member_id} with group instance id {join.group_instance_id}", out)

    def _update_member_and_rebalance(self, now_ms: int, group: ClassicGroup, member: ClassicGroupMember,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout: int, session_timeout: int,
                                     parked: ParkedRequest, reason: str, out: Actions) -> None:
        group.update_member(member, protocols, rebalance_timeout, session_timeout, parked)
        self._maybe_prepare_rebalance_or_complete_join(now_ms, group, reason, out)

    def _replace_static_member_and_rebalance(self, now_ms: int, group: ClassicGroup, old_member_id: str,
                                             new_member_id: str, parked: ParkedRequest, join,
                                             protocols: list[tuple[str, bytes]], rebalance_timeout: int,
                                             out: Actions) -> None:
        instance_id = join.group_instance_id
        request = parked.request
        old_leader = group.leader_id
        member = group.members[old_member_id]
        # The old incarnation's parked requests learn that it was replaced.
        self._refuse_parked(group, member, ErrorCode.FENCED_INSTANCE_ID, old_member_id, out)
        group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timer.cancel(self._session_key(group.group_id, old_member_id))
        self._schedule_session_expiry(now_ms, group, new_member_id, member.session_timeout_ms)
        old_protocols, old_rebalance, old_session = (member.supported_protocols, member.rebalance_timeout_ms,
                                                     member.session_timeout_ms)
        group.update_member(member, protocols, rebalance_timeout, join.session_timeout_ms, parked)
        if group.state is STABLE:
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance_or_complete_join(
                    now_ms, group, f"Group's selectedProtocol will change because static member {new_member_id} with "
                                f"instance id {instance_id} joined with change of protocol", out)
                return
            # Same protocol: no rebalance. The new member id is stored before the member learns it.
            log.info("Static member %s of group %s rejoins during Stable without changing the protocol: no rebalance.",
                     instance_id, group.group_id)
            generation = group.generation_id

            def stored(error: int, now_ms: int, out: Actions) -> None:
                if group.generation_id != generation or group.members.get(new_member_id) is not member:
                    return
                if error != ErrorCode.NONE:
                    log.warning("Failed to persist metadata for group %s: %s", group.group_id, ErrorCode(error).name)
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self.timer.cancel(self._session_key(group.group_id, new_member_id))
                    self._schedule_session_expiry(now_ms, group, old_member_id, member.session_timeout_ms)
                    response = self._join_response(group, UNKNOWN_MEMBER_ID, request, with_members=False)
                    response.leader, response.error_code = old_leader or "", self._group_append_error(error)
                    out.respond(parked.ticket, response)
                    return
                taken = group.take_join(member)
                if request.api_version >= 9:
                    # KIP-814: the leader learns it leads but skips the assignment, which a Stable
                    # group would not hand out anyway.
                    is_leader = group.is_leader(new_member_id)
                    response = self._join_response(group, new_member_id, request, with_members=is_leader)
                    response.skip_assignment = is_leader
                else:
                    # Older clients: answer with the old leader id, so that a rejoining leader does
                    # not see itself as leader and compute an assignment nobody would receive.
                    response = self._join_response(group, new_member_id, request, with_members=False)
                    response.leader = old_leader or ""
                if taken is not None:
                    out.respond(taken.ticket, response)

            out.append(self.coordinator.partition_for(group.group_id),
                       [group.to_record({m.member_id: m.assignment for m in group.members.values()})], stored)
        elif group.state is COMPLETING_REBALANCE:
            # The leader may already be computing an assignment for the old member id: start over.
            self._prepare_rebalance(now_ms, group, f"Updating metadata for static member {new_member_id} with instance "
                                                f"id {instance_id}", out)
        # PreparingRebalance: the join is parked like any other.

    @staticmethod
    def _refuse_parked(group: ClassicGroup, member: ClassicGroupMember, code: int, join_member_id: str,
                       out: Actions) -> None:
        """Answer the member's parked JoinGroup and SyncGroup, if any, with `code`."""
        taken = group.take_join(member)
        if taken is not None:
            out.respond(taken.ticket, join_error(taken.request, join_member_id, code))
        taken = group.take_sync(member)
        if taken is not None:
            out.respond(taken.ticket, sync_response(code))

    def _join_response(self, group: ClassicGroup, member_id: str, request: RequestInfo, with_members: bool):
        Member = JoinGroupResponse.JoinGroupResponseMember
        members = [Member(member_id=mid, group_instance_id=instance_id, metadata=metadata)
                   for mid, instance_id, metadata in group.current_member_metadata()] if with_members else []
        protocol_name = group.protocol_name
        if protocol_name is None and request.api_version < 7:
            protocol_name = ""
        return JoinGroupResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, generation_id=group.generation_id,
                                 protocol_type=group.protocol_type or None, protocol_name=protocol_name,
                                 leader=group.leader_id or "", member_id=member_id, members=members)

    # --- rebalancing ----------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, now_ms: int, group: ClassicGroup, reason: str,
                                                  out: Actions) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(now_ms, group, reason, out)
        elif (group.state is PREPARING_REBALANCE and group.has_all_members_joined()
              and group.previous_state is not EMPTY):
            self._complete_join(now_ms, group, out)

    def _prepare_rebalance(self, now_ms: int, group: ClassicGroup, reason: str, out: Actions) -> None:
        if group.state is COMPLETING_REBALANCE:
            # Members waiting for an assignment of the old generation rejoin instead.
            self._reset_and_propagate_assignment_error(now_ms, group, ErrorCode.REBALANCE_IN_PROGRESS, out)
        self._cancel_pending_sync(group)
        initial = group.state is EMPTY
        group.transition_to(PREPARING_REBALANCE, now_ms)
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old generation %d "
                 "(__consumer_offsets-%d) (reason: %s)", group.group_id, group.generation_id,
                 self.coordinator.partition_for(group.group_id), reason)
        if initial:
            # A new group waits for more members before its first generation (InitialDelayedJoin).
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._schedule_initial_join(now_ms, group, delay, remaining)
        elif group.has_all_members_joined():
            self._complete_join(now_ms, group, out)
        else:
            self._schedule_join_completion(now_ms, group)

    def _schedule_initial_join(self, now_ms: int, group: ClassicGroup, delay: int, remaining: int) -> None:
        group_id = group.group_id

        def expired(now_ms: int, out: Actions) -> None:
            group = self.group(group_id)
            if group is None or group.state is not PREPARING_REBALANCE:
                return
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                self._schedule_initial_join(now_ms, group, min(self.config.group_initial_rebalance_delay_ms, remaining),
                                            max(remaining - delay, 0))
            else:
                self._complete_join(now_ms, group, out)

        self.timer.schedule(self._join_key(group_id), now_ms + delay, expired)

    def _schedule_join_completion(self, now_ms: int, group: ClassicGroup) -> None:
        group_id = group.group_id

        def expired(now_ms: int, out: Actions) -> None:
            group = self.group(group_id)
            if group is not None and group.state is PREPARING_REBALANCE:
                self._complete_join(now_ms, group, out)

        self.timer.schedule(self._join_key(group_id), now_ms + group.rebalance_timeout_ms, expired)

    def _complete_join(self, now_ms: int, group: ClassicGroup, out: Actions) -> None:
        self.timer.cancel(self._join_key(group.group_id))
        gone = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        for member in gone:
            group.remove(member.member_id)
            self.timer.cancel(self._session_key(group.group_id, member.member_id))
        if gone:
            log.info("Group %s removed dynamic members who haven't joined: %s", group.group_id,
                     [m.member_id for m in gone])
        if group.state is DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or their sessions).
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule_join_completion(now_ms, group)
            return
        group.init_next_generation(now_ms)
        partition = self.coordinator.partition_for(group.group_id)
        if group.state is EMPTY:
            log.info("Group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                     group.generation_id, partition)

            def stored(error: int, now_ms: int, out: Actions) -> None:
                if error != ErrorCode.NONE:
                    # The previous generation stays in the log; it has no live members either.
                    log.warning("Failed to write empty metadata for group %s: %s", group.group_id, ErrorCode(error).name)

            out.append(partition, [group.to_record({})], stored)
            return
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members", group.group_id,
                 group.generation_id, partition, group.size)
        for member in group.members.values():
            taken = group.take_join(member)
            if taken is not None:
                out.respond(taken.ticket, self._join_response(group, member.member_id, taken.request,
                                                              with_members=group.is_leader(member.member_id)))
            self._schedule_session_expiry(now_ms, group, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync_expiry(now_ms, group)

    def _schedule_pending_sync_expiry(self, now_ms: int, group: ClassicGroup) -> None:
        group_id, generation = group.group_id, group.generation_id

        def expired(now_ms: int, out: Actions) -> None:
            group = self.group(group_id)
            if group is None or group.generation_id != generation:
                return
            if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync_members:
                return
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self.timer.cancel(self._session_key(group_id, member_id))
            self._prepare_rebalance(now_ms, group, f"Removing {missing} on pending sync request expiration", out)

        self.timer.schedule(self._sync_key(group_id), now_ms + group.rebalance_timeout_ms, expired)

    def _member_synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timer.cancel(self._sync_key(group.group_id))

    def _cancel_pending_sync(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(self._sync_key(group.group_id))

    # --- SyncGroup ----------------------------------------------------------------------------

    def sync_group(self, now_ms: int, ticket: Ticket, request: RequestInfo, sync, out: Actions) -> None:
        if not sync.group_id:
            out.respond(ticket, sync_response(ErrorCode.INVALID_GROUP_ID))
            return
        if request.api_version >= 5 and (sync.protocol_type is None or sync.protocol_name is None):
            out.respond(ticket, sync_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        group = self.group(sync.group_id)
        if group is None:
            out.respond(ticket, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        try:
            if group.state is DEAD:
                raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            group.validate_member(sync.member_id, sync.group_instance_id, "sync-group")
            if sync.generation_id != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            if ((sync.protocol_type is not None and sync.protocol_type != group.protocol_type)
                    or (sync.protocol_name is not None and sync.protocol_name != group.protocol_name)):
                raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        except GroupError as e:
            out.respond(ticket, sync_response(e.code))
            return
        member = group.members[sync.member_id]
        if group.state is EMPTY:
            out.respond(ticket, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.state is PREPARING_REBALANCE:
            out.respond(ticket, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is STABLE:
            self._member_synced(group, member.member_id)
            out.respond(ticket, sync_response(ErrorCode.NONE, member.assignment, group.protocol_type,
                                              group.protocol_name))
            self._schedule_session_expiry(now_ms, group, member.member_id, member.session_timeout_ms)
        else:  # CompletingRebalance: followers wait for the leader's assignment
            member.awaiting_sync = ParkedRequest(ticket, request)
            self._member_synced(group, member.member_id)
            if group.is_leader(member.member_id):
                self._store_assignment(group, {a.member_id: bytes(a.assignment) for a in sync.assignments}, out)

    def _store_assignment(self, group: ClassicGroup, assignment: dict[str, bytes], out: Actions) -> None:
        log.info("Assignment received from leader %s for group %s for generation %d. The group has %d members, "
                 "%d of which are static.", group.leader_id, group.group_id, group.generation_id, group.size,
                 len(group.static_members))
        missing = [mid for mid in group.members if mid not in assignment]
        if missing:
            log.warning("Setting empty assignments for members %s of %s for generation %d", missing, group.group_id,
                        group.generation_id)
        generation = group.generation_id

        def stored(error: int, now_ms: int, out: Actions) -> None:
            # Another member may have joined meanwhile: only this generation's sync completes.
            if group.state is not COMPLETING_REBALANCE or group.generation_id != generation:
                return
            if error != ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(now_ms, group, self._group_append_error(error), out)
                self._maybe_prepare_rebalance_or_complete_join(
                    now_ms, group, f"Error {ErrorCode(error).name} when storing group assignment during SyncGroup", out)
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate_assignment(now_ms, group, ErrorCode.NONE, out)
            group.transition_to(STABLE, now_ms)

        out.append(self.coordinator.partition_for(group.group_id), [group.to_record(assignment)], stored)

    def _reset_and_propagate_assignment_error(self, now_ms: int, group: ClassicGroup, error: int, out: Actions) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(now_ms, group, error, out)

    def _propagate_assignment(self, now_ms: int, group: ClassicGroup, error: int, out: Actions) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            taken = group.take_sync(member)
            if taken is None:
                continue
            out.respond(taken.ticket, sync_response(error, member.assignment, group.protocol_type if ok else None,
                                                    group.protocol_name if ok else None))
            # Its session restarts now: while it waited, its expiry was ignored.
            self._schedule_session_expiry(now_ms, group, member.member_id, member.session_timeout_ms)

    # --- Heartbeat ----------------------------------------------------------------------------

    def heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat, out: Actions) -> None:
        out.respond(ticket, heartbeat_response(self._heartbeat(now_ms, heartbeat)))

    def _heartbeat(self, now_ms: int, heartbeat) -> int:
        if not heartbeat.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.group(heartbeat.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(heartbeat.member_id, heartbeat.group_instance_id, "heartbeat")
        except GroupError as e:
            return e.code
        if heartbeat.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[heartbeat.member_id]
        self._schedule_session_expiry(now_ms, group, member.member_id, member.session_timeout_ms)
        if group.state is PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # --- LeaveGroup ---------------------------------------------------------------------------

    def leave_group(self, now_ms: int, ticket: Ticket, request: RequestInfo, leave, out: Actions) -> None:
        MemberResponse = LeaveGroupResponse.MemberResponse
        if request.api_version >= 3:
            leaving = [(m.member_id, m.group_instance_id, m.reason) for m in leave.members]
        else:
            leaving = [(leave.member_id, None, None)]
        top_level, results = ErrorCode.NONE, []
        group = self.group(leave.group_id)
        if not leave.group_id:
            top_level = ErrorCode.INVALID_GROUP_ID
        elif group is not None and group.state is DEAD:
            top_level = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            results = [(member_id, instance_id, self._leave(now_ms, group, member_id, instance_id, reason, out))
                       for member_id, instance_id, reason in leaving]
        if request.api_version >= 3:
            out.respond(ticket, LeaveGroupResponse(
                throttle_time_ms=0, error_code=top_level,
                members=[MemberResponse(member_id=m, group_instance_id=i, error_code=code) for m, i, code in results]))
        else:
            # Before KIP-345 one member left at a time, its error at the top level.
            code = top_level or next((code for _, _, code in results if code != ErrorCode.NONE), ErrorCode.NONE)
            out.respond(ticket, LeaveGroupResponse(throttle_time_ms=0, error_code=code))

    def _leave(self, now_ms: int, group: ClassicGroup | None, member_id: str, instance_id: str | None,
               reason: str | None, out: Actions) -> int:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id == UNKNOWN_MEMBER_ID:
            # KIP-345: an administrator removes a static member by its group.instance.id alone.
            static_member_id = group.static_members.get(instance_id) if instance_id is not None else None
            if static_member_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            member_id = static_member_id
        elif member_id in group.pending_members:
            self.timer.cancel(self._session_key(group.group_id, member_id))
            self._remove_pending_member(now_ms, group, member_id, out)
            log.info("Pending member with memberId=%s has left group %s through explicit `LeaveGroup` request",
                     member_id, group.group_id)
            return ErrorCode.NONE
        else:
            try:
                group.validate_member(member_id, instance_id, "leave-group")
            except GroupError as e:
                return e.code
        member = group.members[member_id]
        self.timer.cancel(self._session_key(group.group_id, member_id))
        self._remove_member(now_ms, group, member, f"Removing member {member_id} on LeaveGroup; client reason: "
                                                f"{reason or 'not provided'}", out)
        log.info("Member %s has left group %s through explicit `LeaveGroup`; client reason: %s", member_id,
                 group.group_id, reason or "not provided")
        return ErrorCode.NONE

    def _remove_member(self, now_ms: int, group: ClassicGroup, member: ClassicGroupMember, reason: str,
                       out: Actions) -> None:
        # A member leaving with a parked request (a new member timing out mid-rebalance) gets
        # UNKNOWN_MEMBER_ID, on which a client that is still alive joins again.
        self._refuse_parked(group, member, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID, out)
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(now_ms, group, reason, out)
        elif group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(now_ms, group, out)

    def _remove_pending_member(self, now_ms: int, group: ClassicGroup, member_id: str, out: Actions) -> None:
        group.remove(member_id)
        if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(now_ms, group, out)

    # --- sessions -------------------------------------------------------------------------------

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> tuple:
        return "session", group_id, member_id

    @staticmethod
    def _join_key(group_id: str) -> tuple:
        return "join", group_id

    @staticmethod
    def _sync_key(group_id: str) -> tuple:
        return "sync", group_id

    def _schedule_session_expiry(self, now_ms: int, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        group_id = group.group_id

        def expired(now_ms: int, out: Actions) -> None:
            group = self.group(group_id)
            if group is None or group.state is DEAD:
                return
            if member_id in group.pending_members:
                log.info("Pending member %s in group %s has been removed after session timeout expiration.",
                         member_id, group_id)
                self._remove_pending_member(now_ms, group, member_id, out)
                return
            member = group.members.get(member_id)
            if member is not None and not member.has_satisfied_heartbeat():
                log.info("Member %s in group %s has failed, removing it from the group", member_id, group_id)
                self._remove_member(now_ms, group, member, f"removing member {member_id} on heartbeat expiration", out)

        self.timer.schedule(self._session_key(group_id, member_id), now_ms + timeout_ms, expired)

    # --- DescribeGroups -------------------------------------------------------------------------

    def describe_group(self, group_id: str):
        DescribedGroup = DescribeGroupsResponse.DescribedGroup
        Member = DescribeGroupsResponse.DescribedGroupMember
        group = self.group(group_id)
        if group is None:
            # Kafka answers an unknown (or non-classic) group as a Dead one before DescribeGroups v6.
            return DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state=DEAD.value,
                                  protocol_type="", protocol_data="", members=[])
        # The protocol of a stable group; its members' metadata and assignments are shown only then.
        protocol = group.protocol_name if group.state is STABLE else None
        members = [Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                          client_host=m.client_host,
                          member_metadata=m.metadata(protocol) if protocol is not None else b"",
                          member_assignment=m.assignment if protocol is not None else b"")
                   for m in group.members.values()]
        return DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state_name,
                              protocol_type=group.protocol_type, protocol_data=protocol or "",
                              members=members)

    # --- the coordinator's hooks ----------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        group_id = decode_key(GROUP_COORDINATOR, key).group
        if value is None:
            if self.group(group_id) is not None:
                del self.coordinator.groups[group_id]
            return
        self.coordinator.groups[group_id] = ClassicGroup.from_record(group_id, decode_value(GroupMetadataValue, value)[0])

    def on_loaded(self, group: Group, now_ms: int, out: Actions) -> None:
        assert isinstance(group, ClassicGroup)
        log.info("Loaded group metadata for %s with generation %d", group.group_id, group.generation_id)
        for member in group.members.values():
            self._schedule_session_expiry(now_ms, group, member.member_id, member.session_timeout_ms)
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(now_ms, group,
                                    f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                                    "Rebalancing in order to give a chance for consumers to commit offsets", out)

    def on_offset_commit(self, group: Group, member_id: str, now_ms: int) -> None:
        # A commit from a member of a Stable or rebalancing group counts as a heartbeat.
        assert isinstance(group, ClassicGroup)
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self._schedule_session_expiry(now_ms, group, member_id, member.session_timeout_ms)

    def on_deleted(self, group: Group, now_ms: int) -> None:
        assert isinstance(group, ClassicGroup)
        if group.state is not DEAD:
            group.transition_to(DEAD, now_ms)
        self.timer.cancel(self._join_key(group.group_id))
        self.timer.cancel(self._sync_key(group.group_id))
        for member_id in list(group.members) + list(group.pending_members):
            self.timer.cancel(self._session_key(group.group_id, member_id))

    def unload(self, out: Actions) -> None:
        for group in list(self.coordinator.groups.values()):
            if not isinstance(group, ClassicGroup):
                continue
            for member in group.members.values():
                self._refuse_parked(group, member, ErrorCode.NOT_COORDINATOR, member.member_id, out)

    @staticmethod
    def _group_append_error(error: int) -> int:
        """A failed append of group metadata, as Kafka reports it to members."""
        return append_error(error, ErrorCode.UNKNOWN_SERVER_ERROR)
