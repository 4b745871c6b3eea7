"""The group coordinator: every group and committed offset this broker coordinates, sans I/O.

Kafka's GroupCoordinatorShard, for all partitions of `__consumer_offsets` at once (one broker owns
them all). It owns the groups by id, whatever their type, the committed offsets, and one timer; the
server feeds it requests with the clock and carries out the `Actions` it returns (coordinator/actions.py).

How a group type plugs in. The parts here are shared: OffsetCommit, OffsetFetch, ListGroups,
DeleteGroups, OffsetDelete, offset retention, loading. They touch groups through the `Group`
interface only (coordinator/group.py). Each type brings:

* a `Group` subclass (ClassicGroup, coordinator/classic_group.py), stored in `self.groups`;
* a `GroupTypeManager` (ClassicGroupManager) registered with `register(manager)`: it replays its
  record types at load time, reacts to loads, deletions and offset commits of its groups, and
  answers the APIs of its protocol; the coordinator exposes those as methods (`join_group`, ... for
  classic groups) that check the coordinator is active and delegate;
* its services from here: `self.timer` (keyed timers on the explicit clock), `self.groups`,
  `self.offsets`, `self.partition_for(group_id)`, and `Actions.append(...)` to write records.

Every request method takes `now_ms` (ms since the epoch), a ticket naming the request, a RequestInfo
and the decoded request, and returns Actions; read-only requests (OffsetFetch, DescribeGroups,
ListGroups) return their result directly.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from functools import partial

from ..wire import coordinator_record
from ..wire.errors import ErrorCode
from ..wire.protocol import ApiKey, response_class
from .actions import Actions, Append, Ticket, append_error
from .classic_group import ClassicGroup
from .classic_group_manager import ClassicGroupManager
from .consumer_group import ConsumerGroupConfig
from .consumer_group_manager import ConsumerGroupManager
from .group import CommitPartitionValidator, Group, GroupError, GroupTypeManager, NewMemberUuid, RequestInfo
from .group_config import GroupConfigManager
from .offsets import (
    OFFSET_COMMIT_RECORD_TYPES,
    OffsetAndMetadata,
    OffsetMetadataManager,
    offset_commit_record,
    offset_tombstone,
)
from .share_group_manager import ShareGroupCoordinatorConfig, ShareGroupManager
from .streams_group import StreamsSettings
from .streams_group_manager import StreamsGroupManager
from .timer import CoordinatorTimer

log = logging.getLogger("samsa.coordinator")

OffsetCommitResponse = response_class(ApiKey.OFFSET_COMMIT)
TxnOffsetCommitResponse = response_class(ApiKey.TXN_OFFSET_COMMIT)
OffsetFetchResponse = response_class(ApiKey.OFFSET_FETCH)
ListGroupsResponse = response_class(ApiKey.LIST_GROUPS)
DeleteGroupsResponse = response_class(ApiKey.DELETE_GROUPS)
OffsetDeleteResponse = response_class(ApiKey.OFFSET_DELETE)
DescribeGroupsResponse = response_class(ApiKey.DESCRIBE_GROUPS)

OFFSETS_TOPIC = "__consumer_offsets"
INT32_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, in int32 arithmetic."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == INT32_MIN else abs(h)) % num_partitions


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Kafka's configs of the same names (and defaults)."""

    offsets_topic_num_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    group_initial_rebalance_delay_ms: int = 3000
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs (a constant before 3.7).
    group_new_member_join_timeout_ms: int = 300000
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600000
    consumer: ConsumerGroupConfig = ConsumerGroupConfig()  # group.consumer.* (KIP-848)
    share: ShareGroupCoordinatorConfig = ShareGroupCoordinatorConfig()  # group.share.* (KIP-932)
    streams: StreamsSettings = StreamsSettings()  # group.streams.* (KIP-1071)


def offset_append_error(error: int) -> int:
    """A failed append of offsets, as Kafka reports it in OffsetCommit and its kin."""
    return append_error(error, ErrorCode.INVALID_COMMIT_OFFSET_SIZE)


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig, now_ms: int, new_member_uuid: NewMemberUuid,
                 group_configs: GroupConfigManager | None = None) -> None:
        """`new_member_uuid()`: the unique part of each member id the coordinator hands out;
        `group_configs`: the groups' own configs (None: the broker's settings for every group)."""
        self.config = config
        self.new_member_uuid = new_member_uuid
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetMetadataManager()
        self.timer = CoordinatorTimer()
        self.active = True
        # What requests hear while it is not active: COORDINATOR_NOT_AVAILABLE (stopped), or, in a
        # cluster, NOT_COORDINATOR (another broker leads the group's partition) or
        # COORDINATOR_LOAD_IN_PROGRESS (this one is loading it).
        self.inactive_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.managers: dict[str, GroupTypeManager] = {}
        self._replayers: dict[int, GroupTypeManager] = {}
        self.classic = self.register(ClassicGroupManager(self))
        self.consumer = self.register(ConsumerGroupManager(self, config.consumer, group_configs))
        self.share = self.register(ShareGroupManager(self, config.share, group_configs))
        self.streams = self.register(StreamsGroupManager(self, config.streams, group_configs))
        self._schedule_retention(now_ms)

    def register(self, manager: GroupTypeManager):
        self.managers[manager.group_type] = manager
        for record_type in manager.record_types:
            self._replayers[record_type] = manager
        return manager

    # --- services for group types ---------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def add_group(self, group: Group) -> None:
        self.groups[group.group_id] = group

    def _remove_group(self, group: Group, now_ms: int) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self.managers[group.type].on_deleted(group, now_ms)

    def _check_active(self) -> None:
        if not self.active:
            raise GroupError(self.inactive_error)

    def _existing_group(self, group_id: str) -> Group:
        self._check_active()
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    # --- clock and writes -------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When `on_timer` has something to do next (ms since the epoch), None for never."""
        return self.timer.next_deadline()

    def on_timer(self, now_ms: int) -> Actions:
        out = Actions()
        while (callback := self.timer.pop_due(now_ms)) is not None:
            callback(now_ms, out)
        return out

    def complete_append(self, append: Append, error: int, now_ms: int) -> Actions:
        """The server appended (error NONE) or failed to append `append`: finish what waited on it."""
        out = Actions()
        append.on_done(error, now_ms, out)
        return out

    # --- loading and unloading ------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        """One record of `__consumer_offsets`, in log order, at load time; `producer_id` names the
        transaction of a transactional batch's record."""
        record_type = coordinator_record.record_type(key)
        if record_type in OFFSET_COMMIT_RECORD_TYPES:
            self.offsets.replay(key, value, producer_id)
            return
        manager = self._replayers.get(record_type)
        if manager is None:
            log.warning("Skipping a record of unknown type %d in %s", record_type, OFFSETS_TOPIC)
            return
        manager.replay(key, value)

    def replay_end_txn_marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker in `__consumer_offsets`, at load time."""
        self.offsets.complete_transaction(producer_id, commit)

    def load_complete(self, now_ms: int) -> Actions:
        """Every partition is replayed: groups known only by their offsets become simple groups,
        and each group's type starts what its live groups need."""
        out = Actions()
        for group_id in self.offsets.group_ids():
            if group_id not in self.groups:
                self.add_group(ClassicGroup(group_id, now_ms))
        for group in list(self.groups.values()):
            self.managers[group.type].on_loaded(group, now_ms, out)
        log.info("Loaded %d groups and the offsets of %d groups from %s", len(self.groups),
                 sum(1 for _ in self.offsets.group_ids()), OFFSETS_TOPIC)
        return out

    def unload(self, now_ms: int) -> Actions:
        """Stop coordinating: parked requests are answered (NOT_COORDINATOR), later ones refused."""
        out = Actions()
        self.active = False
        for manager in self.managers.values():
            manager.unload(out)
        return out

    # --- classic group APIs -----------------------------------------------------------------------

    def join_group(self, now_ms: int, ticket: Ticket, request: RequestInfo, join) -> Actions:
        return self._classic_call(self.classic.join_group, now_ms, ticket, request, join)

    def sync_group(self, now_ms: int, ticket: Ticket, request: RequestInfo, sync) -> Actions:
        return self._classic_call(self.classic.sync_group, now_ms, ticket, request, sync)

    def heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        return self._classic_call(self.classic.heartbeat, now_ms, ticket, request, heartbeat)

    def leave_group(self, now_ms: int, ticket: Ticket, request: RequestInfo, leave) -> Actions:
        return self._classic_call(self.classic.leave_group, now_ms, ticket, request, leave)

    def _classic_call(self, method, now_ms: int, ticket: Ticket, request: RequestInfo, body) -> Actions:
        out = Actions()
        if not self.active:
            # JoinGroup, SyncGroup, Heartbeat and LeaveGroup responses all carry a top-level error.
            out.respond(ticket, response_class(body.API_KEY)(throttle_time_ms=0,
                                                             error_code=self.inactive_error))
            return out
        method(now_ms, ticket, request, body, out)
        return out

    # --- consumer group APIs (KIP-848, coordinator/consumer_group_manager.py) ----------------------

    def consumer_group_heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        return self.consumer.heartbeat(now_ms, ticket, request, heartbeat)

    # --- share group APIs (KIP-932, coordinator/share_group_manager.py) ---------------------------

    def share_group_heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        return self.share.heartbeat(now_ms, ticket, request, heartbeat)

    # --- streams group APIs (KIP-1071, coordinator/streams_group_manager.py) -----------------------

    def streams_group_heartbeat(self, now_ms: int, ticket: Ticket, request: RequestInfo, heartbeat) -> Actions:
        return self.streams.heartbeat(now_ms, ticket, request, heartbeat)

    def describe_groups(self, request: RequestInfo, group_ids: list[str]) -> list:
        DescribedGroup = DescribeGroupsResponse.DescribedGroup
        if not self.active:
            return [DescribedGroup(error_code=self.inactive_error, group_id=g, group_state="",
                                   protocol_type="", protocol_data="") for g in group_ids]
        return [self.classic.describe_group(group_id) for group_id in group_ids]

    # --- OffsetCommit -----------------------------------------------------------------------------

    def offset_commit(self, now_ms: int, ticket: Ticket, request: RequestInfo, commit) -> Actions:
        """OffsetCommit for the partitions of existing topics (the server answers the others)."""
        out = Actions()
        errors: dict[tuple[str, int], int] = {}
        member_id, instance_id = commit.member_id, commit.group_instance_id
        generation = commit.generation_id_or_member_epoch
        # OffsetCommit v2-v4 could ask for its own retention; v1 for its own commit time.
        expire = -1
        if 2 <= request.api_version <= 4 and commit.retention_time_ms != -1:
            expire = now_ms + commit.retention_time_ms
        try:
            self._check_active()
            group = self._group_to_commit_to(now_ms, request, commit.group_id, generation)
            validator = group.validate_offset_commit(member_id, instance_id, generation, request)
            committed = self._requested_offsets(commit, now_ms, errors, expire)
            _validate_partitions(validator, committed)
        except GroupError as e:
            code = e.code
            out.respond(ticket, _commit_response(commit, lambda topic, partition: code))
            return out
        self.managers[group.type].on_offset_commit(group, member_id, now_ms)
        if not committed:
            out.respond(ticket, _commit_response(commit, lambda topic, partition: errors[(topic, partition)]))
            return out
        group_id = commit.group_id

        def stored(error: int, now_ms: int, out: Actions) -> None:
            code = offset_append_error(error)
            for topic, partition, offset in committed:
                if error == ErrorCode.NONE:
                    self.offsets.put(group_id, topic, partition, offset)
                errors[(topic, partition)] = code
            out.respond(ticket, _commit_response(commit, lambda topic, partition: errors[(topic, partition)]))

        out.append(self.partition_for(group_id),
                   [offset_commit_record(group_id, topic, partition, offset) for topic, partition, offset in committed],
                   stored)
        return out

    def _requested_offsets(self, commit, now_ms: int, errors: dict[tuple[str, int], int],
                           expire: int = -1) -> list[tuple[str, int, OffsetAndMetadata]]:
        """(topic, partition, offset) of each partition of an OffsetCommit or TxnOffsetCommit whose
        metadata fits offset.metadata.max.bytes; the others get OFFSET_METADATA_TOO_LARGE in `errors`."""
        offsets = []
        for topic in commit.topics:
            for p in topic.partitions:
                metadata = p.committed_metadata
                if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                    errors[(topic.name, p.partition_index)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    continue
                timestamp = getattr(p, "commit_timestamp", -1)  # OffsetCommit v1 may set its own
                offsets.append((topic.name, p.partition_index,
                                OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, metadata or "",
                                                  now_ms if timestamp == -1 else timestamp, expire)))
        return offsets

    def _group_to_commit_to(self, now_ms: int, request: RequestInfo, group_id: str, generation: int) -> Group:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if generation < 0:
            # The admin client, or a consumer that assigns partitions itself: a "simple" group.
            log.info("Creating simple consumer group %s via manual offset commit.", group_id)
            group = ClassicGroup(group_id, now_ms)
            self.add_group(group)
            return group
        # OffsetCommit v9 can say so; older clients expect ILLEGAL_GENERATION.
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND if request.api_version >= 9 else ErrorCode.ILLEGAL_GENERATION)

    # --- OffsetFetch --------------------------------------------------------------------------------

    def fetch_offsets(self, request: RequestInfo, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1):
        """One group of OffsetFetch (the v8+ shape): the committed offsets of `topics`' partitions,
        or of every partition with one when `topics` is None; -1 where nothing is committed.
        `require_stable`: a partition an open transaction holds an offset for gets UNSTABLE_OFFSET_COMMIT."""
        Group_ = OffsetFetchResponse.OffsetFetchResponseGroup
        Topic = OffsetFetchResponse.OffsetFetchResponseTopics
        Partition = OffsetFetchResponse.OffsetFetchResponsePartitions
        try:
            self._check_active()
            group = self.groups.get(group_id)
            if group is not None:
                group.validate_offset_fetch(member_id, member_epoch, request)
        except GroupError as e:
            return Group_(group_id=group_id, topics=[], error_code=e.code)

        def partition(topic: str, index: int) -> object:
            if require_stable and self.offsets.has_pending(group_id, topic, index):
                return Partition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                                 error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            offset = self.offsets.get(group_id, topic, index)
            if offset is None:
                return Partition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                                 metadata="", error_code=ErrorCode.NONE)
            return Partition(partition_index=index, committed_offset=offset.offset,
                             committed_leader_epoch=offset.leader_epoch, metadata=offset.metadata,
                             error_code=ErrorCode.NONE)

        if topics is None:
            committed = self.offsets.group_offsets(group_id)
            topics = [(name, sorted(partitions)) for name, partitions in committed.items()]
        return Group_(group_id=group_id, error_code=ErrorCode.NONE,
                      topics=[Topic(name=name, partitions=[partition(name, i) for i in indexes])
                              for name, indexes in topics])

    # --- TxnOffsetCommit, transaction markers --------------------------------------------------------

    def txn_offset_commit(self, now_ms: int, ticket: Ticket, request: RequestInfo, commit,
                          verification_guard: int | None = None) -> Actions:
        """TxnOffsetCommit for the partitions of existing topics: the offsets are written in the
        producer's transaction and stay pending until its marker (`complete_transaction`).
        `verification_guard`: what the transaction's verification on the offsets partition returned,
        which the write brings back (Kafka's scheduleTransactionalWriteOperation): a marker written
        in between makes it fail with INVALID_TXN_STATE."""
        out = Actions()
        errors: dict[tuple[str, int], int] = {}
        try:
            self._check_active()
            generation = commit.generation_id_or_member_epoch
            group = self._group_to_commit_to(now_ms, request, commit.group_id, generation)
            validator = group.validate_offset_commit(commit.member_id, commit.group_instance_id, generation, request,
                                                     transactional=True)
            pending = self._requested_offsets(commit, now_ms, errors)
            _validate_partitions(validator, pending)
        except GroupError as e:
            code = e.code
            if code == ErrorCode.STALE_MEMBER_EPOCH and request.api_version < 6:
                code = ErrorCode.ILLEGAL_GENERATION  # TxnOffsetCommit v6 (KIP-848) can say so
            out.respond(ticket, txn_commit_response(commit, lambda topic, partition: code))
            return out
        group_id, producer_id = commit.group_id, commit.producer_id

        def stored(error: int, now_ms: int, out: Actions) -> None:
            code = offset_append_error(error)
            for topic, partition, offset in pending:
                if error == ErrorCode.NONE:
                    self.offsets.put_pending(producer_id, group_id, topic, partition, offset)
                errors[(topic, partition)] = code
            out.respond(ticket, txn_commit_response(commit, lambda topic, partition: errors[(topic, partition)]))

        if not pending:
            stored(ErrorCode.NONE, now_ms, out)
            return out
        out.append(self.partition_for(group_id),
                   [offset_commit_record(group_id, topic, partition, offset) for topic, partition, offset in pending],
                   stored, producer=(producer_id, commit.producer_epoch), verification_guard=verification_guard)
        return out

    def complete_transaction(self, now_ms: int, producer_id: int, commit: bool, partitions: set[int]) -> Actions:
        """The transaction's marker is written to these partitions of `__consumer_offsets`: the
        pending offsets of their groups are committed or dropped (Kafka's onTransactionCompleted)."""
        committed = self.offsets.complete_transaction(producer_id, commit,
                                                      lambda group_id: self.partition_for(group_id) in partitions)
        for group_id in committed:
            if group_id not in self.groups:
                self.add_group(ClassicGroup(group_id, now_ms))
        log.debug("%s transactional offsets of producer %d", "Committed" if commit else "Aborted", producer_id)
        return Actions()

    # --- ListGroups -------------------------------------------------------------------------------

    def list_groups(self, states: list[str], types: list[str]):
        """ListGroups: (error code, groups) filtered by state and type, both without case."""
        Listed = ListGroupsResponse.ListedGroup
        if not self.active:
            return self.inactive_error, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return ErrorCode.NONE, [
            Listed(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state_name, group_type=g.type)
            for g in self.groups.values()
            if (not wanted_states or g.is_in_states(wanted_states)) and (not wanted_types or g.type in wanted_types)]

    # --- DeleteGroups -----------------------------------------------------------------------------

    def delete_groups(self, now_ms: int, ticket: Ticket, request: RequestInfo, group_ids: list[str]) -> Actions:
        """Delete empty groups with their offsets: tombstones first, then the groups are gone."""
        out = Actions()
        Result = DeleteGroupsResponse.DeletableGroupResult
        group_ids = list(dict.fromkeys(group_ids))
        results: dict[str, int] = {}
        by_partition: dict[int, list[Group]] = defaultdict(list)
        for group_id in group_ids:
            try:
                group = self._existing_group(group_id)
                group.validate_delete_group()
            except GroupError as e:
                results[group_id] = e.code
                continue
            by_partition[self.partition_for(group_id)].append(group)
        remaining = len(by_partition)

        def respond(out: Actions) -> None:
            out.respond(ticket, DeleteGroupsResponse(
                throttle_time_ms=0, results=[Result(group_id=g, error_code=results[g]) for g in group_ids]))

        def stored(groups: list[Group], error: int, now_ms: int, out: Actions) -> None:
            nonlocal remaining
            for group in groups:
                results[group.group_id] = offset_append_error(error)
                if error == ErrorCode.NONE:
                    removed = self.offsets.remove_group(group.group_id)
                    self._remove_group(group, now_ms)
                    log.info("Deleted group %s and its %d offsets", group.group_id, removed)
            remaining -= 1
            if remaining == 0:
                respond(out)

        for partition, groups in by_partition.items():
            records = []
            for group in groups:
                records += [offset_tombstone(group.group_id, topic, index)
                            for topic, index in self.offsets.partitions_of(group.group_id)]
                records += group.tombstones()
            out.append(partition, records, partial(stored, groups))
        if remaining == 0:
            respond(out)
        return out

    # --- OffsetDelete -----------------------------------------------------------------------------

    def offset_delete(self, now_ms: int, ticket: Ticket, request: RequestInfo, delete) -> Actions:
        out = Actions()
        Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
        Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition
        group_id = delete.group_id
        try:
            group = self._existing_group(group_id)
            group.validate_offset_delete()
        except GroupError as e:
            out.respond(ticket, OffsetDeleteResponse(error_code=e.code, throttle_time_ms=0, topics=[]))
            return out
        errors: dict[tuple[str, int], int] = {}
        to_delete: list[tuple[str, int]] = []
        for topic in delete.topics:
            subscribed = group.is_subscribed_to_topic(topic.name)
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                errors[key] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if subscribed else ErrorCode.NONE
                if not subscribed and (self.offsets.get(group_id, *key) is not None
                                       or self.offsets.has_pending(group_id, *key)):
                    to_delete.append(key)

        def respond(out: Actions, top_level: int) -> None:
            topics = [] if top_level != ErrorCode.NONE else [
                Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index,
                                                         error_code=errors[(t.name, p.partition_index)])
                                               for p in t.partitions]) for t in delete.topics]
            out.respond(ticket, OffsetDeleteResponse(error_code=top_level, throttle_time_ms=0, topics=topics))

        if not to_delete:
            respond(out, ErrorCode.NONE)
            return out

        def stored(error: int, now_ms: int, out: Actions) -> None:
            if error != ErrorCode.NONE:
                respond(out, offset_append_error(error))
                return
            for topic, index in to_delete:
                self.offsets.remove(group_id, topic, index)
            log.info("The following offsets of the group %s were deleted: %s", group_id, to_delete)
            respond(out, ErrorCode.NONE)

        out.append(self.partition_for(group_id), [offset_tombstone(group_id, t, i) for t, i in to_delete], stored)
        return out

    # --- deleted topics ---------------------------------------------------------------------------

    def delete_topic_offsets(self, now_ms: int, topics: set[str]) -> Actions:
        """Deleted topics: their committed offsets go from every group (Kafka's handleDeletedPartitions),
        so that a topic created again under the same name is not read from stale offsets."""
        out = Actions()
        by_partition: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
        for group_id in self.offsets.group_ids():
            for topic, index in self.offsets.partitions_of(group_id):
                if topic in topics:
                    by_partition[self.partition_for(group_id)].append((group_id, topic, index))
        for partition, gone in by_partition.items():
            out.append(partition, [offset_tombstone(*each) for each in gone], partial(self._topic_offsets_deleted, gone))
        return out

    def _topic_offsets_deleted(self, gone: list[tuple[str, str, int]], error: int, now_ms: int, out: Actions) -> None:
        if error != ErrorCode.NONE:
            log.warning("Failed to delete the offsets of deleted topics: %s", ErrorCode(error).name)
            return
        for each in gone:
            self.offsets.remove(*each)
        log.info("Removed %d offsets of deleted topics", len(gone))

    # --- offset retention -------------------------------------------------------------------------

    def _schedule_retention(self, now_ms: int) -> None:
        self.timer.schedule(("offsets-retention",), now_ms + self.config.offsets_retention_check_interval_ms,
                            self._expire_offsets)

    def _expire_offsets(self, now_ms: int, out: Actions) -> None:
        """offsets.retention.minutes: drop expired offsets (tombstones), then groups that are empty
        and have no offsets left (Kafka's cleanupGroupMetadata). One append per partition."""
        self._schedule_retention(now_ms)
        by_partition: dict[int, list[tuple[Group, list[tuple[str, int]], bool]]] = defaultdict(list)
        for group in list(self.groups.values()):
            expired, all_expired = self.offsets.expired(group, now_ms, self.config.offsets_retention_ms)
            delete_group = all_expired and group.is_empty() and group.should_expire()
            if expired or delete_group:
                by_partition[self.partition_for(group.group_id)].append((group, expired, delete_group))
        for partition, expiries in by_partition.items():
            records = []
            for group, expired, delete_group in expiries:
                records += [offset_tombstone(group.group_id, topic, index) for topic, index in expired]
                if delete_group:
                    records += group.tombstones()
            out.append(partition, records, partial(self._offsets_expired, expiries))

    def _offsets_expired(self, expiries, error: int, now_ms: int, out: Actions) -> None:
        if error != ErrorCode.NONE:
            log.warning("Failed to write the tombstones of expired offsets: %s", ErrorCode(error).name)
            return
        for group, expired, delete_group in expiries:
            for topic, index in expired:
                self.offsets.remove(group.group_id, topic, index)
            if expired:
                log.info("Removed %d expired offsets of group %s", len(expired), group.group_id)
            if delete_group and group.is_empty() and not self.offsets.has_offsets(group.group_id):
                self._remove_group(group, now_ms)
                log.info("Group %s is empty and has no offsets left: removed", group.group_id)


def _validate_partitions(validator: CommitPartitionValidator | None,
                         offsets: list[tuple[str, int, OffsetAndMetadata]]) -> None:
    """Each partition of a commit (those whose metadata fits) checked by the group's validator: the
    first it refuses refuses the whole request, as Kafka's commitOffset throws out of its loop."""
    if validator is not None:
        for topic, partition, _ in offsets:
            validator(topic, partition)


def _commit_response(commit, error_of, response_class=OffsetCommitResponse):
    """An OffsetCommit (or TxnOffsetCommit) response naming every partition of `commit` with
    `error_of(topic, partition)`; the nested classes are named after the response's API."""
    api = response_class.__name__.removesuffix("Response")
    Topic = getattr(response_class, f"{api}ResponseTopic")
    Partition = getattr(response_class, f"{api}ResponsePartition")
    return response_class(throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index,
                                                 error_code=error_of(t.name, p.partition_index))
                                       for p in t.partitions])
        for t in commit.topics])


def txn_commit_response(commit, error_of):
    return _commit_response(commit, error_of, TxnOffsetCommitResponse)
