"""The transaction coordinator: every transactional id this broker coordinates, sans I/O (Kafka's
TransactionCoordinator, TransactionStateManager and the bookkeeping of its
TransactionMarkerChannelManager), for transactions of versions 0/1 and 2 (KIP-890 part 2).

The server feeds it requests with the clock and a ticket, and carries out the `TxnActions` it
returns: responses to tickets, records to append to a partition of `__transaction_state` (each
with `on_done(error, now_ms, out)`, called through `complete_append`), and transaction markers to
write to the partitions of a transaction (each with `on_done(errors by partition, now_ms, out)`,
called through `complete_markers`). A state change takes effect only once its record is durable.

A transaction: InitProducerId gives the transactional id a producer id and a new epoch (fencing any
older producer: an open transaction is aborted first and the client retries on
CONCURRENT_TRANSACTIONS); AddPartitionsToTxn and AddOffsetsToTxn add partitions (Ongoing); EndTxn
writes PrepareCommit or PrepareAbort, answers the client, writes the markers to every partition,
then CompleteCommit or CompleteAbort. A transaction open longer than its timeout is aborted with a
bumped epoch, fencing its producer; an id idle past transactional.id.expiration.ms is forgotten
(a tombstone). Loading replays `__transaction_state`; a transaction found preparing gets its markers
written again.

The transaction version is per transaction, as in Kafka: EndTxn v5 (and the partition leader's
AddPartitionsToTxn on a producer's behalf) is version 2, older requests version 0. A version 2 end
bumps the producer epoch (the markers carry the new one, the response names it), rolling over to a
new producer id when the epochs run out; a retry of it is recognised by the epoch it names. The
coordinator's own aborts (a fence, a timeout) use the broker's finalized transaction.version.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial

from ..wire.errors import ErrorCode
from .actions import Actions, Append, Ticket, append_error
from .group_coordinator import partition_for
from .producer_id_manager import ProducerIdsUnavailable
from .timer import CoordinatorTimer
from .transaction_log import TRANSACTION_STATE_TOPIC, encode_key, encode_value, read_record
from .transaction_metadata import (
    TV_0, TV_2, ProducerFenced, TopicPartition, TransactionMetadata, TransactionState, TxnTransitMetadata,
    is_epoch_exhausted, supports_epoch_bump,
)

__all__ = ["TransactionConfig", "TransactionCoordinator", "TxnActions", "MarkerWrite", "TRANSACTION_STATE_TOPIC"]

log = logging.getLogger("samsa.txn_coordinator")
S = TransactionState
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 2**15 - 1


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's configs of the same names (and defaults)."""

    transactional_id_expiration_ms: int = 604_800_000
    transaction_max_timeout_ms: int = 900_000
    transaction_state_log_num_partitions: int = 50
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # How soon a marker or a completion that failed to be written is tried again.
    retry_backoff_ms: int = 100
    # The finalized transaction.version (Kafka's TransactionStateManager.transactionVersionLevel):
    # the version of the coordinator's own aborts.
    transaction_version_level: int = TV_2


@dataclass
class MarkerWrite:
    """COMMIT or ABORT markers for one producer to write to `partitions` (Kafka's WriteTxnMarkers
    entry); `on_done` gets the error of each partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    on_done: Callable[[dict[TopicPartition, int], int, "TxnActions"], None]
    transaction_version: int = TV_0  # WriteTxnMarkers v2 (KIP-1228): the transaction's version


@dataclass
class TxnActions(Actions):
    markers: list[MarkerWrite] = field(default_factory=list)

    def write_markers(self, marker: MarkerWrite) -> None:
        self.markers.append(marker)


# Marker errors after which the partition needs no marker: it is written, or the topic is gone.
_MARKER_DONE = (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
# The partition's producer (or coordinator) epoch moved past this transaction: its marker is moot.
_MARKER_STALE = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, generate_producer_id: Callable[[], int], now_ms: int,
                 coordinator_epoch: int = 0) -> None:
        self.config = config
        self.generate_producer_id = generate_producer_id
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}
        self.timer = CoordinatorTimer()
        self.active = False  # until loaded
        # What requests hear while it is not active; in a cluster COORDINATOR_LOAD_IN_PROGRESS
        # while this broker loads the transactional id's partition.
        self.inactive_error = ErrorCode.NOT_COORDINATOR
        self._schedule_every(now_ms, "abort-timed-out", config.abort_timed_out_transaction_cleanup_interval_ms,
                             self._abort_timed_out_transactions)
        self._schedule_every(now_ms, "expire-ids", config.remove_expired_transaction_cleanup_interval_ms,
                             self._expire_transactional_ids)

    def transaction_version_changed(self, level: int) -> None:
        """The finalized transaction.version moved (UpdateFeatures): the coordinator's own aborts
        take the new one from now on; a transaction keeps the version it began with."""
        self.config = replace(self.config, transaction_version_level=level)

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`."""
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    # --- clock, writes --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timer.next_deadline()

    def on_timer(self, now_ms: int) -> TxnActions:
        out = TxnActions()
        while (callback := self.timer.pop_due(now_ms)) is not None:
            callback(now_ms, out)
        return out

    def complete_append(self, append: Append, error: int, now_ms: int) -> TxnActions:
        out = TxnActions()
        append.on_done(error, now_ms, out)
        return out

    def complete_markers(self, marker: MarkerWrite, errors: dict[TopicPartition, int], now_ms: int) -> TxnActions:
        out = TxnActions()
        marker.on_done(errors, now_ms, out)
        return out

    # --- loading --------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record of `__transaction_state`, in log order (RecordFormatError for a bad one)."""
        record = read_record(key, value)
        if record.value is None:
            self.transactions.pop(record.transactional_id, None)
        else:
            self.transactions[record.transactional_id] = TransactionMetadata.from_transit(record.transactional_id,
                                                                                          record.value)

    def load_complete(self, now_ms: int) -> TxnActions:
        """Every partition is replayed: transactions found preparing get their markers written
        (a crash came between PrepareCommit/PrepareAbort and the completion); open ones are left
        to their timeout."""
        out = TxnActions()
        self.active = True
        for metadata in self.transactions.values():
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("Completing %s of transactional id %s after loading", metadata.state,
                         metadata.transactional_id)
                self._send_markers(out, metadata, metadata.state is S.PREPARE_COMMIT, metadata.prepare_complete(now_ms))
        log.info("Loaded %d transactional ids from %s", len(self.transactions), TRANSACTION_STATE_TOPIC)
        return out

    def unload(self) -> None:
        """Stop coordinating (shutdown): later requests get NOT_COORDINATOR."""
        self.active = False

    def _inactive_error(self) -> int | None:
        return None if self.active else self.inactive_error

    # --- InitProducerId --------------------------------------------------------------------------

    def init_producer_id(self, now_ms: int, ticket: Ticket, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> TxnActions:
        """Responds (error, producer id, epoch). `expected`: the (producer id, epoch) a v3+ client
        names to resume after an error (KIP-360)."""
        out = TxnActions()

        def fail(error: int) -> TxnActions:
            out.respond(ticket, (error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
            return out

        if (error := self._inactive_error()) is not None:
            return fail(error)
        if not transactional_id:
            return fail(ErrorCode.INVALID_REQUEST)
        if not self.validate_transaction_timeout_ms(timeout_ms):
            return fail(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        metadata = self.transactions.get(transactional_id)
        try:
            if metadata is None:
                metadata = TransactionMetadata(transactional_id, self._new_producer_id(), txn_timeout_ms=timeout_ms,
                                               txn_last_update_timestamp=now_ms)
                self.transactions[transactional_id] = metadata
            transit = self._prepare_init_producer_id(metadata, timeout_ms, expected, now_ms)
        except _Refused as e:
            return fail(e.error)
        if transit.txn_state is S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction first; the client retries and then gets a new epoch.
            def fenced(error: int, now_ms: int, out: TxnActions) -> None:
                fail_out = ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error
                out.respond(ticket, (fail_out, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
            self._end_transaction(now_ms, out, transactional_id, transit.producer_id, transit.producer_epoch, False,
                                  self.config.transaction_version_level, from_client=False,
                                  respond=lambda error, pid, epoch, now_ms, out: fenced(error, now_ms, out))
            return out

        def stored(error: int, now_ms: int, out: TxnActions) -> None:
            if error == ErrorCode.NONE:
                log.info("Initialized transactional id %s with producer id %d and producer epoch %d on partition "
                         "%s-%d", transactional_id, transit.producer_id, transit.producer_epoch,
                         TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
                out.respond(ticket, (ErrorCode.NONE, transit.producer_id, transit.producer_epoch))
            else:
                out.respond(ticket, (error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
        self._append_transit(out, metadata, transit, stored)
        return out

    def _new_producer_id(self) -> int:
        """A new producer id, or _Refused with the generator's error when none can be had yet (Kafka's
        coordinator answers Errors.forException of what its ProducerIdManager threw)."""
        try:
            return self.generate_producer_id()
        except ProducerIdsUnavailable as e:
            raise _Refused(e.error_code) from None

    def _prepare_init_producer_id(self, metadata: TransactionMetadata, timeout_ms: int,
                                  expected: tuple[int, int] | None, now_ms: int) -> TxnTransitMetadata:
        if metadata.pending_transition_in_progress:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._is_valid_producer_id(metadata, *expected):
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                return metadata.prepare_producer_id_rotation(self._new_producer_id(), timeout_ms, now_ms,
                                                             expected is not None)
            try:
                return metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                                 now_ms)
            except ProducerFenced as e:
                log.info("%s", e)
                raise _Refused(ErrorCode.PRODUCER_FENCED) from None
        if state is S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise RuntimeError(f"Found transactional id {metadata.transactional_id} with state {state}. This is illegal "
                           f"as we should never have transitioned to this state.")

    @staticmethod
    def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """A named producer is fenced unless the id is new (its state was lost: UNKNOWN_PRODUCER_ID
        recovery), its producer id is current, or it is the previous one whose epochs ran out (a
        retry of the rotation)."""
        return (metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id
                or producer_id == metadata.prev_producer_id and is_epoch_exhausted(epoch))

    # --- AddPartitionsToTxn, AddOffsetsToTxn ----------------------------------------------------------

    def add_partitions(self, now_ms: int, ticket: Ticket, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_transaction_version: int = TV_0) -> TxnActions:
        """Responds the error code of the whole request (every partition shares it).
        `client_transaction_version`: 0 from a client (AddPartitionsToTxn v0-3, AddOffsetsToTxn),
        2 from a partition leader adding a partition on a version 2 producer's behalf."""
        out = TxnActions()
        partitions = set(partitions)
        try:
            # Kafka asks about a pending transition before the producer: while a transaction's
            # markers are written even a stale epoch hears CONCURRENT_TRANSACTIONS, and retries.
            existing = self.transactions.get(transactional_id) if self.active and transactional_id else None
            if existing is not None and existing.pending_transition_in_progress:
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            metadata = self._transaction_of(transactional_id, producer_id, producer_epoch)
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            if metadata.state is S.ONGOING and partitions <= metadata.topic_partitions:
                raise _Refused(ErrorCode.NONE)  # nothing to write
        except _Refused as e:
            out.respond(ticket, e.error)
            return out
        transit = metadata.prepare_add_partitions(partitions, now_ms, client_transaction_version)
        self._append_transit(out, metadata, transit, lambda error, now_ms, out: out.respond(ticket, error))
        return out

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Whether the open transaction holds each partition (AddPartitionsToTxn's verifyOnly, and
        the check before a transactional append): TRANSACTION_ABORTABLE for one it does not."""
        partitions = list(partitions)
        try:
            metadata = self._transaction_of(transactional_id, producer_id, producer_epoch)
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        except _Refused as e:
            return {tp: e.error for tp in partitions}
        return {tp: ErrorCode.NONE if tp in metadata.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    def _transaction_of(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        from_client: bool = True) -> TransactionMetadata:
        """The metadata a request about an existing transaction names, or _Refused. A client must
        name the current epoch; the coordinator's own aborts carry a bumped one."""
        if (error := self._inactive_error()) is not None:
            raise _Refused(error)
        if not transactional_id:
            raise _Refused(ErrorCode.INVALID_REQUEST)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch < metadata.producer_epoch or from_client and producer_epoch != metadata.producer_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        return metadata

    # --- EndTxn -----------------------------------------------------------------------------------

    def end_transaction(self, now_ms: int, ticket: Ticket, transactional_id: str, producer_id: int,
                        producer_epoch: int, commit: bool, client_transaction_version: int = TV_0) -> TxnActions:
        """Responds (error, producer id, epoch) once PrepareCommit/PrepareAbort is written (the
        markers follow). A version 2 end names the producer id and epoch to go on with; a version
        0/1 end names none (-1, -1), as Kafka."""
        out = TxnActions()
        self._end_transaction(now_ms, out, transactional_id, producer_id, producer_epoch, commit,
                              client_transaction_version, from_client=True,
                              respond=lambda error, pid, epoch, now_ms, out: out.respond(ticket, (error, pid, epoch)))
        return out

    def _end_transaction(self, now_ms: int, out: TxnActions, transactional_id: str, producer_id: int,
                         producer_epoch: int, commit: bool, client_transaction_version: int, *, from_client: bool,
                         respond: Callable[[int, int, int, int, TxnActions], None]) -> None:
        """`respond(error, producer id, epoch, now_ms, out)`."""
        tv2 = supports_epoch_bump(client_transaction_version)
        try:
            if tv2:
                metadata, is_epoch_fence, transit = self._prepare_end_v2(now_ms, transactional_id, producer_id,
                                                                         producer_epoch, commit, from_client)
            else:
                metadata, is_epoch_fence, transit = self._prepare_end_v1(now_ms, transactional_id, producer_id,
                                                                         producer_epoch, commit, from_client)
        except _Refused as e:
            pid, epoch = e.producer if e.error == ErrorCode.NONE and tv2 else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            respond(e.error, pid, epoch, now_ms, out)
            return

        def prepared(error: int, now_ms: int, out: TxnActions) -> None:
            if error != ErrorCode.NONE:
                if is_epoch_fence and self.transactions.get(transactional_id) is metadata:
                    metadata.has_failed_epoch_fence = True
                    log.warning("The coordinator failed to write an epoch fence transition for producer %s to the "
                                "transaction log with error %s. The epoch was increased to %d but not returned to "
                                "the client", transactional_id, ErrorCode(error).name, transit.producer_epoch)
                respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, now_ms, out)
                return
            # The transaction's outcome is durable: the client hears now, the markers follow.
            complete = metadata.prepare_complete(now_ms)
            if tv2:
                respond(ErrorCode.NONE, complete.producer_id, complete.producer_epoch, now_ms, out)
            else:
                respond(ErrorCode.NONE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, now_ms, out)
            self._send_markers(out, metadata, commit, complete)
        self._append_transit(out, metadata, transit, prepared)

    def _prepare_end_v1(self, now_ms: int, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        from_client: bool) -> tuple[TransactionMetadata, bool, TxnTransitMetadata]:
        """Kafka's endTransactionWithTV1: (metadata, whether it aborts for a fence, the Prepare state)."""
        result = "COMMIT" if commit else "ABORT"
        is_epoch_fence = False
        metadata = self._transaction_of(transactional_id, producer_id, producer_epoch, from_client)
        if metadata.pending_transition_in_progress and metadata.pending_state is not S.PREPARE_EPOCH_FENCE:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = metadata.state
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if next_state is S.PREPARE_ABORT and metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                # The fence's epoch becomes the producer's with the abort record.
                is_epoch_fence = True
                metadata.clear_pending()
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            return metadata, is_epoch_fence, metadata.prepare_abort_or_commit(next_state, now_ms)
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            # A retry of an EndTxn that succeeded.
            raise _Refused(ErrorCode.NONE if (state is S.COMPLETE_COMMIT) == commit
                           else self._invalid_state(transactional_id, state, result))
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS if (state is S.PREPARE_COMMIT) == commit
                           else self._invalid_state(transactional_id, state, result))
        if state is S.EMPTY:
            raise _Refused(self._invalid_state(transactional_id, state, result))
        raise RuntimeError(f"Found transactional id {transactional_id} with state {state}. This is illegal as "
                           f"we should never have transitioned to this state.")

    def _prepare_end_v2(self, now_ms: int, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        from_client: bool) -> tuple[TransactionMetadata, bool, TxnTransitMetadata]:
        """Kafka's endTransaction for transaction version 2: every end bumps the epoch, so a retry
        names the epoch before the bump (or, after a rollover, the previous producer id at the last
        epoch); an abort with nothing open is written too (it bumps the epoch)."""
        result = "COMMIT" if commit else "ABORT"
        if (error := self._inactive_error()) is not None:
            raise _Refused(error)
        if not transactional_id:
            raise _Refused(ErrorCode.INVALID_REQUEST)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        is_epoch_fence = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        retry_on_overflow = (not is_epoch_fence and metadata.prev_producer_id == producer_id
                             and producer_epoch == _SHORT_MAX - 1 and metadata.producer_epoch == 0)
        retry_on_epoch_bump = not is_epoch_fence and metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if is_epoch_fence:
            valid_epoch = (not from_client or producer_epoch == metadata.producer_epoch) \
                and producer_epoch >= metadata.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_epoch_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_epoch_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        is_retry = retry_on_epoch_bump or retry_on_overflow
        if metadata.pending_transition_in_progress and not is_epoch_fence:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if metadata.producer_id != producer_id and not retry_on_overflow:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        current = (metadata.producer_id, metadata.producer_epoch)
        if state is S.ONGOING:
            return metadata, is_epoch_fence, self._prepare_end_v2_transit(
                metadata, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, is_epoch_fence, False, now_ms)
        if state is S.COMPLETE_COMMIT:
            if commit:
                raise _Refused(ErrorCode.NONE if is_retry else self._invalid_state(transactional_id, state, result),
                               current)
            if is_retry:
                raise _Refused(self._invalid_state(transactional_id, state, result))
            return metadata, is_epoch_fence, self._prepare_end_v2_transit(metadata, S.PREPARE_ABORT, is_epoch_fence,
                                                                          True, now_ms)
        if state is S.COMPLETE_ABORT:
            if commit:
                raise _Refused(self._invalid_state(transactional_id, state, result))
            if is_retry:
                raise _Refused(ErrorCode.NONE, current)
            return metadata, is_epoch_fence, self._prepare_end_v2_transit(metadata, S.PREPARE_ABORT, is_epoch_fence,
                                                                          True, now_ms)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS if (state is S.PREPARE_COMMIT) == commit
                           else self._invalid_state(transactional_id, state, result))
        if state is S.EMPTY:
            if commit:
                raise _Refused(self._invalid_state(transactional_id, state, result))
            return metadata, is_epoch_fence, self._prepare_end_v2_transit(metadata, S.PREPARE_ABORT, is_epoch_fence,
                                                                          True, now_ms)
        raise RuntimeError(f"Found transactional id {transactional_id} with state {state}. This is illegal as "
                           f"we should never have transitioned to this state.")

    def _prepare_end_v2_transit(self, metadata: TransactionMetadata, next_state: TransactionState,
                                is_epoch_fence: bool, no_partition_added: bool, now_ms: int) -> TxnTransitMetadata:
        """The Prepare state of a version 2 end, on a new producer id if this epoch is the last."""
        next_producer_id = self._new_producer_id() if metadata.is_producer_epoch_exhausted else NO_PRODUCER_ID
        if next_state is S.PREPARE_ABORT and is_epoch_fence:
            metadata.clear_pending()  # the abort replaces the fence
        return metadata.prepare_abort_or_commit(next_state, now_ms, TV_2, next_producer_id, no_partition_added)

    @staticmethod
    def _invalid_state(transactional_id: str, state: TransactionState, result: str) -> int:
        log.warning("TransactionalId: %s's state is %s, but received transaction marker result to send: %s",
                    transactional_id, state, result)
        return ErrorCode.INVALID_TXN_STATE

    # --- markers and completion (Kafka's TransactionMarkerChannelManager) ----------------------------

    def _send_markers(self, out: TxnActions, metadata: TransactionMetadata, commit: bool,
                      complete: TxnTransitMetadata) -> None:
        """Write the markers to the partitions still without one, then the completion."""
        if not metadata.topic_partitions:
            self._append_completion(out, metadata, complete)
            return
        out.write_markers(MarkerWrite(metadata.transactional_id, metadata.producer_id, metadata.producer_epoch, commit,
                                      self.coordinator_epoch, frozenset(metadata.topic_partitions),
                                      partial(self._markers_written, metadata, commit, complete),
                                      metadata.client_transaction_version))

    def _still_completing(self, metadata: TransactionMetadata, complete: TxnTransitMetadata) -> bool:
        return (self.transactions.get(metadata.transactional_id) is metadata
                and metadata.pending_state is complete.txn_state)

    def _markers_written(self, metadata: TransactionMetadata, commit: bool, complete: TxnTransitMetadata,
                         errors: dict[TopicPartition, int], now_ms: int, out: TxnActions) -> None:
        if not self._still_completing(metadata, complete):
            return
        for partition, error in errors.items():
            if error in _MARKER_STALE:
                log.warning("Transaction marker for %s of transactional id %s refused with %s: the partition has "
                            "moved past this transaction", partition, metadata.transactional_id,
                            ErrorCode(error).name)
            elif error not in _MARKER_DONE:
                log.info("Transaction marker for %s of transactional id %s failed with %s; retrying", partition,
                         metadata.transactional_id, ErrorCode(error).name)
                continue
            metadata.remove_partition(partition)
        if not metadata.topic_partitions:
            self._append_completion(out, metadata, complete)
            return
        self.timer.schedule(("markers", metadata.transactional_id), now_ms + self.config.retry_backoff_ms,
                            lambda now_ms, out: self._retry_markers(metadata, commit, complete, out))

    def _retry_markers(self, metadata: TransactionMetadata, commit: bool, complete: TxnTransitMetadata,
                       out: TxnActions) -> None:
        if self._still_completing(metadata, complete):
            self._send_markers(out, metadata, commit, complete)

    def _append_completion(self, out: TxnActions, metadata: TransactionMetadata, complete: TxnTransitMetadata) -> None:
        """CompleteCommit/CompleteAbort, written until it sticks (the transaction is decided)."""
        def stored(error: int, now_ms: int, out: TxnActions) -> None:
            if error == ErrorCode.NONE:
                log.debug("Completed transaction of %s: %s", metadata.transactional_id, metadata.state)
                return
            if self.transactions.get(metadata.transactional_id) is not metadata or not self.active:
                return
            log.warning("Failed to write %s for transactional id %s: %s; retrying", complete.txn_state,
                        metadata.transactional_id, ErrorCode(error).name)

            def retry(now_ms: int, out: TxnActions) -> None:
                if self.transactions.get(metadata.transactional_id) is metadata and not metadata.pending_state:
                    self._append_completion(out, metadata, metadata.prepare_complete(now_ms))
            self.timer.schedule(("complete", metadata.transactional_id), now_ms + self.config.retry_backoff_ms, retry)
        self._append_transit(out, metadata, complete, stored)

    # --- writes to __transaction_state -----------------------------------------------------------------

    def _append_transit(self, out: TxnActions, metadata: TransactionMetadata, transit: TxnTransitMetadata,
                        callback: Callable[[int, int, TxnActions], None]) -> None:
        """Write `transit`; once durable it becomes the state and `callback(NONE)` runs; on failure
        the pending transition is dropped and `callback(error)` runs."""
        transactional_id = metadata.transactional_id

        def on_done(error: int, now_ms: int, out: TxnActions) -> None:
            error = append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR)
            cached = self.transactions.get(transactional_id) is metadata
            if error == ErrorCode.NONE and not cached:
                error = ErrorCode.NOT_COORDINATOR
            if error == ErrorCode.NONE:
                metadata.complete_transition_to(transit)
            elif metadata.pending_state is transit.txn_state:
                log.info("TransactionalId %s append transaction log for %s transition failed due to %s, resetting "
                         "pending state from %s", transactional_id, transit.txn_state, ErrorCode(error).name,
                         metadata.pending_state)
                metadata.clear_pending()
            callback(error, now_ms, out)
        out.append(self.partition_for(transactional_id), [(encode_key(transactional_id), encode_value(transit))],
                   on_done)

    # --- timers: timed-out transactions, expired transactional ids ----------------------------------------

    def _schedule_every(self, now_ms: int, name: str, interval_ms: int,
                        job: Callable[[int, TxnActions], None]) -> None:
        """Run `job` every `interval_ms` while the coordinator is active."""
        def fire(now_ms: int, out: TxnActions) -> None:
            self._schedule_every(now_ms, name, interval_ms, job)
            if self.active:
                job(now_ms, out)
        self.timer.schedule((name,), now_ms + interval_ms, fire)

    def _abort_timed_out_transactions(self, now_ms: int, out: TxnActions) -> None:
        """Abort every Ongoing transaction past its timeout, fencing its producer with a new epoch."""
        for metadata in list(self.transactions.values()):
            if (metadata.state is not S.ONGOING or metadata.pending_transition_in_progress
                    or metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now_ms):
                continue
            transactional_id = metadata.transactional_id
            log.info("Aborting transaction of %s (producer id %d): open longer than its timeout of %d ms",
                     transactional_id, metadata.producer_id, metadata.txn_timeout_ms)
            fence = metadata.prepare_fence_producer_epoch()

            def aborted(error: int, pid: int, epoch: int, now_ms: int, out: TxnActions,
                        transactional_id: str = transactional_id) -> None:
                if error == ErrorCode.NONE:
                    log.info("Completed rollback of ongoing transaction for transactionalId %s due to timeout",
                             transactional_id)
                else:
                    log.warning("Rollback of ongoing transaction for transactionalId %s failed due to error %s",
                                transactional_id, ErrorCode(error).name)
            self._end_transaction(now_ms, out, transactional_id, fence.producer_id, fence.producer_epoch, False,
                                  self.config.transaction_version_level, from_client=False, respond=aborted)

    def _expire_transactional_ids(self, now_ms: int, out: TxnActions) -> None:
        """Tombstones for the ids idle past transactional.id.expiration.ms, one append per partition."""
        by_partition: dict[int, list[TransactionMetadata]] = defaultdict(list)
        for metadata in self.transactions.values():
            if (metadata.state.expiration_allowed and not metadata.pending_transition_in_progress
                    and metadata.txn_last_update_timestamp <= now_ms - self.config.transactional_id_expiration_ms):
                metadata.prepare_dead()
                by_partition[self.partition_for(metadata.transactional_id)].append(metadata)
        for partition, expired in by_partition.items():
            out.append(partition, [(encode_key(m.transactional_id), None) for m in expired],
                       partial(self._expired, expired))

    def _expired(self, expired: list[TransactionMetadata], error: int, now_ms: int, out: TxnActions) -> None:
        for metadata in expired:
            transactional_id = metadata.transactional_id
            if (error == ErrorCode.NONE and self.transactions.get(transactional_id) is metadata
                    and metadata.pending_state is S.DEAD):
                del self.transactions[transactional_id]
                log.info("Removed expired transactional id %s", transactional_id)
            else:
                log.warning("Failed to remove expired transactionalId: %s from cache. Tombstone append error code: "
                            "%s, pendingState: %s", transactional_id, ErrorCode(error).name, metadata.pending_state)
                metadata.clear_pending()

    # --- DescribeTransactions, ListTransactions ----------------------------------------------------------

    def describe(self, transactional_id: str):
        """(error, metadata or None) for DescribeTransactions."""
        if (error := self._inactive_error()) is not None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE if error == ErrorCode.NOT_COORDINATOR else error, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.state is S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, metadata

    def list_transactions(self, now_ms: int, state_filters: Iterable[str], producer_id_filters: Iterable[int],
                          duration_filter_ms: int = -1):
        """(error, unknown state filters, [metadata]) for ListTransactions: the filters combine,
        an empty one passes everything; Dead ids (being expired) are left out."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        state_names = list(state_filters)
        states = {state for name in state_names if (state := S.from_name(name)) is not None}
        unknown = [name for name in state_names if S.from_name(name) is None]
        producer_ids = set(producer_id_filters)

        def included(metadata: TransactionMetadata) -> bool:
            return (metadata.state is not S.DEAD
                    and (not producer_ids or metadata.producer_id in producer_ids)
                    and (not state_names or metadata.state in states)
                    and (duration_filter_ms < 0 or now_ms - metadata.txn_start_timestamp > duration_filter_ms))
        return ErrorCode.NONE, unknown, [m for m in self.transactions.values() if included(m)]


class _Refused(Exception):
    """A request answered with `error` without any write (NONE included: nothing to do);
    `producer`: the (producer id, epoch) a version 2 EndTxn retry hears."""

    def __init__(self, error: int, producer: tuple[int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)) -> None:
        super().__init__(ErrorCode(error).name)
        self.error = error
        self.producer = producer
