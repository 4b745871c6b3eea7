"""The offset at which each leader epoch began in a partition (Kafka's LeaderEpochFileCache),
kept in the partition's `leader-epoch-checkpoint`. It answers OffsetsForLeaderEpoch: where the
log of an epoch ends, which consumers use to detect truncation after a leader change."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import NamedTuple

from .checkpoints import LeaderEpochCheckpointFile

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger("samsa.storage")


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, partition_dir: Path, *, file_exists: bool = True) -> None:
        """`file_exists`: False when the directory's listing has no checkpoint file to read."""
        self._file = LeaderEpochCheckpointFile(partition_dir / LEADER_EPOCH_CHECKPOINT_FILE)
        self._lock = threading.Lock()
        self._entries: list[EpochEntry] = []
        if file_exists:
            try:
                self._entries = [EpochEntry(*entry) for entry in self._file.read()]
            except ValueError as e:
                log.warning("Ignoring %s: %s", self._file.path, e)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def move_to(self, partition_dir: Path) -> None:
        """The partition directory was renamed."""
        self._file.path = partition_dir / LEADER_EPOCH_CHECKPOINT_FILE

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (a no-op unless the epoch is new, or
        starts earlier than recorded); entries that would no longer be monotonic go."""
        if epoch < 0 or start_offset < 0:
            return
        if self._is_latest(epoch, start_offset):  # every append asks: the usual answer needs no lock
            return
        with self._lock:
            if self._is_latest(epoch, start_offset):
                return
            self._entries = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
            self._entries.append(EpochEntry(epoch, start_offset))
            self._write()

    def _is_latest(self, epoch: int, start_offset: int) -> bool:
        """Whether `epoch` is the latest entry's, which already starts at or before `start_offset`."""
        entries = self._entries
        return bool(entries) and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: the largest epoch <= requested and the
        start offset of the epoch after it (the log end offset for the latest epoch)."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [e for e in entries if e.epoch <= requested_epoch]
        if not floor:
            # Older than anything known: its data is gone, the log restarts at the next epoch.
            return requested_epoch, higher.start_offset
        return floor[-1].epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs starting at or after `end_offset` (the log was truncated there)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < end_offset]
            if len(kept) != len(self._entries):
                self._entries = kept
                self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch holding it starts there."""
        with self._lock:
            before = [e for e in self._entries if e.start_offset <= start_offset]
            if not before or (len(before) == 1 and before[0].start_offset == start_offset):
                return
            self._entries = [EpochEntry(before[-1].epoch, start_offset)] + self._entries[len(before):]
            self._write()

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._write()

    def _write(self) -> None:
        self._file.write(self._entries)
