"""One partition's log (Kafka's UnifiedLog and LocalLog, without tiered storage): an ordered run
of segments, the last one active; the log start offset, log end offset, high watermark and
recovery point; appends, reads, ListOffsets lookups, retention, DeleteRecords, truncation, and
loading from disk with crash recovery (Kafka's LogLoader).

Idempotent producers: an append is checked against the partition's producer state before it is
written (a retried batch is answered with its original offsets, a sequence gap or an old epoch is
refused). The state is snapshotted when a segment rolls and when the log closes, and rebuilt on
load from the latest trusted snapshot plus the batch headers after it.

Transactions: the producer state tracks open transactions, which hold the last stable offset back;
an ABORT marker adds the transaction to its segment's `.txnindex`, which read_committed reads
consult (`read(..., include_aborted_txns=True)`). Recovering a segment rebuilds its transaction
index from the producer state as of the segment's start, as Kafka's LogLoader does.

Threads: the event loop appends and reads; worker threads flush (fsync), run retention and unlink
deleted files. A lock guards every change of state; the segment list is copy-on-write, so a read
or a flush works on a consistent snapshot without holding the lock. A segment removed by
retention or truncation is renamed to `.deleted` at once but its file stays open until
file.delete.delay.ms passes, so a fetch already holding one of its file ranges can still send it.
The log cleaner swaps cleaned segments in the same way (`replace_segments`); a second lock keeps
retention, truncation and renaming the directory out of a swap in progress, without holding up
appends and reads while the swap fsyncs the directory.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from .producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS, SENTINEL_GUARD, BatchMetadata, CompletedTxn, ProducerAppendInfo,
    ProducerStateEntry, ProducerStateManager,
)
from ..wire.exceptions import CodecError
from ..wire.records import NO_PRODUCER_ID, NO_TIMESTAMP, BatchHeader, ControlRecord, decode_batch, parse_control_record
from .durability import fsync_dir, fsync_path
from .errors import (
    CorruptRecordException, CorruptSnapshotException, InvalidProducerEpochException, InvalidRecordException,
    KafkaStorageException, OffsetOutOfRangeException, caused_by_io_error, PolicyViolationException, RecordBatchTooLargeException,
)
from .file_records import FileRecords
from .log_config import LogConfig
from .log_dir_failure_channel import LogDirFailureChannel
from .log_segment import (
    CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX, FetchDataInfo, LogSegment, filename_prefix,
)
from .transaction_index import TXN_INDEX_FILE_SUFFIX, AbortedTxn
from .leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochFileCache
from .log_validator import (
    AppendOrigin, ProducedRecords, analyze_batches, convert_to_topic_format,
    validate_and_assign_offsets,
)
from .producer_snapshots import ProducerSnapshotFiles

__all__ = [
    "Log", "LogAppendInfo", "FetchDataInfo", "OffsetAndTimestamp", "AppendOrigin",
    "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "EARLIEST_LOCAL_TIMESTAMP", "LATEST_TIERED_TIMESTAMP",
    "parse_topic_partition_name", "delete_dir_name", "future_dir_name", "segment_file_sizes",
]

log = logging.getLogger("samsa.storage")

# ListOffsets' special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
_MARKED_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)(-delete|-future|-stray)$")
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
_SWAP_LOG_FILE = re.compile(r"^(\d{20})\.log\.swap$")
_LEFTOVER_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)


def parse_topic_partition_name(name: str) -> tuple[str, int]:
    """`<topic>-<partition>`, also behind a `.<id>-delete` / `-future` / `-stray` mark (Kafka's
    UnifiedLog.parseTopicPartitionName); ValueError for anything else."""
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        if not _MARKED_DIR.match(name):
            raise ValueError(f"{name!r} is not in the form of topic-partition or topic-partition.uniqueId-delete")
        name = name[:name.rindex(".")]
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not in the form of topic-partition or topic-partition.uniqueId-delete")
    return topic, int(partition)


def segment_file_sizes(directory: Path) -> dict[int, int]:
    """The size of each segment's .log file in a log's directory, by base offset, read without
    loading the log (a stat per segment; leftovers of an unfinished clean or deletion not counted)."""
    sizes = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            match = _SEGMENT_FILE.match(entry.name)
            if match and match.group(2) == LOG_FILE_SUFFIX:
                sizes[int(match.group(1))] = entry.stat().st_size
    return sizes


def delete_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid hex>-delete`, the topic cut so the name fits in 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[:255 - len(suffix)] + suffix


def future_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid hex>-future`: where a replica moving to another log directory
    is copied (Kafka's UnifiedLog.logFutureDirName; not cut: AlterReplicaLogDirs refuses a topic
    whose future name passes 255 bytes)."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def is_future_dir(directory: Path) -> bool:
    return directory.name.endswith(FUTURE_DIR_SUFFIX)


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    valid_bytes: int
    # The caller should run `log.flush()` in a worker thread: flush.messages was reached, or a
    # segment rolled (Kafka flushes a rolled segment right away so recovery stays short).
    flush_needed: bool


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class _Segments(NamedTuple):
    """The segment list, replaced whole on every change so readers need no lock."""
    base_offsets: tuple[int, ...]
    segments: tuple[LogSegment, ...]

    @classmethod
    def of(cls, segments: Iterable[LogSegment]) -> _Segments:
        ordered = tuple(sorted(segments, key=lambda s: s.base_offset))
        return cls(tuple(s.base_offset for s in ordered), ordered)

    def floor_index(self, offset: int) -> int:
        return bisect_right(self.base_offsets, offset) - 1


class Log:
    def __init__(self, directory: Path, config: LogConfig, clock_ms: Callable[[], int], segments: Iterable[LogSegment],
                 *, log_start_offset: int, recovery_point: int, next_offset: int, new_directory: bool = False,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 names: Sequence[str] | None = None) -> None:
        """`names`: the files of `directory` as listed when loading (None: list them)."""
        self.dir = directory
        self.topic, self.partition = parse_topic_partition_name(directory.name)
        # "topic-partition", in every append's checks and messages: built once (a log keeps its
        # topic and partition through renames).
        self.name = f"{self.topic}-{self.partition}"
        self.config = config
        self._clock_ms = clock_ms
        self._segments = _Segments.of(segments)
        self._lock = threading.RLock()
        # Taken before `_lock` by whatever renames or removes segment files: retention, truncation,
        # a cleaned segment's swap, closing and renaming the directory.
        self._segment_files_lock = threading.RLock()
        self._next_offset = next_offset
        self._log_start_offset = max(log_start_offset, self._segments.base_offsets[0])
        self._recovery_point = min(max(recovery_point, self._log_start_offset), next_offset)
        self._high_watermark = self._log_start_offset
        self._last_flush_ms = clock_ms()
        self._rolled_since_flush = False
        # A new log's directory entry becomes durable with its first flush, off the event loop.
        self._parent_dir_synced = not new_directory
        self._pending_deletions: list[tuple[int, LogSegment]] = []
        self._closed = False
        self._offline = False
        # Where an I/O failure is reported (the log manager's): its whole directory goes offline.
        self.log_dir_failure_channel: LogDirFailureChannel | None = None
        # Told (log, when) each time segments are renamed `.deleted`: the log manager then calls
        # delete_pending_segments once file.delete.delay.ms has passed (Kafka's delete-file task).
        self.on_segments_deletion_scheduled: Callable[[Log, int], None] | None = None
        if names is None:
            names = os.listdir(directory)
        self.leader_epoch_cache = LeaderEpochFileCache(directory,
                                                       file_exists=LEADER_EPOCH_CHECKPOINT_FILE in names)
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._producer_state = ProducerStateManager(self.name, producer_id_expiration_ms)
        self._producer_snapshots = ProducerSnapshotFiles(directory, names)
        self._unflushed_snapshots: list[Path] = []  # written at a roll, fsynced by the next flush

    def __repr__(self) -> str:
        return f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset})"

    # -- loading (Kafka's LogLoader)
    @classmethod
    def open(cls, directory: Path | str, config: LogConfig, *, log_start_offset: int = 0, recovery_point: int = 0,
             clock_ms: Callable[[], int], had_clean_shutdown: bool = True,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> Log:
        """Load the partition in `directory` (created if missing). Without a clean shutdown every
        segment from the one holding `recovery_point` on is recovered: its batches are
        re-validated, a torn or corrupt tail is cut (with every later segment) and its indexes are
        rebuilt. A segment missing an index file is recovered too. Then the producer state is
        loaded from the latest snapshot it can trust and the batch headers after it."""
        directory = Path(directory)
        now = clock_ms()
        try:
            try:
                names = os.listdir(directory)
                new_directory = False
            except FileNotFoundError:
                directory.mkdir(parents=True, exist_ok=True)
                names = os.listdir(directory)
                new_directory = True
            names = _complete_interrupted_swaps(directory, names)
            recovered: set[int] = set()
            segments = _load_segments(directory, names, config, now, recovered)
            if not had_clean_shutdown:
                _recover_unflushed(segments, recovery_point, recovered, directory.name)
            if not segments:
                segments = [LogSegment.open(directory, log_start_offset, config, now, file_already_exists=False)]
            next_offset = segments[-1].read_next_offset()
            if log_start_offset > next_offset:
                # Everything below the start offset is gone: start over empty at it.
                for segment in segments:
                    segment.delete()
                segments = [LogSegment.open(directory, log_start_offset, config, now, file_already_exists=False)]
                next_offset = log_start_offset
            loaded = cls(directory, config, clock_ms, segments, log_start_offset=log_start_offset,
                         recovery_point=next_offset if had_clean_shutdown else recovery_point,
                         next_offset=next_offset, new_directory=new_directory,
                         producer_id_expiration_ms=producer_id_expiration_ms, names=names)
            loaded._load_producer_state(had_clean_shutdown, recovered)
        except OSError as e:
            raise KafkaStorageException(f"Error while loading log {directory}: {e}") from e
        return loaded

    # -- offsets
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by the replica manager; kept within [log start offset, log end offset]."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._next_offset)
            self._producer_state.on_high_watermark_updated(self._high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        """Where the earliest undecided (or not yet replicated) transaction starts, never below
        the log start offset; None when every transaction is decided."""
        first = self._producer_state.first_unstable_offset
        return None if first is None else max(first, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed readers may see up to (Kafka's lastStableOffset): the first
        unstable offset, capped by the high watermark."""
        first = self.first_unstable_offset
        return first if first is not None and first < self._high_watermark else self._high_watermark

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.segments[-1]

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self._segments.segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (the largest epoch <= leader_epoch, where its records end), or
        (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self._next_offset)

    # -- appends
    def append_as_leader(self, records: bytearray | memoryview | ProducedRecords, *, leader_epoch: int = 0,
                         origin: AppendOrigin = AppendOrigin.CLIENT, transaction_version: int = 0,
                         verification_guard: int | None = None) -> LogAppendInfo:
        """Validate a v2 batch and append it, assigning offsets from the log end offset by
        rewriting it (a bytearray or writable memoryview) in place. A producer's retry of one of
        its last five batches writes nothing and returns the offsets the batch got then.

        `records` is either a batch as the broker writes it (coordinator records, transaction
        markers: v2, in the topic's format), or what a Produce request carried, parsed once
        (`parse_produced_records`): that is first converted to the topic's format (a legacy
        message set up-converted, a batch recompressed to compression.type), and its parsed
        header serves validation and producer state. `transaction_version`: a transaction
        marker's (WriteTxnMarkers v2, KIP-1228): from 2 its epoch must be above the producer's.
        `verification_guard`: what `maybe_start_transaction_verification` returned for this batch,
        when the broker requires transactional batches to be verified (Kafka's
        transaction.partition.verification.enable); a batch whose verification no longer stands
        (a marker came since) is refused with INVALID_TXN_STATE."""
        first_header = None
        if isinstance(records, ProducedRecords):
            records, first_header = convert_to_topic_format(records, self.config)
        batches = analyze_batches(records, self.config, origin, self.name, first_header)
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self._log_start_offset, 0, 0, False)
        with self._lock, self._io("appending"):
            now = self._clock_ms()
            result = validate_and_assign_offsets(
                records, batches, first_offset=self._next_offset, config=self.config, now_ms=now,
                leader_epoch=leader_epoch, origin=origin, topic_partition=self.name)
            if result.valid_bytes > self.config.segment_bytes:
                raise RecordBatchTooLargeException(
                    f"Message batch size is {result.valid_bytes} bytes in append to partition {self.name}, which "
                    f"exceeds the maximum configured segment size of {self.config.segment_bytes}.")
            position, header = result.batches[0]
            producer_append = self._analyze_and_validate_producer_state(header, origin, records, position,
                                                                        transaction_version, verification_guard)
            if producer_append is not None and producer_append.duplicate is not None:
                return self._duplicate_append_info(producer_append.duplicate)
            segment = self._segment_for(result.first_offset, result.last_offset, result.max_timestamp,
                                        result.valid_bytes, now)
            segment.append(result.last_offset, memoryview(records)[:result.valid_bytes], result.batches)
            self._next_offset = result.last_offset + 1
            if producer_append is not None:
                self._producer_state.update(producer_append)
                if producer_append.completed_txn is not None:
                    self._complete_txn(segment, producer_append.completed_txn)
            self._producer_state.update_map_end_offset(self._next_offset)
            self.leader_epoch_cache.assign(leader_epoch, result.first_offset)
            flush_needed = self._rolled_since_flush or self.unflushed_messages >= self.config.flush_messages
            return LogAppendInfo(
                first_offset=result.first_offset, last_offset=result.last_offset, max_timestamp=result.max_timestamp,
                offset_of_max_timestamp=result.offset_of_max_timestamp, log_append_time=result.log_append_time,
                log_start_offset=self._log_start_offset, record_count=result.record_count,
                valid_bytes=result.valid_bytes, flush_needed=flush_needed)

    def append_as_follower(self, records: bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the partition's leader as they are (Kafka's
        UnifiedLog.appendAsFollower): their offsets, leader epochs and timestamps are the leader's;
        only size, magic and CRC are checked. A partial batch at the end (a fetch cut at its byte
        limit) is left out. The batches must start at the log end offset."""
        batches = analyze_batches(records, self.config, AppendOrigin.REPLICATION, self.name)
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self._log_start_offset, 0, 0, False)
        first_offset = batches[0][1].base_offset
        max_timestamp, offset_of_max_timestamp, record_count, last_offset = NO_TIMESTAMP, -1, 0, first_offset - 1
        for _, header in batches:
            if header.base_offset <= last_offset:
                raise InvalidRecordException(
                    f"Out of order offsets in the records fetched for {self.name}: {header.base_offset} "
                    f"after {last_offset}")
            last_offset = header.base_offset + header.last_offset_delta
            record_count += header.records_count
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = header.max_timestamp, last_offset
        position, last_header = batches[-1]
        valid_bytes = position + last_header.size
        with self._lock, self._io("appending"):
            if first_offset != self._next_offset:
                raise InvalidRecordException(
                    f"Unexpected offset in append to {self.name}. First offset {first_offset} is not the log end "
                    f"offset {self._next_offset}")
            segment = self._segment_for(first_offset, last_offset, max_timestamp, valid_bytes, self._clock_ms())
            segment.append(last_offset, memoryview(records)[:valid_bytes], batches)
            epoch = self.leader_epoch_cache.latest_epoch
            for position, header in batches:
                self._next_offset = header.base_offset + header.last_offset_delta + 1
                if header.partition_leader_epoch != epoch and header.partition_leader_epoch >= 0:
                    epoch = header.partition_leader_epoch
                    self.leader_epoch_cache.assign(epoch, header.base_offset)
                if header.producer_id == NO_PRODUCER_ID:  # no producer: no state to keep
                    continue
                producer_append = self._analyze_and_validate_producer_state(
                    header, AppendOrigin.REPLICATION, records, position)
                if producer_append is not None:
                    self._producer_state.update(producer_append)
                    if producer_append.completed_txn is not None:
                        self._complete_txn(segment, producer_append.completed_txn)
            self._producer_state.update_map_end_offset(self._next_offset)
            flush_needed = self._rolled_since_flush or self.unflushed_messages >= self.config.flush_messages
            return LogAppendInfo(
                first_offset=first_offset, last_offset=last_offset, max_timestamp=max_timestamp,
                offset_of_max_timestamp=offset_of_max_timestamp, log_append_time=NO_TIMESTAMP,
                log_start_offset=self._log_start_offset, record_count=record_count, valid_bytes=valid_bytes,
                flush_needed=flush_needed)

    def _analyze_and_validate_producer_state(self, header: BatchHeader, origin: AppendOrigin, records=None,
                                             position: int = 0,
                                             transaction_version: int = 0,
                                             verification_guard: int | None = None) -> ProducerAppendInfo | None:
        """`records` and `position`: where the batch is, for a control batch's marker record."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        marker = (_end_txn_marker(memoryview(records)[position:position + header.size], self.name)
                  if header.is_control else None)
        return self._producer_state.prepare_update(header, origin, marker, transaction_version, verification_guard)

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             supports_epoch_bump: bool) -> int:
        """Before a transactional batch is sent to its coordinator to be verified (or added, with
        transaction version 2): the guard its append must bring back, SENTINEL_GUARD when its
        producer's transaction is already open here at its epoch (nothing to verify). Raises
        InvalidProducerEpochException for an epoch older than the producer's here (Kafka's
        UnifiedLog.maybeStartTransactionVerification)."""
        with self._lock:
            state = self._producer_state
            entry = state.last_entry(producer_id)
            if entry is not None and epoch < entry.producer_epoch:
                raise InvalidProducerEpochException(
                    f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch "
                    f"{entry.producer_epoch}")
            if state.has_ongoing_transaction(producer_id, epoch):
                return SENTINEL_GUARD
            return state.maybe_create_verification_state_entry(producer_id, sequence, epoch, supports_epoch_bump,
                                                               self._clock_ms()).guard

    def _complete_txn(self, segment: LogSegment, completed: CompletedTxn) -> None:
        """A marker closed a transaction: index it if aborted (with the last stable offset it
        leaves), then it is no longer open (Kafka's UnifiedLog.append)."""
        state = self._producer_state
        segment.update_txn_index(*completed, last_stable_offset=state.last_stable_offset(completed))
        state.complete_txn(completed)

    def _duplicate_append_info(self, duplicate: BatchMetadata) -> LogAppendInfo:
        # As Kafka: the batch's max timestamp goes back as the log append time, even under
        # CreateTime. Nothing was written.
        return LogAppendInfo(
            first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
            max_timestamp=duplicate.timestamp, offset_of_max_timestamp=duplicate.last_offset,
            log_append_time=duplicate.timestamp, log_start_offset=self._log_start_offset, record_count=0,
            valid_bytes=0, flush_needed=False)

    def _segment_for(self, first_offset: int, last_offset: int, max_timestamp: int, size: int, now: int) -> LogSegment:
        """The segment an append of `size` bytes (offsets first_offset to last_offset) goes to: the
        active one, or a new one rolled at first_offset."""
        segment = self.active_segment
        if segment.should_roll(max_segment_ms=self.config.max_segment_ms, max_segment_bytes=self.config.segment_bytes,
                               max_timestamp_in_messages=max_timestamp, max_offset_in_messages=last_offset,
                               messages_size=size, now_ms=now):
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset)."""
        with self._lock, self._io("rolling a segment"):
            new_offset = max(expected_next_offset or 0, self._next_offset)
            active = self.active_segment
            if new_offset == active.base_offset:
                if active.size == 0:
                    return active
                raise KafkaStorageException(
                    f"Trying to roll a new log segment for {self.name} with start offset {new_offset} while it "
                    f"already exists.")
            if new_offset < active.base_offset:
                raise KafkaStorageException(
                    f"Trying to roll a new log segment for {self.name} with start offset {new_offset} lower than "
                    f"start offset of the active segment {active.base_offset}")
            prefix = filename_prefix(new_offset)
            for suffix in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX):
                (self.dir / (prefix + suffix)).unlink(missing_ok=True)
            active.on_become_inactive()
            segment = LogSegment.open(self.dir, new_offset, self.config, self._clock_ms(), file_already_exists=False)
            self._segments = _Segments.of((*self._segments.segments, segment))
            # A snapshot at the new segment's base offset: recovering the segment then starts from
            # it. Written now, fsynced by the flush the roll calls for.
            self._producer_state.update_map_end_offset(new_offset)
            self._take_producer_snapshot(sync=False)
            self._rolled_since_flush = True
            return segment

    # -- producer state (Kafka's ProducerStateManager files and UnifiedLog.rebuildProducerState)
    def last_producer_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producer_state.last_entry(producer_id)

    def active_producers(self) -> list[ProducerStateEntry]:
        """Copies of the producers the partition tracks (DescribeProducers)."""
        with self._lock:
            return [entry.copy() for entry in self._producer_state.producers.values()]

    @property
    def producer_snapshot_offsets(self) -> list[int]:
        return self._producer_snapshots.offsets

    def _take_producer_snapshot(self, *, sync: bool) -> None:
        state = self._producer_state
        if not state.needs_snapshot:
            return
        path = self._producer_snapshots.write(state.map_end_offset, state.producers.values(), sync=sync)
        if not sync:
            self._unflushed_snapshots.append(path)
        state.snapshot_taken()

    def _load_producer_state(self, had_clean_shutdown: bool, recovered: set[int]) -> None:
        """At load: drop the snapshots that match no segment (Kafka's removeStraySnapshots) and,
        after a crash, those past the recovery point (written after the last flush, they may be
        torn); rebuild the transaction indexes of the segments recovered (base offsets in
        `recovered`); then rebuild the state up to the log end offset."""
        self._producer_snapshots.remove_stray(self._segments.base_offsets)
        if not had_clean_shutdown:
            self._producer_snapshots.delete_above(self._recovery_point)
        if recovered:
            self._rebuild_txn_indexes([s for s in self._segments.segments if s.base_offset in recovered])
        self._rebuild_producer_state(self._next_offset, reload_from_clean_shutdown=had_clean_shutdown)

    def _rebuild_txn_indexes(self, recovered: list[LogSegment]) -> None:
        """Replay the producer batches from the latest snapshot at or below the first recovered
        segment to the log end, indexing the aborted transactions whose markers lie in a recovered
        segment (Kafka's LogSegment.recover with a ProducerStateManager rebuilt to its start)."""
        first = recovered[0].base_offset
        state = ProducerStateManager(self.name, self._producer_state.producer_id_expiration_ms)
        now = self._clock_ms()
        start = self._log_start_offset
        state.start_empty_at(start)
        for offset in reversed(self._producer_snapshots.offsets):
            if start < offset <= first:
                try:
                    state.load_snapshot_entries(self._producer_snapshots.read(offset), offset, now)
                    break
                except CorruptSnapshotException as e:
                    log.warning("Failed to load producer snapshot %s: %s", self._producer_snapshots.path(offset), e)
        for segment in recovered:
            segment.txn_index.reset()
        recovered_ids = {id(s) for s in recovered}
        view = self._segments
        for segment in view.segments[max(view.floor_index(state.map_end_offset), 0):]:
            if segment.base_offset > recovered[-1].base_offset:
                break
            index_into = segment if id(segment) in recovered_ids else None
            self._replay_producer_batches(segment, max(state.map_end_offset, segment.base_offset), self._next_offset,
                                          state, index_into)

    def _rebuild_producer_state(self, last_offset: int, *, reload_from_clean_shutdown: bool) -> None:
        """The state as of `last_offset`: the latest snapshot at or below it, then the producer
        batches after it, read from batch headers only. Snapshots are taken on the way at the base
        offsets of the last two segments and at `last_offset`."""
        state, snapshots = self._producer_state, self._producer_snapshots
        bases = self._segments.base_offsets
        offsets_to_snapshot = {*bases[-2:], last_offset}
        if snapshots.latest_offset is None and reload_from_clean_shutdown:
            # A log written before producer state was kept (Kafka's upgrade path): a clean shutdown
            # left nothing to recover, so empty snapshots stand in for a scan of every segment.
            for offset in sorted(offsets_to_snapshot):
                state.update_map_end_offset(offset)
                self._take_producer_snapshot(sync=True)
            return
        had_no_producers = state.is_empty and state.map_end_offset >= last_offset
        self._truncate_and_reload_producer_state(last_offset)
        if last_offset > state.map_end_offset and not had_no_producers:
            view = self._segments
            first = max(view.floor_index(state.map_end_offset), 0)
            for segment in view.segments[first:]:
                if segment.base_offset >= last_offset:
                    break
                start = max(state.map_end_offset, segment.base_offset, self._log_start_offset)
                state.update_map_end_offset(start)
                if segment.base_offset in offsets_to_snapshot:
                    self._take_producer_snapshot(sync=True)
                self._replay_producer_batches(segment, start, last_offset)
        state.update_map_end_offset(last_offset)
        self._take_producer_snapshot(sync=True)

    def _truncate_and_reload_producer_state(self, log_end_offset: int) -> None:
        """Kafka's truncateAndReload: snapshots beyond the log or at or below its start go; a state
        not already at `log_end_offset` restarts from the latest valid snapshot."""
        snapshots = self._producer_snapshots
        for offset in snapshots.offsets:
            if offset > log_end_offset or offset <= self._log_start_offset:
                snapshots.delete(offset)
        state = self._producer_state
        if log_end_offset == state.map_end_offset:
            state.on_log_start_offset_incremented(self._log_start_offset, snapshots.latest_offset)
            return
        now = self._clock_ms()
        while (latest := snapshots.latest_offset) is not None:
            try:
                state.load_snapshot_entries(snapshots.read(latest), latest, now)
                return
            except CorruptSnapshotException as e:
                log.warning("Failed to load producer snapshot %s: %s", snapshots.path(latest), e)
                snapshots.delete(latest)
        state.start_empty_at(self._log_start_offset)

    def _replay_producer_batches(self, segment: LogSegment, start_offset: int, end_offset: int,
                                 state: ProducerStateManager | None = None,
                                 index_into: LogSegment | None = None) -> None:
        """Apply the producer batches of `segment` from the one holding `start_offset` to the
        last one below `end_offset` to `state` (the log's by default), unchecked (they are in the
        log already); transactions their markers complete are indexed in `index_into` if given.
        Only a marker's record is read: the rest comes from batch headers."""
        start = segment.translate_offset(start_offset)
        if start is None:
            return
        state = state or self._producer_state
        for position, header in segment.log.batch_headers_from(start.position):
            if header.base_offset >= end_offset:
                break
            if header.producer_id == NO_PRODUCER_ID:
                continue
            marker = None
            if header.is_control:
                marker = _end_txn_marker(segment.log.pread(position, header.size), self.name)
            append = state.prepare_update(header, AppendOrigin.REPLICATION, marker)
            state.update(append)
            if append.completed_txn is not None:
                if index_into is not None:
                    index_into.update_txn_index(*append.completed_txn,
                                                last_stable_offset=state.last_stable_offset(append.completed_txn))
                state.complete_txn(append.completed_txn)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int | None = None) -> int:
        """Forget the producers idle past producer.id.expiration.ms (`expiration_ms` when given:
        the config changed); returns how many went."""
        with self._lock:
            if expiration_ms is not None:
                self._producer_state.producer_id_expiration_ms = expiration_ms
            return self._producer_state.remove_expired_producers(now_ms)

    def min_snapshots_offset_to_retain(self) -> int:
        """Snapshots below this offset are no longer needed: recovery starts at the segment
        holding the recovery point, truncation goes back at most into the previous segment."""
        with self._lock:
            bases = self._segments.base_offsets
            two_segments_min = bases[-2] if len(bases) > 1 else bases[-1]
            below_recovery_point = bisect_left(bases, self._recovery_point) - 1
            recovery_point_offset = bases[below_recovery_point] if below_recovery_point >= 0 else self._recovery_point
            return min(recovery_point_offset, two_segments_min)

    def delete_snapshots_after_recovery_point_checkpoint(self) -> int:
        """Once the recovery point is checkpointed, the older snapshots go (thread-safe). Returns
        the smallest offset whose snapshot was kept."""
        with self._lock:
            if self._closed or self._offline:
                return self._recovery_point
            min_offset = self.min_snapshots_offset_to_retain()
            with self._io("deleting producer snapshots"):
                self._producer_snapshots.delete_before(min_offset)
            return min_offset

    # -- reads
    def read(self, offset: int, max_bytes: int, *, isolation_max_offset: int | None = None,
             min_one_message: bool = True, include_aborted_txns: bool = False) -> FetchDataInfo:
        """Up to max_bytes from `offset`, never past isolation_max_offset (high watermark or last
        stable offset; None for the log end). Returns the file range of whole batches from the
        one holding `offset`, as many as fit in max_bytes (Kafka adds the start of the next one,
        which clients drop; only when none fits is a cut batch returned, as Kafka does);
        min_one_message returns the first batch whole even past max_bytes. With
        include_aborted_txns (read_committed), the aborted transactions overlapping the range."""
        view = self._segments
        end = self._next_offset
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeException(
                f"Received request for offset {offset} for partition {self.name}, but we only have log segments "
                f"in the range {self._log_start_offset} to {end}.")
        max_offset = end if isolation_max_offset is None else min(isolation_max_offset, end)
        if offset >= max_offset:
            return _no_records(offset, include_aborted_txns)
        with self._io("reading"):
            index = max(view.floor_index(offset), 0)
            while index < len(view.segments):
                segment = view.segments[index]
                next_base = view.base_offsets[index + 1] if index + 1 < len(view.segments) else end
                info = segment.read(offset, max_bytes, _max_position(segment, next_base, max_offset), min_one_message)
                if info is not None:
                    if include_aborted_txns:
                        if index == len(view.segments) - 1 and not segment.txn_index.entries:
                            # A read in the last segment, which holds no aborted transaction: what
                            # collect_aborted_transactions would find (most read_committed fetches).
                            aborted = []
                        else:
                            upper = segment.fetch_upper_bound_offset(info.records.position, info.records.size)
                            aborted = self.collect_aborted_transactions(offset, next_base if upper is None else upper,
                                                                        view)
                        info = FetchDataInfo(info.records, info.first_offset, aborted)
                    return info
                index += 1
        return _no_records(offset, include_aborted_txns)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int,
                                     view: _Segments | None = None) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset): from the
        segment holding `start_offset` on, until one's index shows no later one can matter."""
        view = view or self._segments
        aborted: list[AbortedTxn] = []
        for segment in view.segments[max(view.floor_index(start_offset), 0):]:
            found = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            aborted += found.aborted
            if found.is_complete:
                break
        return aborted

    def fetch_offset_by_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets: -2 (and -4) the log start offset, -1 the log end offset, -3 the record with
        the largest timestamp, otherwise the first record whose timestamp is >= `timestamp`; None
        when there is none. Timestamps are -1 for the special queries."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return OffsetAndTimestamp(self._log_start_offset, NO_TIMESTAMP)
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(self._next_offset, NO_TIMESTAMP)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return OffsetAndTimestamp(-1, NO_TIMESTAMP)
        segments = self._segments.segments
        with self._io("searching offsets by timestamp"):
            if timestamp == MAX_TIMESTAMP:
                found = max(segments, key=lambda s: s.max_timestamp_so_far).offset_of_max_timestamp()
            else:
                target = next((s for s in segments if s.largest_timestamp() >= timestamp), None)
                found = target.find_offset_by_timestamp(timestamp, self._log_start_offset) if target else None
        return OffsetAndTimestamp(found.offset, found.timestamp) if found else None

    # -- log start offset, retention
    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: make `before_offset` the log start offset; returns the new low
        watermark. The segments below it go with the next retention pass."""
        with self._lock:
            if not self.config.delete:
                raise PolicyViolationException(
                    f"Records of partition {self.name} can not be deleted due to the configured policy")
            if before_offset < 0:
                raise OffsetOutOfRangeException(f"The offset {before_offset} for partition {self.name} is not valid")
            if before_offset > self._high_watermark:
                raise OffsetOutOfRangeException(
                    f"Cannot increment the log start offset to {before_offset} of partition {self.name} since it "
                    f"is larger than the high watermark {self._high_watermark}")
            self._maybe_increment_log_start_offset(before_offset)
            return self._log_start_offset

    def follow_leader_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower's log starts where its leader's does (retention, DeleteRecords there), within
        what it holds (Kafka's maybeIncrementLogStartOffset, LeaderOffsetIncremented)."""
        with self._lock:
            self._maybe_increment_log_start_offset(min(leader_log_start_offset, self._next_offset))

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._high_watermark = max(self._high_watermark, offset)
            self._recovery_point = max(self._recovery_point, min(offset, self._next_offset))
            self.leader_epoch_cache.truncate_from_start(offset)
            self._producer_state.on_log_start_offset_incremented(offset, self._producer_snapshots.latest_offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: drop the oldest segments past retention.ms (by their largest timestamp) or
        beyond retention.bytes when cleanup.policy has delete, and in any case the segments wholly
        below the log start offset. Never goes past the high watermark; the active segment goes
        only after a roll. Returns how many segments were removed; their files are renamed to
        `.deleted` and unlinked by `delete_pending_segments` once file.delete.delay.ms has passed."""
        with self._segment_files_lock, self._lock:
            if self._closed or self._offline:
                return 0
            with self._io("deleting old segments"):
                deleted = self._delete_segments_below_log_start()
                if self.config.delete:
                    deleted += self._delete_retention_size_breached()
                    deleted += self._delete_retention_ms_breached(now_ms)
            return deleted

    def _delete_segments_below_log_start(self) -> int:
        def below_log_start(_: LogSegment, next_segment: LogSegment | None) -> bool:
            return next_segment is not None and next_segment.base_offset <= self._log_start_offset
        return self._delete_old_segments(below_log_start)

    def _delete_retention_ms_breached(self, now_ms: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        return self._delete_old_segments(lambda segment, _: now_ms - segment.largest_timestamp() > retention_ms)

    def _delete_retention_size_breached(self) -> int:
        retention_bytes = self.config.retention_bytes
        size = self.size
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        excess = size - retention_bytes

        def should_delete(segment: LogSegment, _: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False
        return self._delete_old_segments(should_delete)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        segments = self._segments.segments
        deletable = []
        for index, segment in enumerate(segments):
            next_segment = segments[index + 1] if index + 1 < len(segments) else None
            upper_bound = next_segment.base_offset if next_segment else self._next_offset
            is_last_and_empty = next_segment is None and segment.size == 0
            if self._high_watermark >= upper_bound and not is_last_and_empty and predicate(segment, next_segment):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        to_delete = deletable
        if len(deletable) == len(segments):
            # A log always keeps a segment: roll a fresh active one before the last goes.
            new_segment = self.roll()
            if deletable[-1].base_offset == new_segment.base_offset:
                to_delete = deletable[:-1]
        if to_delete:
            view = self._segments
            self._maybe_increment_log_start_offset(view.base_offsets[view.floor_index(to_delete[-1].base_offset) + 1])
            self._remove_and_delete_segments(to_delete)
        return len(deletable)

    def _remove_and_delete_segments(self, segments: Sequence[LogSegment],
                                    replacement: LogSegment | None = None) -> None:
        doomed = {id(s) for s in segments}
        kept = [s for s in self._segments.segments if id(s) not in doomed]
        self._segments = _Segments.of(kept + [replacement] if replacement else kept)
        due = self._clock_ms() + self.config.file_delete_delay_ms
        for segment in segments:
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            self._pending_deletions.append((due, segment))
            # The segment's snapshot goes with it, as Kafka's deleteProducerSnapshots does, unless
            # its replacement starts at the same offset.
            if replacement is None or segment.base_offset != replacement.base_offset:
                self._producer_snapshots.delete(segment.base_offset)
        if segments and self.on_segments_deletion_scheduled is not None:
            self.on_segments_deletion_scheduled(self, due)

    # -- the log cleaner's swap (Kafka's replaceSegments)
    def replace_segments(self, cleaned: LogSegment, old_segments: Sequence[LogSegment]) -> bool:
        """Swap `cleaned` (flushed, its files named `<base>.*.cleaned`, base offset that of the
        first old segment) in for `old_segments`. Crash-safe as Kafka's: the cleaned files become
        `.swap` and that is made durable before any old segment is renamed `.deleted`; only then
        do they lose the suffix. Loading completes a swap a crash interrupted. The old files stay
        open until file.delete.delay.ms, for reads already under way.

        Returns False, changing nothing, when the log moved on while the segment was cleaned:
        closed, offline, renamed for deletion, or an old segment gone or active again (retention,
        truncation); the caller then deletes the cleaned files."""
        with self._segment_files_lock:
            with self._lock:
                current = {id(s) for s in self._segments.segments}
                if (self._closed or self._offline or cleaned.log.path is None or cleaned.log.path.parent != self.dir
                        or any(id(s) not in current for s in old_segments) or self.active_segment in old_segments):
                    return False
            with self._io("swapping in a cleaned segment"):
                cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
                fsync_dir(self.dir)
                with self._lock:
                    self._remove_and_delete_segments(old_segments, replacement=cleaned)
                cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
                fsync_dir(self.dir)
        return True

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """Producer id -> (offset of its last data batch, or None, and its epoch): the cleaner
        keeps each producer's last batch, emptied if need be, so its state survives a reload."""
        with self._lock:
            return {pid: (entry.last_data_offset if entry.last_data_offset >= 0 else None, entry.producer_epoch)
                    for pid, entry in self._producer_state.producers.items()}

    def delete_pending_segments(self, now_ms: int) -> int:
        """Close and unlink the `.deleted` segments whose file.delete.delay.ms has passed (thread-safe)."""
        with self._lock:
            due = [segment for when, segment in self._pending_deletions if when <= now_ms]
            self._pending_deletions = [(when, s) for when, s in self._pending_deletions if when > now_ms]
        for segment in due:
            segment.delete()
        return len(due)

    # -- truncation
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset >= target_offset; False when there is nothing to remove."""
        if target_offset < 0:
            raise InvalidRecordException(
                f"Cannot truncate partition {self.name} to a negative offset ({target_offset}).")
        with self._segment_files_lock, self._lock, self._io("truncating"):
            if target_offset >= self._next_offset:
                # Nothing to cut, but an epoch entry at the log end goes (Kafka's UnifiedLog.truncateTo):
                # a leader that took an epoch and appended nothing before the next leader came would
                # otherwise keep it, and as a follower claim it as its last fetched epoch for ever.
                self.leader_epoch_cache.truncate_from_end(self._next_offset)
                return False
            if self._segments.base_offsets[0] > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            self._remove_and_delete_segments([s for s in self._segments.segments if s.base_offset > target_offset])
            self.active_segment.truncate_to(target_offset, self._clock_ms())
            self.leader_epoch_cache.truncate_from_end(target_offset)
            self._next_offset = target_offset
            self._recovery_point = min(self._recovery_point, target_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self._high_watermark = min(self._high_watermark, target_offset)
            self._rebuild_producer_state(target_offset, reload_from_clean_shutdown=False)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop every segment and start empty at `new_offset`."""
        with self._segment_files_lock, self._lock, self._io("truncating"):
            self._remove_and_delete_segments(list(self._segments.segments))
            segment = LogSegment.open(self.dir, new_offset, self.config, self._clock_ms(), file_already_exists=False)
            self._segments = _Segments.of([segment])
            self.leader_epoch_cache.clear()
            self._producer_state.truncate_fully_and_start_at(new_offset)
            self._producer_snapshots.delete_all()
            self._next_offset = new_offset
            self._log_start_offset = new_offset
            self._recovery_point = min(self._recovery_point, new_offset)
            self._high_watermark = new_offset

    # -- durability
    def flush_due(self, now_ms: int) -> bool:
        """flush.messages or flush.ms reached, or a rolled segment not flushed yet."""
        unflushed = self.unflushed_messages
        return self._rolled_since_flush or unflushed > 0 and (
            unflushed >= self.config.flush_messages or now_ms - self._last_flush_ms >= self.config.flush_ms)

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync everything below `up_to_offset` (default: the log end offset) and advance the
        recovery point to it. Meant for a worker thread while the event loop appends."""
        with self._lock:
            if self._closed or self._offline:
                return
            offset = self._next_offset if up_to_offset is None else min(up_to_offset, self._next_offset)
            start = self._recovery_point
            self._rolled_since_flush = False
            snapshots, self._unflushed_snapshots = self._unflushed_snapshots, []
            if offset <= start and not snapshots:
                return
            view = self._segments
            first = max(view.floor_index(start), 0)
            segments = [s for s in view.segments[first:] if start < offset and s.base_offset < offset]
        with self._io("flushing"):
            for segment in segments:
                segment.flush()
            for path in snapshots:
                fsync_path(path)  # a snapshot deleted since it was written is skipped
            if snapshots or any(s.base_offset >= start for s in segments):
                # A file created since the last flush: its directory entry must be durable too.
                fsync_dir(self.dir)
            if not self._parent_dir_synced:
                fsync_dir(self.dir.parent)
                self._parent_dir_synced = True
        with self._lock:
            self._recovery_point = max(self._recovery_point, min(offset, self._next_offset))
            self._last_flush_ms = self._clock_ms()

    # -- closing and deleting
    def close(self) -> None:
        """Close every segment (the active one's indexes are trimmed) and finish pending deletions."""
        with self._segment_files_lock, self._lock:
            if self._closed:
                return
            if not self._offline:
                try:
                    with self._io("writing a producer snapshot"):
                        self._take_producer_snapshot(sync=True)
                except KafkaStorageException as e:
                    log.error("%s", e)
            self._closed = True
            pending, self._pending_deletions = self._pending_deletions, []
        for segment in self._segments.segments:
            if self._offline:
                segment.close_handlers()
            else:
                segment.close()
        for _, segment in pending:
            segment.delete()

    def rename_dir(self, name: str) -> None:
        """Move the log directory (to its `-delete` name before removal)."""
        with self._segment_files_lock, self._lock:
            target = self.dir.parent / name
            try:
                os.rename(self.dir, target)
            except OSError as e:
                raise KafkaStorageException(f"Error while renaming dir for {self.name}: {e}") from e
            self.dir = target
            self.leader_epoch_cache.move_to(target)
            self._producer_snapshots.directory = target
            self._unflushed_snapshots = [target / path.name for path in self._unflushed_snapshots]
            for segment in (*self._segments.segments, *(s for _, s in self._pending_deletions)):
                segment.update_parent_dir(target)

    def delete(self) -> None:
        """Close the files and remove the directory with everything in it."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def is_offline(self) -> bool:
        """An I/O error took the log offline, as Kafka takes its directory offline; loading it
        again (a restart) recovers it."""
        return self._offline

    def mark_offline(self) -> None:
        """Its log directory failed: no more reads or writes (Kafka closes its handlers)."""
        self._offline = True

    def _io(self, action: str) -> "_LogIo":
        """Kafka's maybeHandleIOException: any I/O failure takes the log offline for good, since
        what reached the disk is no longer known, and is reported to the log dir failure channel,
        which takes the rest of the directory offline."""
        return _LogIo(self, action)


class _LogIo:
    """Log._io's context manager; a class rather than a generator, since every append and read
    enters one."""

    __slots__ = ("log", "action")

    def __init__(self, log: Log, action: str) -> None:
        self.log = log
        self.action = action

    def __enter__(self) -> None:
        log = self.log
        if log._closed or log._offline:
            state = "closed" if log._closed else "offline"
            raise KafkaStorageException(f"The log for partition {log.name} is {state}")

    def __exit__(self, exc_type, exc, tb) -> None:
        # Never swallows: an I/O error leaves as KafkaStorageException, anything else as it came.
        if exc_type is not None and issubclass(exc_type, (OSError, KafkaStorageException)):
            log = self.log
            log._offline = True
            message = f"Error while {self.action} for {log.name} in dir {log.dir.parent}: {exc}"
            if log.log_dir_failure_channel is not None and caused_by_io_error(exc):
                log.log_dir_failure_channel.maybe_add_offline_log_dir(log.dir.parent, message, exc)
            raise KafkaStorageException(message) from exc


def _no_records(offset: int, include_aborted_txns: bool) -> FetchDataInfo:
    return FetchDataInfo(FileRecords.empty(), offset, [] if include_aborted_txns else None)


def _max_position(segment: LogSegment, next_base_offset: int, max_offset: int) -> int | None:
    """How far into `segment` a read may go so no offset >= max_offset is returned; None when
    nothing of it may be."""
    if max_offset >= next_base_offset:
        return segment.size
    if max_offset < segment.base_offset:
        return None
    bound = segment.translate_offset(max_offset)
    return bound.position if bound else segment.size


def _complete_interrupted_swaps(directory: Path, names: list[str]) -> list[str]:
    """Kafka's LogLoader on the files a crash can leave: `.deleted` files go; `.cleaned` files (a
    cleaning cut short) go, with the `.swap` files at or above the lowest of them (a swap not yet
    complete on disk). A `.swap` log's swap is completed: the segment files it replaces (offsets
    from its base to its end) go and every `.swap` file loses its suffix. Returns the names left."""
    def base(name: str) -> int:
        return int(name[:20]) if name[:20].isdigit() else -1
    min_cleaned = min((base(n) for n in names if n.endswith(CLEANED_FILE_SUFFIX)), default=None)
    swaps = [n for n in names if n.endswith(SWAP_FILE_SUFFIX)]
    doomed = {n for n in names if n.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX))}
    if min_cleaned is not None:
        doomed.update(n for n in swaps if base(n) >= min_cleaned)
    swaps = [n for n in swaps if n not in doomed]
    replaced = []
    for name in swaps:
        if _SWAP_LOG_FILE.match(name):
            start = base(name)
            replaced.append((start, max(_end_offset_of(directory / name, start), start + 1)))
    for name in names:
        if _SEGMENT_FILE.match(name) and any(start <= base(name) < end for start, end in replaced):
            doomed.add(name)
    for name in doomed:
        (directory / name).unlink(missing_ok=True)
    for name in swaps:
        os.rename(directory / name, directory / name[:-len(SWAP_FILE_SUFFIX)])
    if swaps:
        fsync_dir(directory)
    return os.listdir(directory) if doomed or swaps else names


def _end_offset_of(path: Path, base_offset: int) -> int:
    """The offset after the last complete batch of a segment file."""
    records = FileRecords.open(path)
    end = base_offset
    try:
        for _, header in records.batch_headers_from(0):
            end = header.next_offset
    except CorruptRecordException:
        pass
    finally:
        records.close()
    return end


def _load_segments(directory: Path, names: list[str], config: LogConfig, now: int,
                   recovered: set[int]) -> list[LogSegment]:
    """Open the segments found in `directory` (`names`, crash leftovers already dealt with): an
    index without its log goes, a segment without both indexes is rebuilt (its base offset added
    to `recovered`)."""
    logs: set[str] = set()
    indexes: set[str] = set()
    for name in names:
        match = _SEGMENT_FILE.match(name)
        if match:
            (logs if match.group(2) == LOG_FILE_SUFFIX else indexes).add(name)
    for name in indexes:
        if name[:20] + LOG_FILE_SUFFIX not in logs:
            (directory / name).unlink(missing_ok=True)
    segments = []
    for name in sorted(logs):
        segment = LogSegment.open(directory, int(name[:20]), config, now)
        if name[:20] + INDEX_FILE_SUFFIX not in indexes or name[:20] + TIME_INDEX_FILE_SUFFIX not in indexes:
            segment.recover()
            recovered.add(segment.base_offset)
        segments.append(segment)
    return segments


def _recover_unflushed(segments: list[LogSegment], recovery_point: int, recovered: set[int], name: str) -> None:
    """Recover the segments from the one holding the recovery point on (their base offsets
    added to `recovered`); after one that had to be cut, the later ones cannot be trusted and are
    deleted. Each is logged in Kafka's LogLoader words: a segment can take seconds."""
    bases = [s.base_offset for s in segments]
    first = max(bisect_right(bases, recovery_point) - 1, 0)
    for index in range(first, len(segments)):
        log.info("Recovering unflushed segment %d. %d/%d recovered for %s.", segments[index].base_offset,
                 index - first, len(segments) - first, name)
        recovered.add(segments[index].base_offset)
        if segments[index].recover() > 0:
            for later in segments[index + 1:]:
                later.delete()
            del segments[index + 1:]
            return



def _end_txn_marker(batch, topic_partition: str) -> ControlRecord | None:
    """The record of a control batch; None for one emptied by the cleaner (its transaction gone)."""
    try:
        _, records = decode_batch(batch)
        return parse_control_record(records[0]) if records else None
    except CodecError as e:
        raise CorruptRecordException(f"Invalid control batch in {topic_partition}: {e}") from None
