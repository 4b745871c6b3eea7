"""A KRaft broker's copy of the metadata log on disk, laid out as Kafka's KafkaMetadataLog and
FileQuorumStateStore lay it out: `<metadata.log.dir>/__cluster_metadata-0` (metadata.log.dir
defaults to the first log dir) holds the log's segments (storage/log.py's Log: `.log`, `.index`,
`.timeindex`, `leader-epoch-checkpoint`, `partition.metadata`), the snapshots (`<20-digit end offset>-<10-digit
epoch>.checkpoint`, written as `.checkpoint.part` and renamed once whole) and `quorum-state` (the
Raft election state: the leader and epoch last known, as JSON).

This module is the one writer of that layout; storage/cluster_metadata.py reads it (its
`read_cluster_metadata` replays a log dir Kafka left, `MetadataReplay` the batches given here).
Every method does blocking file work: the broker calls them off the event loop (trio.to_thread).

As Kafka's KafkaMetadataLog: the log is recovered at each open (Kafka opens it with
lastShutdownClean=false), time and size retention of segments are off (a segment goes only when a
snapshot covers it: `delete_before_snapshot`), partial snapshots are deleted at open, and a snapshot
past the log's end (a follower that crashed after fetching it) truncates the log fully to it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path

from .checkpoints import PartitionMetadataFile
from .cluster_metadata import CLUSTER_METADATA_DIR
from .durability import fsync_dir, write_atomically
from .errors import KafkaStorageException
from .log import Log
from .log_config import LogConfig
from ..wire.exceptions import CodecError
from ..wire.records import decode_batch, iter_batch_headers

__all__ = ["METADATA_LOG_SEGMENT_MIN_BYTES", "METADATA_TOPIC_ID", "QUORUM_STATE_FILE", "MetadataLogConfig", "QuorumState", "SnapshotId",
           "MetadataLog", "snapshot_file_name"]

log = logging.getLogger("samsa.storage.metadata_log")

QUORUM_STATE_FILE = "quorum-state"  # Kafka's FileQuorumStateStore.DEFAULT_FILE_NAME
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID ("AAAAAAAAAAAAAAAAAAAAAQ")
METADATA_LOG_SEGMENT_MIN_BYTES = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES
PARTIAL_SUFFIX = ".part"  # a snapshot being written (Kafka's Snapshots.PARTIAL_SUFFIX)
_SNAPSHOT_FILE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint(\.part|\.deleted)?$")  # Kafka's Snapshots.parse
_NO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's ReplicaKey.NO_DIRECTORY_ID, as its JSON converter writes it
SNAPSHOT_HEADER = 3  # Kafka's ControlRecordType.SNAPSHOT_HEADER
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_HEADER_VALUE = struct.Struct(">hq")  # SnapshotHeaderRecord v0: version, last contained log timestamp
_SNAPSHOT_HEAD_BYTES = 64 * 1024  # enough for the first batch: the header, and Kafka's kraft.version and voters


@dataclass(frozen=True, order=True)
class SnapshotId:
    """Kafka's OffsetAndEpoch for a snapshot: it holds every record below `end_offset`, the last of
    which has leader epoch `epoch`."""
    end_offset: int
    epoch: int


def snapshot_file_name(snapshot: SnapshotId) -> str:
    return f"{snapshot.end_offset:020d}-{snapshot.epoch:010d}.checkpoint"


@dataclass(frozen=True)
class MetadataLogConfig:
    """Kafka's MetadataLogConfig: the metadata.log.* and metadata.max.* configs."""
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    max_retention_bytes: int = 104857600
    max_retention_ms: int = 604800000

    @classmethod
    def from_broker_config(cls, config) -> MetadataLogConfig:
        return cls(config.get_int("metadata.log.segment.bytes"), config.get_int("metadata.log.segment.ms"),
                   config.get_int("metadata.max.retention.bytes"), config.get_int("metadata.max.retention.ms"))

    def log_config(self) -> LogConfig:
        # Kafka's KafkaMetadataLog.apply: segment size and age from these, retention off.
        return LogConfig.from_props({"segment.bytes": str(self.segment_bytes), "segment.ms": str(self.segment_ms),
                                     "retention.ms": "-1", "retention.bytes": "-1",
                                     "max.message.bytes": str(METADATA_LOG_SEGMENT_MIN_BYTES)})


@dataclass(frozen=True)
class QuorumState:
    """Kafka's QuorumStateData: the election state the broker last saw (an observer never votes)."""
    leader_id: int = -1
    leader_epoch: int = -1


class MetadataLog:
    def __init__(self, directory: Path, config: MetadataLogConfig, clock_ms) -> None:
        """Open (or create) `directory`, the `__cluster_metadata-0` of the metadata log dir."""
        self.dir = directory
        self.config = config
        self._clock_ms = clock_ms
        self.log = Log.open(directory, config.log_config(), clock_ms=clock_ms, had_clean_shutdown=False)
        # Kafka's KafkaMetadataLog keeps a partition.metadata naming the metadata topic's id.
        partition_metadata = PartitionMetadataFile(directory)
        if partition_metadata.read() != METADATA_TOPIC_ID:
            partition_metadata.write(METADATA_TOPIC_ID)
        self.snapshots: list[SnapshotId] = self._recover_snapshots()
        log.info("Initialized snapshots with IDs %s from %s", [(s.end_offset, s.epoch) for s in self.snapshots],
                 directory)
        self.truncate_to_latest_snapshot()

    @classmethod
    def in_log_dir(cls, metadata_log_dir: Path, config: MetadataLogConfig, clock_ms) -> MetadataLog:
        return cls(metadata_log_dir / CLUSTER_METADATA_DIR, config, clock_ms)

    # --- the log ----------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        """Kafka's KafkaMetadataLog.lastFetchedEpoch: the log's latest epoch, or the latest
        snapshot's when the log is empty past it."""
        epoch = self.log.leader_epoch_cache.latest_epoch
        if epoch >= 0:
            return epoch
        latest = self.latest_snapshot
        return latest.epoch if latest is not None and latest.end_offset == self.end_offset else 0

    def append_as_follower(self, data: bytes | memoryview) -> int:
        """Append the batches a Fetch brought (their offsets and epochs the leader's); the new end."""
        self.log.append_as_follower(memoryview(data))
        return self.end_offset

    def read(self, start_offset: int) -> bytes:
        """The whole batches from the one holding `start_offset` to the log end."""
        chunks = []
        offset = max(start_offset, self.start_offset)
        while offset < self.end_offset:
            info = self.log.read(offset, 1 << 30)
            data = info.records.read_bytes()
            if not data:
                break
            chunks.append(data)
            last = None
            for _, header in iter_batch_headers(data):
                last = header
            if last is None:
                break
            offset = last.next_offset
        return b"".join(chunks)

    def truncate_to_end_offset(self, end_offset: int, epoch: int) -> int:
        """The leader's log diverges from this one (a Fetch's diverging epoch): cut where this log's
        records of `epoch` end, or at `end_offset` if sooner (Kafka's
        ReplicatedLog.truncateToEndOffset). The offset truncated to."""
        if epoch == 0:
            offset = min(end_offset, self.end_offset)
        else:
            local_epoch, local_end = self.end_offset_for_epoch(epoch)
            offset = min(local_end, end_offset) if local_epoch == epoch else local_end
        self.log.truncate_to(offset)
        return offset

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(the largest epoch <= `epoch` here, where it ends), as Kafka's
        KafkaMetadataLog.endOffsetForEpoch: the earliest snapshot's id where the log starts at it,
        the log end and its last epoch for an epoch past every one here."""
        local_epoch, local_end = self.log.end_offset_for_epoch(epoch)
        if local_epoch < 0:
            return self.last_fetched_epoch, self.end_offset
        earliest = self.snapshots[0] if self.snapshots else None
        if earliest is not None and local_end == earliest.end_offset and local_epoch < epoch:
            return earliest.epoch, earliest.end_offset
        return local_epoch, local_end

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        """Kafka's KafkaRaftClient.close flushes the log first."""
        self.log.flush()
        self.log.close()

    # --- snapshots --------------------------------------------------------------------------------

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return self.snapshots[-1] if self.snapshots else None

    def snapshot_path(self, snapshot: SnapshotId) -> Path:
        return self.dir / snapshot_file_name(snapshot)

    def read_snapshot(self, snapshot: SnapshotId) -> bytes:
        return self.snapshot_path(snapshot).read_bytes()

    def write_snapshot(self, snapshot: SnapshotId, data: bytes) -> bool:
        """Store a whole snapshot (one the broker generated, or fetched from the leader): written as
        `.checkpoint.part`, fsynced, renamed (Kafka's FileRawSnapshotWriter.freeze). False when it
        is already here."""
        if snapshot in self.snapshots:
            return False
        write_atomically(self.snapshot_path(snapshot), data, suffix=PARTIAL_SUFFIX)
        self.snapshots.append(snapshot)
        self.snapshots.sort()
        return True

    def truncate_to_latest_snapshot(self) -> bool:
        """When the latest snapshot is past the log (one fetched from the leader, whose log no
        longer holds what this one lacks), start the log over empty at its end (Kafka's
        KafkaMetadataLog.truncateToLatestSnapshot); older snapshots go."""
        latest = self.latest_snapshot
        if latest is None:
            return False
        latest_epoch = max(self.log.leader_epoch_cache.latest_epoch, 0)
        if not (latest.epoch > latest_epoch or latest.epoch == latest_epoch and latest.end_offset > self.end_offset):
            return False
        self.log.truncate_fully_and_start_at(latest.end_offset)
        self._remove_snapshots([s for s in self.snapshots if s < latest], "the log was fully truncated")
        return True

    def delete_before_snapshot(self, snapshot: SnapshotId) -> bool:
        """Move the log start to `snapshot` and delete the segments and older snapshots it covers
        (Kafka's KafkaMetadataLog.deleteBeforeSnapshot)."""
        latest = self.latest_snapshot
        if latest is None or snapshot not in self.snapshots or not self.start_offset < snapshot.end_offset <= latest.end_offset:
            return False
        if snapshot.end_offset > self.end_offset:
            return False
        self.log.follow_leader_log_start_offset(snapshot.end_offset)
        log.info("Incremented log start offset to %d due to snapshot generated", self.start_offset)
        now = self._clock_ms()
        self.log.delete_old_segments(now)  # those wholly below the new start
        self.log.delete_pending_segments(now)
        self._remove_snapshots([s for s in self.snapshots if s < snapshot], "the log start moved past it")
        return True

    def maybe_clean(self) -> bool:
        """Kafka's KafkaMetadataLog.maybeClean: while more than one snapshot is kept, delete what
        the oldest but one covers when the log and snapshots together exceed
        metadata.max.retention.bytes, or the oldest is older than metadata.max.retention.ms."""
        cleaned = False
        while len(self.snapshots) > 1:
            oldest, following = self.snapshots[0], self.snapshots[1]
            over_size = 0 <= self.config.max_retention_bytes < self._retained_bytes()
            timestamp = self._snapshot_timestamp(oldest)
            over_age = timestamp is not None and 0 <= self.config.max_retention_ms < self._clock_ms() - timestamp
            if not (over_size or over_age) or not self.delete_before_snapshot(following):
                break
            cleaned = True
        return cleaned

    def _retained_bytes(self) -> int:
        return self.log.size + sum(self._size(self.snapshot_path(s)) for s in self.snapshots)

    @staticmethod
    def _size(path: Path) -> int:
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return 0

    def _snapshot_timestamp(self, snapshot: SnapshotId) -> int | None:
        """The last contained log timestamp its SnapshotHeaderRecord gives (Kafka's
        Snapshots.lastContainedLogTimestamp), None when unreadable."""
        try:
            with open(self.snapshot_path(snapshot), "rb") as f:
                head = f.read(_SNAPSHOT_HEAD_BYTES)
            _, records = decode_batch(head, 0)
        except (OSError, CodecError):
            return None
        for record in records:
            if record.key is not None and record.value is not None and len(record.value) >= _HEADER_VALUE.size and \
                    _CONTROL_KEY.unpack_from(record.key) == (0, SNAPSHOT_HEADER):
                return _HEADER_VALUE.unpack_from(record.value)[1]
        return None

    def _recover_snapshots(self) -> list[SnapshotId]:
        """Kafka's KafkaMetadataLog.recoverSnapshots: partial, deleted and pre-log-start snapshots go."""
        kept: list[SnapshotId] = []
        for name in os.listdir(self.dir):
            match = _SNAPSHOT_FILE.match(name)
            if match is None:
                continue
            snapshot = SnapshotId(int(match[1]), int(match[2]))
            if match[3] or snapshot.end_offset < self.start_offset:
                (self.dir / name).unlink(missing_ok=True)
                log.info("Deleted unneeded snapshot file with path %s", self.dir / name)
            else:
                kept.append(snapshot)
        kept.sort()
        if self.start_offset > 0 and not (kept and kept[-1].end_offset >= self.start_offset):
            raise KafkaStorageException(
                f"Inconsistent snapshot state in {self.dir}: there must be a snapshot at an offset larger than the "
                f"log start offset {self.start_offset}, but the latest snapshot is {kept[-1] if kept else None}")
        return kept

    def _remove_snapshots(self, snapshots: list[SnapshotId], reason: str) -> None:
        for snapshot in snapshots:
            self.snapshots.remove(snapshot)
            path = self.snapshot_path(snapshot)
            path.unlink(missing_ok=True)
            log.info("Deleted snapshot %s: %s", path.name, reason)
        if snapshots:
            fsync_dir(self.dir)

    # --- quorum-state -----------------------------------------------------------------------------

    def read_quorum_state(self) -> QuorumState:
        """The election state last written, or none (a new log, or an unreadable file: Kafka's
        FileQuorumStateStore fails on the latter; an observer loses nothing by starting without it)."""
        path = self.dir / QUORUM_STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return QuorumState(int(data.get("leaderId", -1)), int(data.get("leaderEpoch", -1)))
        except FileNotFoundError:
            return QuorumState()
        except (OSError, ValueError, AttributeError) as e:
            log.warning("Ignoring %s: %s", path, e)
            return QuorumState()

    def write_quorum_state(self, state: QuorumState, *, static_voters: list[int] | None) -> None:
        """As Kafka's FileQuorumStateStore.writeElectionState: data_version 0 (with the voters) for a
        quorum of static voters (kraft.version 0), 1 otherwise; written to `.tmp`, fsynced, renamed."""
        if static_voters is not None:
            data: dict = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.leader_epoch,
                          "votedId": -1, "appliedOffset": 0,
                          "currentVoters": [{"voterId": v} for v in static_voters], "data_version": 0}
        else:
            data = {"leaderId": state.leader_id, "leaderEpoch": state.leader_epoch, "votedId": -1,
                    "votedDirectoryId": _NO_DIRECTORY_ID, "data_version": 1}
        write_atomically(self.dir / QUORUM_STATE_FILE, json.dumps(data, separators=(",", ":")))

