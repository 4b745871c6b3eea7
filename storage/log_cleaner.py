"""Log compaction for the logs whose cleanup.policy has `compact` (Kafka's LogCleaner and
LogCleanerManager).

Each call of `clean_filthiest_log` is one turn of a Kafka cleaner thread: among the compacted
logs not being cleaned, pick the one with the largest dirty ratio (bytes past its cleaner
checkpoint over its total bytes, up to the first uncleanable offset) above its
min.cleanable.dirty.ratio, or any with dirty bytes older than max.compaction.lag.ms; clean it
(cleaner.Cleaner); record where the pass ended in `cleaner-offset-checkpoint` in its log
directory, in Kafka's offset checkpoint format. The first uncleanable offset is the lowest of the
active segment's base offset, the last stable offset (nothing of an undecided transaction is
cleaned) and the first segment holding a record younger than min.compaction.lag.ms, rounded down to the
start of its segment. The server runs log.cleaner.threads such loops in worker threads, each
waiting log.cleaner.backoff.ms when it finds nothing to clean.

Retention (LogManager.cleanup) skips a log while it is being cleaned and the cleaner skips one
while retention works on it (Kafka's pause). Deleting a log aborts its cleaning and forgets its
checkpoint; `shutdown` aborts every pass and waits for them to stop. `reconfigure` takes new
log.cleaner.* values (dynamic broker configs) from the next pass on.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checkpoints import OffsetCheckpointFile
from .cleaner import OFFSET_MAP_ENTRY_BYTES, Cleaner, LogCleaningAbortedException, Throttler, segments_between
from .errors import KafkaStorageException, caused_by_io_error
from .log import Log
from .log_dir_failure_channel import LogDirFailureChannel

__all__ = ["CleanerConfig", "LogCleaner", "LogToClean", "CLEANER_CHECKPOINT_FILE"]

logger = logging.getLogger("samsa.log_cleaner")

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* configs, Kafka's defaults."""
    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134217728
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    io_max_bytes_per_second: float = 1.7976931348623157e308
    backoff_ms: int = 15000

    @classmethod
    def from_broker_config(cls, get: Callable[[str], Any]) -> CleanerConfig:
        """From a getter of broker configs by Kafka's names."""
        return cls(enable=get("log.cleaner.enable"), threads=get("log.cleaner.threads"),
                   dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size"),
                   dedupe_buffer_load_factor=get("log.cleaner.io.buffer.load.factor"),
                   io_buffer_size=get("log.cleaner.io.buffer.size"),
                   io_max_bytes_per_second=get("log.cleaner.io.max.bytes.per.second"),
                   backoff_ms=get("log.cleaner.backoff.ms"))

    @property
    def offset_map_capacity(self) -> int:
        """Keys one cleaner thread maps per pass: its share of the dedupe buffer, filled up to the
        load factor."""
        per_thread = self.dedupe_buffer_size / max(self.threads, 1)
        return int(per_thread / OFFSET_MAP_ENTRY_BYTES * self.dedupe_buffer_load_factor)

    @property
    def io_buffer_per_thread(self) -> int:
        """Kafka splits a thread's share between a read and a write buffer."""
        return self.io_buffer_size // max(self.threads, 1) // 2


@dataclass(frozen=True)
class LogToClean:
    """A compacted log's dirty section and what it weighs (Kafka's LogToClean)."""
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int  # the base offset of the first segment not to clean
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = field(default=False)  # dirty records older than max.compaction.lag.ms

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic, self.log.partition

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @classmethod
    def of(cls, log: Log, last_clean_offset: int | None, now_ms: int) -> tuple[LogToClean, bool]:
        """The log's cleanable section; True when the checkpointed offset was invalid and reset."""
        first_dirty, uncleanable, reset = cleanable_offsets(log, last_clean_offset, now_ms)
        segments = log.segments
        non_active = segments_between(segments, uncleanable, segments[-1].base_offset)
        first_uncleanable = (non_active[0] if non_active else segments[-1]).base_offset
        cleanable = segments_between(segments, min(first_dirty, first_uncleanable), first_uncleanable)
        clean = segments_between(segments, -1, first_dirty)
        return cls(log, first_dirty, first_uncleanable, sum(s.size for s in clean), sum(s.size for s in cleanable),
                   max_compaction_delay(log, first_dirty, now_ms) > 0), reset


def cleanable_offsets(log: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint was reset): Kafka's
    LogCleanerManager.cleanableOffsets."""
    log_start = log.log_start_offset
    checkpoint = log_start if last_clean_offset is None else last_clean_offset
    if checkpoint < log_start or checkpoint > log.log_end_offset:
        # Below the start (retention or DeleteRecords went past it) or beyond the end (the log
        # was truncated): everything from the start is dirty.
        if checkpoint > log.log_end_offset or not log.config.delete:
            logger.warning("Resetting first dirty offset of %s to log start offset %d since the checkpointed "
                           "offset %d is invalid.", log.name, log_start, checkpoint)
        first_dirty, reset = log_start, True
    else:
        first_dirty, reset = checkpoint, False
    segments = log.segments
    # No cleaning past the last stable offset, into the active segment, or into a segment with
    # records younger than min.compaction.lag.ms.
    candidates = [log.last_stable_offset, segments[-1].base_offset]
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in segments_between(segments, first_dirty, segments[-1].base_offset):
            if segment.largest_timestamp() > now_ms - min_lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates)), reset


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty record is (0: not yet)."""
    segments = log.segments
    first_timestamps = [t for s in segments_between(segments, first_dirty_offset, segments[-1].base_offset)
                        if (t := s.first_batch_timestamp()) is not None and t > 0]
    earliest = min(first_timestamps, default=None)
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


def _cleaner_for(config: CleanerConfig) -> Cleaner:
    return Cleaner(offset_map_capacity=config.offset_map_capacity, io_buffer_size=config.io_buffer_per_thread,
                   throttler=Throttler(config.io_max_bytes_per_second))


class LogCleaner:
    def __init__(self, config: CleanerConfig, log_dirs: Iterable[Path], logs: Callable[[], list[Log]],
                 clock_ms: Callable[[], int],
                 log_locations: Callable[[], set[tuple[Path, str, int]]] | None = None,
                 failure_channel: LogDirFailureChannel | None = None) -> None:
        """`logs`: the logs to clean (those with `compact` at least); `log_locations`: (log
        directory, topic, partition) of every log, whose checkpoints are kept (default: `logs`').
        `failure_channel`: where an I/O error of a pass or of a checkpoint write takes its log
        directory offline (Kafka's LogCleaner and LogCleanerManager report to it)."""
        self._failure_channel = failure_channel
        self.log_dirs = list(log_dirs)
        self._logs = logs
        self._log_locations = log_locations or (lambda: {(each.dir.parent, each.topic, each.partition)
                                                         for each in logs()})
        self._clock_ms = clock_ms
        self._setup = (config, _cleaner_for(config))  # replaced whole: a reader never sees half of it
        # `_lock` guards the state below and is never held over file I/O, so the event loop may
        # take it; `_checkpoint_write_lock` orders the checkpoint writes (taken first).
        self._lock = threading.Condition()
        self._checkpoint_write_lock = threading.Lock()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        self._unwritten: set[Path] = set()  # directories whose checkpoint file lags behind
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._paused: Counter[TopicPartition] = Counter()
        self._uncleanable: set[TopicPartition] = set()
        self._stopping = False

    @property
    def config(self) -> CleanerConfig:
        return self._setup[0]

    def reconfigure(self, config: CleanerConfig) -> None:
        """New configs for the passes that start from now on."""
        if config != self.config:
            self._setup = (config, _cleaner_for(config))

    # -- checkpoints
    def load_checkpoints(self) -> None:
        """Read every log directory's cleaner-offset-checkpoint (a damaged one reads as empty)."""
        loaded = {}
        for directory in self.log_dirs:
            path = directory / CLEANER_CHECKPOINT_FILE
            try:
                loaded[directory] = OffsetCheckpointFile(path).read()
            except (ValueError, OSError) as e:
                logger.warning("Error occurred while reading %s, resetting it: %s", path, e)
                loaded[directory] = {}
        with self._lock:
            self._checkpoints = loaded

    def checkpoints(self) -> dict[TopicPartition, int]:
        """Where the dirty section of each cleaned log starts."""
        with self._lock:
            return {tp: offset for offsets in self._checkpoints.values() for tp, offset in offsets.items()}

    def write_checkpoints(self) -> None:
        """Write the checkpoint files that changed since last written (a worker thread)."""
        with self._checkpoint_write_lock:
            if not self._unwritten:
                return
            present = self._log_locations()
            with self._lock:
                changed = {directory: {tp: offset for tp, offset in self._checkpoints.get(directory, {}).items()
                                       if (directory, *tp) in present}
                           for directory in self._unwritten}
                self._unwritten.clear()
            for directory, offsets in changed.items():
                if self._failure_channel is not None and self._failure_channel.has_offline_log_dir(directory):
                    continue  # LogCleanerManager.handleLogDirFailure: an offline dir keeps no checkpoint
                try:
                    OffsetCheckpointFile(directory / CLEANER_CHECKPOINT_FILE).write(offsets)
                except KafkaStorageException as e:
                    logger.error("Failed to write %s in dir %s: %s", CLEANER_CHECKPOINT_FILE, directory, e)
                    with self._lock:
                        self._unwritten.add(directory)
                    if caused_by_io_error(e):  # Kafka's CheckpointFileWithFailureHandler
                        self._report_io_failure(directory, f"Error while writing to checkpoint file "
                                                           f"{directory / CLEANER_CHECKPOINT_FILE}", e)

    def _set_checkpoint(self, each: Log, offset: int) -> None:
        directory = each.dir.parent
        self._checkpoints.setdefault(directory, {})[(each.topic, each.partition)] = offset
        self._unwritten.add(directory)

    # -- one cleaner thread's turn (a worker thread)
    def clean_filthiest_log(self, now_ms: int | None = None) -> bool:
        """Clean the dirtiest compacted log, if one is due; False when none was (the caller then
        waits log.cleaner.backoff.ms) or its cleaning failed."""
        now = self._clock_ms() if now_ms is None else now_ms
        cleaner = self._setup[1]
        cleanable = self._grab_filthiest_log(now)
        self.write_checkpoints()  # checkpoints found invalid and reset
        if cleanable is None:
            return False
        tp = cleanable.topic_partition
        end_offset = cleanable.first_dirty_offset
        try:
            end_offset, stats = cleaner.clean(cleanable.log, cleanable.first_dirty_offset,
                                              cleanable.first_uncleanable_offset, now, lambda: self._check_done(tp))
            logger.info("Cleaned log %s (dirty section = [%d, %d]): %d bytes of log read, %d written; %d of %d "
                        "records kept%s", cleanable.log.name, cleanable.first_dirty_offset, end_offset,
                        stats.bytes_read, stats.bytes_written, stats.messages_written, stats.messages_read,
                        f"; {stats.invalid_messages} records without key dropped" if stats.invalid_messages else "")
        except LogCleaningAbortedException:
            pass
        except (OSError, KafkaStorageException) as e:
            if caused_by_io_error(e):
                # Kafka's cleanLog: an IOException (here also a segment's write of the cleaned
                # segment, raised as KafkaStorageException) takes the log's directory offline; a
                # log already offline was reported before (the channel reports a dir once).
                log_dir = cleanable.log.dir.parent
                self._report_io_failure(log_dir, f"Failed to clean up log for {tp[0]}-{tp[1]} in dir {log_dir} due "
                                                 f"to IOException", e)
            else:
                logger.warning("Cleaning of %s stopped: %s", cleanable.log.name, e)
        except Exception:
            logger.exception("Unexpected exception thrown when cleaning log %s. Marking its partition (%s-%d) as "
                             "uncleanable", cleanable.log.name, *tp)
            with self._lock:
                self._uncleanable.add(tp)
            return False
        finally:
            self._done_cleaning(cleanable, end_offset)
            self.write_checkpoints()
        return True

    def _report_io_failure(self, log_dir: Path, message: str, error: BaseException) -> None:
        if self._failure_channel is not None:
            self._failure_channel.maybe_add_offline_log_dir(log_dir, message, error)
        else:
            logger.error("%s", message, exc_info=error)

    def _grab_filthiest_log(self, now_ms: int) -> LogToClean | None:
        logs = self._logs()
        with self._lock:
            if self._stopping:
                return None
            dirty = []
            for each in logs:
                tp = (each.topic, each.partition)
                if (not each.config.compact or tp in self._in_progress or self._paused[tp]
                        or tp in self._uncleanable or each.is_offline):
                    continue
                try:
                    cleanable, reset = LogToClean.of(each, self._checkpoints.get(each.dir.parent, {}).get(tp), now_ms)
                except Exception:
                    logger.exception("Failed to calculate log cleaning stats for partition %s-%d; marking it "
                                     "uncleanable", *tp)
                    self._uncleanable.add(tp)
                    continue
                if reset:
                    self._set_checkpoint(each, cleanable.first_dirty_offset)
                if cleanable.total_bytes > 0:
                    dirty.append(cleanable)
            due = [c for c in dirty if c.needs_compaction_now and c.cleanable_bytes > 0
                   or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not due:
                return None
            filthiest = max(due, key=lambda c: c.cleanable_ratio)
            self._in_progress.add(filthiest.topic_partition)
            return filthiest

    def _check_done(self, tp: TopicPartition) -> None:
        with self._lock:
            if self._stopping or tp in self._aborted:
                raise LogCleaningAbortedException(f"cleaning of {tp[0]}-{tp[1]} aborted")

    def _done_cleaning(self, cleanable: LogToClean, end_offset: int) -> None:
        tp = cleanable.topic_partition
        with self._lock:
            self._in_progress.discard(tp)
            if tp in self._aborted:
                self._aborted.discard(tp)
            else:
                self._set_checkpoint(cleanable.log, end_offset)
            self._lock.notify_all()

    # -- coordination with retention, deletion and shutdown
    def pause_cleaning(self, logs: Iterable[Log]) -> list[Log]:
        """The logs not being cleaned, now kept from the cleaner until `resume_cleaning`."""
        with self._lock:
            free = [each for each in logs if (each.topic, each.partition) not in self._in_progress]
            for each in free:
                self._paused[(each.topic, each.partition)] += 1
            return free

    def resume_cleaning(self, logs: Iterable[Log]) -> None:
        with self._lock:
            for each in logs:
                tp = (each.topic, each.partition)
                self._paused[tp] -= 1
                if self._paused[tp] <= 0:
                    del self._paused[tp]

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Keep the cleaner from the partition until `resume` (its replica moves to another log
        directory: Kafka's abortAndPauseCleaning); a pass under way stops at its next check."""
        with self._lock:
            if tp in self._in_progress:
                self._aborted.add(tp)
            self._paused[tp] += 1

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            if self._paused[tp] <= 1:
                del self._paused[tp]
            else:
                self._paused[tp] -= 1

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path, dest: Path) -> None:
        """The partition's log moved from `source` to `dest`: its checkpoint moves with it."""
        with self._lock:
            offset = self._checkpoints.get(source, {}).pop(tp, None)
            if offset is not None:
                self._checkpoints.setdefault(dest, {})[tp] = offset
                self._unwritten |= {source, dest}

    def forget_log(self, topic: str, partition: int, directory: Path) -> None:
        """The log is being deleted: abort its cleaning without waiting for it, and drop its
        checkpoint (the file follows with the next write) and its uncleanable mark."""
        tp = (topic, partition)
        with self._lock:
            if tp in self._in_progress:
                self._aborted.add(tp)
            self._uncleanable.discard(tp)
            if self._checkpoints.get(directory, {}).pop(tp, None) is not None:
                self._unwritten.add(directory)

    def shutdown(self) -> None:
        """Abort every pass and wait until they have stopped (each checks between batches)."""
        with self._lock:
            self._stopping = True
            while self._in_progress:
                self._lock.wait()
        self.write_checkpoints()
