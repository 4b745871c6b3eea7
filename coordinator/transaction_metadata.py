"""One transactional id's state in the transaction coordinator (Kafka's TransactionState,
TransactionMetadata and TxnTransitMetadata), sans I/O.

A state change happens in two steps, as in Kafka: `prepare_*` checks the transition, marks it
pending and returns the new state as a TxnTransitMetadata (what is written to
`__transaction_state`); once that record is durable, `complete_transition_to` makes it current. A
pending transition blocks any other (the coordinator answers CONCURRENT_TRANSACTIONS), and a failed
write drops it again.

The transaction version is per transaction (Kafka's clientTransactionVersion: what the client's
requests said, or the broker's finalized level for the coordinator's own aborts). With versions 0/1
the producer epoch changes only when a producer is (re)initialised or fenced; with version 2
(KIP-890 part 2) every commit or abort bumps it, and once it is exhausted the transaction ends on a
new producer id (`next_producer_id`, taken up at epoch 0 by the completion).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from enum import Enum

from ..wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

__all__ = ["TransactionState", "TransactionMetadata", "TxnTransitMetadata", "TopicPartition", "is_epoch_exhausted",
           "TV_0", "TV_2", "supports_epoch_bump"]

log = logging.getLogger("samsa.txn_coordinator")
TopicPartition = tuple[str, int]
_SHORT_MAX = 2**15 - 1
# Kafka's TransactionVersion levels (the transaction.version feature): 0 and 1 end a transaction
# on the producer's epoch; 2 bumps it at every end.
TV_0, TV_2 = 0, 2


def supports_epoch_bump(transaction_version: int) -> bool:
    return transaction_version >= TV_2


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch free so that the coordinator can always fence a producer."""
    return epoch >= _SHORT_MAX - 1


class TransactionState(Enum):
    """(id in TransactionLogValue, name in DescribeTransactions and ListTransactions, whether the
    transactional id may expire in this state)."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool) -> None:
        self.id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"Unknown transaction state id {state_id} from the transaction status message")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return next((state for state in cls if state.state_name == name), None)

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS_STATES[self]

    def __repr__(self) -> str:
        return self.state_name


S = TransactionState
_VALID_PREVIOUS_STATES = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Empty and Complete*: the abort of a transaction with no partitions (transaction version 2).
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


@dataclass(frozen=True)
class TxnTransitMetadata:
    """A state a transactional id is moving to: the value of its `__transaction_state` record.
    `prev_producer_id` is the producer id before the transition; `next_producer_id` the one a
    version 2 transaction ends on when its epochs ran out."""

    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = TV_0


class IllegalTransitionError(RuntimeError):
    """A transition the state machine does not allow: a bug, never a client's doing."""


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    prev_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = TV_0
    pending_state: TransactionState | None = None
    # A fencing epoch bump whose write failed: the next fence reuses the epoch rather than bump again.
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(self, state: TransactionState, **changes) -> TxnTransitMetadata:
        """The current values with `changes`; the previous producer id is always the current one
        (Kafka's prepareTransitionTo)."""
        current = TxnTransitMetadata(
            self.producer_id, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, state, frozenset(self.topic_partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp, self.next_producer_id, self.client_transaction_version)
        return self._prepare_transition_to(replace(current, **changes))

    def _prepare_transition_to(self, transit: TxnTransitMetadata) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {transit.txn_state} while it already has a pending "
                f"state {self.pending_state}")
        if transit.producer_id < 0:
            raise IllegalTransitionError(f"Illegal new producer id {transit.producer_id}")
        if transit.txn_state is not TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalTransitionError(f"Illegal new producer epoch {transit.producer_epoch}")
        if self.state not in transit.txn_state.valid_previous_states:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {transit.txn_state} failed since the target state "
                f"{transit.txn_state} is not a valid previous state of the current state {self.state}")
        self.pending_state = transit.txn_state
        return transit

    # -- the transitions
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the current producer before its transaction is aborted. The
        epoch is set now (not when a record is written), as Kafka does: the abort carries it."""
        bumped = self.producer_epoch if self.has_failed_epoch_fence or self.producer_epoch == _SHORT_MAX \
            else self.producer_epoch + 1
        return self._transit(TransactionState.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata:
        """InitProducerId for an existing id: a new epoch, or (KIP-360) the same one for a retry of
        a bump that succeeded. Raises ProducerFenced when `expected_producer_epoch` is stale."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFenced(
                f"Expected producer epoch {expected_producer_epoch} does not match current producer epoch "
                f"{self.producer_epoch} or previous producer epoch {self.last_producer_epoch}")
        return self._transit(TransactionState.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                             txn_last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """The epochs of the current producer id are used up: go on with a new producer id at 0."""
        if self.state in (TransactionState.ONGOING, TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT):
            raise IllegalTransitionError("Cannot rotate producer ids while a transaction is still pending")
        return self._transit(TransactionState.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                             txn_last_update_timestamp=now_ms)

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int,
                               client_transaction_version: int = TV_0) -> TxnTransitMetadata:
        starts = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_ABORT,
                                TransactionState.COMPLETE_COMMIT)
        return self._transit(TransactionState.ONGOING, topic_partitions=frozenset(self.topic_partitions | added),
                             txn_start_timestamp=now_ms if starts else self.txn_start_timestamp,
                             txn_last_update_timestamp=now_ms, client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, new_state: TransactionState, now_ms: int, client_transaction_version: int = TV_0,
                                next_producer_id: int = NO_PRODUCER_ID,
                                no_partition_added: bool = False) -> TxnTransitMetadata:
        """PrepareCommit or PrepareAbort; with transaction version 2 on the next epoch (the markers
        carry it), `next_producer_id` the one to go on with when this epoch was the last.
        `no_partition_added`: a version 2 abort of a transaction that never started."""
        if supports_epoch_bump(client_transaction_version):
            if self.producer_epoch == _SHORT_MAX and new_state is TransactionState.PREPARE_ABORT:
                log.error("Aborting producer %s %d with epoch equal to Short.MaxValue, this must not happen unless "
                          "there is a bug", self.transactional_id, self.producer_id)
                epoch = self.producer_epoch
            else:
                epoch = self.producer_epoch + 1
            last_epoch = self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._transit(new_state, producer_epoch=epoch, last_producer_epoch=last_epoch,
                             txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
                             next_producer_id=next_producer_id, txn_last_update_timestamp=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """CompleteCommit or CompleteAbort; a version 2 transaction whose epochs ran out goes on
        with its next producer id at epoch 0."""
        self.has_failed_epoch_fence = False
        complete = (TransactionState.COMPLETE_COMMIT if self.state is TransactionState.PREPARE_COMMIT
                    else TransactionState.COMPLETE_ABORT)
        producer_id, epoch = self.producer_id, self.producer_epoch
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        return self._transit(complete, producer_id=producer_id, producer_epoch=epoch, next_producer_id=NO_PRODUCER_ID,
                             topic_partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._transit(TransactionState.DEAD, topic_partitions=frozenset())

    def clear_pending(self) -> None:
        """The pending transition's write failed (or was dropped): nothing changes."""
        self.pending_state = None

    def remove_partition(self, partition: TopicPartition) -> None:
        """Its marker is written: the partition is out of the transaction being completed."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransitionError(
                f"Transaction metadata's current state is {self.state}, and its pending state is {self.pending_state} "
                f"while trying to remove partitions whose txn marker has been sent, this is not expected")
        self.topic_partitions.discard(partition)

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The record of `transit` is durable: it becomes the current state (Kafka's checks that the
        transition is the one pending and consistent with the state)."""
        to_state = self.pending_state
        if to_state is None or to_state is not transit.txn_state:
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} completing transaction state transition to {transit} "
                f"while its pending state is {to_state}")
        valid_epoch = self._valid_producer_epoch(transit)
        if to_state is TransactionState.EMPTY:
            valid_bump = (transit.producer_epoch == self.producer_epoch + 1
                          or transit.producer_epoch == 0 and transit.producer_id != self.producer_id)
            valid = ((transit.producer_epoch == self.producer_epoch or valid_bump) and not transit.topic_partitions
                     and transit.txn_start_timestamp == -1)
        elif to_state is TransactionState.ONGOING:
            valid = (valid_epoch and transit.topic_partitions >= self.topic_partitions
                     and transit.txn_timeout_ms == self.txn_timeout_ms)
        elif to_state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            allowed_empty_abort = (to_state is TransactionState.PREPARE_ABORT
                                   and supports_epoch_bump(transit.client_transaction_version)
                                   and self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                                      TransactionState.COMPLETE_ABORT))
            valid = (valid_epoch and transit.topic_partitions == self.topic_partitions
                     and transit.txn_timeout_ms == self.txn_timeout_ms
                     and (transit.txn_start_timestamp == self.txn_start_timestamp or allowed_empty_abort))
        elif to_state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            valid = valid_epoch and transit.txn_timeout_ms == self.txn_timeout_ms and transit.txn_start_timestamp != -1
        else:  # PrepareEpochFence is never written; Dead ends in removal, never in a state
            valid = False
        if not valid:
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} failed transition to state {transit} due to unexpected "
                f"metadata {self}")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        """Kafka's validProducerEpoch: the transition keeps the producer, except that a version 2
        end moves to the next epoch (Prepare*) or to the next producer id at 0 (Complete*)."""
        tv2 = supports_epoch_bump(transit.client_transaction_version)
        state = transit.txn_state
        if tv2 and state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT) \
                and transit.producer_epoch == 0:
            return transit.last_producer_epoch == self.last_producer_epoch and transit.prev_producer_id == self.producer_id
        if tv2 and state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return transit.last_producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransitMetadata) -> TransactionMetadata:
        """As loaded from a `__transaction_state` record."""
        return cls(transactional_id, transit.producer_id, transit.prev_producer_id, transit.producer_epoch,
                   transit.last_producer_epoch, transit.txn_timeout_ms, transit.txn_state,
                   set(transit.topic_partitions), transit.txn_start_timestamp, transit.txn_last_update_timestamp,
                   transit.next_producer_id, transit.client_transaction_version)


class ProducerFenced(Exception):
    """InitProducerId named an epoch that is neither the current nor the previous one."""
