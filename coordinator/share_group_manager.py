"""Share groups in the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe, their session
timers, their records in `__consumer_offsets`, the initialization and deletion of their share
partitions' state.

The group type manager (coordinator/group.py) of ShareGroup (coordinator/share_group.py):

- A heartbeat is answered once its records are appended. Its ticket gets `(response, init)`: `init`
  (a ShareInitRequest or None) names the share partitions the server must initialize through the
  persister before they can be assigned; the server reports the outcome with `initialize_state`
  or `uninitialize_state` (Kafka's GroupCoordinatorService.persisterInitialize).
- A share group cannot take the id of another type's group: GROUP_ID_NOT_FOUND ("Group g is not a
  share group."), whatever that group's state, as Kafka 4.4 answers.
- Each member has a session (`share.session.timeout.ms`, the group's config or the broker's); the
  group's timer fences the members whose session ran out.
- Members that leave (or are fenced) and groups left empty are reported in `events` for the
  server's ShareGroupListener (the share fetch path), once their records are written; so are the
  heartbeats that bumped a group's epoch (the share-group-rebalance metric).
- DeleteGroups of a share group is two steps: `prepare_delete` records its share partitions as
  deleting and returns them for the persister to delete (DeleteShareGroupState); then the
  coordinator's delete_groups writes the tombstones (Kafka's sharePartitionDeleteRequests).
- The admin's AlterShareGroupOffsets and DeleteShareGroupOffsets, on empty groups only:
  `alter_offsets` records the share partitions as initializing (a group that does not exist is
  created by that record, as in Kafka) and returns what the server initializes through the persister
  at the start offsets asked for; `delete_offsets` moves initialized topics to deleting and returns
  the share partitions whose state the persister deletes, and `offsets_deleted` ends it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from ..wire.coordinator_record import CoordinatorRecord, encode_record
from ..wire.coordinator_records.share_group_metadata_key import ShareGroupMetadataKey
from ..wire.errors import ErrorCode
from ..wire.messages.alter_share_group_offsets_response import AlterShareGroupOffsetsResponse
from ..wire.messages.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponse
from ..wire.messages.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponseTopic as DeleteTopic
from ..wire.messages.share_group_describe_response import DescribedGroup
from ..wire.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from .actions import Actions, Ticket, append_error
from .consumer_group import TopicsImage
from .group import Group, GroupError, GroupType, GroupTypeManager, RequestInfo, describe_groups, replay_group_record
from .group_config import GroupConfigManager, ShareGroupConfig
from .share_group import (
    LEAVE_GROUP_MEMBER_EPOCH, SHARE_GROUP_RECORD_TYPES, ShareGroup, ShareInitRequest, validate_heartbeat_request,
)

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("samsa.coordinator.share")

__all__ = ["MemberLeft", "ShareGroupCoordinatorConfig", "ShareGroupEmpty", "ShareGroupManager",
           "ShareGroupRebalanced"]


@dataclass(frozen=True)
class ShareGroupCoordinatorConfig:
    """The broker's share group settings the coordinator needs, with Kafka's defaults."""

    max_size: int = 200  # group.share.max.size
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    assignment_interval_ms: int = 1_000  # group.share.assignment.interval.ms
    # group.share.initialize.retry.interval.ms, at least offsets.commit.timeout.ms (as Kafka takes it).
    initialize_retry_interval_ms: int = 30_000


@dataclass(frozen=True)
class MemberLeft:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupEmpty:
    group_id: str


@dataclass(frozen=True)
class ShareGroupRebalanced:
    """A heartbeat bumped the group epoch (Kafka records its ShareGroupRebalances sensor then)."""

    group_id: str


class ShareGroupManager(GroupTypeManager):
    group_type = GroupType.SHARE
    record_types = SHARE_GROUP_RECORD_TYPES

    def __init__(self, coordinator: GroupCoordinator, config: ShareGroupCoordinatorConfig,
                 group_configs: GroupConfigManager | None = None) -> None:
        self.coordinator = coordinator
        self.config = config
        self.group_configs = group_configs
        self.timer = coordinator.timer
        self.topics = TopicsImage()
        self.events: list[MemberLeft | ShareGroupEmpty | ShareGroupRebalanced] = []

    def group(self, group_id: str) -> ShareGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def share_config(self, group_id: str) -> ShareGroupConfig:
        """The group's heartbeat, session and assignment intervals: its group config, else the broker's."""
        if self.group_configs is not None:
            return self.group_configs.share_config(group_id)
        return ShareGroupConfig(heartbeat_interval_ms=self.config.heartbeat_interval_ms,
                                session_timeout_ms=self.config.session_timeout_ms,
                                assignment_interval_ms=self.config.assignment_interval_ms)

    def take_events(self) -> list[MemberLeft | ShareGroupEmpty | ShareGroupRebalanced]:
        events, self.events = self.events, []
        return events

    # --- ShareGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        out = Actions()
        try:
            if not self.coordinator.active:
                raise GroupError(self.coordinator.inactive_error)
            validate_heartbeat_request(heartbeat)
            group = self._group_for(heartbeat.group_id, heartbeat.member_epoch)
            settings = self.share_config(group.group_id)
            if heartbeat.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                response, records = group.leave(heartbeat.member_id, now_ms, self.topics)
                init = None
            else:
                epoch = group.group_epoch
                response, records, init = group.heartbeat(
                    heartbeat, client_id=request.client_id, client_host=request.client_host, now_ms=now_ms,
                    topics=self.topics, max_size=self.config.max_size,
                    heartbeat_interval_ms=settings.heartbeat_interval_ms,
                    assignment_interval_ms=settings.assignment_interval_ms,
                    initialize_retry_interval_ms=self.config.initialize_retry_interval_ms)
                if group.group_epoch > epoch:
                    self.events.append(ShareGroupRebalanced(group.group_id))
        except GroupError as e:
            out.respond(ticket, (ShareGroupHeartbeatResponse(error_code=e.code, error_message=e.message), None))
            return out
        if heartbeat.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            log.info("[GroupId %s] Member %s left the share group.", group.group_id, heartbeat.member_id)
            self.timer.cancel(self._session_key(group.group_id, heartbeat.member_id))
        else:
            self._schedule_session(group, heartbeat.member_id, now_ms + settings.session_timeout_ms)
        if self.coordinator.groups.get(group.group_id) is not group:
            if not records:
                out.respond(ticket, (response, init))
                return out
            self.coordinator.add_group(group)
        left = heartbeat.member_epoch == LEAVE_GROUP_MEMBER_EPOCH

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error == ErrorCode.NONE:
                if left:
                    self._left(group, heartbeat.member_id)
                out.respond(ticket, (response, init))
            else:
                log.warning("Writing the records of share group %s failed: %s", group.group_id, ErrorCode(error).name)
                code = append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR)
                out.respond(ticket, (ShareGroupHeartbeatResponse(error_code=code), None))

        if not records:
            stored(ErrorCode.NONE, now_ms, out)
            return out
        out.append(self.coordinator.partition_for(group.group_id), [encode_record(r) for r in records], stored)
        return out

    def _group_for(self, group_id: str, member_epoch: int) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup: a new group only for a joining member."""
        existing = self.coordinator.groups.get(group_id)
        if isinstance(existing, ShareGroup):
            return existing
        if existing is None:
            if member_epoch != 0:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            return ShareGroup(group_id)
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")

    def _left(self, group: ShareGroup, member_id: str) -> None:
        self.events.append(MemberLeft(group.group_id, member_id))
        if group.is_empty():
            self.events.append(ShareGroupEmpty(group.group_id))

    # --- initialization of share partitions -------------------------------------------------------

    def initialize_state(self, now_ms: int, ticket: Ticket, request: RequestInfo, init: ShareInitRequest) -> Actions:
        """The persister initialized `init`'s share partitions: record them as initialized."""
        return self._write_state(ticket, init.group_id,
                                 lambda group: group.initialize_state(init.topic_partitions(), now_ms, self.topics))

    def uninitialize_state(self, now_ms: int, ticket: Ticket, request: RequestInfo, init: ShareInitRequest) -> Actions:
        """The persister failed: they are no longer initializing (the next heartbeat asks again)."""
        return self._write_state(ticket, init.group_id,
                                 lambda group: group.uninitialize_state(init.topic_partitions(), now_ms))

    def _write_state(self, ticket: Ticket, group_id: str, change) -> Actions:
        out = Actions()
        group = self.group(group_id) if self.coordinator.active else None
        records = [] if group is None else change(group)
        if not records:
            out.respond(ticket, ErrorCode.NONE if self.coordinator.active else self.coordinator.inactive_error)
            return out

        def stored(error: int, now_ms: int, out: Actions) -> None:
            out.respond(ticket, append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR))

        out.append(self.coordinator.partition_for(group_id), [encode_record(r) for r in records], stored)
        return out

    # --- deletion ------------------------------------------------------------------------------

    def prepare_delete(self, now_ms: int, ticket: Ticket, request: RequestInfo,
                       group_ids: list[str]) -> Actions:
        """The first step of DeleteGroups for the share groups among `group_ids`: the ticket gets
        {group id: (error code, {topic id: partitions whose state the persister must delete})} for
        each share group (NON_EMPTY_GROUP for one with members); other ids are left out."""
        out = Actions()
        results: dict[str, tuple[int, dict[UUID, list[int]]]] = {}
        records: list[CoordinatorRecord] = []
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        for group_id in group_ids:
            group = self.group(group_id) if self.coordinator.active else None
            if group is None:
                continue
            if not group.is_empty():
                results[group_id] = (ErrorCode.NON_EMPTY_GROUP, {})
                continue
            group_records, partitions = group.prepare_delete(now_ms, self.topics)
            by_partition.setdefault(self.coordinator.partition_for(group_id), []).extend(group_records)
            records += group_records
            results[group_id] = (ErrorCode.NONE, partitions)
        remaining = len(by_partition)

        def stored(error: int, now_ms: int, out: Actions) -> None:
            nonlocal remaining
            remaining -= 1
            if error != ErrorCode.NONE:
                code = append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR)
                for group_id, (current, partitions) in list(results.items()):
                    if current == ErrorCode.NONE:
                        results[group_id] = (code, partitions)
            if remaining == 0:
                out.respond(ticket, results)

        if not by_partition:
            out.respond(ticket, results)
        for partition, partition_records in by_partition.items():
            out.append(partition, [encode_record(r) for r in partition_records], stored)
        return out

    # --- admin: AlterShareGroupOffsets, DeleteShareGroupOffsets ----------------------------------

    def alter_offsets(self, now_ms: int, ticket: Ticket, request: RequestInfo, alter) -> Actions:
        """AlterShareGroupOffsets for the topics the server let through: the ticket gets
        `(response, init)`, `init` (a ShareInitRequest or None) being what the server must
        initialize through the persister (Kafka's GroupCoordinatorService.alterShareGroupOffsets).
        A group that does not exist is created, as Kafka creates it, by its state record."""
        out = Actions()
        try:
            if not self.coordinator.active:
                raise GroupError(self.coordinator.inactive_error)
            if not alter.group_id:
                raise GroupError(ErrorCode.INVALID_GROUP_ID)
            group = self.coordinator.groups.get(alter.group_id)
            if group is None:
                group = ShareGroup(alter.group_id)
            elif not isinstance(group, ShareGroup):
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {alter.group_id} is not a share group.")
            topics, records, init = group.alter_offsets(
                ((t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in alter.topics),
                now_ms, self.topics)
        except GroupError as e:
            out.respond(ticket, (AlterShareGroupOffsetsResponse(error_code=e.code,
                                                                error_message=e.message or e.code.message), None))
            return out
        if records and self.coordinator.groups.get(group.group_id) is not group:
            self.coordinator.add_group(group)
        self._write_then(out, ticket, group.group_id, records, (AlterShareGroupOffsetsResponse(responses=topics), init),
                         lambda **error: (AlterShareGroupOffsetsResponse(**error), None))
        return out

    def delete_offsets(self, now_ms: int, ticket: Ticket, request: RequestInfo, delete) -> Actions:
        """The first step of DeleteShareGroupOffsets (Kafka's initiateDeleteShareGroupOffsets): the
        ticket gets a DeleteShareGroupOffsetsResponse refusing the request, or `(topics refused,
        {topic id: partitions whose state the persister must delete})` once the record that marks
        them deleting is written; `offsets_deleted` is the second step."""
        out = Actions()
        try:
            if not self.coordinator.active:
                raise GroupError(self.coordinator.inactive_error)
            if not delete.group_id:
                raise GroupError(ErrorCode.INVALID_GROUP_ID)
            group = self._existing(delete.group_id)
            errors, records, to_delete = group.delete_offsets((t.topic_name for t in delete.topics), now_ms,
                                                              self.topics)
        except GroupError as e:
            out.respond(ticket, DeleteShareGroupOffsetsResponse(error_code=e.code,
                                                                error_message=e.message or e.code.message))
            return out
        self._write_then(out, ticket, group.group_id, records, (errors, to_delete), DeleteShareGroupOffsetsResponse)
        return out

    def offsets_deleted(self, now_ms: int, ticket: Ticket, request: RequestInfo,
                        done: tuple[str, Mapping[UUID, str], list]) -> Actions:
        """The persister deleted the share partitions of `done` = (group id, {topic id: name},
        topics refused so far): they leave the deleting topics, and the ticket gets the response."""
        group_id, topics, errors = done
        out = Actions()
        group = self.group(group_id) if self.coordinator.active else None
        records = [] if group is None else group.offsets_deleted(topics, now_ms)
        response = DeleteShareGroupOffsetsResponse(responses=[
            DeleteTopic(topic_name=name, topic_id=topic_id) for topic_id, name in topics.items()] + list(errors))
        self._write_then(out, ticket, group_id, records, response, DeleteShareGroupOffsetsResponse)
        return out

    def _existing(self, group_id: str) -> ShareGroup:
        """Kafka's GroupMetadataManager.shareGroup(groupId)."""
        group = self.coordinator.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return group

    def _write_then(self, out: Actions, ticket: Ticket, group_id: str, records: list[CoordinatorRecord],
                    answer, error_response) -> None:
        """Write `records`, then answer `answer`; a failed write answers `error_response` with the
        error as the coordinator runtime reports it."""
        if not records:
            out.respond(ticket, answer)
            return

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error == ErrorCode.NONE:
                out.respond(ticket, answer)
            else:
                code = ErrorCode(append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR))
                out.respond(ticket, error_response(error_code=code, error_message=code.message))

        out.append(self.coordinator.partition_for(group_id), [encode_record(r) for r in records], stored)

    # --- ShareGroupDescribe ----------------------------------------------------------------------

    def describe(self, group_ids: list[str]) -> list[DescribedGroup]:
        return describe_groups(self, group_ids, DescribedGroup)

    # --- topics and time --------------------------------------------------------------------------

    def update_topics(self, now_ms: int, topics: TopicsImage) -> Actions:
        """The cluster's topics changed: groups hash their subscribed topics again at the next
        heartbeat; deleted topics leave their state metadata."""
        deleted = set(self.topics.by_id) - set(topics.by_id)
        self.topics = topics
        out = Actions()
        for group in list(self.coordinator.groups.values()):
            if isinstance(group, ShareGroup):
                group.metadata_refresh = True
                if deleted:
                    self._write(out, group, group.on_topics_deleted(deleted, now_ms))
        return out

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
        return ("share-session", group_id, member_id)

    def _schedule_session(self, group: ShareGroup, member_id: str, deadline_ms: int) -> None:
        group.touch(member_id, deadline_ms)
        self.timer.schedule(self._session_key(group.group_id, member_id), deadline_ms,
                            lambda now_ms, out: self._expire(group, member_id, now_ms, out))

    def _expire(self, group: ShareGroup, member_id: str, now_ms: int, out: Actions) -> None:
        if self.group(group.group_id) is not group or member_id not in group.members:
            return
        log.info("[GroupId %s] Member %s fenced from the group because the member session expired.",
                 group.group_id, member_id)
        records = group.fence(member_id, now_ms, self.topics)

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error != ErrorCode.NONE:
                log.warning("Writing the records of share group %s failed: %s", group.group_id, ErrorCode(error).name)
            self._left(group, member_id)

        out.append(self.coordinator.partition_for(group.group_id), [encode_record(r) for r in records], stored)

    def _write(self, out: Actions, group: ShareGroup, records: list[CoordinatorRecord]) -> None:
        if not records:
            return

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error != ErrorCode.NONE:
                log.warning("Writing the records of share group %s failed: %s", group.group_id, ErrorCode(error).name)

        out.append(self.coordinator.partition_for(group.group_id), [encode_record(r) for r in records], stored)

    # --- the coordinator's hooks --------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        replay_group_record(self, key, value, ShareGroupMetadataKey, ShareGroup)

    def on_loaded(self, group: Group, now_ms: int, out: Actions) -> None:
        assert isinstance(group, ShareGroup)
        log.info("Loaded share group %s with %d members.", group.group_id, len(group.members))
        settings = self.share_config(group.group_id)
        group.on_loaded(now_ms, settings.session_timeout_ms)
        for member_id in group.members:
            self._schedule_session(group, member_id, now_ms + settings.session_timeout_ms)

    def on_deleted(self, group: Group, now_ms: int) -> None:
        assert isinstance(group, ShareGroup)
        for member_id in group.members:
            self.timer.cancel(self._session_key(group.group_id, member_id))

    def share_groups(self) -> Iterable[ShareGroup]:
        return [g for g in self.coordinator.groups.values() if isinstance(g, ShareGroup)]

    def initialized_partitions(self, group_id: str) -> Mapping[UUID, frozenset[int]]:
        """The share partitions of the group whose state is initialized (Kafka's initializedShareGroupPartitions)."""
        group = self.group(group_id)
        return {} if group is None else {t: v.partitions for t, v in group.initialized.items()}
