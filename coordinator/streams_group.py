"""The streams group of KIP-1071 (Kafka's StreamsGroup and the streams half of its
GroupMetadataManager), sans I/O.

Kafka Streams clients heartbeat (StreamsGroupHeartbeat) with their topology; the coordinator
configures it against the cluster's topics (streams_topology.py: missing source topics, internal
topics to create, copartitioning), assigns tasks with the sticky assignor (streams_assignor.py) and
moves each member to its target assignment as KIP-848 consumer groups do (streams_group_member.py).

Epochs: the group epoch is bumped when a member joins, leaves or changes what assignment depends
on (its process, rack, client tags, topology epoch), when the topology's topics change (their
metadata hash), when the topology becomes valid (its validated topology epoch), or when the
assignment configs (num.standby.replicas) change. The target assignment follows the group epoch,
at most every `streams.assignment.interval.ms`, and not before `streams.initial.rebalance.delay.ms`
after the first member joined an empty group (ASSIGNMENT_DELAYED meanwhile).

States, as Kafka names them: Empty, NotReady (the topology is not configured: topics missing),
Assigning, Reconciling, Stable.

Every change is one of Kafka's records (wire/coordinator_records/streams_group_*), applied by
`replay` as it is made and again at load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from ..wire.coordinator_record import CoordinatorRecord, encode_record
from ..wire.coordinator_records.streams_group_current_member_assignment_key import (
    StreamsGroupCurrentMemberAssignmentKey,
)
from ..wire.coordinator_records.streams_group_member_metadata_key import StreamsGroupMemberMetadataKey
from ..wire.coordinator_records.streams_group_metadata_key import StreamsGroupMetadataKey
from ..wire.coordinator_records.streams_group_metadata_value import LastAssignmentConfig, StreamsGroupMetadataValue
from ..wire.coordinator_records.streams_group_target_assignment_member_key import (
    StreamsGroupTargetAssignmentMemberKey,
)
from ..wire.coordinator_records.streams_group_target_assignment_member_value import (
    StreamsGroupTargetAssignmentMemberValue,
)
from ..wire.coordinator_records.streams_group_target_assignment_member_value import TaskIds as TargetTaskIds
from ..wire.coordinator_records.streams_group_target_assignment_metadata_key import (
    StreamsGroupTargetAssignmentMetadataKey,
)
from ..wire.coordinator_records.streams_group_target_assignment_metadata_value import (
    StreamsGroupTargetAssignmentMetadataValue,
)
from ..wire.coordinator_records.streams_group_topology_key import StreamsGroupTopologyKey
from ..wire.errors import ErrorCode
from ..wire.messages import streams_group_describe_response as described
from ..wire.messages import streams_group_heartbeat_response as hb
from .actions import Record
from .consumer_group import TopicsImage
from .group import (
    CommitPartitionValidator,
    Group,
    GroupError,
    GroupType,
    OffsetExpirationCondition,
    RequestInfo,
    member_committing_at_an_older_epoch,
)
from .share_group import metadata_hash
from .streams_assignor import AssignorMember, StickyTaskAssignor, Subtopology, TaskAssignorError, TasksTuple
from .streams_group_member import (
    StreamsGroupMember, TasksWithEpochs, record_task_ids, reconcile, tasks_of,
)
from .streams_topology import ConfiguredTopology, InternalTopic, Status, StreamsTopology, configure_topics

__all__ = ["STREAMS_GROUP_RECORD_TYPES", "StreamsGroup", "StreamsGroupState", "StreamsSettings",
           "validate_heartbeat_request"]

STICKY_ASSIGNOR = StickyTaskAssignor()
STREAMS_GROUP_RECORD_TYPES = tuple(key.API_KEY for key in (
    StreamsGroupMetadataKey, StreamsGroupTopologyKey, StreamsGroupMemberMetadataKey,
    StreamsGroupTargetAssignmentMetadataKey, StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupCurrentMemberAssignmentKey))

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class StreamsGroupState(Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def lower(self) -> str:
        return "not_ready" if self is StreamsGroupState.NOT_READY else self.value.lower()


@dataclass(frozen=True)
class StreamsSettings:
    """A streams group's effective settings (its group config, else the broker's group.streams.*)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignment_interval_ms: int = 1_000
    initial_rebalance_delay_ms: int = 3_000
    num_standby_replicas: int = 0
    task_offset_interval_ms: int = 60_000
    acceptable_recovery_lag: int = 10_000
    max_size: int = 2**31 - 1
    rack_aware_assignment_tags: tuple[str, ...] = ()

    def assignment_configs(self) -> dict[str, str]:
        """Kafka's streamsGroupAssignmentConfigs: what the assignor is given, kept in the group's
        metadata record; a change is a new group epoch. Kafka 4.4's sticky assignor reads only
        num.standby.replicas: the tags only trigger that rebalance and the MISSING_CLIENT_TAGS status."""
        configs = {"num.standby.replicas": str(self.num_standby_replicas)}
        if self.rack_aware_assignment_tags:
            configs["rack.aware.assignment.tags"] = ",".join(self.rack_aware_assignment_tags)
        return configs


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat_request(request) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid (GroupCoordinatorService), with the
    check of unsupported features before it."""
    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.INVALID_REQUEST, message)

    if request.topology is not None:
        for s in request.topology.subtopologies:
            if s.source_topic_regex:
                raise invalid("Regular expressions for source topics are not supported yet.")
    if _blank(request.member_id):
        raise invalid("MemberId can't be empty.")
    if _blank(request.group_id):
        raise invalid("GroupId can't be empty.")
    if _blank(request.instance_id):
        raise invalid("InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise invalid("RackId can't be empty.")
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        for tasks, name in ((request.active_tasks, "ActiveTasks"), (request.standby_tasks, "StandbyTasks"),
                            (request.warmup_tasks, "WarmupTasks")):
            if tasks is None or tasks:
                raise invalid(f"{name} must be empty when (re-)joining.")
        if request.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
        for s in request.topology.subtopologies:
            for t in s.state_changelog_topics:
                if t.partitions != 0:
                    raise GroupError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                     f"Changelog topic {t.name} must have an undefined partition count, but it is "
                                     f"set to {t.partitions}.")
    elif request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid(f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -2.")
    if request.active_tasks is not None or request.standby_tasks is not None or request.warmup_tasks is not None:
        if request.active_tasks is None or request.standby_tasks is None or request.warmup_tasks is None:
            raise invalid("If one task-type is non-null, all must be non-null.")
    if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH and request.topology is not None:
        raise invalid("Topology can only be provided when (re-)joining.")


def _status(code: Status, detail: str) -> hb.Status:
    return hb.Status(status_code=code, status_detail=detail)


class StreamsGroup(Group):
    type = GroupType.STREAMS

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1  # Kafka's StreamsGroup starts at epoch 1
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.stored_description_topology_epoch = -1
        self.failed_description_topology_epoch = -1
        self.assignment_epoch = 1  # Kafka's TargetAssignmentMetadata.INITIAL: (1, 0)
        self.assignment_timestamp = 0
        self.topology: StreamsTopology | None = None
        self.configured: ConfiguredTopology | None = None
        self.members: dict[str, StreamsGroupMember] = {}
        self.target_assignment: dict[str, TasksTuple] = {}
        # Kept in memory only, as Kafka keeps them: the offsets members last reported, the member
        # that asked the application to shut down.
        self.task_offsets: dict[str, tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]] = {}
        self.shutdown_requested_by: str | None = None
        self.endpoint_information_epoch = 0
        # When the initial rebalance delay ends (None: not delaying).
        self.initial_delay_deadline: int | None = None
        # The topics changed (or the group was loaded): configure the topology again.
        self.metadata_refresh = True

    # --- what the group looks like -------------------------------------------------------------------

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_in_states(self, states: set[str]) -> bool:
        return self.state.lower() in states

    @property
    def protocol_type(self) -> str:
        return "streams"

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if not self.members or self.topology is None:
            return False
        return topic in self.topology.source_topics()

    def active_process(self, subtopology: str, partition: int) -> str | None:
        """The process of the member running the task active (or still revoking it)."""
        for m in self.members.values():
            for tasks in (m.assigned.active, m.pending_revocation.active):
                if partition in tasks.get(subtopology, ()):
                    return m.process_id
        return None

    def _replica_processes(self, kind: str, subtopology: str, partition: int) -> set[str]:
        return {m.process_id for m in self.members.values()
                for tasks in (getattr(m.assigned, kind), getattr(m.pending_revocation, kind))
                if partition in tasks.get(subtopology, ())}

    def standby_processes(self, subtopology: str, partition: int) -> set[str]:
        return self._replica_processes("standby", subtopology, partition)

    def warmup_processes(self, subtopology: str, partition: int) -> set[str]:
        return self._replica_processes("warmup", subtopology, partition)

    # --- describe ------------------------------------------------------------------------------------

    def describe(self) -> described.DescribedGroup:
        def task_ids(tasks) -> list[described.TaskIds]:
            return record_task_ids(tasks, described.TaskIds)

        def offsets(values: Mapping[str, Mapping[int, int]]) -> list[described.TaskOffset]:
            return [described.TaskOffset(subtopology_id=s, partition=p, offset=o)
                    for s, ps in sorted(values.items()) for p, o in sorted(ps.items())]

        members = []
        for m in self.members.values():
            target = self.target_assignment.get(m.member_id)
            reported = self.task_offsets.get(m.member_id, ({}, {}))
            members.append(described.Member(
                member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                process_id=m.process_id,
                user_endpoint=None if m.user_endpoint is None else described.Endpoint(host=m.user_endpoint[0],
                                                                                     port=m.user_endpoint[1]),
                client_tags=[described.KeyValue(key=k, value=v) for k, v in m.client_tags.items()],
                task_offsets=offsets(reported[0]), task_end_offsets=offsets(reported[1]),
                assignment=described.Assignment(active_tasks=task_ids(m.assigned.active_tasks()),
                                                standby_tasks=task_ids(m.assigned.standby),
                                                warmup_tasks=task_ids(m.assigned.warmup)),
                target_assignment=described.Assignment() if target is None else described.Assignment(
                    active_tasks=task_ids(target.active), standby_tasks=task_ids(target.standby),
                    warmup_tasks=task_ids(target.warmup))))
        topology: described.Topology | None = None
        if self.configured is not None and self.configured.is_ready():
            topology = self.configured.describe()
        elif self.topology is not None:
            topology = self.topology.describe()
        return described.DescribedGroup(
            group_id=self.group_id, group_state=self.state_name, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch, assignor_name=STICKY_ASSIGNOR.name, topology=topology,
            members=members)

    # --- offsets and deletion (the coordinator's shared APIs) ----------------------------------------

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               request: RequestInfo, transactional: bool = False,
                               ) -> CommitPartitionValidator | None:
        """Kafka's StreamsGroup.validateOffsetCommit: a member commits at its epoch; at an older one
        only the input partitions of active tasks it got at that epoch or before (and still has, or
        is revoking): anything else is STALE_MEMBER_EPOCH, the whole commit refused."""
        member = member_committing_at_an_older_epoch(self.members, self._member_or_throw, member_id, group_instance_id,
                                                     generation_or_epoch, request, transactional, "streams")
        return None if member is None else self._assignment_epoch_validator(member, generation_or_epoch)

    def _assignment_epoch_validator(self, member: StreamsGroupMember, epoch: int) -> CommitPartitionValidator:
        """Kafka's createAssignmentEpochValidator: each partition is the input of a task, which the
        member must have got at `epoch` or before."""
        if self.topology is None:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, "Topology is not available for offset commit validation.")
        subtopology_of = self.topology.source_topic_map()
        assigned, revoking = member.assigned.active, member.pending_revocation.active

        def validate(topic: str, partition: int) -> None:
            subtopology = subtopology_of.get(topic)
            if subtopology is None:
                raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Topic {topic} is not in the topology.")
            assignment_epoch = assigned.get(subtopology, {}).get(partition)
            if assignment_epoch is None:
                assignment_epoch = revoking.get(subtopology, {}).get(partition)
            if assignment_epoch is None:
                raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Task {subtopology}-{partition} is not assigned or "
                                 "pending revocation for member.")
            if epoch < assignment_epoch:
                raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch {epoch} is older than "
                                 f"assignment epoch {assignment_epoch} for task {subtopology}-{partition}.")

        return validate

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int, request: RequestInfo) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        if member_epoch != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH, f"The received member epoch {member_epoch} does not match "
                             f"the expected member epoch {member.member_epoch}.")

    def validate_offset_delete(self) -> None:
        return

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        return OffsetExpirationCondition(lambda offset: offset.commit_timestamp)

    def tombstones(self) -> list[Record]:
        """Kafka's StreamsGroup.createGroupTombstoneRecords, in its order."""
        g = self.group_id
        records: list[CoordinatorRecord] = []
        records += [CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(g, m), None) for m in self.members]
        records += [CoordinatorRecord(StreamsGroupTargetAssignmentMemberKey(g, m), None) for m in self.members]
        records.append(CoordinatorRecord(StreamsGroupTargetAssignmentMetadataKey(g), None))
        records += [CoordinatorRecord(StreamsGroupMemberMetadataKey(g, m), None) for m in self.members]
        records.append(CoordinatorRecord(StreamsGroupMetadataKey(g), None))
        records.append(CoordinatorRecord(StreamsGroupTopologyKey(g), None))
        return [encode_record(r) for r in records]

    def _member_or_throw(self, member_id: str) -> StreamsGroupMember:
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    # --- heartbeats ----------------------------------------------------------------------------------

    def heartbeat(self, request, *, client_id: str, client_host: str, now_ms: int, topics: TopicsImage,
                  settings: StreamsSettings, api_version: int = 1,
                  ) -> tuple[hb.StreamsGroupHeartbeatResponse, list[CoordinatorRecord], dict[str, InternalTopic]]:
        """A StreamsGroupHeartbeat checked by `validate_heartbeat_request`, not a leave: (the response,
        the records to append, the internal topics the server must create). The group has applied
        the records; a refused request (GroupError) changes nothing."""
        member_id, epoch = request.member_id, request.member_epoch
        instance_id = request.instance_id
        joining = epoch == JOIN_GROUP_MEMBER_EPOCH
        # A static member that left with epoch -2 and rejoins under a new member id replaces it (Kafka's
        # getOrMaybeCreateStaticStreamsGroupMember): it takes over its metadata, target and tasks.
        predecessor = None if instance_id is None else self.static_member(instance_id)
        if joining and predecessor is None:
            if len(self.members) >= settings.max_size and member_id not in self.members:
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The streams group has reached its maximum "
                                 f"capacity of {settings.max_size} members.")
        owned = None
        if request.active_tasks is not None:
            owned = TasksWithEpochs({s: {p: 0 for p in ps} for s, ps in tasks_of(request.active_tasks).items()},
                                    tasks_of(request.standby_tasks), tasks_of(request.warmup_tasks))
        replaced: StreamsGroupMember | None = None
        if instance_id is None or not joining:
            if instance_id is not None:
                if predecessor is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if predecessor.member_id != member_id:
                    raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{instance_id} was fenced by member {predecessor.member_id}.")
            member = (self.members.get(member_id) or StreamsGroupMember(member_id)) if joining \
                else self._member_or_throw(member_id)
            self._check_member_epoch(member, epoch, owned)
        elif predecessor is None:
            member = self.members.get(member_id) or StreamsGroupMember(member_id)
        else:
            if predecessor.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} cannot join the group because the instance id is owned by "
                                 f"{predecessor.member_id} member.")
            replaced = predecessor
            member = replace(predecessor, member_id=member_id, member_epoch=JOIN_GROUP_MEMBER_EPOCH,
                             previous_member_epoch=JOIN_GROUP_MEMBER_EPOCH)
        new_topology = StreamsTopology.from_request(request.topology) if request.topology is not None else None
        if new_topology is not None and self.topology is not None and self.topology.epoch <= new_topology.epoch \
                and not self.topology.same_as(new_topology):
            raise GroupError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
        if new_topology is None and self.topology is None:
            raise GroupError(ErrorCode.INVALID_REQUEST, "The topology is null and the group topology is also null.")

        endpoint = (request.user_endpoint.host, request.user_endpoint.port) if request.user_endpoint is not None \
            else (None if joining else member.user_endpoint)
        updated = replace(
            member,
            instance_id=member.instance_id if request.instance_id is None else request.instance_id,
            rack_id=member.rack_id if request.rack_id is None else request.rack_id,
            rebalance_timeout_ms=(member.rebalance_timeout_ms if request.rebalance_timeout_ms == -1
                                  else request.rebalance_timeout_ms),
            topology_epoch=member.topology_epoch if request.topology is None else request.topology.epoch,
            client_id=client_id, client_host=client_host,
            process_id=member.process_id if request.process_id is None else request.process_id,
            client_tags=(member.client_tags if request.client_tags is None
                         else {kv.key: kv.value for kv in request.client_tags}),
            user_endpoint=endpoint)

        # The topology configured against the topics (cached until they change), and the last check:
        # the tasks the member says it owns must be tasks of it.
        topology = self.topology if self.topology is not None else new_topology
        assert topology is not None
        configured = self.configured
        new_hash = self.metadata_hash
        reconfigured = configured is None or self.metadata_refresh
        if reconfigured:
            new_hash = metadata_hash(topology.required_topics(), topics)
            if configured is None or new_hash != self.metadata_hash or configured.epoch != topology.epoch:
                configured = configure_topics(topology, _partition_count(topics), new_hash)
        assert configured is not None
        validated_epoch = -1
        if configured.is_ready():
            validated_epoch = topology.epoch
            for tasks in (request.active_tasks, request.standby_tasks, request.warmup_tasks):
                self._check_tasks(configured, tasks)

        # Every check is done: from here on the group changes.
        records: list[CoordinatorRecord] = []
        statuses: list[hb.Status] = []
        was_empty = not self.members
        new_member = member_id not in self.members and replaced is None
        if replaced is not None:
            self._replace_member(records, replaced, member)
        recompute = new_hash != self.metadata_hash
        if updated != member or new_member:
            self._emit(records, StreamsGroupMemberMetadataKey(self.group_id, member_id), updated.metadata_value())
            recompute |= updated.instance_id is None or (
                member.topology_epoch, member.rack_id, member.client_tags, member.process_id) != (
                updated.topology_epoch, updated.rack_id, updated.client_tags, updated.process_id)
            recompute |= new_member
        if self.topology is None:
            self._emit(records, StreamsGroupTopologyKey(self.group_id), topology.record_value())
        self.configured = configured
        if reconfigured:
            self.metadata_refresh = False
        if updated.topology_epoch < topology.epoch:
            statuses.append(_status(Status.STALE_TOPOLOGY, f"The member's topology epoch {updated.topology_epoch} is "
                                    f"behind the group's topology epoch {topology.epoch}."))
        if request.task_offsets is not None or request.task_end_offsets is not None:
            self._update_task_offsets(member_id, request.task_offsets, request.task_end_offsets)
        recompute |= validated_epoch != self.validated_topology_epoch
        configs = settings.assignment_configs()
        recompute |= configs != self.last_assignment_configs
        group_epoch = self.group_epoch
        if recompute:
            group_epoch += 1
            self._emit(records, StreamsGroupMetadataKey(self.group_id), StreamsGroupMetadataValue(
                epoch=group_epoch, metadata_hash=new_hash, validated_topology_epoch=validated_epoch,
                last_assignment_configs=[LastAssignmentConfig(key=k, value=v) for k, v in sorted(configs.items())],
                stored_description_topology_epoch=self.stored_description_topology_epoch,
                failed_description_topology_epoch=self.failed_description_topology_epoch))
        if was_empty and settings.initial_rebalance_delay_ms > 0 and self.initial_delay_deadline is None:
            self.initial_delay_deadline = now_ms + settings.initial_rebalance_delay_ms
        target_epoch, target = self._maybe_update_target(records, group_epoch, updated, configured, now_ms,
                                                          settings, statuses)
        current = self.members.get(member_id, updated)
        final = current
        if not current.is_reconciled_to(target_epoch):
            final = reconcile(current, target_epoch, target.get(member_id, TasksTuple()), self.active_process,
                              self.standby_processes, self.warmup_processes, owned)
            if final != current:
                self._emit(records, StreamsGroupCurrentMemberAssignmentKey(self.group_id, member_id),
                           final.assignment_value())
        if request.shutdown_application and self.shutdown_requested_by is None:
            self.shutdown_requested_by = member_id

        response = hb.StreamsGroupHeartbeatResponse(
            member_id=member_id, member_epoch=final.member_epoch, heartbeat_interval_ms=settings.heartbeat_interval_ms,
            task_offset_interval_ms=settings.task_offset_interval_ms)
        if api_version >= 1:  # Kafka leaves v0's AcceptableRecoveryLagLegacy at 0
            response.acceptable_recovery_lag = settings.acceptable_recovery_lag
        changed = final.assigned != member.assigned
        if joining or changed:
            response.active_tasks = record_task_ids(final.assigned.active_tasks(), hb.TaskIds)
            response.standby_tasks = record_task_ids(final.assigned.standby, hb.TaskIds)
            response.warmup_tasks = record_task_ids(final.assigned.warmup, hb.TaskIds)
        if final.user_endpoint != member.user_endpoint or (changed and final.user_endpoint is not None):
            self.endpoint_information_epoch += 1
        if self.endpoint_information_epoch != request.endpoint_information_epoch:
            response.partitions_by_user_endpoint = self._endpoint_to_partitions(topics)
        response.endpoint_information_epoch = self.endpoint_information_epoch
        to_create: dict[str, InternalTopic] = {}
        if configured.error is not None:
            to_create = dict(configured.internal_topics_to_create)
            statuses.append(_status(configured.error.status, configured.error.message))
        if self.shutdown_requested_by is not None:
            statuses.append(_status(Status.SHUTDOWN_APPLICATION, f"Streams group member {self.shutdown_requested_by} "
                                    "encountered a fatal error and requested a shutdown for the entire application."))
        required = configs.get("rack.aware.assignment.tags", "").strip()
        if api_version >= 1 and required:
            missing = [t for t in re.split(r"\s*,\s*", required) if t not in final.client_tags]
            if missing:
                statuses.append(_status(Status.MISSING_CLIENT_TAGS, "Missing required client tags for rack-aware "
                                        f"standby assignment: [{', '.join(missing)}]. Configure them via "
                                        "'client.tag.<tagKey>' in your Streams config."))
        response.status = statuses
        return response, records, to_create

    def static_member(self, instance_id: str) -> StreamsGroupMember | None:
        """The member with this group instance id (Kafka's StreamsGroup.staticMember)."""
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def _replace_member(self, records: list[CoordinatorRecord], old: StreamsGroupMember,
                        new: StreamsGroupMember) -> None:
        """Kafka's replaceStreamsMember: the old member's records deleted, the new member's written
        with the old one's metadata, target and tasks."""
        g = self.group_id
        target = self.target_assignment.get(old.member_id, TasksTuple())
        for key in (StreamsGroupCurrentMemberAssignmentKey(g, old.member_id),
                    StreamsGroupTargetAssignmentMemberKey(g, old.member_id),
                    StreamsGroupMemberMetadataKey(g, old.member_id)):
            self._emit(records, key, None)
        self.task_offsets.pop(old.member_id, None)
        self._emit(records, StreamsGroupMemberMetadataKey(g, new.member_id), new.metadata_value())
        self._emit(records, StreamsGroupTargetAssignmentMemberKey(g, new.member_id),
                   StreamsGroupTargetAssignmentMemberValue(
                       active_tasks=record_task_ids(target.active, TargetTaskIds),
                       standby_tasks=record_task_ids(target.standby, TargetTaskIds),
                       warmup_tasks=record_task_ids(target.warmup, TargetTaskIds)))
        self._emit(records, StreamsGroupCurrentMemberAssignmentKey(g, new.member_id), new.assignment_value())

    def _check_member_epoch(self, member: StreamsGroupMember, epoch: int, owned: TasksWithEpochs | None) -> None:
        """Kafka's throwIfStreamsGroupMemberEpochIsInvalid: a member a step behind is accepted if it
        owns no more than it was given."""
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            return
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The streams group member has a greater member epoch "
                             f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). The member "
                             "must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch:
            contained = owned is None or all(
                ps <= frozenset(assigned.get(s, ())) for mine, assigned in (
                    (owned.active_tasks(), member.assigned.active_tasks()), (owned.standby, member.assigned.standby),
                    (owned.warmup, member.assigned.warmup)) for s, ps in mine.items())
            if epoch != member.previous_member_epoch or not contained:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, f"The streams group member has a smaller member epoch "
                                 f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). The "
                                 "member must abandon all its partitions and rejoin.")

    @staticmethod
    def _check_tasks(configured: ConfiguredTopology, tasks) -> None:
        """Kafka's throwIfRequestContainsInvalidTasks."""
        assert configured.subtopologies is not None
        for t in tasks or ():
            sub = configured.subtopologies.get(t.subtopology_id)
            if sub is None:
                raise GroupError(ErrorCode.INVALID_REQUEST, f"Subtopology {t.subtopology_id} does not exist in the "
                                 "topology.")
            for p in t.partitions:
                if p < 0 or p >= sub.num_tasks:
                    raise GroupError(ErrorCode.INVALID_REQUEST, f"Task {p} for subtopology {t.subtopology_id} is "
                                     f"invalid. Number of tasks for this subtopology: {sub.num_tasks}")

    def _update_task_offsets(self, member_id: str, offsets, end_offsets) -> None:
        current, current_end = self.task_offsets.get(member_id, ({}, {}))

        def of(values, old):
            if values is None:
                return old
            result: dict[str, dict[int, int]] = {}
            for t in values:
                result.setdefault(t.subtopology_id, {})[t.partition] = t.offset
            return result

        self.task_offsets[member_id] = (of(offsets, current), of(end_offsets, current_end))

    def _endpoint_to_partitions(self, topics: TopicsImage) -> list[hb.EndpointToPartitions]:
        """Kafka's buildEndpointToPartitions: for each member with an endpoint, the input partitions
        of its active and of its standby tasks (for interactive queries)."""
        result: list[hb.EndpointToPartitions] = []
        configured = self.configured
        if configured is None or configured.subtopologies is None:
            return result
        subs = configured.subtopologies

        def partitions(tasks: Mapping[str, frozenset[int]]) -> list[hb.TopicPartition]:
            by_topic: dict[str, set[int]] = {}
            for s, ps in tasks.items():
                sub = subs.get(s)
                if sub is None:
                    continue
                for topic in sub.input_topics():
                    n = topics.by_name[topic].num_partitions if topic in topics.by_name else 0
                    by_topic.setdefault(topic, set()).update(p for p in ps if p < n)
            return [hb.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]

        for m in self.members.values():
            if m.user_endpoint is None:
                continue
            standby = {s: ps | m.assigned.warmup.get(s, frozenset()) for s, ps in m.assigned.standby.items()}
            for s, ps in m.assigned.warmup.items():
                standby.setdefault(s, ps)
            result.append(hb.EndpointToPartitions(
                user_endpoint=hb.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                active_partitions=partitions(m.assigned.active_tasks()), standby_partitions=partitions(standby)))
        return result

    def _maybe_update_target(self, records: list[CoordinatorRecord], group_epoch: int,
                             updated: StreamsGroupMember | None, configured: ConfiguredTopology | None, now_ms: int,
                             settings: StreamsSettings, statuses: list[hb.Status] | None,
                             ) -> tuple[int, dict[str, TasksTuple]]:
        """Kafka's maybeUpdateStreamsTargetAssignment: (target epoch, target of every member)."""
        if self.initial_delay_deadline is not None and now_ms < self.initial_delay_deadline:
            if statuses is not None:
                statuses.append(_status(Status.ASSIGNMENT_DELAYED,
                                        "Assignment delayed due to the configured initial rebalance delay."))
            return self.assignment_epoch, {}
        self.initial_delay_deadline = None
        if self.assignment_epoch >= group_epoch:
            return self.assignment_epoch, self.target_assignment
        interval = settings.assignment_interval_ms
        if not (self.assignment_timestamp == 0 or interval == 0 or now_ms >= self.assignment_timestamp + interval):
            if statuses is not None:
                statuses.append(_status(Status.ASSIGNMENT_DELAYED,
                                        "Assignment delayed due to the configured assignment interval."))
            return self.assignment_epoch, self.target_assignment
        members = dict(self.members)
        if updated is not None:
            members[updated.member_id] = updated
        if configured is not None and configured.is_ready():
            assert configured.subtopologies is not None
            # Each member's current tasks, not its last target (Kafka's TargetAssignmentBuilder
            # createMemberMetadataAndState): stickiness follows what members run.
            specs = {member_id: AssignorMember(member.process_id, member.assigned.active_tasks(), member.assigned.standby,
                                               self.task_offsets.get(member_id, ({}, {}))[0])
                     for member_id, member in members.items()}
            try:
                new_target = STICKY_ASSIGNOR.assign(
                    specs, {s: Subtopology(c.num_tasks, c.stateful) for s, c in configured.subtopologies.items()},
                    settings.num_standby_replicas)
            except TaskAssignorError as e:
                raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for "
                                 f"epoch {group_epoch}: {e}") from e
        else:
            new_target = {m: TasksTuple() for m in members}
        for member_id in sorted(new_target):
            if new_target[member_id] != self.target_assignment.get(member_id):
                t = new_target[member_id]
                self._emit(records, StreamsGroupTargetAssignmentMemberKey(self.group_id, member_id),
                           StreamsGroupTargetAssignmentMemberValue(
                               active_tasks=record_task_ids(t.active, TargetTaskIds),
                               standby_tasks=record_task_ids(t.standby, TargetTaskIds),
                               warmup_tasks=record_task_ids(t.warmup, TargetTaskIds)))
        self._emit(records, StreamsGroupTargetAssignmentMetadataKey(self.group_id),
                   StreamsGroupTargetAssignmentMetadataValue(group_epoch, now_ms))
        return group_epoch, new_target

    def compute_delayed_target_assignment(self, now_ms: int, settings: StreamsSettings) -> list[CoordinatorRecord]:
        """The initial rebalance delay ended (Kafka's computeDelayedTargetAssignment)."""
        self.initial_delay_deadline = None
        records: list[CoordinatorRecord] = []
        if not self.members or self.group_epoch <= self.assignment_epoch or self.configured is None:
            return records
        self._maybe_update_target(records, self.group_epoch, None, self.configured, now_ms, settings, None)
        return records

    def leave(self, member_id: str, instance_id: str | None, epoch: int, shutdown_application: bool,
              ) -> tuple[hb.StreamsGroupHeartbeatResponse, list[CoordinatorRecord]]:
        """A heartbeat with epoch -1 or -2 (Kafka's streamsGroupLeave)."""
        if shutdown_application and self.shutdown_requested_by is None:
            self.shutdown_requested_by = member_id
        response = hb.StreamsGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch, status=[])
        if instance_id is None:
            self._member_or_throw(member_id)
            return response, self.fence(member_id)
        member = next((m for m in self.members.values() if m.instance_id == instance_id), None)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                             f"{instance_id} was fenced by member {member.member_id}.")
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                              pending_revocation=TasksWithEpochs(), assigned=member.assigned.reset_epochs())
            records: list[CoordinatorRecord] = []
            self._emit(records, StreamsGroupCurrentMemberAssignmentKey(self.group_id, member_id),
                       leaving.assignment_value())
            response.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            return response, records
        return response, self.fence(member_id)

    def fence(self, member_id: str) -> list[CoordinatorRecord]:
        """Remove the member (Kafka's streamsGroupFenceMember)."""
        records: list[CoordinatorRecord] = []
        g = self.group_id
        last = len(self.members) == 1
        for key in (StreamsGroupCurrentMemberAssignmentKey(g, member_id),
                    StreamsGroupTargetAssignmentMemberKey(g, member_id), StreamsGroupMemberMetadataKey(g, member_id)):
            self._emit(records, key, None)
        epoch = self.group_epoch + 1
        self._emit(records, StreamsGroupMetadataKey(g), StreamsGroupMetadataValue(
            epoch=epoch, metadata_hash=self.metadata_hash, validated_topology_epoch=self.validated_topology_epoch,
            last_assignment_configs=[LastAssignmentConfig(key=k, value=v)
                                     for k, v in sorted(self.last_assignment_configs.items())],
            stored_description_topology_epoch=self.stored_description_topology_epoch,
            failed_description_topology_epoch=self.failed_description_topology_epoch))
        if last:
            self._emit(records, StreamsGroupTargetAssignmentMetadataKey(g),
                       StreamsGroupTargetAssignmentMetadataValue(epoch, 0))
        self.task_offsets.pop(member_id, None)
        return records

    # --- replay --------------------------------------------------------------------------------------

    def _emit(self, records: list[CoordinatorRecord], key, value) -> None:
        record = CoordinatorRecord(key, value)
        self.replay(record)
        records.append(record)

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one record of this group (from a heartbeat, or from __consumer_offsets at load)."""
        key, value = record.key, record.value
        if isinstance(key, StreamsGroupMetadataKey):
            if value is not None:
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
                self.validated_topology_epoch = value.validated_topology_epoch
                self.last_assignment_configs = {c.key: c.value for c in value.last_assignment_configs or ()}
                self.stored_description_topology_epoch = value.stored_description_topology_epoch
                self.failed_description_topology_epoch = value.failed_description_topology_epoch
        elif isinstance(key, StreamsGroupTopologyKey):
            self.topology = None if value is None else StreamsTopology.from_record(value)
            self.configured = None
        elif isinstance(key, StreamsGroupMemberMetadataKey):
            if value is None:
                self.members.pop(key.member_id, None)
            else:
                member = self.members.get(key.member_id) or StreamsGroupMember(key.member_id)
                self.members[key.member_id] = member.with_metadata(value)
        elif isinstance(key, StreamsGroupTargetAssignmentMetadataKey):
            if value is None:
                self.assignment_epoch, self.assignment_timestamp = 1, 0
            else:
                self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
        elif isinstance(key, StreamsGroupTargetAssignmentMemberKey):
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = TasksTuple(
                    tasks_of(value.active_tasks), tasks_of(value.standby_tasks), tasks_of(value.warmup_tasks))
        elif isinstance(key, StreamsGroupCurrentMemberAssignmentKey):
            current = self.members.get(key.member_id)
            if value is None:
                if current is not None:
                    self.members[key.member_id] = replace(current, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                          previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                          assigned=TasksWithEpochs(),
                                                          pending_revocation=TasksWithEpochs())
                return
            self.members[key.member_id] = (current or StreamsGroupMember(key.member_id)).with_assignment(value)
        else:
            raise TypeError(f"not a streams group record: {key!r}")
        if not self.members:
            self.shutdown_requested_by = None

    def on_loaded(self) -> None:
        """After replaying the group: configure the topology again at the next heartbeat."""
        self.metadata_refresh = True
        self.configured = None


def _partition_count(topics: TopicsImage):
    def count(name: str) -> int | None:
        info = topics.by_name.get(name)
        return None if info is None else info.num_partitions
    return count
