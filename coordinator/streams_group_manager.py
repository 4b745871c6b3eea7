"""Streams groups in the group coordinator: StreamsGroupHeartbeat, StreamsGroupDescribe, their
timers and their records in `__consumer_offsets` (the group type manager of
coordinator/streams_group.py).

- A heartbeat is answered once its records are appended. Its ticket gets `(response, to_create)`:
  the internal topics (repartition, changelog) the server must create (Kafka's
  StreamsGroupHeartbeatResult.creatableTopics, created by its AutoTopicCreationManager).
- A streams group cannot take the id of another type's group: GROUP_ID_NOT_FOUND ("Group g is not a
  streams group."), as Kafka answers.
- Timers: each member's session (`streams.session.timeout.ms`), the rebalance timeout of a member
  that must give tasks up, and the end of a new group's initial rebalance delay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..wire.coordinator_record import CoordinatorRecord, encode_record
from ..wire.coordinator_records.streams_group_metadata_key import StreamsGroupMetadataKey
from ..wire.errors import ErrorCode
from ..wire.messages.streams_group_describe_response import DescribedGroup
from ..wire.messages.streams_group_heartbeat_response import StreamsGroupHeartbeatResponse
from .actions import Actions, Record, Ticket, append_error
from .consumer_group import TopicsImage
from .group import Group, GroupError, GroupType, GroupTypeManager, RequestInfo, replay_group_record
from .group_config import GroupConfigManager
from .streams_group import (
    JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, STREAMS_GROUP_RECORD_TYPES,
    StreamsGroup, StreamsSettings, validate_heartbeat_request,
)
from .streams_group_member import MemberState

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("samsa.coordinator.streams")

__all__ = ["StreamsGroupManager"]


class StreamsGroupManager(GroupTypeManager):
    group_type = GroupType.STREAMS
    record_types = STREAMS_GROUP_RECORD_TYPES

    def __init__(self, coordinator: GroupCoordinator, settings: StreamsSettings,
                 group_configs: GroupConfigManager | None = None) -> None:
        self.coordinator = coordinator
        self.defaults = settings
        self.group_configs = group_configs
        self.timer = coordinator.timer
        self.topics = TopicsImage()

    def group(self, group_id: str) -> StreamsGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group if isinstance(group, StreamsGroup) else None

    def settings(self, group_id: str) -> StreamsSettings:
        """The group's settings: its group config (streams.*), else the broker's (group.streams.*)."""
        if self.group_configs is None:
            return self.defaults
        v = self.group_configs.value
        return StreamsSettings(
            session_timeout_ms=v(group_id, "streams.session.timeout.ms"),
            heartbeat_interval_ms=v(group_id, "streams.heartbeat.interval.ms"),
            assignment_interval_ms=v(group_id, "streams.assignment.interval.ms"),
            initial_rebalance_delay_ms=v(group_id, "streams.initial.rebalance.delay.ms"),
            num_standby_replicas=v(group_id, "streams.num.standby.replicas"),
            task_offset_interval_ms=v(group_id, "streams.task.offset.interval.ms"),
            acceptable_recovery_lag=v(group_id, "streams.acceptable.recovery.lag"),
            max_size=self.defaults.max_size,
            rack_aware_assignment_tags=tuple(v(group_id, "streams.rack.aware.assignment.tags") or ()))

    # --- StreamsGroupHeartbeat ---------------------------------------------------------------------

    def heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        out = Actions()
        leaving = heartbeat.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        try:
            if not self.coordinator.active:
                raise GroupError(self.coordinator.inactive_error)
            validate_heartbeat_request(heartbeat)
            group, replaced = self._group_for(heartbeat.group_id, heartbeat.member_epoch)
            settings = self.settings(group.group_id)
            if leaving:
                response, records = group.leave(heartbeat.member_id, heartbeat.instance_id, heartbeat.member_epoch,
                                                heartbeat.shutdown_application)
                to_create: dict = {}
            else:
                response, records, to_create = group.heartbeat(
                    heartbeat, client_id=request.client_id, client_host=request.client_host, now_ms=now_ms,
                    topics=self.topics, settings=settings, api_version=request.api_version)
        except GroupError as e:
            out.respond(ticket, (StreamsGroupHeartbeatResponse(error_code=e.code, error_message=e.message), {}))
            return out
        if leaving:
            log.info("[GroupId %s][MemberId %s] Member left the streams group.", group.group_id, heartbeat.member_id)
            # A static member gone for a while (epoch -2) keeps its tasks until it comes back or its
            # session expires: Kafka's streamsGroupStaticMemberGroupLeave cancels no timer.
            if heartbeat.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                self._cancel_timers(group.group_id, heartbeat.member_id)
        else:
            self._schedule_session(group, heartbeat.member_id, now_ms + settings.session_timeout_ms)
            self._maybe_schedule_rebalance_timeout(group, heartbeat.member_id, now_ms)
            if group.initial_delay_deadline is not None:
                self._schedule_initial_delay(group, group.initial_delay_deadline)
        if self.coordinator.groups.get(group.group_id) is not group:
            if not records:
                out.respond(ticket, (response, to_create))
                return out
            if replaced is not None:
                log.info("[GroupId %s] Converted the empty classic group to a streams group.", group.group_id)
                self.coordinator._remove_group(replaced, now_ms)
            self.coordinator.add_group(group)
        tombstones = [] if replaced is None else replaced.tombstones()
        self._write(out, group, records, lambda out: out.respond(ticket, (response, to_create)),
                    lambda code, out: out.respond(ticket, (StreamsGroupHeartbeatResponse(error_code=code), {})),
                    tombstones)
        return out

    def _group_for(self, group_id: str, member_epoch: int) -> tuple[StreamsGroup, Group | None]:
        """Kafka's getOrCreateStreamsGroup (joining) and getStreamsGroupOrThrow (the others): a new
        streams group replaces an empty classic group (whose offsets stay: an application stopped
        and restarted with group.protocol=streams keeps its progress)."""
        existing = self.coordinator.groups.get(group_id)
        if isinstance(existing, StreamsGroup):
            return existing, None
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if existing is None:
            if not joining:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            return StreamsGroup(group_id), None
        if joining and existing.type == GroupType.CLASSIC and existing.is_empty():
            return StreamsGroup(group_id), existing
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

    # --- StreamsGroupDescribe ----------------------------------------------------------------------

    def describe(self, group_ids: list[str]) -> list[DescribedGroup]:
        """Kafka's GroupMetadataManager.streamsGroupDescribe."""
        coordinator = self.coordinator
        result = []
        for group_id in group_ids:
            if not coordinator.active:
                result.append(DescribedGroup(group_id=group_id, error_code=coordinator.inactive_error))
            elif (group := self.group(group_id)) is not None:
                result.append(group.describe())
            else:
                message = (f"Group {group_id} not found." if group_id not in coordinator.groups
                           else f"Group {group_id} is not a streams group.")
                result.append(DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                             error_message=message))
        return result

    # --- topics and time ---------------------------------------------------------------------------

    def update_topics(self, now_ms: int, topics: TopicsImage) -> Actions:
        """The cluster's topics changed: each group configures its topology again at its next heartbeat."""
        self.topics = topics
        for group in self.coordinator.groups.values():
            if isinstance(group, StreamsGroup):
                group.metadata_refresh = True
        return Actions()

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("streams-session", group_id, member_id)

    @staticmethod
    def _rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("streams-rebalance", group_id, member_id)

    @staticmethod
    def _initial_delay_key(group_id: str) -> tuple[str, str]:
        return ("streams-initial-rebalance", group_id)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(self._session_key(group_id, member_id))
        self.timer.cancel(self._rebalance_key(group_id, member_id))

    def _schedule_session(self, group: StreamsGroup, member_id: str, deadline_ms: int) -> None:
        self.timer.schedule(self._session_key(group.group_id, member_id), deadline_ms,
                            lambda now_ms, out: self._fence(group, member_id, now_ms, out,
                                                            "the member session expired."))

    def _maybe_schedule_rebalance_timeout(self, group: StreamsGroup, member_id: str, now_ms: int) -> None:
        """A member that must give tasks up has its rebalance timeout to do so (Kafka's
        scheduleStreamsGroupRebalanceTimeout), else it is fenced."""
        member = group.members.get(member_id)
        key = self._rebalance_key(group.group_id, member_id)
        if member is None or member.state != MemberState.UNREVOKED_TASKS:
            self.timer.cancel(key)
            return
        if self.timer.is_scheduled(key):
            return
        epoch = member.member_epoch

        def expire(now_ms: int, out: Actions) -> None:
            current = group.members.get(member_id)
            if current is not None and current.state == MemberState.UNREVOKED_TASKS and current.member_epoch == epoch:
                self._fence(group, member_id, now_ms, out, "the member failed to revoke its tasks within "
                            f"{current.rebalance_timeout_ms}ms.")

        self.timer.schedule(key, now_ms + max(member.rebalance_timeout_ms, 0), expire)

    def _schedule_initial_delay(self, group: StreamsGroup, deadline_ms: int) -> None:
        key = self._initial_delay_key(group.group_id)
        if self.timer.is_scheduled(key):
            return

        def fire(now_ms: int, out: Actions) -> None:
            if self.group(group.group_id) is not group:
                return
            self._write(out, group, group.compute_delayed_target_assignment(now_ms, self.settings(group.group_id)))

        self.timer.schedule(key, deadline_ms, fire)

    def _fence(self, group: StreamsGroup, member_id: str, now_ms: int, out: Actions, reason: str) -> None:
        if self.group(group.group_id) is not group or member_id not in group.members:
            return
        log.info("[GroupId %s][MemberId %s] Member fenced from the group because %s", group.group_id, member_id, reason)
        self._cancel_timers(group.group_id, member_id)
        self._write(out, group, group.fence(member_id))

    def _write(self, out: Actions, group: StreamsGroup, records: list[CoordinatorRecord],
               done: Callable[[Actions], None] | None = None,
               failed: Callable[[int, Actions], None] | None = None, before: list[Record] | None = None) -> None:
        """Append the records (after `before`, already encoded: a replaced group's tombstones)."""
        if not records:
            if done is not None:
                done(out)
            return

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error == ErrorCode.NONE:
                if done is not None:
                    done(out)
                return
            log.warning("Writing the records of streams group %s failed: %s", group.group_id, ErrorCode(error).name)
            if failed is not None:
                failed(append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR), out)

        out.append(self.coordinator.partition_for(group.group_id),
                   (before or []) + [encode_record(r) for r in records], stored)

    # --- the coordinator's hooks ---------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        replay_group_record(self, key, value, StreamsGroupMetadataKey, StreamsGroup, replaces_simple_group=True)

    def on_loaded(self, group: Group, now_ms: int, out: Actions) -> None:
        assert isinstance(group, StreamsGroup)
        log.info("Loaded streams group %s with %d members.", group.group_id, len(group.members))
        group.on_loaded()
        settings = self.settings(group.group_id)
        for member_id in group.members:
            self._schedule_session(group, member_id, now_ms + settings.session_timeout_ms)

    def on_deleted(self, group: Group, now_ms: int) -> None:
        assert isinstance(group, StreamsGroup)
        for member_id in group.members:
            self._cancel_timers(group.group_id, member_id)
        self.timer.cancel(self._initial_delay_key(group.group_id))
