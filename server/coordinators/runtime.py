"""What the shells of the sans-I/O coordinators share (server/coordinators/group_service.py for groups,
server/coordinators/txn_service.py for transactions): writing a coordinator's records to a partition of its
internal topic, reading them back at startup, and waking the coordinator at its next deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import trio

from ...storage.errors import StorageError
from ...storage.log import AppendOrigin
from ...wire import records as batches
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ..clock import elapsed_ns, wall_clock_ms

if TYPE_CHECKING:
    from ..config.kafka_config import KafkaConfig
    from ..metadata.cache import MetadataView
    from ..replication.replica_manager import ReplicaManager

log = logging.getLogger("samsa.coordinator_runtime")

C = TypeVar("C")  # a coordinator: GroupCoordinator or TransactionCoordinator


async def append_records(replicas: ReplicaManager, topic: str, partition_index: int,
                         records: list[tuple[bytes, bytes | None]], *,
                         compression: int = batches.CompressionType.NONE, producer: tuple[int, int] | None = None,
                         verification_guard: int | None = None, leader_epoch: int | None = None, timeout_ms: int = 0,
                         on_appended: Callable[[int], None] | None = None) -> tuple[int, Any]:
    """Append (key, value) records as one batch to an internal topic's partition, as the
    coordinator (Kafka's AppendOrigin.COORDINATOR: no sequence checks). `producer`: the (id, epoch)
    of a transactional batch (offsets committed in a transaction), with the `verification_guard` its
    transaction's verification returned (None: none was made). `leader_epoch`: in a cluster, the
    coordinator epoch the partition was loaded with: the append is refused (NOT_LEADER_OR_FOLLOWER)
    once its leadership moved on, and acknowledged once the ISR has it (acks=all, within
    `timeout_ms`). `on_appended(offset)`: told the first record's offset once the leader's log has
    them (the share coordinator tracks where each share partition's snapshot is). Returns (error
    code, the log to flush before anyone hears of the write, or None)."""
    if not records:
        return ErrorCode.NONE, None
    partition = replicas.get(topic, partition_index)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if leader_epoch is not None and (not partition.is_leader or partition.leader_epoch != leader_epoch):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    producer_id, producer_epoch = producer or (batches.NO_PRODUCER_ID, batches.NO_PRODUCER_EPOCH)
    try:
        batch = bytearray(batches.build_batch(
            [batches.Record(i, 0, key, value, []) for i, (key, value) in enumerate(records)],
            compression=compression, base_timestamp=wall_clock_ms(), producer_id=producer_id, producer_epoch=producer_epoch,
            # Kafka's CoordinatorRuntime builds every batch with base sequence 0, a producer or not.
            base_sequence=0, is_transactional=producer is not None))
        info = partition.append(batch, origin=AppendOrigin.COORDINATOR, verification_guard=verification_guard)
    except StorageError as e:
        log.warning("Appending to %s failed: %s", partition.name, e)
        return e.error_code, None
    except CodecError as e:
        log.warning("Cannot write to %s: %s", partition.name, e)
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    if on_appended is not None:
        on_appended(info.first_offset)
    to_flush = partition.log if info.flush_needed else None
    if leader_epoch is not None:
        return await await_replication(partition, info.last_offset + 1, leader_epoch, timeout_ms), to_flush
    return ErrorCode.NONE, to_flush


def create_internal_topic(replicas: ReplicaManager, config: KafkaConfig, name: str, partitions: int,
                          replication_factor_config: str, configs: dict[str, str]) -> None:
    """Create a coordinator's topic as Kafka's coordinator asks for it, with replication factor 1:
    the broker is alone (Kafka's shipped server.properties sets 1 for a single broker)."""
    replication = config.get(replication_factor_config)
    if replication != 1:
        log.info("%s=%d, but this broker is alone: creating %s with replication factor 1", replication_factor_config,
                 replication, name)
    replicas.create_topic(name, partitions, configs, 1)


def log_batches(log_) -> Iterator[tuple[batches.BatchHeader, list[batches.Record]]]:
    """Every batch of a log from its start offset, decoded, oldest first; a corrupt one is logged
    and skipped."""
    for segment in log_.segments:
        for _, header, data in segment.log.batches_from(0):
            if header.last_offset < log_.log_start_offset:
                continue
            try:
                _, records = batches.decode_batch(data)
            except CodecError as e:
                log.error("Skipping a corrupt batch at offset %d of %s: %s", header.base_offset, log_.name, e)
                continue
            yield header, records


def replay_topic(metadata: MetadataView, replicas: ReplicaManager, topic_name: str,
                 replay_batch: Callable[[Any, batches.BatchHeader, list[batches.Record]], int]) -> None:
    """Hand every batch of an internal topic, partition by partition and oldest first, to
    `replay_batch(partition, header, records)`, which returns how many records it replayed; log
    the count and the time it took. A topic that does not exist yet has nothing to replay."""
    started = elapsed_ns()
    count = 0
    topic = metadata.topics.get(topic_name)
    if topic is None:
        return
    for index in range(topic.num_partitions):
        partition = replicas.get(topic_name, index)
        if partition is None:  # as Kafka's coordinators load a partition without a log: nothing to replay
            log.warning("Attempted to load %s-%d, but found no log", topic_name, index)
            continue
        for header, records in log_batches(partition.log):
            count += replay_batch(partition, header, records)
    log.info("Replayed %d records of %s in %.0f ms", count, topic_name, (elapsed_ns() - started) / 1e6)


class DeadlineWaker:
    """Runs a coordinator's timers: sleeps until its next deadline, or until `poke` says the
    deadlines may have changed (after every request)."""

    def __init__(self, name: str, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.name = name
        self._clock = clock
        self._rescheduled = trio.Event()

    def poke(self) -> None:
        self._rescheduled.set()

    async def run(self, next_deadline: Callable[[], int | None], fire: Callable[[int], Awaitable[None]],
                  before: Callable[[], Awaitable[None]] | None = None) -> None:
        """`before`: what to do each time before waiting (the group service's topic changes)."""
        while True:
            if before is not None:
                await before()
            self._rescheduled = trio.Event()
            deadline = next_deadline()
            if deadline is None:
                await self._rescheduled.wait()
                continue
            delay = (deadline - self._clock()) / 1000
            if delay > 0:
                with trio.move_on_after(delay):
                    await self._rescheduled.wait()
                continue
            try:
                await fire(self._clock())
            except Exception:
                log.exception("%s timer failed", self.name)


async def await_replication(partition, required_offset: int, leader_epoch: int, timeout_ms: int) -> int:
    """A coordinator's write with acks=all (Kafka appends them with required acks -1): NONE once the
    ISR has everything before `required_offset`, NOT_LEADER_OR_FOLLOWER when the partition's
    leadership moved past `leader_epoch`, REQUEST_TIMED_OUT after `timeout_ms`."""
    with trio.move_on_after(max(timeout_ms, 0) / 1000):
        while (code := partition.replication_done(required_offset, leader_epoch)) is None:
            wake = trio.Event()
            partition.park(wake)
            try:
                await wake.wait()
            finally:
                partition.unpark(wake)
        return code
    return ErrorCode.REQUEST_TIMED_OUT


class CoordinatorPartitions(Generic[C]):
    """Which partitions of a coordinator topic this broker coordinates in a ZooKeeper cluster: those it
    leads, each with its own coordinator (a shard, as Kafka 4's coordinator runtime has), loaded from
    the partition's log in the background when the controller makes this broker its leader and
    dropped when it follows or stops it (Kafka 3.9's onElection and onResignation; its
    loadingPartitions, ownedPartitions and epochForPartitionId). A partition being loaded answers
    COORDINATOR_LOAD_IN_PROGRESS, one not led here NOT_COORDINATOR: through coordinators that refuse.

    `load(partition, epoch)` (in a worker thread) builds the partition's coordinator from its log and
    returns it with what loading it asks for; `loaded(coordinator, actions)` carries that
    out once it is installed; `unload(coordinator)` answers what it parked."""

    def __init__(self, name: str, refusing: Callable[[ErrorCode], C], load: Callable[[int, int], tuple[C, Any]],
                 loaded: Callable[[C, Any], Awaitable[object]], unload: Callable[[C], None]) -> None:
        self.name = name
        self.owned: dict[int, C] = {}
        self.epochs: dict[int, int] = {}  # the coordinator epoch (leader epoch) of each owned or loading partition
        self.loading: set[int] = set()
        self._not_coordinator = refusing(ErrorCode.NOT_COORDINATOR)
        self._load_in_progress = refusing(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        self._load = load
        self._loaded = loaded
        self._unload = unload
        self.nursery: trio.Nursery | None = None  # where loads run; set by the service's run

    def get(self, partition: int) -> C:
        coordinator = self.owned.get(partition)
        if coordinator is not None:
            return coordinator
        return self._load_in_progress if partition in self.loading else self._not_coordinator

    def epoch(self, partition: int) -> int | None:
        return self.epochs.get(partition)

    def on_leadership_change(self, led: list[tuple[int, int]], resigned: list[tuple[int, int]]) -> None:
        """(partition, leader epoch) of the partitions now led here, and of those no longer led."""
        for partition, epoch in resigned:
            self.on_resignation(partition, epoch)
        for partition, epoch in led:
            self.on_election(partition, epoch)

    def on_election(self, partition: int, epoch: int) -> None:
        known = self.epochs.get(partition)
        if known is not None and epoch <= known:
            log.info("Not loading %s-%d for epoch %d: epoch %d is already known", self.name, partition, epoch, known)
            return
        self.epochs[partition] = epoch
        if partition in self.owned or partition in self.loading:
            return  # still led here: what is loaded stays, under the new epoch
        if self.nursery is None:
            raise RuntimeError(f"{self.name}'s coordinator is not running: it cannot load partitions")
        self.loading.add(partition)
        log.info("Scheduling loading of %s-%d for epoch %d", self.name, partition, epoch)
        self.nursery.start_soon(self._load_partition, partition, epoch)

    def on_resignation(self, partition: int, epoch: int) -> None:
        known = self.epochs.get(partition)
        if known is not None and 0 <= epoch < known:
            log.info("Not unloading %s-%d for epoch %d: it is at epoch %d", self.name, partition, epoch, known)
            return
        self.epochs.pop(partition, None)
        self.loading.discard(partition)
        coordinator = self.owned.pop(partition, None)
        if coordinator is not None:
            log.info("Unloading %s-%d", self.name, partition)
            self._unload(coordinator)

    async def _load_partition(self, partition: int, epoch: int) -> None:
        started = elapsed_ns()
        try:
            coordinator, actions = await trio.to_thread.run_sync(self._load, partition, epoch)
        except Exception:
            log.exception("Loading %s-%d failed", self.name, partition)
            self.loading.discard(partition)
            self.epochs.pop(partition, None)
            return
        if partition not in self.loading:
            return  # resigned meanwhile
        self.loading.discard(partition)
        self.owned[partition] = coordinator
        log.info("Finished loading %s-%d for epoch %d in %.0f ms", self.name, partition, epoch,
                 (elapsed_ns() - started) / 1e6)
        await self._loaded(coordinator, actions)

    def stop(self) -> None:
        for partition in list(self.owned):
            self.on_resignation(partition, -1)
