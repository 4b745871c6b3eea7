"""The idempotent and transactional producers of one partition (Kafka's ProducerStateManager,
ProducerStateEntry, ProducerAppendInfo, BatchMetadata, TxnMetadata and CompletedTxn), sans I/O.

For each producer id: its epoch and the metadata of its last five batches, enough to recognise a
batch the producer retried (it keeps at most five requests in flight per partition) and to answer
it with the offsets it got the first time, and to refuse a gap in the sequence numbers; and the
first offset of its open transaction, if any.

Transactions: a producer's first transactional batch opens its transaction (an ongoing transaction,
by first offset); its COMMIT or ABORT marker closes it (a CompletedTxn). The partition's first
unstable offset is the first offset of the earliest transaction still open, or of a completed one
whose marker the high watermark has not yet passed; the last stable offset stops there.

The log asks `prepare_update` about a batch once offsets are assigned and, if the batch is not a
duplicate, appends it and hands the result to `update`; a marker's CompletedTxn then goes to
`last_stable_offset` (for the transaction index) and `complete_txn`. Loading restores
`load_snapshot_entries` and replays batch headers with AppendOrigin.REPLICATION, which checks
nothing. Time is an argument: `remove_expired_producers(now_ms)` forgets producers idle for
producer.id.expiration.ms, never one with an open transaction.

Transaction verification (KIP-890): before a transactional batch that opens no transaction here
is sent to the coordinator to be verified (or, with transaction version 2, added), the leader
records a VerificationStateEntry for its producer, holding a verification guard, the epoch and the
lowest sequence verified. The append must bring the same guard back: a transactional batch (a
marker too) clears the entry, so a batch verified before a marker closed the transaction no longer
matches and is refused; and its sequence is checked against the entry (a version 2 producer
without state here starts at 0; no batch may skip ahead of the lowest one verified).
"""

from __future__ import annotations

import itertools
import logging
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import (
    InvalidProducerEpochException, InvalidTxnStateException, OutOfOrderSequenceException,
    TransactionCoordinatorFencedException,
)
from .log_validator import AppendOrigin
from ..wire.records import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader, ControlRecord, ControlRecordType,
)

__all__ = [
    "NUM_BATCHES_TO_RETAIN", "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "BatchMetadata", "ProducerStateEntry",
    "ProducerAppendInfo", "CompletedTxn", "ProducerStateManager", "VerificationStateEntry", "SENTINEL_GUARD",
]

log = logging.getLogger("samsa.producer_state")
_SHORT_MAX = 2**15 - 1

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: max.in.flight.requests.per.connection may be at
# most 5 for an idempotent producer, so a retry is always one of the last five batches.
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_INT_MAX = 2**31 - 1


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequences wrap from Integer.MAX_VALUE to 0."""
    if sequence < decrement:
        return _INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT_MAX)


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int  # last offset - first offset, which is also last sequence - first sequence
    timestamp: int  # the batch's max timestamp

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=deque)  # oldest first

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                                  self.current_txn_first_offset, deque(self.batches))

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        """A new epoch starts the sequence over: the old batches no longer tell duplicates."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        return next((b for b in self.batches if b.first_seq == first_seq and b.last_seq == last_seq), None)


# Kafka's VerificationGuard.SENTINEL: what a batch carries when it was not verified (its producer's
# transaction was already open here); it verifies nothing.
SENTINEL_GUARD = 0
_guards = itertools.count(1)


@dataclass
class VerificationStateEntry:
    """A producer's transactional batch sent for verification (Kafka's VerificationStateEntry):
    `guard` (Kafka's VerificationGuard, unique) is what the append must bring back; `lowest_sequence`
    the lowest first sequence verified at `epoch`; `supports_epoch_bump`: its producer is on
    transaction version 2 (Produce v12+). `timestamp`: when it was made, for its expiry."""
    timestamp: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool
    guard: int = field(default_factory=lambda: next(_guards))

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence

    def verifies(self, guard: int) -> bool:
        """Kafka's VerificationGuard.verify: the sentinel verifies nothing."""
        return guard != SENTINEL_GUARD and guard == self.guard


class CompletedTxn(NamedTuple):
    """A transaction its marker closed: from its first record to the marker."""
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ProducerAppendInfo(NamedTuple):
    """What `prepare_update` decided about one batch: either a duplicate of a batch already in the
    log (its metadata: nothing is written, the client gets the original offsets), or the producer's
    entry as it will be once the batch is written, with the transaction the batch starts or ends."""
    producer_id: int
    duplicate: BatchMetadata | None
    updated_entry: ProducerStateEntry | None
    started_txn: bool = False  # the batch opens a transaction (at its base offset)
    completed_txn: CompletedTxn | None = None  # the marker closes a transaction that wrote records
    # The batch is transactional: once written, its producer's verification is used up (Kafka's
    # UnifiedLog.updateProducers), unless it is a version 2 marker at the epoch the producer's
    # next transaction was verified at (that transaction began before this marker came).
    clears_verification: bool = False


class ProducerStateManager:
    def __init__(self, topic_partition: str,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.topic_partition = topic_partition
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # Open transactions as (first offset, producer id), in offset order (Kafka's ongoingTxns).
        self._ongoing_txns: list[tuple[int, int]] = []
        # Completed transactions whose marker is at or above the high watermark, by first offset:
        # (producer id, marker offset) (Kafka's unreplicatedTxns).
        self._unreplicated_txns: dict[int, tuple[int, int]] = {}
        # Every batch below this log offset is reflected in the state (Kafka's lastMapOffset).
        self.map_end_offset = 0
        # Where the last snapshot was taken or loaded from (Kafka's lastSnapOffset).
        self.last_snapshot_offset = 0
        # Producers whose transactional batch is being verified (Kafka's verificationStates).
        self._verification_states: dict[int, VerificationStateEntry] = {}

    def __repr__(self) -> str:
        return f"ProducerStateManager({self.topic_partition}, {len(self.producers)} producers)"

    @property
    def is_empty(self) -> bool:
        return not self.producers and not self._unreplicated_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- appends
    def prepare_update(self, header: BatchHeader, origin: AppendOrigin = AppendOrigin.CLIENT,
                       marker: ControlRecord | None = None, transaction_version: int = 0,
                       verification_guard: int | None = None) -> ProducerAppendInfo:
        """Check a batch (offsets assigned) from a producer against its state without changing it.
        Raises InvalidProducerEpochException for an older epoch, OutOfOrderSequenceException for a
        sequence that does not follow the last one, InvalidTxnStateException for a plain batch while
        the producer's transaction is open, TransactionCoordinatorFencedException for a marker from
        an older coordinator epoch. Only a client's batch is checked for duplicates and sequence, a
        coordinator's for its epoch; a replicated one (or one replayed from the log) only logs an
        old epoch. `marker` is the control batch's record; a control batch without one (its
        transaction was cleaned away) changes nothing. `transaction_version`: a marker's (KIP-1228):
        from 2 it must carry an epoch above the producer's, as every version 2 end bumps it (the same
        epoch passes only as a retry of a marker already written). `verification_guard`: the guard
        the batch's verification returned, when the broker requires one (see
        `check_transactional_append`). A client's batch verified for its producer's transaction
        also has its sequence checked against that verification."""
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            raise ValueError(f"Batch without a producer id passed to the producer state of {self.topic_partition}")
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        if origin is AppendOrigin.CLIENT:
            duplicate = current.find_duplicate_batch(header)
            if duplicate is not None:
                return ProducerAppendInfo(producer_id, duplicate, None)
        self.check_transactional_append(header, origin, verification_guard)
        if header.is_control and transaction_version >= 2:
            self._check_marker_epoch_v2(current, header, origin)
        else:
            self._check_producer_epoch(current, header, origin)
        updated = current.copy()
        clears = header.is_transactional and not self._starts_next_v2_transaction(header)
        if header.is_control:
            if marker is None or marker.type is ControlRecordType.UNKNOWN:
                return ProducerAppendInfo(producer_id, None, None, clears_verification=clears)
            return self._append_end_txn_marker(current, updated, header, marker, origin)._replace(
                clears_verification=clears)
        if origin is AppendOrigin.CLIENT:
            self._check_sequence(current, header, self._verification_states.get(producer_id))
        updated.add_batch(header.producer_epoch, header.last_sequence, header.last_offset, header.last_offset_delta,
                          header.max_timestamp)
        if updated.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateException(
                f"Expected transactional write from producer {producer_id} at offset {header.base_offset} in "
                f"partition {self.topic_partition}")
        started = updated.current_txn_first_offset is None and header.is_transactional
        if started:
            updated.current_txn_first_offset = header.base_offset
        return ProducerAppendInfo(producer_id, None, updated, started_txn=started, clears_verification=clears)

    def _starts_next_v2_transaction(self, header: BatchHeader) -> bool:
        """A version 2 marker at the epoch its producer's next transaction was verified at: that
        verification stands (Kafka's isV2NextTransactionStarted)."""
        entry = self._verification_states.get(header.producer_id)
        return (entry is not None and entry.supports_epoch_bump and header.is_control
                and header.producer_epoch == entry.epoch)

    def _append_end_txn_marker(self, current: ProducerStateEntry, updated: ProducerStateEntry, header: BatchHeader,
                               marker: ControlRecord, origin: AppendOrigin) -> ProducerAppendInfo:
        coordinator_epoch = marker.coordinator_epoch if marker.coordinator_epoch is not None else -1
        if current.coordinator_epoch > coordinator_epoch:
            message = (f"Invalid coordinator epoch for producerId {header.producer_id} at offset {header.base_offset} "
                       f"in partition {self.topic_partition}: {coordinator_epoch} (zombie), "
                       f"{current.coordinator_epoch} (current)")
            if origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedException(message)
            log.info("%s", message)
        # Only a transaction that wrote records here completes: a marker alone moves no offset.
        completed = None
        if current.current_txn_first_offset is not None:
            completed = CompletedTxn(header.producer_id, current.current_txn_first_offset, header.base_offset,
                                     marker.type is ControlRecordType.ABORT)
        updated.maybe_update_producer_epoch(header.producer_epoch)
        updated.coordinator_epoch = coordinator_epoch
        updated.current_txn_first_offset = None
        updated.last_timestamp = header.max_timestamp
        return ProducerAppendInfo(header.producer_id, None, updated, completed_txn=completed)

    def _check_producer_epoch(self, current: ProducerStateEntry, header: BatchHeader, origin: AppendOrigin) -> None:
        if header.producer_epoch >= current.producer_epoch:
            return
        message = (f"Epoch of producer {header.producer_id} at offset {header.base_offset} in "
                   f"{self.topic_partition} is {header.producer_epoch}, which is smaller than the last seen epoch "
                   f"{current.producer_epoch}")
        if origin is AppendOrigin.REPLICATION:
            log.warning("%s", message)
        else:
            raise InvalidProducerEpochException(message)

    def _check_marker_epoch_v2(self, current: ProducerStateEntry, header: BatchHeader, origin: AppendOrigin) -> None:
        """Kafka's ProducerAppendInfo.checkProducerEpoch for a transaction version 2 marker."""
        epoch = header.producer_epoch
        if epoch > current.producer_epoch:
            return
        if epoch == current.producer_epoch and (current.current_txn_first_offset is None or epoch == _SHORT_MAX):
            log.info("Idempotent transaction marker retry detected for producer %d epoch %d. Transaction already "
                     "completed, allowing duplicate marker write.", header.producer_id, epoch)
            return
        message = (f"Epoch of producer {header.producer_id} at offset {header.base_offset} in {self.topic_partition} "
                   f"is {epoch}, which is <= the last seen epoch {current.producer_epoch} (TV2)")
        if origin is AppendOrigin.REPLICATION:
            log.warning("%s", message)
        else:
            raise InvalidProducerEpochException(message)

    def _check_sequence(self, current: ProducerStateEntry, header: BatchHeader,
                        verification: VerificationStateEntry | None) -> None:
        """Kafka's ProducerAppendInfo.checkSequence."""
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if verification is not None:
            # A version 2 producer's transaction starts each partition at sequence 0 (every
            # transaction is a new epoch): a later batch without state here lost its predecessors.
            if verification.supports_epoch_bump and first_seq != 0 and current.is_empty:
                raise OutOfOrderSequenceException(
                    f"Invalid sequence number for producer {header.producer_id} at offset {header.base_offset} in "
                    f"partition {self.topic_partition}: {first_seq} (incoming seq. number). Expected sequence 0 for "
                    f"transactions v2 idempotent producer with no existing state.")
            # A batch verified after a lower one must not be written before it.
            if first_seq > verification.lowest_sequence:
                raise OutOfOrderSequenceException(
                    f"Out of order sequence number for producer {header.producer_id} at offset "
                    f"{header.base_offset} in partition {self.topic_partition}: {first_seq} (incoming seq. number), "
                    f"{verification.lowest_sequence} (earliest seen sequence)")
        if epoch != current.producer_epoch:
            # A new epoch must start at 0. An unknown producer (its state expired, or its records
            # were deleted) may go on from any sequence: Kafka stopped refusing it with
            # UNKNOWN_PRODUCER_ID in 2.5 (KIP-360).
            if first_seq != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceException(
                    f"Invalid sequence number for new epoch of producer {header.producer_id} at offset "
                    f"{header.base_offset} in partition {self.topic_partition}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {current.producer_epoch} (current producer epoch)")
            return
        if current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(current.last_seq, first_seq):
            raise OutOfOrderSequenceException(
                f"Out of order sequence number for producer {header.producer_id} at offset {header.base_offset} in "
                f"partition {self.topic_partition}: {first_seq} (incoming seq. number), {current.last_seq} (current "
                f"end sequence number)")

    def update(self, append: ProducerAppendInfo) -> None:
        """Apply what `prepare_update` decided, once the batch is in the log. A completed
        transaction stays ongoing until `complete_txn`."""
        if append.clears_verification:
            self._verification_states.pop(append.producer_id, None)
        entry = append.updated_entry
        if entry is not None:
            self.producers[append.producer_id] = entry
            if append.started_txn:
                first_offset = entry.current_txn_first_offset
                assert first_offset is not None, "prepare_update sets a started transaction's first offset"
                insort(self._ongoing_txns, (first_offset, append.producer_id))

    # -- transaction verification (Kafka's maybeCreateVerificationStateEntry and UnifiedLog's checks)
    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch

    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              supports_epoch_bump: bool, now_ms: int) -> VerificationStateEntry:
        """The producer's verification, made now unless one is pending; its lowest sequence and
        epoch follow this batch's."""
        entry = self._verification_states.get(producer_id)
        if entry is None:
            entry = self._verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch,
                                                                                    supports_epoch_bump)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self._verification_states.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verification_states.pop(producer_id, None)

    def check_transactional_append(self, header: BatchHeader, origin: AppendOrigin, guard: int | None) -> None:
        """Kafka's UnifiedLog.analyzeAndValidateProducerState, before the producer's own checks: a
        client's or coordinator's transactional batch that opens a transaction here (none is open
        at its epoch) is refused for an older epoch, and, when verification is required (`guard`
        not None: the one its verification returned), unless its verification still stands."""
        if (origin is AppendOrigin.REPLICATION or not header.is_transactional
                or header.producer_id == NO_PRODUCER_ID
                or self.has_ongoing_transaction(header.producer_id, header.producer_epoch)):
            return
        entry = self.producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochException(
                f"Epoch of producer {header.producer_id} is {header.producer_epoch}, which is smaller than the last "
                f"seen epoch {entry.producer_epoch}")
        if guard is not None and not header.is_control:
            verification = self._verification_states.get(header.producer_id)
            if verification is None or not verification.verifies(guard):
                raise InvalidTxnStateException("Record was not part of an ongoing transaction")

    # -- transactions (Kafka's firstUnstableOffset, lastStableOffset, completeTxn)
    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The last stable offset once `completed` is complete (what its transaction index entry
        records): the first offset of the earliest other open transaction, else past the marker."""
        return next((first for first, pid in self._ongoing_txns if pid != completed.producer_id),
                    completed.last_offset + 1)

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The marker of `completed` is in the log; it stays unstable until the high watermark passes it."""
        index = bisect_left(self._ongoing_txns, (completed.first_offset, completed.producer_id))
        if index == len(self._ongoing_txns) or self._ongoing_txns[index] != (completed.first_offset,
                                                                              completed.producer_id):
            raise ValueError(f"Attempted to complete transaction {completed} on partition {self.topic_partition} "
                             f"which was not started")
        del self._ongoing_txns[index]
        self._unreplicated_txns[completed.first_offset] = (completed.producer_id, completed.last_offset)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_txns(high_watermark)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        if not self._unreplicated_txns:  # asked at every high watermark move
            return
        for first, (_, last) in list(self._unreplicated_txns.items()):
            if last < offset:
                del self._unreplicated_txns[first]

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction not yet decided, or decided by a marker the
        high watermark has not passed; None when every transaction is stable."""
        first = self._ongoing_txns[0][0] if self._ongoing_txns else None
        if self._unreplicated_txns:
            unreplicated = min(self._unreplicated_txns)
            return unreplicated if first is None else min(first, unreplicated)
        return first

    @property
    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction."""
        return self._ongoing_txns[0][0] if self._ongoing_txns else None

    @property
    def ongoing_txns(self) -> list[tuple[int, int]]:
        """(first offset, producer id) of each open transaction, in offset order."""
        return list(self._ongoing_txns)

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # -- snapshots, loading, truncation, expiry
    @property
    def needs_snapshot(self) -> bool:
        """The state moved past the last snapshot (Kafka takes none otherwise)."""
        return self.map_end_offset > self.last_snapshot_offset

    def snapshot_taken(self) -> None:
        self.last_snapshot_offset = self.map_end_offset

    def load_snapshot_entries(self, entries: Iterable[ProducerStateEntry], snapshot_offset: int, now_ms: int) -> None:
        """Start over from a snapshot taken at `snapshot_offset`, less the producers expired since;
        a producer's open transaction is ongoing again."""
        self._clear()
        for entry in entries:
            if not self._is_expired(entry, now_ms):
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset is not None:
                    insort(self._ongoing_txns, (entry.current_txn_first_offset, entry.producer_id))
        self.map_end_offset = self.last_snapshot_offset = snapshot_offset

    def start_empty_at(self, offset: int) -> None:
        """No snapshot to load: the state is rebuilt from the log from `offset` (the log start)."""
        self._clear()
        self.map_end_offset = self.last_snapshot_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        self.last_snapshot_offset = 0
        self.map_end_offset = offset

    def _clear(self) -> None:
        self.producers = {}
        self._ongoing_txns = []
        self._unreplicated_txns = {}

    def on_log_start_offset_incremented(self, log_start_offset: int, latest_snapshot_offset: int | None) -> None:
        self._remove_unreplicated_txns(log_start_offset)
        self.map_end_offset = max(self.map_end_offset, log_start_offset)
        self.last_snapshot_offset = log_start_offset if latest_snapshot_offset is None else latest_snapshot_offset

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        idle_ms = now_ms - entry.last_timestamp
        return entry.current_txn_first_offset is None and idle_ms >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers without an open transaction whose last batch is older than
        producer.id.expiration.ms (by the batch's timestamp, as Kafka does). Returns how many went."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        # A verification never followed by its append goes after as long (Kafka's removeExpiredProducers).
        for pid in [pid for pid, entry in self._verification_states.items()
                    if now_ms - entry.timestamp >= self.producer_id_expiration_ms]:
            del self._verification_states[pid]
        return len(expired)
