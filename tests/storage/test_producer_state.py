"""The producer state machine alone: batch headers in, decisions out, time as an argument."""

import pytest

from samsa.storage.producer_state import NUM_BATCHES_TO_RETAIN, CompletedTxn, ProducerStateEntry, ProducerStateManager
from samsa.storage.errors import (
    InvalidProducerEpochException, InvalidTxnStateException, OutOfOrderSequenceException,
    TransactionCoordinatorFencedException,
)
from samsa.storage.log_validator import AppendOrigin
from samsa.wire.records import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, ControlRecord, ControlRecordType

PID = 42
INT_MAX = 2**31 - 1
EXPIRATION_MS = 1000
COMMIT = ControlRecord(ControlRecordType.COMMIT, 0, 5)
ABORT = ControlRecord(ControlRecordType.ABORT, 0, 5)


def header(sequence: int, count: int = 1, *, offset: int, epoch: int = 0, pid: int = PID, timestamp: int = 100,
           transactional: bool = False, control: bool = False) -> BatchHeader:
    attributes = (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    return BatchHeader(base_offset=offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attributes, last_offset_delta=count - 1, base_timestamp=timestamp,
                       max_timestamp=timestamp, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       records_count=count)


def append(state: ProducerStateManager, batch: BatchHeader, origin=AppendOrigin.CLIENT, marker=None):
    """What the log does: prepare, and apply unless it is a duplicate; a completed transaction is
    then complete."""
    decided = state.prepare_update(batch, origin, marker)
    if decided.duplicate is None:
        state.update(decided)
        if decided.completed_txn is not None:
            state.complete_txn(decided.completed_txn)
        state.update_map_end_offset(batch.last_offset + 1)
    return decided


@pytest.fixture
def state() -> ProducerStateManager:
    return ProducerStateManager("t-0", producer_id_expiration_ms=EXPIRATION_MS)


def test_batches_in_sequence_are_recorded(state):
    append(state, header(0, 3, offset=0))
    append(state, header(3, 2, offset=3))
    entry = state.last_entry(PID)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 0, 4, 4)
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches] == [(0, 2, 0, 2),
                                                                                                (3, 4, 3, 4)]


def test_a_retry_of_one_of_the_last_five_batches_is_a_duplicate_with_its_original_offsets(state):
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        append(state, header(2 * i, 2, offset=10 + 2 * i, timestamp=100 + i))
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(0, 2, offset=99))  # the sixth-latest is forgotten
    for i in range(1, NUM_BATCHES_TO_RETAIN + 1):
        decided = state.prepare_update(header(2 * i, 2, offset=99))
        assert decided.updated_entry is None
        assert (decided.duplicate.first_offset, decided.duplicate.last_offset) == (10 + 2 * i, 11 + 2 * i)
        assert decided.duplicate.timestamp == 100 + i


def test_a_sequence_gap_is_refused_and_changes_nothing(state):
    append(state, header(0, 2, offset=0))
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(3, offset=2))
    assert state.last_entry(PID).last_seq == 1
    append(state, header(2, offset=2))  # the right one still goes in


def test_a_different_sequence_range_is_not_a_duplicate(state):
    append(state, header(0, 2, offset=0))
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(0, 3, offset=2))


def test_an_older_epoch_is_refused(state):
    append(state, header(0, offset=0, epoch=3))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(1, offset=1, epoch=2))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(0, offset=1, epoch=2))  # even what looks like a retry


def test_a_new_epoch_starts_again_at_sequence_zero(state):
    append(state, header(0, 5, offset=0))
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(5, offset=5, epoch=1))
    append(state, header(0, offset=5, epoch=1))
    entry = state.last_entry(PID)
    assert (entry.producer_epoch, len(entry.batches), entry.last_seq) == (1, 1, 0)
    # The old epoch's batches no longer count as duplicates.
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(0, 5, offset=6, epoch=0))


def test_an_unknown_producer_may_start_at_any_sequence(state):
    # Since KIP-360 (Kafka 2.5) a producer whose state expired goes on where it was.
    append(state, header(17, offset=0))
    assert state.last_entry(PID).last_seq == 17


def test_sequences_wrap_after_int_max(state):
    append(state, header(INT_MAX - 1, 3, offset=0))  # INT_MAX - 1, INT_MAX, 0
    entry = state.last_entry(PID)
    assert (entry.first_seq, entry.last_seq) == (INT_MAX - 1, 0)
    assert state.prepare_update(header(INT_MAX - 1, 3, offset=9)).duplicate.last_offset == 2
    append(state, header(1, offset=3))
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(0, offset=4))


def test_producers_are_independent(state):
    append(state, header(0, offset=0, pid=1))
    append(state, header(5, offset=1, pid=2))
    append(state, header(1, offset=2, pid=1))
    assert (state.last_entry(1).last_seq, state.last_entry(2).last_seq) == (1, 5)


def test_replicated_and_replayed_batches_are_not_checked(state):
    append(state, header(0, offset=0, epoch=2))
    append(state, header(7, offset=1, epoch=2), AppendOrigin.REPLICATION)  # a gap
    append(state, header(0, offset=2, epoch=1), AppendOrigin.REPLICATION)  # an older epoch: a warning only
    entry = state.last_entry(PID)
    assert (entry.producer_epoch, entry.last_data_offset) == (1, 2)
    append(state, header(0, offset=3, epoch=1), AppendOrigin.REPLICATION)
    assert state.last_entry(PID).last_data_offset == 3  # a replica never answers with a duplicate


def test_a_transaction_marker_closes_the_transaction(state):
    append(state, header(0, offset=0, transactional=True), AppendOrigin.REPLICATION)
    assert state.last_entry(PID).current_txn_first_offset == 0
    with pytest.raises(InvalidTxnStateException):
        state.prepare_update(header(1, offset=1), AppendOrigin.REPLICATION)
    decided = append(state, header(-1, offset=1, control=True, timestamp=300), AppendOrigin.REPLICATION,
                     marker=COMMIT)
    assert decided.completed_txn == CompletedTxn(PID, 0, 1, False)
    entry = state.last_entry(PID)
    assert (entry.current_txn_first_offset, entry.last_timestamp, entry.last_seq) == (None, 300, 0)
    assert entry.coordinator_epoch == 5


def test_idle_producers_expire_after_producer_id_expiration_ms(state):
    append(state, header(0, offset=0, pid=1, timestamp=1000))
    append(state, header(0, offset=1, pid=2, timestamp=1500))
    assert state.remove_expired_producers(1000 + EXPIRATION_MS - 1) == 0
    assert state.remove_expired_producers(1000 + EXPIRATION_MS) == 1
    assert state.last_entry(1) is None and state.last_entry(2) is not None


def test_a_producer_with_an_open_transaction_does_not_expire(state):
    append(state, header(0, offset=0, transactional=True, timestamp=0), AppendOrigin.REPLICATION)
    assert state.remove_expired_producers(10 * EXPIRATION_MS) == 0


def test_loading_a_snapshot_drops_the_producers_expired_since(state):
    fresh = ProducerStateEntry(1, producer_epoch=0, last_timestamp=5000)
    stale = ProducerStateEntry(2, producer_epoch=0, last_timestamp=1000)
    state.load_snapshot_entries([fresh, stale], snapshot_offset=40, now_ms=1000 + EXPIRATION_MS)
    assert set(state.producers) == {1}
    assert (state.map_end_offset, state.last_snapshot_offset, state.needs_snapshot) == (40, 40, False)
    state.update_map_end_offset(41)
    assert state.needs_snapshot


def test_a_batch_without_a_producer_id_has_no_producer_state(state):
    with pytest.raises(ValueError):
        state.prepare_update(header(-1, offset=0, pid=-1))


# -- transactions

def test_open_transactions_hold_back_the_first_unstable_offset(state):
    assert state.first_unstable_offset is None
    append(state, header(0, 2, offset=10, pid=1, transactional=True))
    append(state, header(0, offset=12, pid=2, transactional=True))
    append(state, header(2, offset=13, pid=1, transactional=True))  # same transaction: still from 10
    assert state.ongoing_txns == [(10, 1), (12, 2)]
    assert (state.first_unstable_offset, state.first_undecided_offset) == (10, 10)
    decided = state.prepare_update(header(-1, offset=14, pid=1, control=True), AppendOrigin.COORDINATOR, ABORT)
    state.update(decided)
    # The index entry of producer 1's abort: stable up to producer 2's open transaction.
    assert state.last_stable_offset(decided.completed_txn) == 12
    state.complete_txn(decided.completed_txn)
    # Decided, but not stable until the high watermark passes the marker.
    assert (state.first_unstable_offset, state.first_undecided_offset) == (10, 12)
    state.on_high_watermark_updated(14)
    assert state.first_unstable_offset == 10
    state.on_high_watermark_updated(15)
    assert state.first_unstable_offset == 12
    decided = append(state, header(-1, offset=15, pid=2, control=True), AppendOrigin.COORDINATOR, COMMIT)
    assert decided.completed_txn == CompletedTxn(2, 12, 15, False)
    assert state.last_stable_offset(decided.completed_txn) == 16
    state.on_high_watermark_updated(16)
    assert state.first_unstable_offset is None and state.ongoing_txns == []


def test_a_marker_without_records_completes_nothing(state):
    decided = append(state, header(-1, offset=0, control=True, epoch=3), AppendOrigin.COORDINATOR, ABORT)
    assert decided.completed_txn is None
    assert state.last_entry(PID).producer_epoch == 3  # the fencing epoch is recorded all the same
    assert state.first_unstable_offset is None


def test_a_cleaned_away_marker_changes_nothing(state):
    append(state, header(0, offset=0, transactional=True), AppendOrigin.REPLICATION)
    decided = append(state, header(-1, offset=1, control=True), AppendOrigin.REPLICATION, marker=None)
    assert decided.updated_entry is None and decided.completed_txn is None
    assert state.ongoing_txns == [(0, PID)]


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(state):
    append(state, header(0, offset=0, transactional=True))
    append(state, header(-1, offset=1, control=True), AppendOrigin.COORDINATOR, COMMIT)  # coordinator epoch 5
    append(state, header(1, offset=2, transactional=True))
    stale = ControlRecord(ControlRecordType.ABORT, 0, 4)
    with pytest.raises(TransactionCoordinatorFencedException):
        state.prepare_update(header(-1, offset=3, control=True), AppendOrigin.COORDINATOR, stale)
    assert state.prepare_update(header(-1, offset=3, control=True), AppendOrigin.REPLICATION, stale).completed_txn


def test_a_marker_of_an_older_producer_epoch_is_refused(state):
    append(state, header(0, offset=0, epoch=2, transactional=True))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(-1, offset=1, epoch=1, control=True), AppendOrigin.COORDINATOR, ABORT)


def test_a_transaction_version_2_marker_must_carry_a_bumped_epoch(state):
    """KIP-1228 (Kafka's ProducerAppendInfo.checkProducerEpoch): a version 2 transaction ends on the
    epoch after its records'; the same epoch passes only once nothing is open (a marker's retry)."""
    append(state, header(0, offset=0, epoch=3, transactional=True))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(-1, offset=1, epoch=3, control=True), AppendOrigin.COORDINATOR, COMMIT, 2)
    assert state.prepare_update(header(-1, offset=1, epoch=3, control=True), AppendOrigin.COORDINATOR, COMMIT, 0)
    decided = append_v2(state, header(-1, offset=1, epoch=4, control=True), COMMIT)
    assert decided.completed_txn == CompletedTxn(PID, 0, 1, False)
    assert state.last_entry(PID).producer_epoch == 4
    assert append_v2(state, header(-1, offset=2, epoch=4, control=True), COMMIT).completed_txn is None  # a retry
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(-1, offset=3, epoch=3, control=True), AppendOrigin.COORDINATOR, COMMIT, 2)
    # Replicated, a stale one is only logged.
    assert state.prepare_update(header(-1, offset=3, epoch=3, control=True), AppendOrigin.REPLICATION, COMMIT, 2)


def append_v2(state: ProducerStateManager, batch: BatchHeader, marker: ControlRecord):
    decided = state.prepare_update(batch, AppendOrigin.COORDINATOR, marker, 2)
    state.update(decided)
    if decided.completed_txn is not None:
        state.complete_txn(decided.completed_txn)
    state.update_map_end_offset(batch.last_offset + 1)
    return decided


def test_an_epoch_fencing_abort_restarts_the_sequence(state):
    append(state, header(0, offset=0, transactional=True))
    append(state, header(-1, offset=1, epoch=1, control=True), AppendOrigin.COORDINATOR, ABORT)
    entry = state.last_entry(PID)
    assert (entry.producer_epoch, entry.last_seq) == (1, -1)
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(5, offset=2, epoch=1, transactional=True))
    assert append(state, header(0, offset=2, epoch=1, transactional=True)).started_txn


def test_a_snapshot_brings_back_open_transactions(state):
    open_txn = ProducerStateEntry(1, producer_epoch=0, last_timestamp=0, current_txn_first_offset=7)
    idle = ProducerStateEntry(2, producer_epoch=0, last_timestamp=0)
    state.load_snapshot_entries([open_txn, idle], snapshot_offset=9, now_ms=10 * EXPIRATION_MS)
    assert set(state.producers) == {1}  # an open transaction keeps its producer from expiring
    assert state.ongoing_txns == [(7, 1)] and state.first_unstable_offset == 7


def test_truncation_and_a_moved_log_start_forget_transactions(state):
    append(state, header(0, offset=0, pid=1, transactional=True))
    append(state, header(-1, offset=1, pid=1, control=True), AppendOrigin.COORDINATOR, COMMIT)
    append(state, header(0, offset=2, pid=2, transactional=True))
    state.on_log_start_offset_incremented(2, None)
    assert state.first_unstable_offset == 2  # the completed one below the log start is gone
    state.truncate_fully_and_start_at(3)
    assert state.first_unstable_offset is None and state.ongoing_txns == []
