"""KIP-848 consumer groups in the group coordinator: ConsumerGroupHeartbeat, ConsumerGroupDescribe,
their timers, their records in `__consumer_offsets` and their topics.

The group type manager (coordinator/group.py) of ConsumerGroup (coordinator/consumer_group.py):

- A heartbeat is answered once its records are appended, as Kafka answers after the write.
- A consumer group and a classic group cannot share an id: a heartbeat that would create a consumer
  group where an empty classic group is replaces it (its offsets stay), as Kafka does; a classic
  group with members makes the heartbeat fail with GROUP_ID_NOT_FOUND (Kafka's answer when the
  online upgrade does not apply; it is not implemented here).
- A group's session timeout, heartbeat interval and assignment interval are its group configs
  (consumer.*) where it has them, else the broker's group.consumer.*, read at each use.
- Each group has one timer at its next deadline (session or rebalance timeout), which fences the
  members whose time ran out.
- The server hands in the cluster's topics (`update_topics`) whenever they change; groups that
  subscribe to a changed topic bump their epoch at once.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from ..wire.coordinator_record import CoordinatorRecord, encode_record
from ..wire.coordinator_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from ..wire.errors import ErrorCode
from ..wire.messages.consumer_group_describe_response import DescribedGroup
from ..wire.messages.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from .actions import Actions, Ticket, append_error
from .consumer_group import (
    CONSUMER_GROUP_RECORD_TYPES, ConsumerGroup, ConsumerGroupConfig, TopicsImage, validate_heartbeat_request,
)
from .consumer_group_member import JOIN_GROUP_MEMBER_EPOCH
from .group import Group, GroupError, GroupType, GroupTypeManager, RequestInfo, describe_groups, replay_group_record

if TYPE_CHECKING:
    from .group_config import GroupConfigManager
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("samsa.coordinator.consumer")


class ConsumerGroupManager(GroupTypeManager):
    group_type = GroupType.CONSUMER
    record_types = CONSUMER_GROUP_RECORD_TYPES

    def __init__(self, coordinator: GroupCoordinator, config: ConsumerGroupConfig,
                 group_configs: GroupConfigManager | None = None) -> None:
        self.coordinator = coordinator
        self.config = config
        self.group_configs = group_configs
        self.timer = coordinator.timer
        self.topics = TopicsImage()

    def consumer_config(self, group_id: str) -> ConsumerGroupConfig:
        """The group's settings: its group configs (consumer.*), else the broker's (group.consumer.*)."""
        if self.group_configs is None:
            return self.config
        v = self.group_configs.value
        return replace(self.config, session_timeout_ms=v(group_id, "consumer.session.timeout.ms"),
                       heartbeat_interval_ms=v(group_id, "consumer.heartbeat.interval.ms"),
                       assignment_interval_ms=v(group_id, "consumer.assignment.interval.ms"))

    def _new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id, lambda: self.consumer_config(group_id), self._cluster_topics)

    def _cluster_topics(self) -> TopicsImage:
        return self.topics

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    # --- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        out = Actions()
        try:
            if not self.coordinator.active:
                raise GroupError(self.coordinator.inactive_error)
            validate_heartbeat_request(heartbeat, request.api_version, self.config.assignors)
            group, replaced = self._group_for(heartbeat.group_id, heartbeat.member_epoch)
        except GroupError as e:
            out.respond(ticket, ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message))
            return out
        response, group_records = group.heartbeat(heartbeat, client_id=request.client_id,
                                                  client_host=request.client_host, now_ms=now_ms, topics=self.topics,
                                                  new_member_uuid=self.coordinator.new_member_uuid,
                                                  describable=request.describable)
        if replaced is not None:
            if not group_records:  # refused: the classic group stays, no consumer group appears
                return self._respond(out, ticket, response)
            log.info("Replacing empty classic group %s by a consumer group", group.group_id)
            self.coordinator._remove_group(replaced, now_ms)
        if self.coordinator.groups.get(group.group_id) is not group:
            if not group_records:
                return self._respond(out, ticket, response)
            self.coordinator.add_group(group)
        self._schedule(group)
        encoded = ([] if replaced is None else replaced.tombstones()) + [encode_record(r) for r in group_records]
        if not encoded:
            return self._respond(out, ticket, response)

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error == ErrorCode.NONE:
                out.respond(ticket, response)
            else:
                log.warning("Writing the records of consumer group %s failed: %s", group.group_id,
                            ErrorCode(error).name)
                code = append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR)
                out.respond(ticket, ConsumerGroupHeartbeatResponse(error_code=code))

        out.append(self.coordinator.partition_for(group.group_id), encoded, stored)
        return out

    @staticmethod
    def _respond(out: Actions, ticket: Ticket, response) -> Actions:
        out.respond(ticket, response)
        return out

    def _group_for(self, group_id: str, member_epoch: int) -> tuple[ConsumerGroup, Group | None]:
        """The consumer group a heartbeat goes to (new when a member joins), and the empty classic
        group it replaces, if any (Kafka's getOrMaybeCreateConsumerGroup)."""
        existing = self.coordinator.groups.get(group_id)
        if isinstance(existing, ConsumerGroup):
            return existing, None
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if existing is None:
            if not joining:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return self._new_group(group_id), None
        if joining and existing.is_empty() and existing.type == GroupType.CLASSIC:
            return self._new_group(group_id), existing
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    # --- ConsumerGroupDescribe ----------------------------------------------------------------

    def describe(self, group_ids: list[str]) -> list[DescribedGroup]:
        return describe_groups(self, group_ids, DescribedGroup)

    # --- topics and time ------------------------------------------------------------------------

    def update_topics(self, now_ms: int, topics: TopicsImage) -> Actions:
        """The cluster's topics changed: groups subscribed to what changed bump their epoch."""
        self.topics = topics
        out = Actions()
        for group in list(self.coordinator.groups.values()):
            if isinstance(group, ConsumerGroup):
                self._write(out, group, group.on_topics_changed(topics))
        return out

    def _schedule(self, group: ConsumerGroup) -> None:
        key = ("consumer-group", group.group_id)
        deadline = group.next_deadline()
        if deadline is None:
            self.timer.cancel(key)
        elif self.timer.deadline(key) != deadline:
            self.timer.schedule(key, deadline, lambda now_ms, out: self._expire(group, now_ms, out))

    def _expire(self, group: ConsumerGroup, now_ms: int, out: Actions) -> None:
        if self.group(group.group_id) is not group:
            return
        self._write(out, group, group.poll(now_ms, self.topics))
        self._schedule(group)

    def _write(self, out: Actions, group: ConsumerGroup, records: list[CoordinatorRecord]) -> None:
        if not records:
            return

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error != ErrorCode.NONE:
                log.warning("Writing the records of consumer group %s failed: %s", group.group_id,
                            ErrorCode(error).name)

        out.append(self.coordinator.partition_for(group.group_id), [encode_record(r) for r in records], stored)

    # --- the coordinator's hooks --------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        replay_group_record(self, key, value, ConsumerGroupMetadataKey, self._new_group, replaces_simple_group=True)

    def on_loaded(self, group: Group, now_ms: int, out: Actions) -> None:
        assert isinstance(group, ConsumerGroup)
        log.info("Loaded consumer group %s with %d members", group.group_id, len(group.members))
        group.on_loaded(now_ms)
        self._schedule(group)

    def on_deleted(self, group: Group, now_ms: int) -> None:
        self.timer.cancel(("consumer-group", group.group_id))
