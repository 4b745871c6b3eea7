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
  response. An OFFSET_OUT_OF_RANGE from the log: `update_cache_and_offsets(log_start_offset)`.
- `acknowledge(member_id, batches, now_ms)` and `release_acquired_records(member_id, now_ms)`.
- Locks: `next_deadline()` says when to call `expire_locks(now_ms)`.
- State changes to persist come back as a `PendingWrite`: the shell sends `pending.state` with
  `Persister.write_state`, then calls `complete_write(pending.write_id, error_code)`.

Writes and the restart rule. Kafka writes state on acknowledgement, release and lock expiry, never
on acquisition (DeliveryCountOps.INCREASE is in memory only), and neither does this class. An
acknowledgement or a release is a transition: the records take their new state at once, marked as
in transition (a record in transition is neither acquired nor acknowledged again), and
`complete_write` commits it when the persister has the state, or rolls it back (to ACQUIRED, or to
AVAILABLE/ARCHIVED when the lock ran out meanwhile) when the write failed, the client being
answered the persister's error. A lock expiry applies at once and its write is best effort, as in
Kafka: a lost write only leaves the persisted state one step behind (ACQUIRED is never persisted).
The SPSO moves only when a write completes, over records whose terminal state is committed, and
each write carries the SPSO as it was when the write was made, so the persisted start offset never
passes a record whose terminal state is not persisted. Hence, across a restart (a new leader reads
the persisted state):
- no record is lost: a record is past the persisted SPSO unless its ACKNOWLEDGED/ARCHIVED state was
  written first, and a record the new leader finds with no state, or AVAILABLE, is delivered again;
- a delivery count is never lower than the persisted one, and a record found ARCHIVED (its count at
  `group.share.delivery.count.limit`) is never delivered again. The one delivery the persister does
  not see is the acquisition in flight when the leader died (Kafka persists no acquisition): the
  new leader delivers that record again with the count it had before, so each leader failure can
  add one delivery per record in flight at the time. Read-committed archival of aborted records
  and archival below a moved log start offset are not written either (as in Kafka): the new leader
  finds them the same way again.

Errors of a request raise `SharePartitionError` with Kafka's error code (INVALID_RECORD_STATE,
INVALID_REQUEST...) and change nothing.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from ..wire.errors import ErrorCode
from .share_state import UNINITIALIZED_START_OFFSET, PersisterStateBatch, RecordState, SharePartitionState

__all__ = [
    "AbortedTransaction", "AcknowledgeType", "AcquiredRecords", "CompletedWrite", "FetchedBatch",
    "PendingWrite", "RecordState", "ShareAcknowledgementBatch", "ShareAcquireMode", "ShareAcquiredRecords",
    "SharePartition", "SharePartitionConfig", "SharePartitionError", "SharePartitionStatus",
    "UNINITIALIZED_START_OFFSET",
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
    """What `acquire` answers: the ranges in offset order and how many offsets they cover (what
    counts against the request's max_records)."""

    acquired_records: list[AcquiredRecords]
    count: int


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


class SharePartition:
    """The state of one share partition; see the module's docstring."""

    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int = -1,
                 config: SharePartitionConfig | None = None) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.config = config if config is not None else SharePartitionConfig()
        raise NotImplementedError

    # -- life ------------------------------------------------------------------------------------

    @property
    def status(self) -> SharePartitionStatus:
        raise NotImplementedError

    def start_initializing(self) -> bool:
        """EMPTY -> INITIALIZING: true when the caller should now read the persister's state; false
        when already ACTIVE. Raises SharePartitionError LEADER_NOT_AVAILABLE while initializing or
        fenced, UNKNOWN_SERVER_ERROR when it failed (Kafka's maybeInitialize)."""
        raise NotImplementedError

    def initialize(self, state: SharePartitionState, start_offset: int | None = None) -> None:
        """Load the persister's state (ReadShareGroupState) and become ACTIVE. `start_offset`: the
        offset the caller resolved by `share.auto.offset.reset` when `state.start_offset` is
        UNINITIALIZED_START_OFFSET (ignored otherwise). State batches below the start offset or
        with last < first fail the partition (FAILED, SharePartitionError UNKNOWN_SERVER_ERROR)."""
        raise NotImplementedError

    def mark_failed(self) -> None:
        """The persister's read failed: FAILED (Kafka's future completed exceptionally)."""
        raise NotImplementedError

    def mark_fenced(self) -> None:
        """FENCED: leadership moved or the partition is being removed; every call refuses from now."""
        raise NotImplementedError

    # -- fetch -----------------------------------------------------------------------------------

    def maybe_acquire_fetch_lock(self, fetch_id: object) -> bool:
        """Take the partition's fetch lock (one fetch reads the log and acquires at a time), false
        when another fetch holds it or the partition is not ACTIVE."""
        raise NotImplementedError

    def release_fetch_lock(self, fetch_id: object) -> None:
        raise NotImplementedError

    def next_fetch_offset(self) -> int:
        """Where the next fetch reads the log: the first AVAILABLE in-flight offset, else SPEO + 1
        (SPEO itself while nothing is in flight)."""
        raise NotImplementedError

    def can_acquire_records(self) -> bool:
        """Whether a fetch may acquire: some in-flight record is available again, or the window
        is not full."""
        raise NotImplementedError

    def acquire(self, member_id: str, fetch_offset: int, batches: Sequence[FetchedBatch], now_ms: int, *,
                max_fetch_records: int, batch_size: int,
                share_acquire_mode: ShareAcquireMode = ShareAcquireMode.BATCH_OPTIMIZED,
                read_committed: bool = False,
                aborted_transactions: Iterable[AbortedTransaction] | None = None) -> ShareAcquiredRecords:
        """Acquire for `member_id` what it may take of the batches the log answered for a read at
        `fetch_offset`, with locks until now_ms + record_lock_duration_ms, raising delivery counts.

        Batches never in flight are acquired whole, cut at the window limit and at `max_fetch_records`
        (rounded up to a batch end in batch_optimized mode; exactly, in record_limit mode, which also
        answers a single range), and answered in ranges of about `batch_size` records along batch
        boundaries. In-flight batches are acquired where AVAILABLE; records near the delivery limit
        are throttled as Kafka does (a record on its last attempt goes alone). Under read_committed,
        data batches of `aborted_transactions` are archived and left out of the answer. Nothing is
        written (Kafka persists no acquisition)."""
        raise NotImplementedError

    def update_cache_and_offsets(self, log_start_offset: int) -> None:
        """The log's start offset moved past the SPSO (retention, DeleteRecords; the fetch answered
        OFFSET_OUT_OF_RANGE): AVAILABLE records below it are archived and the SPSO moves to it."""
        raise NotImplementedError

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
        raise NotImplementedError

    def release_acquired_records(self, member_id: str, now_ms: int) -> PendingWrite | None:
        """Release every record `member_id` holds (it left the group, its share session closed):
        AVAILABLE again (the delivery count stays), ARCHIVED below the SPSO or at the limit."""
        raise NotImplementedError

    # -- acquisition locks -----------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline (ms on the caller's clock), None without locks."""
        raise NotImplementedError

    def expire_locks(self, now_ms: int) -> PendingWrite | None:
        """Release the records whose lock is due at `now_ms`: AVAILABLE again, ARCHIVED at the
        delivery count limit. Applied at once; the write (returned, None when nothing expired) is
        best effort. A non-None answer also means records became acquirable."""
        raise NotImplementedError

    # -- persistence -----------------------------------------------------------------------------

    def complete_write(self, write_id: int, error_code: int = ErrorCode.NONE) -> CompletedWrite:
        """The persister answered the write `write_id`: commit its transitions and move the SPSO
        (error NONE), or roll them back."""
        raise NotImplementedError

    # -- describe --------------------------------------------------------------------------------

    @property
    def state_epoch(self) -> int:
        raise NotImplementedError

    @property
    def start_offset(self) -> int:
        """The SPSO."""
        raise NotImplementedError

    @property
    def end_offset(self) -> int:
        """The SPEO: the last offset in flight (the SPSO while nothing is)."""
        raise NotImplementedError

    @property
    def in_flight_records(self) -> int:
        """SPEO - SPSO + 1 while records are in flight, else 0 (what the window limit counts)."""
        raise NotImplementedError

    @property
    def delivery_complete_count(self) -> int:
        """In-flight records past the SPSO in a terminal state (KIP-1226, for lag)."""
        raise NotImplementedError

    def snapshot(self) -> SharePartitionState:
        """The whole in-flight state as the persister would hold it (for tests and diagnostics)."""
        raise NotImplementedError


def _batch(first: int, last: int, state: RecordState, delivery_count: int) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, int(state), delivery_count)
