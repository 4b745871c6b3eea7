"""Runs the share coordinator for the broker (Kafka's ShareCoordinatorService): the five share state
RPCs in, split by share partition, each carried out by the shard of its `__share_group_state`
partition (coordinator/share_coordinator.py), and the responses put back together.

The shards are sans-I/O; this is their shell. An RPC's partitions run concurrently, each on its
shard under that shard's lock (Kafka's runtime runs one shard's operations in order: a record is
computed from the state the previous one left), and answers once the records it asked for are
written to `__share_group_state` (created on first need with Kafka's partition count and configs:
`cleanup.policy=delete`, `retention.ms=-1`, pruned as below), acknowledged by the ISR in a cluster
within `share.coordinator.write.timeout.ms`, and flushed as the log's flush policy says.

A single broker has a shard for every partition of the topic, replayed before the broker accepts
connections (or made empty when the topic is created). In a ZooKeeper cluster the broker
coordinates the partitions it leads, each loaded in the background when the controller makes it
leader and dropped when it follows or stops it (server/coordinators/runtime.py's
CoordinatorPartitions; Kafka's onElection and onResignation); writes there wait for the ISR at the
leader epoch the partition was loaded with.

While share groups are enabled (`share.version` finalized), two periodic jobs run as in Kafka:
every `share.coordinator.cold.partition.snapshot.interval.ms` a snapshot of the share partitions
whose last one is older than that, and every `share.coordinator.state.topic.prune.interval.ms` the
records no share partition needs any more are deleted (DeleteRecords up to the shard's last
redundant offset: ShareCoordinatorOffsetsManager). They follow the level as it changes: stopped when
share.version goes to 0, started afresh (their first run an interval later) when it comes back
(Kafka's onMetadataUpdate and periodicJobGeneration). The RPCs are answered whatever the level, as
Kafka 4.4 answers them (asked at share.version 0).
"""

from __future__ import annotations

import itertools
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ...coordinator.actions import Actions
from ...coordinator.share_coordinator import (
    SHARE_GROUP_STATE_TOPIC, ShareCoordinatorConfig, ShareCoordinatorShard, SharePartitionKey, partition_for,
)
from ...storage.errors import StorageError
from ...wire.coordinator_record import RecordFormatError
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from .runtime import CoordinatorPartitions, append_records, create_internal_topic, log_batches

if TYPE_CHECKING:
    from ...wire.records import BatchHeader, Record
    from ..config.kafka_config import KafkaConfig
    from ..metadata.cache import MetadataView
    from ..replication.replica_manager import Partition, ReplicaManager

log = logging.getLogger("samsa.share_service")

InitializeResponse = response_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
ReadResponse = response_class(ApiKey.READ_SHARE_GROUP_STATE)
WriteResponse = response_class(ApiKey.WRITE_SHARE_GROUP_STATE)
DeleteResponse = response_class(ApiKey.DELETE_SHARE_GROUP_STATE)
SummaryResponse = response_class(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)

NOT_AVAILABLE_MESSAGE = "Share coordinator is not available."
ShardOperation = Callable[..., Actions]  # ShareCoordinatorShard.write_state and its siblings, unbound


class _Rpc:
    """One RPC's response classes and how the service checks its request (Kafka's
    ShareCoordinatorService differs by RPC in the order of its checks)."""

    def __init__(self, response: Any, topic_result: Any, operation: ShardOperation, *,
                 inactive_first: bool, partitions_required: bool = True) -> None:
        self.response = response
        self.topic_result = topic_result
        self.partition_result = response.PartitionResult
        self.operation = operation
        self.inactive_first = inactive_first
        self.partitions_required = partitions_required


_WRITE = _Rpc(WriteResponse, WriteResponse.WriteStateResult, ShareCoordinatorShard.write_state, inactive_first=False)
_READ = _Rpc(ReadResponse, ReadResponse.ReadStateResult, ShareCoordinatorShard.read_state, inactive_first=False)
_SUMMARY = _Rpc(SummaryResponse, SummaryResponse.ReadStateSummaryResult, ShareCoordinatorShard.read_state_summary,
                inactive_first=True)
_DELETE = _Rpc(DeleteResponse, DeleteResponse.DeleteStateResult, ShareCoordinatorShard.delete_state,
               inactive_first=True)
_INITIALIZE = _Rpc(InitializeResponse, InitializeResponse.InitializeStateResult, ShareCoordinatorShard.initialize_state,
                   inactive_first=True, partitions_required=False)


class ShareService:
    def __init__(self, config: KafkaConfig, metadata: MetadataView, replicas: ReplicaManager,
                 disk_limiter: trio.CapacityLimiter, clock: Callable[[], int], share_groups_enabled: bool,
                 cluster: MetadataView | None = None) -> None:
        """`replicas`: where `__share_group_state` is (created through it); `disk_limiter`: fsyncs
        take turns with the broker's; `clock()`: ms since the epoch (snapshots carry wall-clock
        times); `share_groups_enabled`: share.version is finalized (the periodic jobs run);
        `cluster`: in a ZooKeeper cluster, the controller's metadata."""
        self._config = config
        self._metadata = metadata
        self._replicas = replicas
        self._disk_limiter = disk_limiter
        self._clock = clock
        self._share_groups_enabled = share_groups_enabled
        self._nursery: trio.Nursery | None = None  # run's, once running
        self._jobs: trio.CancelScope | None = None  # the periodic jobs', while they run
        self._cluster = cluster
        self.active = False  # Kafka's isActive: from startup (run) to shutdown
        self.shards: dict[int, ShareCoordinatorShard] = {}  # a single broker's, by partition
        self.partitions: CoordinatorPartitions[ShareCoordinatorShard] | None = None if cluster is None else \
            CoordinatorPartitions(SHARE_GROUP_STATE_TOPIC, self._refusing, self._load_partition, self._installed,
                                  self._unload_partition)
        self._locks: defaultdict[int, trio.Lock] = defaultdict(trio.Lock)  # one shard's operations, in order
        self._tickets = itertools.count()
        self._last_pruned: dict[int, int] = {}  # the offset each partition was last pruned to

    # --- configuration ----------------------------------------------------------------------------

    def _coordinator_config(self) -> ShareCoordinatorConfig:
        get_int = self._config.get_int
        return ShareCoordinatorConfig(
            state_topic_num_partitions=self.num_partitions(),
            snapshot_update_records_per_snapshot=get_int("share.coordinator.snapshot.update.records.per.snapshot"),
            cold_partition_snapshot_interval_ms=get_int("share.coordinator.cold.partition.snapshot.interval.ms"),
        )

    def _topics(self) -> MetadataView:
        return self._metadata if self._cluster is None else self._cluster

    def num_partitions(self) -> int:
        """The topic's real partition count wins: share partitions must map where their records are."""
        topic = self._topics().topics.get(SHARE_GROUP_STATE_TOPIC)
        return topic.num_partitions if topic else self._config.get_int("share.coordinator.state.topic.num.partitions")

    def partition_for(self, key: SharePartitionKey) -> int:
        """The partition of `__share_group_state` that holds a share partition's state (Kafka's
        ShareCoordinatorService.partitionFor)."""
        return partition_for(key, self.num_partitions())

    def topic_configs(self) -> dict[str, str]:
        """Kafka's shareGroupStateTopicConfigs: the topic is pruned by the coordinator, never by retention."""
        return {
            "cleanup.policy": "delete",
            "compression.type": "producer",
            "segment.bytes": str(self._config.get("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(self._config.get("share.coordinator.state.topic.min.isr")),
            "retention.ms": "-1",
        }

    def ensure_share_group_state_topic(self) -> None:
        """Create `__share_group_state` the way Kafka's coordinator asks for it, if it is missing (a
        single broker; a cluster's is created through ZooKeeper, server/zookeeper/admin_manager.py),
        with an empty shard for each partition."""
        if SHARE_GROUP_STATE_TOPIC in self._metadata.topics or self._cluster is not None or not self.active:
            return
        create_internal_topic(self._replicas, self._config, SHARE_GROUP_STATE_TOPIC, self.num_partitions(),
                              "share.coordinator.state.topic.replication.factor", self.topic_configs())
        for index in range(self.num_partitions()):
            shard = self._new_shard(index)
            shard.load_complete()
            self.shards[index] = shard

    def _partition_count(self, topic_id) -> int | None:
        topic = self._topics().topics_by_id.get(topic_id)
        return None if topic is None else topic.num_partitions

    def _new_shard(self, index: int) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(self._coordinator_config(), index, self._partition_count)

    def _refusing(self, error: ErrorCode) -> ShareCoordinatorShard:
        shard = self._new_shard(-1)
        shard.inactive_error = error
        return shard

    def shard_for(self, index: int) -> ShareCoordinatorShard:
        """The shard of a partition of `__share_group_state`: in a cluster, the partition's if led
        here, or one that refuses (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        if self.partitions is not None:
            return self.partitions.get(index)
        shard = self.shards.get(index)
        if shard is None and self.active and SHARE_GROUP_STATE_TOPIC in self._metadata.topics:
            # The topic was created since startup, by another path than ensure_share_group_state_topic
            # (CreateTopics): its partitions start empty.
            shard = self.shards[index] = self._new_shard(index)
            shard.load_complete()
        return shard if shard is not None else self._refusing(ErrorCode.NOT_COORDINATOR)

    def owned_shards(self) -> dict[int, ShareCoordinatorShard]:
        if self.partitions is not None:
            return dict(self.partitions.owned)
        return dict(self.shards)

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if self.partitions is not None:
                self.partitions.nursery = nursery
            else:
                self.shards = await trio.to_thread.run_sync(self._load_all)
            self.active = True
            self._nursery = nursery
            self._start_jobs()
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self.active = False
                self._nursery = None
                if self.partitions is not None:
                    self.partitions.stop()
                for shard in self.shards.values():
                    shard.unload()

    def _load_all(self) -> dict[int, ShareCoordinatorShard]:
        """A single broker's shards, each replayed from its partition (in a thread, before requests arrive)."""
        topic = self._metadata.topics.get(SHARE_GROUP_STATE_TOPIC)
        return {} if topic is None else {index: self._load_partition(index, 0)[0]
                                         for index in range(topic.num_partitions)}

    def _load_partition(self, index: int, epoch: int) -> tuple[ShareCoordinatorShard, None]:
        """One partition's share partitions, replayed into a shard of their own (in a thread)."""
        shard = self._new_shard(index)
        partition = self._replicas.get(SHARE_GROUP_STATE_TOPIC, index)
        if partition is None:  # as Kafka's loader: nothing to load, the partition is owned
            log.warning("Attempted to load %s-%d, but found no log", SHARE_GROUP_STATE_TOPIC, index)
        else:
            count = sum(self._replay_batch(shard, partition, header, records)
                        for header, records in log_batches(partition.log))
            if count:
                log.info("Replayed %d records of %s-%d for epoch %d", count, SHARE_GROUP_STATE_TOPIC, index, epoch)
        shard.load_complete()
        return shard, None

    @staticmethod
    def _replay_batch(shard: ShareCoordinatorShard, partition: Partition, header: BatchHeader,
                      records: list[Record]) -> int:
        if header.is_control:  # the share coordinator writes no transactions
            return 0
        replayed = 0
        for record in records:
            if record.key is None:
                continue
            try:
                shard.replay(header.base_offset + record.offset_delta, bytes(record.key),
                             None if record.value is None else bytes(record.value))
                replayed += 1
            except RecordFormatError as e:
                log.warning("Skipping a record of %s: %s", partition.name, e)
        return replayed

    async def _installed(self, shard: ShareCoordinatorShard, actions: None) -> None:
        pass  # loading asks for nothing

    def _unload_partition(self, shard: ShareCoordinatorShard) -> None:
        shard.unload()
        self._last_pruned.pop(shard.partition_index, None)

    def on_leadership_change(self, led: list[tuple[int, int]], resigned: list[tuple[int, int]]) -> None:
        """(partition, leader epoch) of `__share_group_state` partitions this broker now leads, and
        of those it no longer leads."""
        if self.partitions is None:
            raise RuntimeError("a single broker's share coordinator has no partitions")
        self.partitions.on_leadership_change(led, resigned)

    # --- the RPCs ---------------------------------------------------------------------------------------

    async def initialize_state(self, request) -> Any:
        return await self._serve(_INITIALIZE, request)

    async def read_state(self, request) -> Any:
        return await self._serve(_READ, request)

    async def write_state(self, request) -> Any:
        return await self._serve(_WRITE, request)

    async def delete_state(self, request) -> Any:
        return await self._serve(_DELETE, request)

    async def read_state_summary(self, request) -> Any:
        return await self._serve(_SUMMARY, request)

    async def _serve(self, rpc: _Rpc, request) -> Any:
        """The RPC's response: each partition from its shard, the topics in the request's order."""
        if rpc.inactive_first and not self.active:
            return self._not_available(rpc, request)
        if not request.group_id and rpc.inactive_first:
            log.error("Group id must be specified and non-empty: %r", request)
            return rpc.response()
        if not request.topics:
            log.error("Topic Data is empty: %r", request)
            return rpc.response()
        if rpc.partitions_required and any(not t.partitions for t in request.topics):
            log.error("Partition Data is empty: %r", request)
            return rpc.response()
        if not request.group_id:
            log.error("Group id must be specified and non-empty: %r", request)
            return rpc.response()
        if not self.active:
            return self._not_available(rpc, request)
        calls = [(t.topic_id, p) for t in request.topics for p in t.partitions]
        results: list[Any] = [None] * len(calls)

        async def one(i: int) -> None:
            topic_id, data = calls[i]
            results[i] = await self._call(rpc, request.group_id, topic_id, data)

        async with trio.open_nursery() as nursery:
            for i in range(len(calls)):
                nursery.start_soon(one, i)
        by_topic: dict[Any, dict[int, Any]] = {}
        for (topic_id, data), result in zip(calls, results):
            by_topic.setdefault(topic_id, {})[data.partition] = result
        return rpc.response(results=[rpc.topic_result(topic_id=topic_id, partitions=[r for _, r in sorted(parts.items())])
                                     for topic_id, parts in by_topic.items()])

    @staticmethod
    def _not_available(rpc: _Rpc, request) -> Any:
        return _error_response(rpc, request, ErrorCode.COORDINATOR_NOT_AVAILABLE, NOT_AVAILABLE_MESSAGE)

    async def _call(self, rpc: _Rpc, group_id: str, topic_id, data) -> Any:
        """One partition of an RPC on its shard: its result once the shard's writes are done."""
        index = self.partition_for(SharePartitionKey(group_id, topic_id, data.partition))
        async with self._locks[index]:
            shard = self.shard_for(index)
            ticket = next(self._tickets)
            responses = await self._apply(index, shard, rpc.operation(shard, self._clock(), ticket, group_id,
                                                                      topic_id, data))
            return responses[ticket]

    async def _apply(self, index: int, shard: ShareCoordinatorShard, actions: Actions) -> dict[Any, Any]:
        responses: dict[Any, Any] = {}
        queue = [actions]
        to_flush = []
        epoch = None if self.partitions is None else self.partitions.epoch(index)
        while queue:
            actions = queue.pop(0)
            responses.update(actions.responses)
            for append in actions.appends:
                first_offset = [-1]
                error, log_ = await append_records(
                    self._replicas, SHARE_GROUP_STATE_TOPIC, append.partition, append.records,
                    compression=self._config.get_int("share.coordinator.state.topic.compression.codec"),
                    leader_epoch=epoch, timeout_ms=self._config.get_int("share.coordinator.write.timeout.ms"),
                    on_appended=partial(first_offset.__setitem__, 0))
                to_flush.append(log_)
                queue.append(shard.complete_append(append, error, self._clock(), first_offset[0]))
        for log_ in dict.fromkeys(filter(None, to_flush)):
            # flush.messages reached or a segment rolled: fsync before anyone hears of the write.
            await trio.to_thread.run_sync(log_.flush, limiter=self._disk_limiter)
        return responses

    # --- periodic jobs ----------------------------------------------------------------------------------

    def share_groups_changed(self, enabled: bool) -> None:
        """share.version was finalized at a level that enables share groups or not: the periodic
        jobs stop, or start afresh."""
        if enabled == self._share_groups_enabled:
            return
        self._share_groups_enabled = enabled
        if self._jobs is not None:
            self._jobs.cancel()
            self._jobs = None
        if self._nursery is not None:
            self._start_jobs()

    @property
    def periodic_jobs_running(self) -> bool:
        return self._jobs is not None

    def _start_jobs(self) -> None:
        if self._share_groups_enabled and self._nursery is not None:
            self._jobs = trio.CancelScope()
            self._nursery.start_soon(self._periodic_jobs, self._jobs)

    async def _periodic_jobs(self, scope: trio.CancelScope) -> None:
        with scope:
            async with trio.open_nursery() as jobs:
                jobs.start_soon(_every, self._config.get_int("share.coordinator.cold.partition.snapshot.interval.ms"),
                                self.snapshot_cold_partitions)
                jobs.start_soon(_every, self._config.get_int("share.coordinator.state.topic.prune.interval.ms"),
                                self.prune)

    async def snapshot_cold_partitions(self) -> None:
        for index, shard in self.owned_shards().items():
            async with self._locks[index]:
                if shard.active:
                    await self._apply(index, shard, shard.snapshot_cold_partitions(self._clock()))

    async def prune(self) -> None:
        """Kafka's performRecordPruning, for every partition coordinated here."""
        for index, shard in self.owned_shards().items():
            offset = shard.last_redundant_offset()
            if offset is None or self._last_pruned.get(index) == offset:
                continue
            partition = self._replicas.get(SHARE_GROUP_STATE_TOPIC, index)
            if partition is None:
                continue
            log.debug("Pruning records in %s till offset %d.", partition.name, offset)
            try:
                partition.log.delete_records(offset)
            except StorageError as e:
                log.error("Exception while deleting records in %s till offset %d: %s", partition.name, offset, e)
                continue
            partition.wake()
            self._last_pruned[index] = offset

    async def topics_deleted(self, topic_ids: set) -> None:
        """Deleted topics' share partitions are forgotten (Kafka's handleTopicsDeletion)."""
        if self._cluster is None and SHARE_GROUP_STATE_TOPIC not in self._metadata.topics:
            for shard in self.shards.values():  # the topic itself went: its state with it
                shard.unload()
            self.shards = {}
        for index, shard in self.owned_shards().items():
            async with self._locks[index]:
                await self._apply(index, shard, shard.cleanup_share_state(topic_ids))


_RPCS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE: _INITIALIZE, ApiKey.READ_SHARE_GROUP_STATE: _READ,
         ApiKey.WRITE_SHARE_GROUP_STATE: _WRITE, ApiKey.DELETE_SHARE_GROUP_STATE: _DELETE,
         ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _SUMMARY}


def _error_response(rpc: _Rpc, request, error: int, message: str) -> Any:
    return rpc.response(results=[rpc.topic_result(topic_id=t.topic_id, partitions=[
        rpc.partition_result(partition=p.partition, error_code=error, error_message=message) for p in t.partitions])
        for t in request.topics])


def global_error_response(api_key: ApiKey, request, error: ErrorCode) -> Any:
    """Every partition of a share state request answered `error` with its message (Kafka's
    toGlobalErrorResponse, as the handlers refuse an unauthorized request)."""
    return _error_response(_RPCS[api_key], request, error, error.message)


async def _every(interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
    """Run `job` every `interval_ms`, as Kafka's timer tasks rescheduled after each run."""
    while True:
        await trio.sleep(interval_ms / 1000)
        try:
            await job()
        except Exception:
            log.exception("share coordinator job %s failed", job.__name__)
