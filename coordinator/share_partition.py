"""One share partition on its leader: the state of a (share group, topic-partition), sans I/O (Kafka's
SharePartition, with its InFlightBatch, InFlightState, RecordState and AcquisitionLockTimerTask).

The records past the share-partition start offset (SPSO) up to its end offset (SPEO) are in flight,
each AVAILABLE, ACQUIRED by a member under an acquisition lock, ACKNOWLEDGED or ARCHIVED, with a
delivery count. The state is kept per batch of offsets as the log was read (one state for the
whole batch) until a request touches part of a batch, which then keeps a state per offset. The
SPSO moves forward over the records in a terminal state (ACKNOWLEDGED, ARCHIVED); the window
SPSO..SPEO is limited to `group.share.partition.max.record.locks` records.

The shell (server/share/: SharePartitionManager, DelayedShareFetch and the ShareFetch/ShareAcknowledge
handlers) drives it:
- `initialize(state, start_offset)` with what the persister read (`Persister.read_state`); a state
  never initialized with an offset (`start_offset == UNINITIALIZED_START_OFFSET`) needs the offset the
  shell resolved from the group's `share.auto.offset.reset` (earliest, latest, by_duration).
- Fetch: read the log from `next_fetch_offset()` (while `can_acquire_records()`), then hand the
  batches read to `acquire(...)` as header facts only (`FetchedBatch`: offsets, producer id,
  transactional, control; the records are never decoded here) with the log's aborted transactions
  of that range under read_committed; it answers the `AcquiredRecords` ranges for the ShareFetch
  response and their write (the response goes once it is committed). An OFFSET_OUT_OF_RANGE from
  the log: `update_cache_and_offsets(log_start_offset)`.
- `acknowledge(member_id, batches, now_ms)` and `release_acquired_records(member_id, now_ms)`.
- Locks: `next_deadline()` says when to call `expire_locks(now_ms)`.
- State changes to persist come back as a `PendingWrite`: the shell sends `pending.state` with
  `Persister.write_state`, then calls `complete_write(pending.write_id, error_code)`.

Writes and the restart rule. Every change of a record's delivery state or count is written before
anyone acts on it. An acquisition is written too, which Kafka 4.4 does not do (its
DeliveryCountOps.INCREASE is in memory only, so a leader that dies forgets the deliveries in flight
and a record may be delivered past the limit): `acquire` answers the acquired ranges with a
`PendingWrite` (`ShareAcquiredRecords.write`) of them as AVAILABLE with their raised delivery
count, and the shell hands the records to the member only once `complete_write` committed it. A
new leader reading that state delivers them again with the count going on from there, and archives
at load a record AVAILABLE at the limit (its last delivery was made). A failed write rolls the
acquisition back: the records are AVAILABLE again with their previous count, never delivered. An
acknowledgement or a release is a transition too: the records take their new state at once,
marked as in transition (a record in transition is neither acquired nor acknowledged again, and
the SPSO does not pass it), and `complete_write` commits it when the persister has the state, or
rolls it back (to ACQUIRED, or to AVAILABLE/ARCHIVED when the lock ran out meanwhile) when the
write failed, the client being answered the persister's error. An acquisition whose lock ran out or
whose member's records were released while it was being written is released when it commits (its
write holds the count already). A lock expiry applies at once and its write is best effort, as in
Kafka (the count it carries was written by the acquisition). The SPSO moves over a run of terminal
records when a write completes, and each write carries the SPSO as it was when the write was made:
the persisted start offset passes a record only once its ACKNOWLEDGED or ARCHIVED state was
written, or once it needs no state (archived in memory only, as in Kafka: an aborted transaction's
record under read_committed or a record below the log's start, which a new leader finds the same
way again; or a record archived at the delivery limit, whose count at the limit was written by its
last acquisition). The shell must have the writes of one share partition applied in the order they
were made. Hence, across a restart (a new leader reads the persisted state):
- no record is lost: a record the new leader finds past the persisted SPSO with no state, AVAILABLE,
  or in a state whose change was not written, is delivered again;
- nothing acknowledged or archived in the persister is delivered again, and the delivery count
  resumes from the persisted one, which counts every delivery made: a record is never delivered
  more than `group.share.delivery.count.limit` times, whatever fails and restarts
  (tests/coordinator/test_share_partition.py checks this in random runs with failed writes,
  restarts, retention and read_committed). A write that failed but reached the persister counts a
  delivery never made: a record may be archived with fewer deliveries than the limit, never more.

Where it differs from Kafka 4.4: acquisitions are written (above); and, each to end a stall Kafka
has (marked "not in Kafka" below), the SPSO also moves after a rolled-back write, after
read_committed archival in `acquire` and after a moved log start; records below the SPSO never
block it and are never the next fetch offset; the persister's gap window starts at the next real
gap. Not served: the dead letter queue (KIP-1191's ARCHIVING state loads as ARCHIVED). Adjacent
changes with one state and count are written as one state batch.

Errors of a request raise `SharePartitionError` with Kafka's error code (INVALID_RECORD_STATE,
INVALID_REQUEST...) and change nothing.
"""

from __future__ import annotations

import bisect
import enum
import heapq
import itertools
import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from ..wire.errors import ErrorCode
from .share_state import UNINITIALIZED_START_OFFSET, PersisterStateBatch, RecordState, SharePartitionState

__all__ = [
    "AbortedTransaction", "AcknowledgeType", "InFlightBatch", "InFlightState", "AcquiredRecords", "CompletedWrite", "FetchedBatch",
    "PendingWrite", "RecordState", "ShareAcknowledgementBatch", "ShareAcquireMode", "ShareAcquiredRecords",
    "SharePartition", "SharePartitionConfig", "SharePartitionError", "SharePartitionStatus",
    "UNINITIALIZED_START_OFFSET", "persister_error",
]

EMPTY_MEMBER_ID = ""


class AcknowledgeType(IntEnum):
    """The acknowledge types of ShareFetch/ShareAcknowledge (Kafka's AcknowledgeType ids; 0 is a gap:
    an offset with no record, archived)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: extend the acquisition lock


class ShareAcquireMode(IntEnum):
    """ShareFetch v2's ShareAcquireMode (KIP-1206): batch_optimized may answer more than
    max_records to keep batches whole; record_limit never does."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


class SharePartitionStatus(enum.Enum):
    """The life of a share partition (Kafka's SharePartition.SharePartitionState, renamed here
    because SharePartitionState is the persisted state in coordinator/share_state.py)."""

    EMPTY = "EMPTY"  # created, state not read yet
    INITIALIZING = "INITIALIZING"  # the persister's state is being read
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"  # the state could not be read or was invalid
    FENCED = "FENCED"  # leadership lost, or the share partition is being removed


@dataclass(frozen=True)
class SharePartitionConfig:
    """The group's settings this class applies, each the group's config or else the broker's
    default (Kafka's ShareGroupConfigProvider). The shell may replace `SharePartition.config` at
    any time (a group config changed); the new values apply from the next call."""

    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms / group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit / group.share.delivery.count.limit
    max_in_flight_records: int = 2000  # share.partition.max.record.locks / group.share.partition.max.record.locks
    renew_acknowledge_enabled: bool = True  # share.renew.acknowledge.enable


class SharePartitionError(Exception):
    """A request the share partition refuses; `error_code` is Kafka's answer for it."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message


class FetchedBatch(NamedTuple):
    """The header facts of one record batch read from the log: all `acquire` looks at."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


class AbortedTransaction(NamedTuple):
    """An aborted transaction in the fetched range (Fetch's AbortedTransaction)."""

    producer_id: int
    first_offset: int


class AcquiredRecords(NamedTuple):
    """A range of offsets acquired for the member, for the ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class ShareAcquiredRecords:
    """What `acquire` answers: the ranges in offset order, how many offsets they cover (what
    counts against the request's max_records), and the write of their delivery counts (None when
    nothing was acquired): the records go to the member only once it is committed."""

    acquired_records: list[AcquiredRecords]
    count: int
    write: PendingWrite | None = None


class ShareAcknowledgementBatch(NamedTuple):
    """A ShareFetch/ShareAcknowledge AcknowledgementBatch: one acknowledge type for the whole range,
    or one per offset (len(acknowledge_types) == last_offset - first_offset + 1)."""

    first_offset: int
    last_offset: int
    acknowledge_types: Sequence[int]


@dataclass(frozen=True)
class PendingWrite:
    """A state change to persist: send `state` with Persister.write_state (the changed batches
    only, with the SPSO, epochs and delivery complete count of when it was made), then call
    `SharePartition.complete_write(write_id, error_code)`."""

    write_id: int
    state: SharePartitionState


@dataclass(frozen=True)
class CompletedWrite:
    """What `complete_write` says: `error_code` is the answer for the request that made the write
    (NONE, or Kafka's mapping of the persister's error); `fetchable` is true when records may have
    become acquirable or the SPSO moved (wake the delayed share fetches of the partition)."""

    error_code: ErrorCode
    fetchable: bool


# -- internals: Kafka's AcquisitionLockTimerTask, InFlightState and InFlightBatch ------------------

_INCREASE, _NO_OP, _DECREASE = 1, 0, -1  # Kafka's DeliveryCountOps, as the change they make
_TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
# Kafka's ACK_TYPE_TO_RECORD_STATE (RENEW is no state change).
_ACK_TYPE_TO_RECORD_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}
_EMPTY_ACQUIRED = ShareAcquiredRecords([], 0)


class _AcquisitionLock:
    """An acquisition lock on offsets first..last for a member, due at `deadline_ms` (Kafka's
    AcquisitionLockTimerTask, on the caller's clock)."""

    __slots__ = ("deadline_ms", "member_id", "first_offset", "last_offset", "cancelled", "expired")

    def __init__(self, deadline_ms: int, member_id: str, first_offset: int, last_offset: int) -> None:
        self.deadline_ms = deadline_ms
        self.member_id = member_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.cancelled = False
        self.expired = False


def _valid_transition(current: RecordState, new: RecordState) -> bool:
    """Kafka's RecordState.validateTransition."""
    if current is new or current in _TERMINAL:
        return False
    return not (current is RecordState.AVAILABLE and new is not RecordState.ACQUIRED)


class InFlightState:
    """The state of one in-flight batch, or of one offset of a batch kept per offset (Kafka's
    InFlightState): state, delivery count, the member holding it, its lock, and the state to go
    back to while a change waits for the persister."""

    __slots__ = ("state", "delivery_count", "member_id", "lock", "_rollback", "_terminal")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str,
                 lock: _AcquisitionLock | None = None) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock = lock
        # (state, member id, delivery count limit) before the change in transition.
        self._rollback: tuple[RecordState, str, int, int] | None = None
        self._terminal = False  # archived while in transition: a rollback must not undo it

    def has_ongoing_state_transition(self) -> bool:
        return self._rollback is not None

    def cancel_and_clear_lock(self) -> None:
        if self.lock is not None:
            self.lock.cancelled = True
            self.lock = None

    def try_update_state(self, new_state: RecordState, ops: int, max_delivery_count: int,
                         new_member_id: str) -> InFlightState | None:
        if self._rollback is not None:
            return None
        if new_state is RecordState.AVAILABLE and ops != _DECREASE and self.delivery_count >= max_delivery_count:
            new_state = RecordState.ARCHIVED
        if not _valid_transition(self.state, new_state):
            return None
        self.state = new_state
        if new_state is not RecordState.ARCHIVED:
            self.delivery_count += ops
        self.member_id = new_member_id
        return self

    def start_state_transition(self, new_state: RecordState, ops: int, max_delivery_count: int,
                               new_member_id: str) -> InFlightState | None:
        previous = (self.state, self.member_id, self.delivery_count, max_delivery_count)
        updated = self.try_update_state(new_state, ops, max_delivery_count, new_member_id)
        if updated is not None:
            self._rollback = previous
        return updated

    def start_acquisition_transition(self, max_delivery_count: int) -> None:
        """Acquired (ACQUIRED, the delivery count raised by one) until its write completes."""
        self._rollback = (RecordState.AVAILABLE, EMPTY_MEMBER_ID, self.delivery_count - 1, max_delivery_count)

    def complete_state_transition(self, commit: bool) -> None:
        rollback = self._rollback
        self._rollback = None
        if rollback is not None and not self._terminal and self.state is RecordState.ACQUIRED:
            self._complete_acquisition(commit, rollback)
            return
        if commit or self._terminal or rollback is None:
            self.cancel_and_clear_lock()
            return
        previous_state, previous_member, previous_count, max_delivery_count = rollback
        if self.lock is not None and self.lock.expired:
            # The lock ran out while the change was being written: the records are not the
            # member's any more (Kafka's completeStateTransition).
            self.state = RecordState.ARCHIVED if previous_count >= max_delivery_count else RecordState.AVAILABLE
            self.member_id = EMPTY_MEMBER_ID
            self.cancel_and_clear_lock()
        else:
            self.state = previous_state
            self.member_id = previous_member

    def _complete_acquisition(self, commit: bool, rollback: tuple[RecordState, str, int, int]) -> None:
        previous_state, _, previous_count, max_delivery_count = rollback
        if not commit:  # never delivered: as it was
            self.state = previous_state
            self.delivery_count = previous_count
            self.member_id = EMPTY_MEMBER_ID
            self.cancel_and_clear_lock()
        elif self.lock is None or self.lock.expired:
            # Released, or its lock ran out, while being written: released now (the count written
            # is the one it keeps, so nothing more to write; one at the limit is archived, as a
            # new leader archives it at load).
            self.state = RecordState.ARCHIVED if self.delivery_count >= max_delivery_count else RecordState.AVAILABLE
            self.member_id = EMPTY_MEMBER_ID
            self.cancel_and_clear_lock()

    def archive(self) -> None:
        self._terminal = True
        self.state = RecordState.ARCHIVED
        self.member_id = EMPTY_MEMBER_ID
        self.cancel_and_clear_lock()

    def __repr__(self) -> str:
        return f"InFlightState({self.state.name}, {self.delivery_count}, {self.member_id!r})"


class InFlightBatch:
    """In-flight offsets first..last with one state (`batch_state`) until a request touches part of
    them, then one state per offset (`offset_state`, in offset order) (Kafka's InFlightBatch)."""

    __slots__ = ("first_offset", "last_offset", "batch_state", "offset_state")

    def __init__(self, first_offset: int, last_offset: int, state: InFlightState) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.batch_state: InFlightState | None = state
        self.offset_state: dict[int, InFlightState] | None = None

    def __repr__(self) -> str:
        inner = self.batch_state if self.offset_state is None else self.offset_state
        return f"InFlightBatch({self.first_offset}..{self.last_offset}, {inner})"


class _GapWindow:
    """Offsets the persister's state left out between its batches (never delivered) up to
    `end_offset`, the SPEO at load: acquired from `gap_start_offset` on (Kafka's GapWindow)."""

    __slots__ = ("end_offset", "gap_start_offset")

    def __init__(self, end_offset: int, gap_start_offset: int) -> None:
        self.end_offset = end_offset
        self.gap_start_offset = gap_start_offset


@dataclass
class _Write:
    """A PendingWrite's bookkeeping: the states in transition it commits or rolls back (None for a
    lock expiry, applied already)."""

    transitions: list[InFlightState] | None


def persister_error(error_code: int) -> ErrorCode:
    """The error a request gets for the persister's error (Kafka's SharePartition.fetchPersisterError)."""
    try:
        error = ErrorCode(error_code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if error is ErrorCode.NONE:
        return error
    if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return error
    if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _throttle_records_delivery_limit(max_delivery_count: int) -> int:
    # From this delivery count on, records go out in fewer numbers (Kafka's throttleRecordsDeliveryLimit).
    return max(2, math.ceil(max_delivery_count / 2))


def _merge_state_batches(batches: list[PersisterStateBatch]) -> list[PersisterStateBatch]:
    """Adjacent batches with one state and count as one (the offsets are in order)."""
    merged: list[PersisterStateBatch] = []
    for batch in batches:
        if merged:
            last = merged[-1]
            if (last.last_offset + 1 == batch.first_offset and last.delivery_state == batch.delivery_state
                    and last.delivery_count == batch.delivery_count):
                merged[-1] = PersisterStateBatch(last.first_offset, batch.last_offset, last.delivery_state,
                                                 last.delivery_count)
                continue
        merged.append(batch)
    return merged


class SharePartition:
    """The state of one share partition; see the module's docstring."""

    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int = -1,
                 config: SharePartitionConfig | None = None) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.config = config if config is not None else SharePartitionConfig()
        self._status = SharePartitionStatus.EMPTY
        self._state_epoch = 0
        self._start_offset = 0
        self._end_offset = 0
        # The in-flight batches by first offset, and their first offsets in order.
        self._cached_state: dict[int, InFlightBatch] = {}
        self._keys: list[int] = []
        self._find_next_fetch_offset = False
        self._gap_window: _GapWindow | None = None
        self._locks: list[tuple[int, int, _AcquisitionLock]] = []  # heap by deadline
        self._lock_sequence = itertools.count()
        self._writes: dict[int, _Write] = {}
        self._write_ids = itertools.count(1)
        self._fetch_lock: object | None = None

    # -- life ------------------------------------------------------------------------------------

    @property
    def status(self) -> SharePartitionStatus:
        return self._status

    def start_initializing(self) -> bool:
        """EMPTY -> INITIALIZING: true when the caller should now read the persister's state; false
        when already ACTIVE. Raises SharePartitionError LEADER_NOT_AVAILABLE while initializing or
        fenced, UNKNOWN_SERVER_ERROR when it failed (Kafka's maybeInitialize)."""
        status = self._status
        if status is SharePartitionStatus.ACTIVE:
            return False
        if status is SharePartitionStatus.INITIALIZING:
            raise SharePartitionError(ErrorCode.LEADER_NOT_AVAILABLE, "Share partition is already initializing")
        if status is SharePartitionStatus.FENCED:
            raise SharePartitionError(ErrorCode.LEADER_NOT_AVAILABLE, "Share partition is fenced")
        if status is SharePartitionStatus.FAILED:
            raise SharePartitionError(ErrorCode.UNKNOWN_SERVER_ERROR, "Share partition failed to load")
        self._status = SharePartitionStatus.INITIALIZING
        return True

    def initialize(self, state: SharePartitionState, start_offset: int | None = None) -> None:
        """Load the persister's state (ReadShareGroupState) and become ACTIVE. `start_offset`: the
        offset the caller resolved by `share.auto.offset.reset` when `state.start_offset` is
        UNINITIALIZED_START_OFFSET (ignored otherwise). Records AVAILABLE at the delivery count
        limit are archived. State batches below the start offset or
        with last < first fail the partition (FAILED, SharePartitionError UNKNOWN_SERVER_ERROR)."""
        if self._status in (SharePartitionStatus.ACTIVE, SharePartitionStatus.FENCED):
            raise SharePartitionError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Share partition is {self._status.value}")
        if state.start_offset != UNINITIALIZED_START_OFFSET:
            spso = state.start_offset
        elif start_offset is not None and start_offset >= 0:
            spso = start_offset
        else:
            self._status = SharePartitionStatus.FAILED
            raise SharePartitionError(ErrorCode.UNKNOWN_SERVER_ERROR, "No start offset to initialize the share partition")
        cached: list[InFlightBatch] = []
        gap_start = -1
        previous_last = spso - 1
        for state_batch in sorted(state.state_batches, key=lambda b: b.first_offset):
            if (state_batch.first_offset < spso or state_batch.last_offset < state_batch.first_offset
                    or state_batch.first_offset <= previous_last):
                self._status = SharePartitionStatus.FAILED
                raise SharePartitionError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                          f"Invalid state batch {state_batch} (start offset {spso})")
            if gap_start == -1 and state_batch.first_offset > previous_last + 1:
                gap_start = previous_last + 1
            previous_last = state_batch.last_offset
            loaded = _loaded_state(state_batch.delivery_state)
            if loaded is RecordState.AVAILABLE and state_batch.delivery_count >= self.config.delivery_count_limit:
                # Its last delivery was made (an acquisition's write, not in Kafka): never again.
                loaded = RecordState.ARCHIVED
            cached.append(InFlightBatch(state_batch.first_offset, state_batch.last_offset,
                                        InFlightState(loaded, state_batch.delivery_count, EMPTY_MEMBER_ID)))
        self._state_epoch = state.state_epoch
        self._start_offset = spso
        self._cached_state = {batch.first_offset: batch for batch in cached}
        self._keys = [batch.first_offset for batch in cached]
        if cached:
            self._find_next_fetch_offset = True
            self._end_offset = cached[-1].last_offset
            if gap_start != -1:
                self._gap_window = _GapWindow(self._end_offset, gap_start)
            self._maybe_update_cached_state_and_offsets()
        else:
            self._end_offset = spso
        self._status = SharePartitionStatus.ACTIVE

    def mark_failed(self) -> None:
        """The persister's read failed: FAILED (Kafka's future completed exceptionally)."""
        self._status = SharePartitionStatus.FAILED

    def mark_fenced(self) -> None:
        """FENCED: leadership moved or the partition is being removed; every call refuses from now."""
        self._status = SharePartitionStatus.FENCED

    # -- fetch -----------------------------------------------------------------------------------

    def maybe_acquire_fetch_lock(self, fetch_id: object) -> bool:
        """Take the partition's fetch lock (one fetch reads the log and acquires at a time), false
        when another fetch holds it or the partition is not ACTIVE."""
        if self._status is not SharePartitionStatus.ACTIVE or self._fetch_lock is not None:
            return False
        self._fetch_lock = fetch_id
        return True

    def release_fetch_lock(self, fetch_id: object) -> None:
        # Kafka releases it whoever holds it (and logs when it was not `fetch_id`).
        self._fetch_lock = None

    def next_fetch_offset(self) -> int:
        """Where the next fetch reads the log: the first AVAILABLE in-flight offset, else SPEO + 1
        (SPEO itself while nothing is in flight)."""
        in_flight = bool(self._keys) and self._start_offset <= self._last_batch().last_offset
        if not self._find_next_fetch_offset:
            return self._end_offset + 1 if in_flight else self._end_offset
        if not in_flight:
            self._find_next_fetch_offset = False
            return self._end_offset
        gap_active = self._gap_window_active()
        gap_start = self._gap_window.gap_start_offset if gap_active and self._gap_window else -1
        start = self._start_offset
        # Records below the SPSO are never fetched again (Kafka's would answer one that went back
        # to AVAILABLE after the log's start passed it: a read below the log's start).
        for key in self._keys[max(0, bisect.bisect_right(self._keys, start) - 1):]:
            batch = self._cached_state[key]
            if gap_active:
                if key > gap_start:
                    return gap_start
                gap_start = max(batch.last_offset + 1, gap_start)
            if batch.offset_state is None:
                state = batch.batch_state
                assert state is not None
                if state.state is RecordState.AVAILABLE and not state.has_ongoing_state_transition():
                    return max(key, start)
            else:
                for offset, offset_state in batch.offset_state.items():
                    if (offset >= start and offset_state.state is RecordState.AVAILABLE
                            and not offset_state.has_ongoing_state_transition()):
                        return offset
        self._find_next_fetch_offset = False
        return self._end_offset + 1

    def can_acquire_records(self) -> bool:
        """Whether a fetch may acquire: some in-flight record is available again, or the window
        is not full."""
        if self.next_fetch_offset() != self._end_offset + 1:
            return True
        return self.in_flight_records < self.config.max_in_flight_records

    def acquire(self, member_id: str, fetch_offset: int, batches: Sequence[FetchedBatch], now_ms: int, *,
                max_fetch_records: int, batch_size: int,
                share_acquire_mode: ShareAcquireMode = ShareAcquireMode.BATCH_OPTIMIZED,
                read_committed: bool = False,
                aborted_transactions: Iterable[AbortedTransaction] | None = None) -> ShareAcquiredRecords:
        """Acquire for `member_id` what it may take of the batches the log answered for a read at
        `fetch_offset`, with locks until now_ms + record_lock_duration_ms, raising delivery counts.

        Batches never in flight are acquired whole, cut at the window limit and at `max_fetch_records`
        (rounded up to a batch end in batch_optimized mode; exactly in record_limit mode, the rest of
        the last batch staying AVAILABLE), and answered in ranges of about `batch_size` records along
        batch boundaries (batch_optimized). In-flight batches are acquired where AVAILABLE; records near the delivery limit
        are throttled as Kafka does (a record on its last attempt goes alone). Under read_committed,
        data batches of `aborted_transactions` are archived and left out of the answer. The
        answer's `write` persists the acquired records' raised delivery counts (as AVAILABLE): they
        stay ACQUIRED in transition until `complete_write` commits it, or go back to AVAILABLE with
        their previous count if it failed (not in Kafka, which persists no acquisition)."""
        acquired = self._acquire(member_id, fetch_offset, batches, now_ms, max_fetch_records, batch_size,
                                 share_acquire_mode == ShareAcquireMode.RECORD_LIMIT, read_committed,
                                 aborted_transactions)
        if not acquired.acquired_records:
            return acquired
        transitions: list[InFlightState] = []
        state_batches: list[PersisterStateBatch] = []
        max_delivery_count = self.config.delivery_count_limit
        for records in acquired.acquired_records:
            for state in self._states_in(records.first_offset, records.last_offset):
                state.start_acquisition_transition(max_delivery_count)
                transitions.append(state)
            state_batches.append(_batch(records.first_offset, records.last_offset, RecordState.AVAILABLE,
                                        records.delivery_count))
        return ShareAcquiredRecords(acquired.acquired_records, acquired.count,
                                    self._new_write(state_batches, transitions))

    def _acquire(self, member_id: str, fetch_offset: int, batches: Sequence[FetchedBatch], now_ms: int,
                 max_fetch_records: int, batch_size: int, record_limit: bool, read_committed: bool,
                 aborted_transactions: Iterable[AbortedTransaction] | None) -> ShareAcquiredRecords:
        if self._status is not SharePartitionStatus.ACTIVE or max_fetch_records <= 0 or not batches:
            return _EMPTY_ACQUIRED
        last_batch = batches[-1]
        if last_batch.last_offset < self._start_offset:
            return _EMPTY_ACQUIRED
        last_offset_to_acquire, max_records = self._last_offset_and_max_records_to_acquire(
            fetch_offset, max_fetch_records, last_batch.last_offset)
        if max_records <= 0:
            return _EMPTY_ACQUIRED
        first_batch_offset = batches[0].base_offset
        base_offset = first_batch_offset
        self._maybe_archive_stale_batches(fetch_offset, base_offset)
        floor = self._floor_batch(base_offset)
        if floor is None:
            if base_offset < self._start_offset:
                base_offset = self._start_offset
        elif floor.last_offset >= base_offset:
            base_offset = floor.first_offset
        sub_map = self._sub_map(min(first_batch_offset, base_offset), last_offset_to_acquire)
        if not sub_map:
            acquired = self._acquire_new_batch_records(member_id, batches, record_limit, base_offset,
                                                       last_offset_to_acquire, batch_size, max_records, now_ms)
            return self._maybe_filter_aborted(batches, read_committed, aborted_transactions, acquired)

        # Overlap with in-flight records: acquire those available, and what is new around them.
        result: list[AcquiredRecords] = []
        acquired_count = 0
        max_delivery_count = self.config.delivery_count_limit
        maybe_gap_start = base_offset
        for batch in sub_map:
            if acquired_count >= max_records:
                break
            if self._gap_window_active():
                if maybe_gap_start < batch.first_offset:
                    new = self._acquire_new_batch_records(member_id, batches, record_limit, maybe_gap_start,
                                                          batch.first_offset - 1, batch_size,
                                                          max_records - acquired_count, now_ms)
                    result.extend(new.acquired_records)
                    acquired_count += new.count
                maybe_gap_start = batch.last_offset + 1
                if acquired_count >= max_records:
                    break
            full_match = batch.first_offset >= first_batch_offset and batch.last_offset <= last_offset_to_acquire
            remaining = max_records - acquired_count
            record_limit_subset = record_limit and batch.last_offset - batch.first_offset + 1 > remaining
            throttle = self._should_throttle_records_delivery(batch, first_batch_offset, last_offset_to_acquire)
            if throttle and acquired_count > 0:
                # Records near the delivery limit go out on their own.
                max_records = 0
                break
            if full_match and batch.offset_state is None and not record_limit_subset and not throttle:
                state = batch.batch_state
                assert state is not None
                if state.state is RecordState.AVAILABLE and not state.has_ongoing_state_transition():
                    updated = state.try_update_state(RecordState.ACQUIRED, _INCREASE, max_delivery_count, member_id)
                    if updated is not None and updated.state is RecordState.ACQUIRED:
                        state.lock = self._schedule_lock(member_id, batch.first_offset, batch.last_offset, now_ms)
                        result.append(AcquiredRecords(batch.first_offset, batch.last_offset, state.delivery_count))
                        acquired_count += batch.last_offset - batch.first_offset + 1
                continue
            if batch.offset_state is None:
                state = batch.batch_state
                assert state is not None
                if state.state is not RecordState.AVAILABLE or state.has_ongoing_state_transition():
                    continue
                self._split(batch)
            subset_count = self._acquire_subset_batch_records(member_id, record_limit, remaining, first_batch_offset,
                                                              last_offset_to_acquire, batch, result, now_ms)
            acquired_count += subset_count
            if throttle and subset_count > 0:
                max_records = 0
                break
        last_in_flight = sub_map[-1].last_offset
        if acquired_count < max_records and last_in_flight < last_offset_to_acquire:
            new = self._acquire_new_batch_records(member_id, batches, record_limit, last_in_flight + 1,
                                                  last_offset_to_acquire, batch_size, max_records - acquired_count,
                                                  now_ms)
            result.extend(new.acquired_records)
            acquired_count += new.count
        if not result:
            return ShareAcquiredRecords(result, acquired_count)
        self._maybe_update_gap_window_start_offset(result[-1].last_offset + 1)
        return self._maybe_filter_aborted(batches, read_committed, aborted_transactions,
                                          ShareAcquiredRecords(result, acquired_count))

    def update_cache_and_offsets(self, log_start_offset: int) -> None:
        """The log's start offset moved past the SPSO (retention, DeleteRecords; the fetch answered
        OFFSET_OUT_OF_RANGE): AVAILABLE records below it are archived and the SPSO moves to it."""
        if log_start_offset <= self._start_offset:
            return
        gap = self._gap_window
        if gap is not None and gap.gap_start_offset < log_start_offset:
            # The gap below the log's start is gone with the log (Kafka would move the SPSO back to it).
            self._set_gap_start_offset(gap, log_start_offset)
        if self._keys:
            if self._archive_records(self._start_offset, log_start_offset, self._batches(), RecordState.AVAILABLE):
                self._find_next_fetch_offset = True
            self._start_offset = log_start_offset
            if self._end_offset < log_start_offset:
                self._end_offset = log_start_offset
            # Not in Kafka: terminal records below the new start need no write to be dropped.
            self._maybe_update_cached_state_and_offsets()
            return
        self._start_offset = log_start_offset
        self._end_offset = log_start_offset

    # -- acknowledgement -------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[ShareAcknowledgementBatch],
                    now_ms: int) -> PendingWrite | None:
        """Acknowledge `member_id`'s acquired records: ACCEPT -> ACKNOWLEDGED, RELEASE -> AVAILABLE
        (ARCHIVED at the delivery count limit), REJECT and GAP -> ARCHIVED, RENEW extends the lock
        to now_ms + record_lock_duration_ms (nothing to write). All or nothing: raises
        SharePartitionError (INVALID_REQUEST for an unknown type or offsets past the acquired
        records, INVALID_RECORD_STATE for records not acquired, acquired by another member or in
        transition, or RENEW when disabled) with no change. Offsets below the SPSO are skipped.
        Returns the write to persist, or None when there is none."""
        transitions: list[InFlightState] = []
        state_batches: list[PersisterStateBatch] = []
        try:
            for batch in batches:
                types = self._acknowledge_types(batch)
                if batch.last_offset < self._start_offset:
                    continue  # already archived
                sub_map = self._sub_map_for_acknowledgement_batch(batch)
                self._acknowledge_batch_records(member_id, batch, types, sub_map, transitions, state_batches, now_ms)
        except SharePartitionError:
            self._roll_back(transitions)
            raise
        return self._new_write(state_batches, transitions)

    def release_acquired_records(self, member_id: str, now_ms: int) -> PendingWrite | None:
        """Release every record `member_id` holds (it left the group, its share session closed):
        AVAILABLE again (the delivery count stays), ARCHIVED below the SPSO or at the limit. Records
        whose acquisition is being written are released when it commits."""
        transitions: list[InFlightState] = []
        state_batches: list[PersisterStateBatch] = []
        max_delivery_count = self.config.delivery_count_limit
        try:
            for batch in self._batches():
                state = batch.batch_state
                if (batch.offset_state is None and state is not None and state.state is RecordState.ACQUIRED
                        and state.member_id == member_id
                        and batch.first_offset < self._start_offset <= batch.last_offset):
                    self._split(batch)
                if batch.offset_state is not None:
                    for offset, offset_state in batch.offset_state.items():
                        if offset_state.member_id not in (member_id, EMPTY_MEMBER_ID):
                            continue
                        if offset_state.state is not RecordState.ACQUIRED:
                            continue
                        if offset_state.has_ongoing_state_transition():
                            offset_state.cancel_and_clear_lock()  # being acquired: released once written
                            continue
                        target = RecordState.ARCHIVED if offset < self._start_offset else RecordState.AVAILABLE
                        self._transition(offset_state, offset, offset, target, max_delivery_count, transitions,
                                         state_batches, "Unable to release acquired records for the offset")
                else:
                    assert state is not None
                    if state.member_id not in (member_id, EMPTY_MEMBER_ID) or state.state is not RecordState.ACQUIRED:
                        continue
                    if state.has_ongoing_state_transition():
                        state.cancel_and_clear_lock()
                        continue
                    target = RecordState.ARCHIVED if batch.last_offset < self._start_offset else RecordState.AVAILABLE
                    self._transition(state, batch.first_offset, batch.last_offset, target, max_delivery_count,
                                     transitions, state_batches, "Unable to release acquired records for the batch")
        except SharePartitionError:
            self._roll_back(transitions)
            raise
        return self._new_write(state_batches, transitions)

    # -- acquisition locks -----------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline (ms on the caller's clock), None without locks."""
        locks = self._locks
        while locks and locks[0][2].cancelled:
            heapq.heappop(locks)
        return locks[0][0] if locks else None

    def expire_locks(self, now_ms: int) -> PendingWrite | None:
        """Release the records whose lock is due at `now_ms`: AVAILABLE again, ARCHIVED at the
        delivery count limit. Applied at once; the write (returned, None when nothing expired) is
        best effort. A non-None answer also means records became acquirable."""
        state_batches: list[PersisterStateBatch] = []
        locks = self._locks
        while locks and locks[0][0] <= now_ms:
            lock = heapq.heappop(locks)[2]
            if lock.cancelled:
                continue
            lock.expired = True
            self._release_acquisition_lock_on_timeout(lock, state_batches)
        if not state_batches:
            return None
        return self._new_write(state_batches, None)

    # -- persistence -----------------------------------------------------------------------------

    def complete_write(self, write_id: int, error_code: int = ErrorCode.NONE) -> CompletedWrite:
        """The persister answered the write `write_id` (once per write; KeyError otherwise): commit
        its transitions (error NONE) or roll them back, and move the SPSO."""
        write = self._writes.pop(write_id)
        error = persister_error(error_code)
        fetchable = False
        if write.transitions is not None:
            ok = error is ErrorCode.NONE
            for state in write.transitions:
                state.complete_state_transition(ok)
                if state.state is RecordState.AVAILABLE:
                    self._find_next_fetch_offset = True
                    fetchable = True
        # A lock expiry was applied already: the SPSO moves whether its write made it or not. So it
        # does after a rollback (not in Kafka), which archives records whose lock ran out at the
        # delivery limit meanwhile: else a full window of them would stop the partition.
        if self._maybe_update_cached_state_and_offsets():
            fetchable = True
        return CompletedWrite(error, fetchable)

    # -- describe --------------------------------------------------------------------------------

    @property
    def state_epoch(self) -> int:
        return self._state_epoch

    @property
    def start_offset(self) -> int:
        """The SPSO."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The SPEO: the last offset in flight (the SPSO while nothing is)."""
        return self._end_offset

    @property
    def in_flight_records(self) -> int:
        """SPEO - SPSO + 1 while records are in flight, else 0 (what the window limit counts)."""
        return self._end_offset - self._start_offset + 1 if self._keys else 0

    @property
    def in_flight_batch_count(self) -> int:
        """Batches in the cached state (Kafka's cachedState.size(), its InFlightBatchCount metric)."""
        return len(self._keys)

    @property
    def delivery_complete_count(self) -> int:
        """In-flight records past the SPSO in a terminal state (KIP-1226, for lag)."""
        start = self._start_offset
        count = 0
        for batch in self._batches():
            if batch.last_offset < start:
                continue
            if batch.offset_state is None:
                assert batch.batch_state is not None
                if batch.batch_state.state in _TERMINAL:
                    count += batch.last_offset - max(start, batch.first_offset) + 1
            else:
                count += sum(1 for offset, state in batch.offset_state.items()
                             if offset >= start and state.state in _TERMINAL)
        return count

    def snapshot(self) -> SharePartitionState:
        """The in-flight state past the SPSO, as the persister would hold it if every change were
        written (ACQUIRED included; for tests and diagnostics)."""
        start = self._start_offset
        state_batches: list[PersisterStateBatch] = []
        for batch in self._batches():
            if batch.last_offset < start:
                continue
            if batch.offset_state is None:
                assert batch.batch_state is not None
                state = batch.batch_state
                state_batches.append(_batch(max(start, batch.first_offset), batch.last_offset, state.state,
                                            state.delivery_count))
            else:
                state_batches.extend(_batch(offset, offset, state.state, state.delivery_count)
                                     for offset, state in batch.offset_state.items() if offset >= start)
        return SharePartitionState(self._state_epoch, self._start_offset, self.leader_epoch,
                                   _merge_state_batches(state_batches), self.delivery_complete_count)

    # -- the cached state (Kafka's cachedState, a NavigableMap by first offset) -------------------

    def _batches(self) -> list[InFlightBatch]:
        return [self._cached_state[key] for key in self._keys]

    def _last_batch(self) -> InFlightBatch:
        return self._cached_state[self._keys[-1]]

    def _floor_batch(self, offset: int) -> InFlightBatch | None:
        index = bisect.bisect_right(self._keys, offset)
        return self._cached_state[self._keys[index - 1]] if index else None

    def _sub_map(self, first: int, last: int) -> list[InFlightBatch]:
        """The batches whose first offset is in first..last (inclusive)."""
        keys = self._keys
        low = bisect.bisect_left(keys, first)
        high = bisect.bisect_right(keys, last)
        return [self._cached_state[key] for key in keys[low:high]]

    def _put(self, batch: InFlightBatch) -> None:
        if batch.first_offset not in self._cached_state:
            bisect.insort(self._keys, batch.first_offset)
        self._cached_state[batch.first_offset] = batch

    def _remove_first(self, count: int) -> None:
        for key in self._keys[:count]:
            _cancel_locks(self._cached_state.pop(key))
        del self._keys[:count]

    def _split(self, batch: InFlightBatch) -> None:
        """Keep the batch's state per offset from now on, each offset with its own lock (Kafka's
        InFlightBatch.maybeInitializeOffsetStateUpdate)."""
        state = batch.batch_state
        if batch.offset_state is not None or state is None:
            return
        offset_state: dict[int, InFlightState] = {}
        lock = state.lock
        for offset in range(batch.first_offset, batch.last_offset + 1):
            offset_lock = None
            if lock is not None:
                offset_lock = self._add_lock(_AcquisitionLock(lock.deadline_ms, state.member_id, offset, offset))
                offset_lock.expired = lock.expired
            offset_state[offset] = split = InFlightState(state.state, state.delivery_count, state.member_id, offset_lock)
            split._rollback, split._terminal = state._rollback, state._terminal
        state.cancel_and_clear_lock()
        batch.offset_state = offset_state
        batch.batch_state = None
        if state.has_ongoing_state_transition():
            # Its pending write commits or rolls back the offsets' states now.
            for write in self._writes.values():
                if write.transitions is not None and any(s is state for s in write.transitions):
                    write.transitions = [s for s in write.transitions if s is not state] + list(offset_state.values())

    def _states_in(self, first_offset: int, last_offset: int) -> list[InFlightState]:
        """The states of offsets first..last, a batch kept whole only if it lies within them."""
        floor = self._floor_batch(first_offset)
        found: list[InFlightState] = []
        for batch in self._sub_map(floor.first_offset if floor is not None else first_offset, last_offset):
            if batch.last_offset < first_offset:
                continue
            if batch.offset_state is None and (batch.first_offset < first_offset or batch.last_offset > last_offset):
                self._split(batch)
            if batch.offset_state is None:
                assert batch.batch_state is not None
                found.append(batch.batch_state)
            else:
                found.extend(state for offset, state in batch.offset_state.items()
                             if first_offset <= offset <= last_offset)
        return found

    # -- locks -----------------------------------------------------------------------------------

    def _add_lock(self, lock: _AcquisitionLock) -> _AcquisitionLock:
        heapq.heappush(self._locks, (lock.deadline_ms, next(self._lock_sequence), lock))
        return lock

    def _schedule_lock(self, member_id: str, first_offset: int, last_offset: int, now_ms: int) -> _AcquisitionLock:
        deadline = now_ms + self.config.record_lock_duration_ms
        return self._add_lock(_AcquisitionLock(deadline, member_id, first_offset, last_offset))

    def _release_acquisition_lock_on_timeout(self, lock: _AcquisitionLock,
                                             state_batches: list[PersisterStateBatch]) -> None:
        """Kafka's releaseAcquisitionLockOnTimeout: the ACQUIRED records of the lock's range become
        AVAILABLE (ARCHIVED below the SPSO or at the limit), at once."""
        floor = self._floor_batch(lock.first_offset)
        if floor is None:
            return
        max_delivery_count = self.config.delivery_count_limit
        start = self._start_offset
        for batch in self._sub_map(floor.first_offset, lock.last_offset):
            state = batch.batch_state
            if (batch.offset_state is None and state is not None and state.state is RecordState.ACQUIRED
                    and batch.first_offset < start <= batch.last_offset):
                self._split(batch)
            if batch.offset_state is None:
                assert state is not None
                if state.state is not RecordState.ACQUIRED:
                    continue
                target = RecordState.ARCHIVED if batch.last_offset < start else RecordState.AVAILABLE
                if state.try_update_state(target, _NO_OP, max_delivery_count, EMPTY_MEMBER_ID) is None:
                    continue  # in transition: its completion sees the lock expired
                state_batches.append(_batch(batch.first_offset, batch.last_offset, state.state, state.delivery_count))
                state.cancel_and_clear_lock()
                if state.state is not RecordState.ARCHIVED:
                    self._find_next_fetch_offset = True
                continue
            for offset, offset_state in batch.offset_state.items():
                if offset < lock.first_offset:
                    continue
                if offset > lock.last_offset:
                    break
                if offset_state.state is not RecordState.ACQUIRED:
                    continue
                target = RecordState.ARCHIVED if offset < start else RecordState.AVAILABLE
                if offset_state.try_update_state(target, _NO_OP, max_delivery_count, EMPTY_MEMBER_ID) is None:
                    continue
                state_batches.append(_batch(offset, offset, offset_state.state, offset_state.delivery_count))
                offset_state.cancel_and_clear_lock()
                if offset_state.state is not RecordState.ARCHIVED:
                    self._find_next_fetch_offset = True

    # -- acquisition -----------------------------------------------------------------------------

    def _last_offset_and_max_records_to_acquire(self, fetch_offset: int, max_fetch_records: int,
                                                last_offset: int) -> tuple[int, int]:
        last_offset_to_acquire = last_offset
        max_records = min(max_fetch_records, self.config.max_in_flight_records - self.in_flight_records)
        if max_records <= 0 and fetch_offset <= self._end_offset:
            # The window is full, but the fetch is for records in flight (released ones).
            max_records = min(max_fetch_records, self._end_offset - fetch_offset + 1)
            last_offset_to_acquire = min(last_offset, self._end_offset)
        return last_offset_to_acquire, max_records

    def _acquire_new_batch_records(self, member_id: str, batches: Sequence[FetchedBatch], record_limit: bool,
                                   first_offset: int, last_offset: int, batch_size: int, max_fetch_records: int,
                                   now_ms: int) -> ShareAcquiredRecords:
        first_acquired = first_offset
        if not self._keys and self._end_offset > first_acquired:
            first_acquired = self._end_offset
        last_acquired = last_offset
        if max_fetch_records < last_acquired - first_acquired + 1:
            last_acquired = _last_offset_from_batch_with_request_offset(
                batches, first_acquired + max_fetch_records - 1)
            if self._gap_window_active() and last_acquired > last_offset:
                last_acquired = last_offset
        if last_acquired < first_acquired:
            return _EMPTY_ACQUIRED
        acquired = self._create_batches(member_id, batches, record_limit, max_fetch_records, first_acquired,
                                        last_acquired, batch_size, now_ms)
        if self._keys[0] == first_acquired:
            self._start_offset = first_acquired
        if last_acquired > self._end_offset:
            self._end_offset = last_acquired
        if record_limit:
            last_acquired = acquired[0].last_offset
        self._maybe_update_gap_window_start_offset(last_acquired + 1)
        return ShareAcquiredRecords(acquired, last_acquired - first_acquired + 1)

    def _create_batches(self, member_id: str, batches: Sequence[FetchedBatch], record_limit: bool,
                        max_fetch_records: int, first_acquired: int, last_acquired: int, batch_size: int,
                        now_ms: int) -> list[AcquiredRecords]:
        ranges: list[tuple[int, int]] = []
        current_first = first_acquired
        if not record_limit and batch_size > 0 and last_acquired - first_acquired + 1 > batch_size:
            # Ranges of about batch_size records, cut where a log batch starts.
            for batch in batches:
                if batch.base_offset > last_acquired:
                    break
                if batch.base_offset - current_first >= batch_size:
                    ranges.append((current_first, batch.base_offset - 1))
                    current_first = batch.base_offset
        ranges.append((current_first, last_acquired))
        if record_limit and last_acquired - current_first + 1 > max_fetch_records:
            # The strict record limit: the batch is in flight whole, its records past the limit
            # AVAILABLE (with no delivery yet).
            in_flight = InFlightBatch(current_first, last_acquired, InFlightState(RecordState.ACQUIRED, 1, member_id))
            last_offset = current_first + max_fetch_records - 1
            deadline = now_ms + self.config.record_lock_duration_ms
            offset_state: dict[int, InFlightState] = {}
            for offset in range(current_first, last_acquired + 1):
                if offset <= last_offset:
                    lock = self._add_lock(_AcquisitionLock(deadline, member_id, offset, offset))
                    offset_state[offset] = InFlightState(RecordState.ACQUIRED, 1, member_id, lock)
                else:
                    offset_state[offset] = InFlightState(RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)
            in_flight.offset_state = offset_state
            in_flight.batch_state = None
            self._find_next_fetch_offset = True
            self._put(in_flight)
            return [AcquiredRecords(current_first, last_offset, 1)]
        result = []
        for first, last in ranges:
            lock = self._schedule_lock(member_id, first, last, now_ms)
            self._put(InFlightBatch(first, last, InFlightState(RecordState.ACQUIRED, 1, member_id, lock)))
            result.append(AcquiredRecords(first, last, 1))
        return result

    def _should_throttle_records_delivery(self, batch: InFlightBatch, first_offset: int, last_offset: int) -> bool:
        limit = _throttle_records_delivery_limit(self.config.delivery_count_limit)
        if batch.offset_state is None:
            state = batch.batch_state
            assert state is not None
            return (state.state is RecordState.AVAILABLE and not state.has_ongoing_state_transition()
                    and state.delivery_count >= limit)
        highest = max((state.delivery_count for offset, state in batch.offset_state.items()
                       if first_offset <= offset <= last_offset and state.state is RecordState.AVAILABLE
                       and not state.has_ongoing_state_transition()), default=0)
        return highest >= limit

    def _acquire_subset_batch_records(self, member_id: str, record_limit: bool, max_fetch_records: int,
                                      request_first_offset: int, request_last_offset: int, batch: InFlightBatch,
                                      result: list[AcquiredRecords], now_ms: int) -> int:
        assert batch.offset_state is not None
        acquired_count = 0
        max_while_throttled = -1
        has_throttled_record = False
        max_delivery_count = self.config.delivery_count_limit
        throttle_limit = _throttle_records_delivery_limit(max_delivery_count)
        acquired: list[AcquiredRecords] = []
        for offset, state in batch.offset_state.items():
            if offset < request_first_offset:
                continue
            if offset > request_last_offset:
                break
            if state.state is not RecordState.AVAILABLE or state.has_ongoing_state_transition():
                continue
            delivery_count = state.delivery_count
            if max_delivery_count > 2 and delivery_count == max_delivery_count - 1 and acquired_count > 0:
                break  # on its last attempt: goes alone in the next fetch
            if delivery_count >= throttle_limit and max_while_throttled < 0:
                max_while_throttled = max(1, len(batch.offset_state) >> (delivery_count - throttle_limit + 1))
                has_throttled_record = True
            if state.try_update_state(RecordState.ACQUIRED, _INCREASE, max_delivery_count, member_id) is None:
                continue
            state.lock = self._schedule_lock(member_id, offset, offset, now_ms)
            acquired.append(AcquiredRecords(offset, offset, state.delivery_count))
            acquired_count += 1
            if state.delivery_count == max_delivery_count and max_delivery_count > 2:
                break  # on its last attempt: goes alone
            if record_limit and acquired_count == max_fetch_records:
                break
            if has_throttled_record and acquired_count == max_while_throttled:
                break
        _accumulate_acquired_records(result, acquired)
        return acquired_count

    def _maybe_archive_stale_batches(self, fetch_offset: int, base_offset: int) -> None:
        """The log answered from past `fetch_offset` (the records between are gone: compaction, a
        moved log start): archive the AVAILABLE in-flight records there."""
        if not self._keys or fetch_offset >= base_offset:
            return
        floor_offset = fetch_offset
        floor = self._floor_batch(fetch_offset)
        if floor is not None and floor.last_offset >= fetch_offset:
            floor_offset = floor.first_offset
        stale = self._sub_map(floor_offset, base_offset - 1)
        if stale and self._archive_records(fetch_offset, base_offset, stale, RecordState.AVAILABLE):
            self._find_next_fetch_offset = True
            self._maybe_update_cached_state_and_offsets()  # not in Kafka, see _maybe_filter_aborted

    def _archive_records(self, start_offset: int, end_offset: int, batches: list[InFlightBatch],
                         initial_state: RecordState) -> bool:
        """Archive the records of offsets start..end-1 in `initial_state` (Kafka's archiveRecords)."""
        any_archived = False
        for batch in batches:
            if batch.first_offset >= end_offset:
                break
            full_match = batch.first_offset >= start_offset and batch.last_offset <= end_offset - 1
            if full_match and batch.offset_state is None:
                state = batch.batch_state
                assert state is not None
                if state.state is initial_state:
                    state.archive()
                    any_archived = True
                continue
            if batch.offset_state is None:
                assert batch.batch_state is not None
                if batch.batch_state.state is not initial_state:
                    continue
                self._split(batch)
            assert batch.offset_state is not None
            for offset, offset_state in batch.offset_state.items():
                if offset < start_offset:
                    continue
                if offset > end_offset - 1:
                    break
                if offset_state.state is initial_state:
                    offset_state.archive()
                    any_archived = True
        return any_archived

    def _maybe_filter_aborted(self, batches: Sequence[FetchedBatch], read_committed: bool,
                              aborted_transactions: Iterable[AbortedTransaction] | None,
                              acquired: ShareAcquiredRecords) -> ShareAcquiredRecords:
        """read_committed: archive the acquired records of aborted transactions and leave them out
        (Kafka's maybeFilterAbortedTransactionalAcquiredRecords)."""
        if not read_committed or not aborted_transactions or not acquired.acquired_records:
            return acquired
        to_archive = _aborted_transaction_batches(batches, aborted_transactions)
        if not to_archive:
            return acquired
        for batch in to_archive:
            floor = self._floor_batch(batch.base_offset)
            first = floor.first_offset if floor is not None else batch.base_offset
            self._archive_records(batch.base_offset, batch.last_offset + 1,
                                  self._sub_map(first, batch.last_offset), RecordState.ACQUIRED)
        result = _subtract_ranges(acquired.acquired_records, to_archive)
        # Not in Kafka: move the SPSO over what was archived now rather than at the next write, or
        # a window filled with aborted records would stop the partition until a member acknowledges.
        self._maybe_update_cached_state_and_offsets()
        return ShareAcquiredRecords(result, sum(r.last_offset - r.first_offset + 1 for r in result))

    # -- acknowledgement -------------------------------------------------------------------------

    @staticmethod
    def _acknowledge_types(batch: ShareAcknowledgementBatch) -> list[int]:
        types = list(batch.acknowledge_types)
        if batch.last_offset < batch.first_offset:
            raise SharePartitionError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledgement batch {batch}")
        if not types or (len(types) > 1 and len(types) != batch.last_offset - batch.first_offset + 1):
            raise SharePartitionError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge types: {types}")
        for ack_type in types:
            if not 0 <= ack_type <= AcknowledgeType.RENEW:
                raise SharePartitionError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type: {types}")
        return types

    def _sub_map_for_acknowledgement_batch(self, batch: ShareAcknowledgementBatch) -> list[InFlightBatch]:
        floor = self._floor_batch(batch.first_offset)
        if floor is None:
            if batch.first_offset < self._start_offset <= batch.last_offset:
                floor = self._floor_batch(self._start_offset)
            if floor is None:
                raise SharePartitionError(
                    ErrorCode.INVALID_RECORD_STATE,
                    "Batch record not found. The request batch offsets are not found in the cache.")
        sub_map = self._sub_map(floor.first_offset, batch.last_offset)
        if sub_map[-1].last_offset < batch.first_offset:
            raise SharePartitionError(ErrorCode.INVALID_REQUEST,
                                      "Batch record not found. The first offset in request is past acquired records.")
        if batch.last_offset > sub_map[-1].last_offset:
            raise SharePartitionError(ErrorCode.INVALID_REQUEST,
                                      "Batch record not found. The last offset in request is past acquired records.")
        return sub_map

    def _acknowledge_batch_records(self, member_id: str, batch: ShareAcknowledgementBatch, types: list[int],
                                   sub_map: list[InFlightBatch], transitions: list[InFlightState],
                                   state_batches: list[PersisterStateBatch], now_ms: int) -> None:
        start = self._start_offset
        per_offset_ack = len(types) > 1
        for in_flight in sub_map:
            if in_flight.last_offset < start:
                continue  # already archived
            state = in_flight.batch_state
            if in_flight.offset_state is None:
                assert state is not None
                if state.member_id == EMPTY_MEMBER_ID:
                    raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE,
                                              "The batch cannot be acknowledged. The batch is not in the acquired state.")
                if state.member_id != member_id:
                    raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of batch record")
                if state.has_ongoing_state_transition():
                    raise SharePartitionError(
                        ErrorCode.INVALID_RECORD_STATE,
                        "The record state is invalid. The acknowledgement of delivery could not be completed.")
            full_match = in_flight.first_offset >= batch.first_offset and in_flight.last_offset <= batch.last_offset
            start_offset_moved = in_flight.first_offset < start <= in_flight.last_offset
            if full_match and in_flight.offset_state is None and not per_offset_ack and not start_offset_moved:
                assert state is not None
                self._acknowledge_complete_batch(in_flight, state, types[0], member_id, transitions,
                                                 state_batches, now_ms)
                continue
            if in_flight.offset_state is None:
                assert state is not None
                if state.state is not RecordState.ACQUIRED:
                    raise SharePartitionError(
                        ErrorCode.INVALID_RECORD_STATE,
                        "The batch cannot be acknowledged. The subset batch is not in the acquired state.")
                self._split(in_flight)
            self._acknowledge_per_offset_batch_records(member_id, batch, types, in_flight, transitions,
                                                       state_batches, now_ms)

    def _acknowledge_complete_batch(self, in_flight: InFlightBatch, state: InFlightState, ack_type: int,
                                    member_id: str, transitions: list[InFlightState],
                                    state_batches: list[PersisterStateBatch], now_ms: int) -> None:
        if state.state is not RecordState.ACQUIRED:
            raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE,
                                      "The batch cannot be acknowledged. The batch is not in the acquired state.")
        if ack_type == AcknowledgeType.RENEW:
            self._renew(state, member_id, in_flight.first_offset, in_flight.last_offset, now_ms)
            return
        self._transition(state, in_flight.first_offset, in_flight.last_offset,
                         _ACK_TYPE_TO_RECORD_STATE[AcknowledgeType(ack_type)], self.config.delivery_count_limit,
                         transitions, state_batches, "Unable to acknowledge records for the batch")

    def _acknowledge_per_offset_batch_records(self, member_id: str, batch: ShareAcknowledgementBatch,
                                              types: list[int], in_flight: InFlightBatch,
                                              transitions: list[InFlightState],
                                              state_batches: list[PersisterStateBatch], now_ms: int) -> None:
        assert in_flight.offset_state is not None
        start = self._start_offset
        max_delivery_count = self.config.delivery_count_limit
        for offset, state in in_flight.offset_state.items():
            if offset < batch.first_offset or offset < start:
                continue
            if offset > batch.last_offset:
                break
            if state.state is not RecordState.ACQUIRED:
                raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE,
                                          "The offset cannot be acknowledged. The offset is not acquired.")
            if state.has_ongoing_state_transition():
                raise SharePartitionError(
                    ErrorCode.INVALID_RECORD_STATE,
                    "The record state is invalid. The acknowledgement of delivery could not be completed.")
            if state.member_id != member_id:
                raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of offset")
            ack_type = types[offset - batch.first_offset] if len(types) > 1 else types[0]
            if ack_type == AcknowledgeType.RENEW:
                self._renew(state, member_id, offset, offset, now_ms)
                continue
            self._transition(state, offset, offset, _ACK_TYPE_TO_RECORD_STATE[AcknowledgeType(ack_type)],
                             max_delivery_count, transitions, state_batches,
                             "Unable to acknowledge records for the batch")

    def _renew(self, state: InFlightState, member_id: str, first_offset: int, last_offset: int, now_ms: int) -> None:
        """RENEW (KIP-1222): a new lock from now; nothing to persist."""
        if not self.config.renew_acknowledge_enabled:
            raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE,
                                      "Renewing acquisition locks is not enabled for the group.")
        state.cancel_and_clear_lock()
        state.lock = self._schedule_lock(member_id, first_offset, last_offset, now_ms)

    @staticmethod
    def _transition(state: InFlightState, first_offset: int, last_offset: int, target: RecordState,
                    max_delivery_count: int, transitions: list[InFlightState],
                    state_batches: list[PersisterStateBatch], message: str) -> None:
        updated = state.start_state_transition(target, _NO_OP, max_delivery_count, EMPTY_MEMBER_ID)
        if updated is None:
            raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE, message)
        transitions.append(state)
        state_batches.append(_batch(first_offset, last_offset, state.state, state.delivery_count))

    def _roll_back(self, transitions: list[InFlightState]) -> None:
        for state in transitions:
            state.complete_state_transition(False)
            if state.state is RecordState.AVAILABLE:
                self._find_next_fetch_offset = True

    def _new_write(self, state_batches: list[PersisterStateBatch],
                   transitions: list[InFlightState] | None) -> PendingWrite | None:
        if not state_batches:
            return None
        write_id = next(self._write_ids)
        self._writes[write_id] = _Write(transitions)
        state = SharePartitionState(self._state_epoch, self._start_offset, self.leader_epoch,
                                    _merge_state_batches(state_batches), self.delivery_complete_count)
        return PendingWrite(write_id, state)

    # -- the start offset ------------------------------------------------------------------------

    def _gap_window_active(self) -> bool:
        gap = self._gap_window
        return gap is not None and gap.end_offset == self._end_offset

    def _maybe_update_gap_window_start_offset(self, offset: int) -> None:
        gap = self._gap_window
        if gap is None:
            return
        if gap.end_offset == self._end_offset and offset <= gap.end_offset:
            self._set_gap_start_offset(gap, offset)
        else:
            self._gap_window = None

    def _set_gap_start_offset(self, gap: _GapWindow, offset: int) -> None:
        """The gap start moves to the first offset from `offset` that no in-flight batch holds, and
        the window closes when there is none up to its end. Kafka sets `offset` itself, which kept
        the SPSO from moving over the batches past a filled gap until new records came."""
        index = bisect.bisect_right(self._keys, offset) - 1
        keys = self._keys
        while 0 <= index < len(keys):
            batch = self._cached_state[keys[index]]
            if batch.first_offset > offset:
                break
            offset = max(offset, batch.last_offset + 1)
            index += 1
        if offset > gap.end_offset:
            self._gap_window = None
        else:
            gap.gap_start_offset = offset

    def _can_move_start_offset(self) -> bool:
        if not self._keys:
            return False
        batch = self._floor_batch(self._start_offset)
        if batch is None:
            return False  # an acquirable gap at the beginning
        if batch.last_offset < self._start_offset:
            return True  # the SPSO is past the batch (the log's start moved): let the scan decide
        if batch.offset_state is None:
            state = batch.batch_state
        else:
            state = batch.offset_state.get(self._start_offset)
        assert state is not None
        return not state.has_ongoing_state_transition() and state.state in _TERMINAL

    def _find_last_offset_acknowledged(self) -> int:
        """The end of the run of terminal records from the first in-flight batch, -1 for none.
        Records below the SPSO count as done (not in Kafka, whose scan stops at one there that a
        late RELEASE made AVAILABLE after the log's start passed it, and then never moves again)."""
        last_acknowledged = -1
        start = self._start_offset
        gap = self._gap_window if self._gap_window_active() else None
        for batch in self._batches():
            if gap is not None and batch.last_offset >= gap.gap_start_offset:
                return last_acknowledged
            if batch.offset_state is None:
                state = batch.batch_state
                assert state is not None
                if batch.last_offset >= start and (state.has_ongoing_state_transition() or state.state not in _TERMINAL):
                    return last_acknowledged
                last_acknowledged = batch.last_offset
                continue
            for offset, offset_state in batch.offset_state.items():
                if offset >= start and (offset_state.has_ongoing_state_transition() or offset_state.state not in _TERMINAL):
                    return last_acknowledged
                last_acknowledged = offset
        return last_acknowledged

    def _maybe_update_cached_state_and_offsets(self) -> bool:
        """Move the SPSO over the terminal records at the start and drop their batches (Kafka's
        maybeUpdateCachedStateAndOffsets); true when it moved."""
        if not self._can_move_start_offset():
            return False
        last_acknowledged = self._find_last_offset_acknowledged()
        if last_acknowledged == -1:
            return False
        last_cached = self._last_batch().last_offset
        if last_acknowledged == last_cached:
            # Never backwards, which Kafka's would when the log's start moved past the cache.
            self._start_offset = max(self._start_offset, last_cached + 1)
            self._end_offset = max(self._end_offset, self._start_offset)
            self._remove_first(len(self._keys))
            return True
        index = bisect.bisect_right(self._keys, last_acknowledged) - 1
        batch = self._cached_state[self._keys[index]]
        if last_acknowledged == batch.last_offset:
            higher_key = self._keys[index + 1]
            if higher_key > self._start_offset:
                self._start_offset = higher_key
            if self._gap_window_active() and self._gap_window is not None:
                self._start_offset = min(self._gap_window.gap_start_offset, self._start_offset)
            self._remove_first(index + 1)
        else:
            if last_acknowledged + 1 > self._start_offset:
                self._start_offset = last_acknowledged + 1
            self._remove_first(index)
        return True


def _cancel_locks(batch: InFlightBatch) -> None:
    if batch.batch_state is not None:
        batch.batch_state.cancel_and_clear_lock()
    if batch.offset_state is not None:
        for state in batch.offset_state.values():
            state.cancel_and_clear_lock()


def _loaded_state(delivery_state: int) -> RecordState:
    """A persisted state as this leader holds it: ACQUIRED (never written by Kafka) is AVAILABLE with
    no member; ARCHIVING (3, KIP-1191's dead letter queue, not served) is ARCHIVED."""
    if delivery_state == RecordState.ACQUIRED:
        return RecordState.AVAILABLE
    if delivery_state in (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED):
        return RecordState(delivery_state)
    return RecordState.ARCHIVED


def _last_offset_from_batch_with_request_offset(batches: Sequence[FetchedBatch], offset: int) -> int:
    """The last offset of the batch holding `offset`, or `offset` (Kafka's lastOffsetFromBatchWithRequestOffset)."""
    previous: FetchedBatch | None = None
    for batch in batches:
        if offset < batch.base_offset:
            break
        previous = batch
    return previous.last_offset if previous is not None and offset <= previous.last_offset else offset


def _accumulate_acquired_records(result: list[AcquiredRecords], acquired: list[AcquiredRecords]) -> None:
    """Consecutive offsets with one delivery count as one range (Kafka's ShareFetchUtils.accumulateAcquiredRecords)."""
    if not acquired:
        return
    first, last, count = acquired[0]
    for current in acquired[1:]:
        if current.first_offset == last + 1 and current.delivery_count == count:
            last = current.last_offset
        else:
            result.append(AcquiredRecords(first, last, count))
            first, last, count = current
    result.append(AcquiredRecords(first, last, count))


def _aborted_transaction_batches(batches: Sequence[FetchedBatch],
                                 aborted_transactions: Iterable[AbortedTransaction]) -> list[FetchedBatch]:
    """The data batches of aborted transactions (Kafka's fetchAbortedTransactionRecordBatches). A
    control batch ends its producer's transaction: Kafka looks for an ABORT marker, but inside an
    aborted transaction's range its producer writes no other marker, so any control batch will do."""
    ordered = sorted(aborted_transactions, key=lambda txn: txn.first_offset)
    position = 0
    aborted_producer_ids: set[int] = set()
    to_archive: list[FetchedBatch] = []
    for batch in batches:
        if batch.producer_id < 0:
            continue
        while position < len(ordered) and ordered[position].first_offset <= batch.last_offset:
            aborted_producer_ids.add(ordered[position].producer_id)
            position += 1
        if batch.is_control:
            aborted_producer_ids.discard(batch.producer_id)
        elif batch.is_transactional and batch.producer_id in aborted_producer_ids:
            to_archive.append(batch)
    return to_archive


def _subtract_ranges(acquired: list[AcquiredRecords], removed: list[FetchedBatch]) -> list[AcquiredRecords]:
    """The acquired ranges without the offsets of `removed` (both in offset order)."""
    result: list[AcquiredRecords] = []
    index = 0
    for first, last, count in acquired:
        while index < len(removed) and removed[index].last_offset < first:
            index += 1
        scan = index
        while first <= last:
            if scan >= len(removed) or removed[scan].base_offset > last:
                result.append(AcquiredRecords(first, last, count))
                break
            cut = removed[scan]
            if cut.base_offset > first:
                result.append(AcquiredRecords(first, cut.base_offset - 1, count))
            first = max(first, cut.last_offset + 1)
            scan += 1
    return result


def _batch(first: int, last: int, state: RecordState, delivery_count: int) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, int(state), delivery_count)
