"""Runs the group coordinator for the broker: requests in with the clock, actions carried out.

The coordinator (coordinator/group_coordinator.py) is sans-I/O; this is its shell. A handler calls
`submit(ctx, GroupCoordinator.join_group, request)`: the request gets a ticket and waits on it while
the coordinator's actions are carried out. Records go to `__consumer_offsets` (created on first
need, compacted) and their completions run once the append is done (and flushed when the log's
flush policy says so); responses go to the tickets they name, which may be requests parked earlier.
A task in the broker's nursery wakes the coordinator at its next deadline (session timeouts,
rebalance timeouts, the initial rebalance delay, offset retention).

At startup every partition of `__consumer_offsets` is replayed into the coordinator before the
broker accepts connections, transaction markers included (offsets committed in a transaction are
pending until its marker; the transaction service reports markers it writes later through
`complete_transaction`). At shutdown parked requests are answered NOT_COORDINATOR, as Kafka
does when it resigns, so that clients find the coordinator again once the broker is back.

In a ZooKeeper cluster the broker coordinates the groups of the `__consumer_offsets` partitions it
leads, each partition with its own coordinator, loaded in the background when the controller makes
it leader and unloaded when it follows or stops the partition (server/coordinators/runtime.py's
CoordinatorPartitions; Kafka 3.9's GroupCoordinator.onElection and onResignation). Writes there
wait for the ISR (acks=all, up to offsets.commit.timeout.ms) at the leader epoch the partition was
loaded with (Kafka's coordinator epoch).
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ...coordinator.actions import Actions, Append
from ...coordinator.group import RequestInfo
from ...coordinator.group_config import GroupConfigManager
from ...coordinator.group_coordinator import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    GroupCoordinatorConfig,
    partition_for,
)
from ...coordinator.share_group import ShareInitRequest
from ...coordinator.streams_group import StreamsSettings
from ...coordinator.streams_topology import Status as StreamsTopicStatus
from ...wire.messages.streams_group_heartbeat_response import Status as StreamsStatus
from ...coordinator.share_group_manager import (
    MemberLeft, ShareGroupCoordinatorConfig, ShareGroupEmpty, ShareGroupRebalanced,
)
from ...wire.coordinator_record import RecordFormatError
from ...wire.records import ControlRecordType, parse_control_record
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from .runtime import (
    CoordinatorPartitions, DeadlineWaker, append_records, create_internal_topic, log_batches, replay_topic,
)
from ...wire.exceptions import CodecError
from ..metadata.admin_manager import AdminError
from ..security.authorizer import CLUSTER, CREATE, DESCRIBE, TOPIC
from .consumer_groups import consumer_group_config, topics_image

if TYPE_CHECKING:
    from ...coordinator.share_state import SharePartitionState
    from ..share.partition_metadata_client import PartitionMetadataClient
    from ..share.persister import Persister
    from ..share.share_group_listener import ShareGroupListener
    from ..config.kafka_config import KafkaConfig
    from ..context import RequestContext
    from ..metadata.cache import MetadataView
    from ..replication.replica_manager import ReplicaManager

log = logging.getLogger("samsa.group_service")


class _Reply:
    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: Any = None

    def set(self, response: Any) -> None:
        if not self.event.is_set():
            self.response = response
            self.event.set()


def random_member_uuid() -> str:
    """The unique part of a member id, as Kafka makes it: a random UUID."""
    return str(uuid.uuid4())


class GroupService:
    def __init__(self, config: KafkaConfig, metadata: MetadataView, replicas: ReplicaManager,
                 disk_limiter: trio.CapacityLimiter, clock: Callable[[], int],
                 new_member_uuid: Callable[[], str], cluster: MetadataView | None = None,
                 group_configs: GroupConfigManager | None = None) -> None:
        """`replicas`: where `__consumer_offsets` is (created through it); `disk_limiter`: fsyncs
        take turns with the broker's; `clock()`: ms since the epoch (offsets and group states carry
        wall-clock times); `new_member_uuid()`: the unique part of each new member id; `cluster`: in a
        ZooKeeper cluster, the controller's metadata; `group_configs`: the groups' own configs."""
        self._config = config
        self._metadata = metadata
        self._replicas = replicas
        self._disk_limiter = disk_limiter
        self._clock = clock
        self._new_member_uuid = new_member_uuid
        self.coordinator: GroupCoordinator | None = None
        self._replies: dict[int, _Reply] = {}
        self._tickets = itertools.count()
        self._waker = DeadlineWaker("group coordinator", clock)
        self._topics_changed = False
        self._cluster = cluster
        self._group_configs = group_configs or GroupConfigManager(config.get)
        # Share groups (KIP-932): where share partitions' state is initialized and deleted (the share
        # coordinator's persister, set by the broker), and who hears of members leaving (none in a
        # broker: see server/share/share_group_listener.py). Without a persister no share partition
        # is initialized.
        self.persister: Persister | None = None
        self.share_group_listener: ShareGroupListener | None = None
        # Heartbeats that bumped a share group's epoch, on every coordinator this broker ran (Kafka's
        # share-group-rebalance-count, a broker-wide sensor).
        self.share_group_rebalances = 0
        self._nursery: trio.Nursery | None = None
        self.partitions: CoordinatorPartitions[GroupCoordinator] | None = None if cluster is None else \
            CoordinatorPartitions(OFFSETS_TOPIC, self._refusing, self._load_partition, self._apply,
                                  self._unload_partition)

    # --- configuration ----------------------------------------------------------------------------

    def _coordinator_config(self) -> GroupCoordinatorConfig:
        get_int = self._config.get_int
        return GroupCoordinatorConfig(
            offsets_topic_num_partitions=self.num_partitions(),
            group_min_session_timeout_ms=get_int("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=get_int("group.max.session.timeout.ms"),
            group_max_size=get_int("group.max.size"),
            group_initial_rebalance_delay_ms=get_int("group.initial.rebalance.delay.ms"),
            offset_metadata_max_bytes=get_int("offset.metadata.max.bytes"),
            offsets_retention_ms=get_int("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms=get_int("offsets.retention.check.interval.ms"),
            consumer=consumer_group_config(self._config.get),
            share=ShareGroupCoordinatorConfig(
                max_size=get_int("group.share.max.size"),
                session_timeout_ms=get_int("group.share.session.timeout.ms"),
                heartbeat_interval_ms=get_int("group.share.heartbeat.interval.ms"),
                assignment_interval_ms=get_int("group.share.assignment.interval.ms"),
                # Kafka's: group.share.initialize.retry.interval.ms (internal), at least offsets.commit.timeout.ms.
                initialize_retry_interval_ms=max(self._group_configs.broker_value(
                    "group.share.initialize.retry.interval.ms"), get_int("offsets.commit.timeout.ms"))),
            streams=StreamsSettings(max_size=get_int("group.streams.max.size")),
        )

    def num_partitions(self) -> int:
        """The topic's real partition count wins: groups must map where their records are."""
        topic = self._topics().topics.get(OFFSETS_TOPIC)
        return topic.num_partitions if topic else self._config.get_int("offsets.topic.num.partitions")

    def _topics(self) -> MetadataView:
        return self._metadata if self._cluster is None else self._cluster

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions())

    def coordinator_for(self, group_id: str) -> GroupCoordinator:
        """The coordinator of the group: in a cluster, its partition's, or one that refuses
        (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        if self.partitions is None:
            return self._local_coordinator()
        return self.partitions.get(self.partition_for(group_id))

    def _local_coordinator(self) -> GroupCoordinator:
        """A single broker's coordinator, made by `run` before the broker takes requests."""
        if self.coordinator is None:
            raise RuntimeError("the group coordinator is not running")
        return self.coordinator

    def _cluster_partitions(self) -> CoordinatorPartitions[GroupCoordinator]:
        """A cluster's coordinators by partition (leadership changes come from its controller)."""
        if self.partitions is None:
            raise RuntimeError("a single broker's group coordinator has no partitions")
        return self.partitions

    def coordinators(self) -> list[GroupCoordinator]:
        if self.partitions is not None:
            return list(self.partitions.owned.values())
        return [] if self.coordinator is None else [self.coordinator]

    def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` the way Kafka's coordinator asks for it, if it is missing (a
        single broker; a cluster's is created through ZooKeeper, server/zookeeper/admin_manager.py)."""
        if OFFSETS_TOPIC in self._metadata.topics or self.coordinator is None or self._cluster is not None:
            return
        create_internal_topic(self._replicas, self._config, OFFSETS_TOPIC,
                              self.coordinator.config.offsets_topic_num_partitions,
                              "offsets.topic.replication.factor", self.topic_configs())

    def topic_configs(self) -> dict[str, str]:
        """Kafka's groupMetadataTopicConfigs."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self._config.get("offsets.topic.segment.bytes")),
            # Batches are compressed here with offsets.topic.compression.codec; the log keeps them as written.
            "compression.type": "producer",
        }

    # --- lifecycle ----------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        if self.partitions is not None:
            await self._run_in_cluster(self.partitions, task_status)
            return
        coordinator = self.coordinator = self._new_coordinator()
        loaded = await trio.to_thread.run_sync(self._load, coordinator)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self._apply(coordinator, loaded)
                await self._waker.run(coordinator.next_deadline, self._fire_timers, before=self._update_topics)
            finally:
                self._deliver(coordinator.unload(self._clock()).responses)
                nursery.cancel_scope.cancel()

    async def _run_in_cluster(self, partitions: CoordinatorPartitions[GroupCoordinator], task_status) -> None:
        """Partitions are loaded as the controller makes this broker their leader (`on_leadership_change`)."""
        async with trio.open_nursery() as nursery:
            partitions.nursery = nursery
            self._nursery = nursery
            task_status.started()
            try:
                await self._waker.run(self._next_deadline, self._fire_timers, before=self._update_topics)
            finally:
                partitions.stop()

    def _new_coordinator(self) -> GroupCoordinator:
        coordinator = GroupCoordinator(self._coordinator_config(), self._clock(), self._new_member_uuid,
                                       self._group_configs)
        coordinator.consumer.topics = coordinator.share.topics = coordinator.streams.topics = topics_image(self._topics())
        return coordinator

    def _refusing(self, error: ErrorCode) -> GroupCoordinator:
        coordinator = self._new_coordinator()
        coordinator.active, coordinator.inactive_error = False, error
        return coordinator

    def _load(self, coordinator: GroupCoordinator) -> Actions:
        """Replay every record of `__consumer_offsets` (runs in a thread, before requests arrive)."""
        replay_topic(self._metadata, self._replicas, OFFSETS_TOPIC, partial(self._replay_batch, coordinator))
        return coordinator.load_complete(self._clock())

    def _load_partition(self, index: int, epoch: int) -> tuple[GroupCoordinator, Actions]:
        """One partition's groups and offsets, replayed into a coordinator of their own (in a thread:
        Kafka's loadGroupsAndOffsets), up to the log end as Kafka reads it."""
        coordinator = self._new_coordinator()
        partition = self._replicas.get(OFFSETS_TOPIC, index)
        if partition is None:  # as Kafka's doLoadGroupsAndOffsets: nothing to load, the partition is owned
            log.warning("Attempted to load offsets and group metadata from %s-%d, but found no log", OFFSETS_TOPIC,
                        index)
        else:
            count = sum(self._replay_batch(coordinator, partition, header, records)
                        for header, records in log_batches(partition.log))
            log.info("Replayed %d records of %s-%d for epoch %d", count, OFFSETS_TOPIC, index, epoch)
        return coordinator, coordinator.load_complete(self._clock())

    def _unload_partition(self, coordinator: GroupCoordinator) -> None:
        """Kafka's onResignation: parked requests hear NOT_COORDINATOR, and so do later ones that
        still hold this coordinator."""
        coordinator.inactive_error = ErrorCode.NOT_COORDINATOR
        self._deliver(coordinator.unload(self._clock()).responses)

    def on_leadership_change(self, led: list[tuple[int, int]], resigned: list[tuple[int, int]]) -> None:
        """(partition, leader epoch) of `__consumer_offsets` partitions this broker now leads, and
        of those it no longer leads."""
        self._cluster_partitions().on_leadership_change(led, resigned)
        self._waker.poke()

    def _next_deadline(self) -> int | None:
        return min((d for c in self.coordinators() if (d := c.next_deadline()) is not None), default=None)

    def _replay_batch(self, coordinator: GroupCoordinator, partition, header, records) -> int:
        replayed = 0
        try:
            if header.is_control:
                self._replay_marker(coordinator, header, records)
                return replayed
            producer_id = header.producer_id if header.is_transactional else -1
            for record in records:
                if record.key is not None:
                    value = None if record.value is None else bytes(record.value)
                    coordinator.replay(bytes(record.key), value, producer_id)
                    replayed += 1
        except (RecordFormatError, CodecError) as e:
            log.error("Skipping a malformed record in %s: %s", partition.name, e)
        return replayed

    @staticmethod
    def _replay_marker(coordinator: GroupCoordinator, header, records) -> None:
        if records:  # an emptied marker: its transaction was cleaned away
            marker = parse_control_record(records[0])
            if marker.type is not ControlRecordType.UNKNOWN:
                coordinator.replay_end_txn_marker(header.producer_id, marker.type is ControlRecordType.COMMIT)

    def complete_transaction(self, producer_id: int, commit: bool, partitions: set[int]) -> None:
        """A transaction's marker is written to these partitions of `__consumer_offsets`."""
        if self.partitions is not None:
            for index in partitions:
                if (coordinator := self.partitions.owned.get(index)) is not None:
                    self._deliver(coordinator.complete_transaction(self._clock(), producer_id, commit,
                                                                   {index}).responses)
        elif self.coordinator is not None:
            self._deliver(self.coordinator.complete_transaction(self._clock(), producer_id, commit,
                                                                partitions).responses)

    def topics_changed(self) -> None:
        """A topic was created, deleted or grew: consumer groups subscribed to it rebalance."""
        self._topics_changed = True
        self._waker.poke()

    async def _update_topics(self) -> None:
        """Hand the coordinator the topics as they are now, if they changed: before the next group
        request, so that a client that created a topic then heartbeats sees it."""
        if self._topics_changed:
            self._topics_changed = False
            topics = topics_image(self._topics())
            for coordinator in self.coordinators():
                await self._apply(coordinator, coordinator.consumer.update_topics(self._clock(), topics))
                await self._apply(coordinator, coordinator.share.update_topics(self._clock(), topics))
                await self._apply(coordinator, coordinator.streams.update_topics(self._clock(), topics))

    async def refresh_topics(self) -> None:
        """The coordinators see the topics as they are now (a describe that follows a creation)."""
        await self._update_topics()

    async def _fire_timers(self, now_ms: int) -> None:
        for coordinator in self.coordinators():
            deadline = coordinator.next_deadline()
            if deadline is not None and deadline <= now_ms:
                await self._apply(coordinator, coordinator.on_timer(now_ms))

    # --- requests -----------------------------------------------------------------------------------

    @staticmethod
    def request_info(ctx: RequestContext) -> RequestInfo:
        # Kafka shows a member's host as InetAddress.toString does: "/127.0.0.1". A topic a regex
        # matches but the sender may not DESCRIBE is left out, without an audit line (Kafka's
        # TopicRegexResolver authorizes with logIfDenied false).
        describable = (None if ctx.services.authorizer is None
                       else partial(ctx.authorized, DESCRIBE, TOPIC, log_if_denied=False))
        return RequestInfo(ctx.api_version, ctx.client_id or "", f"/{ctx.connection.client_host}", describable)

    async def submit(self, ctx: RequestContext, method: Callable[..., Actions], group_id: str, *args: Any) -> Any:
        """Run `method(coordinator, now_ms, ticket, request_info, *args)` on the coordinator of
        `group_id` and wait for its response."""
        info = self.request_info(ctx)
        self.ensure_offsets_topic()
        await self._update_topics()
        coordinator = self.coordinator_for(group_id)
        ticket = next(self._tickets)
        reply = self._replies[ticket] = _Reply()
        try:
            await self._apply(coordinator, method(coordinator, self._clock(), ticket, info, *args))
            await reply.event.wait()
            return reply.response
        finally:
            del self._replies[ticket]

    def list_groups(self, states: list[str], types: list[str]):
        """ListGroups over every coordinator here; COORDINATOR_LOAD_IN_PROGRESS with the groups
        known while a partition loads (Kafka's handleListGroups)."""
        code, groups = ErrorCode.NONE, []
        for coordinator in self.coordinators():
            error, listed = coordinator.list_groups(states, types)
            code = code or error
            groups += listed
        if self.partitions is not None and self.partitions.loading and code == ErrorCode.NONE:
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return code, groups

    async def topics_deleted(self, names: set[str]) -> None:
        for coordinator in self.coordinators():
            if coordinator.active and names:
                await self._apply(coordinator, coordinator.delete_topic_offsets(self._clock(), names))

    async def _apply(self, coordinator: GroupCoordinator, actions: Actions) -> None:
        responses = list(actions.responses)
        appends = list(actions.appends)
        to_flush = []
        while appends:
            append = appends.pop(0)
            error, log_to_flush = await self._append(append)
            if log_to_flush is not None and log_to_flush not in to_flush:
                to_flush.append(log_to_flush)
            more = coordinator.complete_append(append, error, self._clock())
            responses += more.responses
            appends += more.appends
        for log_ in to_flush:
            # flush.messages reached or a segment rolled: fsync before anyone hears of the write.
            await trio.to_thread.run_sync(log_.flush, limiter=self._disk_limiter)
        self._deliver(responses)
        self._share_group_events(coordinator)
        self._waker.poke()

    async def _append(self, append: Append) -> tuple[int, Any]:
        """(error code, the log to flush before answering or None). In a cluster, at the leader
        epoch the partition was loaded with, and acknowledged by the ISR (Kafka's
        offsets.commit.required.acks, -1)."""
        epoch = None if self.partitions is None else self.partitions.epoch(append.partition)
        return await append_records(self._replicas, OFFSETS_TOPIC, append.partition, append.records,
                                    compression=self._config.get_int("offsets.topic.compression.codec"),
                                    producer=append.producer, verification_guard=append.verification_guard,
                                    leader_epoch=epoch,
                                    timeout_ms=self._config.get_int("offsets.commit.timeout.ms"))

    def _deliver(self, responses: list[tuple[Any, Any]]) -> None:
        for ticket, response in responses:
            reply = self._replies.get(ticket)
            if reply is not None:  # None: the client went away while parked
                reply.set(response)


    # --- streams groups (KIP-1071) ---------------------------------------------------------------------

    async def streams_group_heartbeat(self, ctx: RequestContext, request) -> Any:
        """StreamsGroupHeartbeat: answered once its records are written; the internal topics the
        group's topology lacks are then created, as Kafka's AutoTopicCreationManager does (the
        response already says MISSING_INTERNAL_TOPICS; a later heartbeat finds them)."""
        response, to_create = await self.submit(ctx, GroupCoordinator.streams_group_heartbeat, request.group_id,
                                                request)
        if to_create:
            creatable = (set(to_create) if ctx.authorize(CREATE, CLUSTER, log_if_denied=False)
                         else ctx.authorized(CREATE, TOPIC, to_create))
            refused = sorted(set(to_create) - set(creatable))
            if refused:
                response.status.append(StreamsStatus(
                    status_code=StreamsTopicStatus.MISSING_INTERNAL_TOPICS,
                    status_detail=f"Unauthorized to CREATE on topics {', '.join(refused)}."))
            await self._create_internal_topics(ctx, [to_create[name] for name in sorted(creatable)])
        return response

    async def _create_internal_topics(self, ctx: RequestContext, topics: list) -> None:
        """Create a streams application's internal topics (repartition, changelog) that do not exist."""
        services = ctx.services
        created = False
        for topic in topics:
            if topic.name in services.metadata.topics:
                continue
            replication = (topic.replication_factor if topic.replication_factor > 0
                           else self._config.get_int("default.replication.factor"))
            try:
                assignment = services.admin.assign_replicas(services, topic.partitions, replication, None)
                await services.admin.create_topic(services, topic.name, assignment, dict(topic.configs))
                created = True
                log.info("Created internal topic %s of a streams group with %d partitions", topic.name,
                         topic.partitions)
            except AdminError as e:
                log.warning("Creating the internal topic %s of a streams group failed: %s", topic.name, e)
        if created:
            self.topics_changed()

    # --- share groups (KIP-932) ---------------------------------------------------------------------

    @property
    def group_configs(self) -> GroupConfigManager:
        return self._group_configs

    def _share_group_events(self, coordinator: GroupCoordinator) -> None:
        """Members that left share groups, and groups left empty, told to the share fetch path;
        rebalances counted."""
        events = coordinator.share.take_events()
        self.share_group_rebalances += sum(isinstance(e, ShareGroupRebalanced) for e in events)
        listener = self.share_group_listener
        if listener is None:
            return
        for event in events:
            if isinstance(event, MemberLeft):
                listener.on_member_leave(event.group_id, event.member_id)
            elif isinstance(event, ShareGroupEmpty):
                listener.on_group_empty(event.group_id)

    async def share_group_heartbeat(self, ctx: RequestContext, request) -> Any:
        """ShareGroupHeartbeat: answered once its records are written; the share partitions it
        subscribed to are initialized through the persister afterwards, as Kafka's
        GroupCoordinatorService does (assigned from the next heartbeat on)."""
        response, init = await self.submit(ctx, GroupCoordinator.share_group_heartbeat, request.group_id, request)
        if init is not None:
            if self._nursery is not None:
                self._nursery.start_soon(self._initialize_share_partitions, ctx, init)
            else:
                await self._initialize_share_partitions(ctx, init)
        return response

    async def _initialize_share_partitions(self, ctx: RequestContext, init: ShareInitRequest) -> None:
        """InitializeShareGroupState for each share partition, then recorded as initialized (or, on
        an error, as no longer initializing: the next heartbeat asks again)."""
        persister = self.persister
        error: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if persister is not None:
            error = ErrorCode.NONE
            for topic_id, partitions in init.partitions.items():
                for partition, start_offset in partitions.items():
                    code = await persister.initialize_state(init.group_id, topic_id, partition, init.group_epoch,
                                                            start_offset)
                    if code != ErrorCode.NONE and error == ErrorCode.NONE:
                        error = code
        if error == ErrorCode.NONE:
            await self.submit(ctx, lambda c, *args: c.share.initialize_state(*args), init.group_id, init)
        else:
            log.error("Unable to initialize share group state %s: %s", init.group_id, ErrorCode(error).name)
            await self.submit(ctx, lambda c, *args: c.share.uninitialize_state(*args), init.group_id, init)

    async def delete_groups(self, ctx: RequestContext, group_ids: list[str]) -> dict[str, Any]:
        """DeleteGroups for the groups of one coordinator: share groups first have their share
        partitions' state deleted through the persister (DeleteShareGroupState; a group whose state
        cannot be deleted stays, with the error), then every group goes as Kafka deletes groups."""
        DeletableGroupResult = response_class(ApiKey.DELETE_GROUPS).DeletableGroupResult
        results: dict[str, Any] = {}
        prepared = await self.submit(ctx, lambda c, *args: c.share.prepare_delete(*args), group_ids[0], group_ids)
        for group_id, (error, partitions) in prepared.items():
            if error == ErrorCode.NONE and partitions:
                error = await self._delete_share_state(group_id, partitions)
            if error != ErrorCode.NONE:
                results[group_id] = DeletableGroupResult(group_id=group_id, error_code=error)
        remaining = [g for g in group_ids if g not in results]
        if remaining:
            deleted = await self.submit(ctx, GroupCoordinator.delete_groups, remaining[0], remaining)
            results.update((r.group_id, r) for r in deleted.results)
        return results

    async def _delete_share_state(self, group_id: str, partitions: dict[uuid.UUID, list[int]]) -> int:
        persister = self.persister
        if persister is None:
            return ErrorCode.NONE  # nothing was ever initialized without one
        for topic_id, indexes in partitions.items():
            errors = await persister.delete_state(group_id, topic_id, indexes)
            for code in errors.values():
                if code != ErrorCode.NONE:
                    log.error("Received error while deleting share group %s: %s", group_id, ErrorCode(code).name)
                    return code
        return ErrorCode.NONE

    # --- share group offsets (the admin APIs: AlterShareGroupOffsets, DeleteShareGroupOffsets,
    # DescribeShareGroupOffsets), as Kafka's GroupCoordinatorService runs them ------------------------

    async def alter_share_group_offsets(self, ctx: RequestContext, request) -> Any:
        """The share partitions of an empty group start at the offsets asked for: recorded as
        initializing, initialized through the persister, then recorded as initialized. A partition
        the persister refuses carries its error (and stays initializing, as in Kafka)."""
        response, init = await self.submit(ctx, lambda c, *args: c.share.alter_offsets(*args), request.group_id,
                                           request)
        if init is None:
            return response
        errors = await self._initialize_each(init)
        if not errors:
            await self.submit(ctx, lambda c, *args: c.share.initialize_state(*args), init.group_id, init)
            return response
        for topic in response.responses:
            for p in topic.partitions:
                code = errors.get((topic.topic_id, p.partition_index))
                if p.error_code == ErrorCode.NONE and code is not None:
                    p.error_code, p.error_message = code, ErrorCode(code).message
        return response

    async def _initialize_each(self, init: ShareInitRequest) -> dict[tuple[uuid.UUID, int], int]:
        """InitializeShareGroupState for each share partition of `init`, at once: the errors."""
        errors: dict[tuple[uuid.UUID, int], int] = {}
        persister = self.persister

        async def one(topic_id: uuid.UUID, partition: int, start_offset: int) -> None:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if persister is None else await persister.initialize_state(
                init.group_id, topic_id, partition, init.group_epoch, start_offset)
            if code != ErrorCode.NONE:
                errors[(topic_id, partition)] = code

        async with trio.open_nursery() as nursery:
            for topic_id, partitions in init.partitions.items():
                for partition, start_offset in partitions.items():
                    nursery.start_soon(one, topic_id, partition, start_offset)
        if errors:
            log.error("Unable to initialize share group state for %s while altering share group offsets: %s",
                      init.group_id, {f"{t}-{p}": ErrorCode(c).name for (t, p), c in errors.items()})
        return errors

    async def delete_share_group_offsets(self, ctx: RequestContext, request) -> Any:
        """The share partitions of the topics named forget their state: marked deleting, deleted
        through the persister (DeleteShareGroupState), then no longer deleting. A topic whose
        state cannot be deleted carries the error and stays deleting (a later delete retries it)."""
        DeleteResponse = response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
        Topic = DeleteResponse.DeleteShareGroupOffsetsResponseTopic
        first = await self.submit(ctx, lambda c, *args: c.share.delete_offsets(*args), request.group_id, request)
        if isinstance(first, DeleteResponse):  # refused
            return first
        errors, to_delete = first
        names = self._topics().topics_by_id
        deleted: dict[uuid.UUID, str] = {}
        for topic_id, partitions in to_delete.items():
            name = names[topic_id].name if topic_id in names else None
            code = await self._delete_share_state(request.group_id, {topic_id: partitions})
            if code == ErrorCode.NONE:
                deleted[topic_id] = name or ""
            else:
                errors.append(Topic(topic_name=name, topic_id=topic_id, error_code=code,
                                    error_message=ErrorCode(code).message))
        if not deleted:
            return DeleteResponse(responses=errors)
        return await self.submit(ctx, lambda c, *args: c.share.offsets_deleted(*args), request.group_id,
                                 (request.group_id, deleted, errors))

    async def describe_share_group_offsets(self, ctx: RequestContext, group_id: str,
                                           topics: list[tuple[str, list[int]]] | None,
                                           end_offsets: PartitionMetadataClient) -> Any:
        """One group of DescribeShareGroupOffsets: each share partition's start offset, leader epoch
        and lag (KIP-1226: the partition's end offset less the start offset and the records past it
        already delivered for good) from its state summary (ReadShareGroupStateSummary through the
        persister). `topics` None: every share partition the group has initialized; a topic that
        does not exist is answered with start offset -1 (Kafka's describeShareGroupOffsets)."""
        DescribeResponse = response_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
        Group = DescribeResponse.DescribeShareGroupOffsetsResponseGroup
        Topic = DescribeResponse.DescribeShareGroupOffsetsResponseTopic
        Partition = DescribeResponse.DescribeShareGroupOffsetsResponsePartition
        image = self._topics()
        wanted: dict[uuid.UUID, tuple[str, list[int]]] = {}
        unknown: list[Any] = []
        if topics is None:
            coordinator = self.coordinator_for(group_id)
            if not coordinator.active:
                inactive = ErrorCode(coordinator.inactive_error)
                return Group(group_id=group_id, error_code=inactive, error_message=inactive.message)
            for topic_id, partitions in coordinator.share.initialized_partitions(group_id).items():
                if topic_id in image.topics_by_id:
                    wanted[topic_id] = (image.topics_by_id[topic_id].name, sorted(partitions))
        else:
            for name, partitions in topics:
                info = image.topics.get(name)
                if info is None:
                    unknown.append(Topic(topic_name=name, topic_id=uuid.UUID(int=0), partitions=[
                        Partition(partition_index=p, start_offset=-1) for p in partitions]))
                else:
                    wanted[info.topic_id] = (name, list(partitions))
        if not wanted:
            return Group(group_id=group_id, topics=unknown)
        summaries: dict[tuple[uuid.UUID, int], tuple[int, SharePartitionState | None]] = {}
        persister = self.persister

        async def read(topic_id: uuid.UUID, partition: int) -> None:
            summaries[(topic_id, partition)] = ((ErrorCode.COORDINATOR_NOT_AVAILABLE, None) if persister is None else
                                                await persister.read_summary(group_id, topic_id, partition, 0))

        async with trio.open_nursery() as nursery:
            for topic_id, (_, partitions) in wanted.items():
                for partition in partitions:
                    nursery.start_soon(read, topic_id, partition)

        def has_lag(summary: tuple[int, SharePartitionState | None]) -> bool:  # Kafka's shouldComputeSharePartitionLag
            error, state = summary
            return (error == ErrorCode.NONE and state is not None and state.start_offset != -1
                    and state.delivery_complete_count != -1)

        ends = await end_offsets.list_latest_offsets(
            (wanted[t][0], p) for (t, p), summary in summaries.items() if has_lag(summary))
        described = []
        for topic_id, (name, partitions) in wanted.items():
            answers = []
            for partition in partitions:
                summary = summaries[(topic_id, partition)]
                read_error, state = summary
                if state is None or not has_lag(summary):
                    if read_error != ErrorCode.NONE or state is None:  # Kafka leaves the error out
                        answers.append(Partition(partition_index=partition, start_offset=-1, leader_epoch=0, lag=-1))
                    else:
                        answers.append(Partition(partition_index=partition, start_offset=state.start_offset,
                                                 leader_epoch=state.leader_epoch, lag=-1))
                    continue
                end, end_error = ends[(name, partition)]
                if end_error != ErrorCode.NONE:
                    log.error("Partition end offset fetch failed for topicPartition %s-%d", name, partition)
                    answers.append(Partition(partition_index=partition, error_code=end_error,
                                             error_message=ErrorCode(end_error).message))
                else:
                    answers.append(Partition(partition_index=partition, start_offset=state.start_offset,
                                             leader_epoch=state.leader_epoch,
                                             lag=end - state.start_offset - state.delivery_complete_count))
            described.append(Topic(topic_name=name, topic_id=topic_id, partitions=answers))
        return Group(group_id=group_id, topics=described + unknown)
