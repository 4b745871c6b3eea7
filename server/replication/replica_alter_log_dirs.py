"""Moving replicas between this broker's log directories (Kafka's ReplicaAlterLogDirsManager and
ReplicaAlterLogDirsThread): AlterReplicaLogDirs created a partition's future log in the
destination directory; its mover copies the current log into it while produce goes on, then
the future log takes the current one's place.

Each move is a task in the replica manager's nursery (the broker's), under its own cancel scope:
a new destination, the partition leaving this broker, or shutdown cancels it. The bulk of the
copy runs in worker threads (storage/future_log.py's `catch_up`, a chunk of
replica.fetch.max.bytes at a time, as Kafka's thread fetches from the local replica, a few
chunks a turn). Once a
chunk found the future log caught up, it is flushed (a worker thread), then the event loop copies
what was appended meanwhile and swaps the logs without awaiting in between, so no append falls
between the last copy and the swap: every acknowledged record is in the new log, and a read
either sees the old log (kept open until file.delete.delay.ms has passed) or the new one whole.
Kafka holds the partition's leaderIsrUpdateLock for the same reason.

Throttling (replica.alter.log.dirs.io.max.bytes.per.second, a dynamic broker config): the moves share
one quota (coordinator/replication_quota.py, Kafka's ReplicationQuotaManager for
ALTER_LOG_DIRS_REPLICATION). While it is bounded a thread's turn is one chunk: before each, a move
whose quota is exceeded waits replica.fetch.backoff.ms and asks again (Kafka's LocalLeaderEndPoint
builds no fetch and its thread backs off as long); the bytes of each chunk are recorded once
copied; and the copy before the swap is at most one chunk, as Kafka's last fetch. Unbounded
(Kafka's default, Long.MAX_VALUE), the copy goes as above, its bytes recorded all the same.

Errors: the future log's directory failing ends the move and forgets the future log (Kafka's
removeFutureLocalReplica without deleting it); the current log's failing stops the move (a
restart resumes it); a batch torn by a concurrent truncation of the current log is read again
after replica.fetch.backoff.ms.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ...coordinator.quota_manager import Window
from ...coordinator.replication_quota import UNBOUNDED, ReplicationQuotaManager
from ...storage.errors import KafkaStorageException, OffsetOutOfRangeException, StorageError
from ...storage.future_log import catch_up, caught_up
from ..clock import loop_ms

if TYPE_CHECKING:
    from ...storage.log import Log
    from ...storage.log_manager import LogManager
    from ..config.kafka_config import KafkaConfig
    from .replica_manager import Partition

log = logging.getLogger("samsa.replica")

TopicPartition = tuple[str, int]
# What the event loop copies at most before the swap; past that the copy goes back to a thread.
FINAL_COPY_MAX_BYTES = 4 * 1024 * 1024
CHUNKS_PER_TURN = 16
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


def _copy_chunks(current: Log, future: Log, chunk: int, chunks: int) -> tuple[bool, int]:
    """A worker thread's turn: up to `chunks` chunks (a turn ends soon enough for a cancellation
    to be felt); whether the future log reached the current log's end, and the bytes copied."""
    copied = 0
    for _ in range(chunks):
        size = catch_up(current, future, chunk)
        if size == 0:
            return True, copied
        copied += size
    return False, copied


@dataclass
class _Move:
    partition: Partition
    future: Log
    cancel_scope: trio.CancelScope


class ReplicaAlterLogDirsManager:
    def __init__(self, logs: LogManager, config: KafkaConfig,
                 disk_limiter: trio.CapacityLimiter | None = None, clock_ms: Callable[[], int] = loop_ms) -> None:
        self._logs = logs
        self._config = config
        self._disk_limiter = disk_limiter
        self._clock_ms = clock_ms
        self.quota = ReplicationQuotaManager(Window(
            config.get_int("alter.log.dirs.replication.quota.window.num"),
            config.get_int("alter.log.dirs.replication.quota.window.size.seconds") * 1000))
        self.throttled = 0  # the times a move waited for the quota (tests see the throttle act)
        self._moves: dict[TopicPartition, _Move] = {}
        self.nursery: trio.Nursery | None = None  # the replica manager's, once it runs
        self.completed = 0  # moves done since startup (tests wait on it)
        self._changed = trio.Event()

    def is_moving(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._moves

    def start(self, partition: Partition) -> None:
        """Copy the partition's current log into its future log (which must exist), then swap
        them. A move under way for it goes on."""
        tp = (partition.topic.name, partition.index)
        future = self._logs.get_future_log(*tp)
        if future is None or tp in self._moves or self.nursery is None:
            return
        move = _Move(partition, future, trio.CancelScope())
        self._moves[tp] = move
        if self._logs.cleaner is not None:
            self._logs.cleaner.abort_and_pause(tp)
        self.nursery.start_soon(self._run, tp, move)

    def stop(self, topic: str, partition: int) -> None:
        """Cancel the partition's move (its future log stays: the caller deletes it or not)."""
        move = self._moves.pop((topic, partition), None)
        if move is not None:
            move.cancel_scope.cancel()
            self._ended((topic, partition))

    async def wait_changed(self) -> None:
        """Until a move ends (tests)."""
        await self._changed.wait()

    def _ended(self, tp: TopicPartition) -> None:
        if self._logs.cleaner is not None:
            self._logs.cleaner.resume(tp)
        self._changed.set()
        self._changed = trio.Event()

    async def _run(self, tp: TopicPartition, move: _Move) -> None:
        with move.cancel_scope:
            try:
                await self._copy(tp, move)
            except StorageError as e:
                self._failed(tp, move, e)
            except Exception:  # a bug must not take the broker down: Kafka marks the partition failed
                log.exception("[ReplicaAlterLogDirs] moving %s-%d failed", *tp)
            finally:
                if self._moves.get(tp) is move:
                    del self._moves[tp]
                    self._ended(tp)

    def _current(self, tp: TopicPartition, move: _Move) -> bool:
        """The move is still this one's: not cancelled, its future log not replaced or deleted."""
        return self._moves.get(tp) is move and self._logs.get_future_log(*tp) is move.future

    async def _copy(self, tp: TopicPartition, move: _Move) -> None:
        partition, future = move.partition, move.future
        chunk = self._config.get_int("replica.fetch.max.bytes")
        log.info("[ReplicaAlterLogDirs] moving %s-%d to %s from offset %d", *tp, future.dir.parent,
                 future.log_end_offset)
        while True:
            current = partition.log
            await self._within_quota()
            chunks = CHUNKS_PER_TURN if self._bound() == UNBOUNDED else 1
            try:
                reached, copied = await trio.to_thread.run_sync(_copy_chunks, current, future, chunk, chunks,
                                                                limiter=self._disk_limiter)
            except OffsetOutOfRangeException:
                continue  # retention passed the future log's end meanwhile: it starts over there
            except KafkaStorageException:
                raise
            except StorageError as e:  # a batch torn by a truncation of the current log meanwhile
                log.info("[ReplicaAlterLogDirs] copying %s-%d: %s; trying again", *tp, e)
                await trio.sleep(self._config.get_int("replica.fetch.backoff.ms") / 1000)
                continue
            self.quota.record(copied, self._clock_ms())
            if not self._current(tp, move):
                return
            if not reached:
                continue  # more to copy
            # Caught up as of the last read: made durable off the event loop, then the rest and the swap.
            await trio.to_thread.run_sync(future.flush, limiter=self._disk_limiter)
            await self._within_quota()
            if not self._current(tp, move):
                return
            if self._finish(tp, move):
                return

    def _bound(self) -> int:
        return self._config.get_int(THROTTLE)

    async def _within_quota(self) -> None:
        """Until the moves' quota allows another chunk."""
        while self.quota.is_quota_exceeded(self._bound(), self._clock_ms()):
            self.throttled += 1
            await trio.sleep(self._config.get_int("replica.fetch.backoff.ms") / 1000)

    def _finish(self, tp: TopicPartition, move: _Move) -> bool:
        """On the event loop, no await: copy what was appended since, and if that was little
        enough, replace the current log with the future one. True when done."""
        partition, future = move.partition, move.future
        current = partition.log
        chunk = self._config.get_int("replica.fetch.max.bytes")
        budget = FINAL_COPY_MAX_BYTES if self._bound() == UNBOUNDED else chunk
        while not caught_up(current, future) and budget > 0:
            try:
                copied = catch_up(current, future, min(budget, chunk))
            except KafkaStorageException:
                raise
            except StorageError:
                return False  # torn or out of range: the threaded loop sorts it out
            self.quota.record(copied, self._clock_ms())
            if copied == 0 and not caught_up(current, future):
                return False
            budget -= copied
        if not caught_up(current, future):
            return False  # produce outran this turn: another round in a thread
        replaced = self._logs.replace_current_with_future_log(*tp)
        partition.replace_log(replaced)
        del self._moves[tp]
        self.completed += 1
        self._ended(tp)
        log.info("[ReplicaAlterLogDirs] %s-%d moved to %s", *tp, replaced.dir.parent)
        if self.nursery is not None:
            self.nursery.start_soon(trio.to_thread.run_sync, self._logs.checkpoint)  # the source dir forgets it
        return True

    def _failed(self, tp: TopicPartition, move: _Move, error: StorageError) -> None:
        if move.future.is_offline:
            log.error("[ReplicaAlterLogDirs] the future log of %s-%d is offline, its move ends: %s", *tp, error)
            if self._logs.get_future_log(*tp) is move.future:
                self._logs.delete_future_log(*tp)
        else:
            log.error("[ReplicaAlterLogDirs] moving %s-%d stopped: %s", *tp, error)
