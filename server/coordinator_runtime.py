"""What the shells of the sans-I/O coordinators share (server/group_service.py for groups,
server/txn_service.py for transactions): writing a coordinator's records to a partition of its
internal topic, reading them back at startup, and waking the coordinator at its next deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import trio

from ..storage.errors import StorageError
from ..storage.log import AppendOrigin
from ..wire import records as batches
from ..wire.errors import ErrorCode
from ..wire.exceptions import CodecError
from .clock import elapsed_ns, wall_clock_ms

if TYPE_CHECKING:
    from .config import KafkaConfig
    from .metadata import MetadataCache
    from .replica_manager import ReplicaManager

log = logging.getLogger("samsa.coordinator_runtime")


def append_records(replicas: ReplicaManager, topic: str, partition_index: int,
                   records: list[tuple[bytes, bytes | None]], *, compression: int = batches.CompressionType.NONE,
                   producer: tuple[int, int] | None = None) -> tuple[int, Any]:
    """Append (key, value) records as one batch to an internal topic's partition, as the
    coordinator (Kafka's AppendOrigin.COORDINATOR: no sequence checks). `producer`: the (id, epoch)
    of a transactional batch (offsets committed in a transaction). Returns (error code, the log to
    flush before anyone hears of the write, or None)."""
    if not records:
        return ErrorCode.NONE, None
    partition = replicas.get(topic, partition_index)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    producer_id, producer_epoch = producer or (batches.NO_PRODUCER_ID, batches.NO_PRODUCER_EPOCH)
    try:
        batch = bytearray(batches.build_batch(
            [batches.Record(i, 0, key, value, []) for i, (key, value) in enumerate(records)],
            compression=compression, base_timestamp=wall_clock_ms(), producer_id=producer_id, producer_epoch=producer_epoch,
            # Kafka's CoordinatorRuntime builds every batch with base sequence 0, a producer or not.
            base_sequence=0, is_transactional=producer is not None))
        info = partition.append(batch, origin=AppendOrigin.COORDINATOR)
    except StorageError as e:
        log.warning("Appending to %s failed: %s", partition.name, e)
        return e.error_code, None
    except CodecError as e:
        log.warning("Cannot write to %s: %s", partition.name, e)
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    return ErrorCode.NONE, partition.log if info.flush_needed else None


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


def replay_topic(metadata: MetadataCache, replicas: ReplicaManager, topic_name: str,
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
