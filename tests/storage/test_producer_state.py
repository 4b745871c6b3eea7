"""The producer state machine alone: batch headers in, decisions out, time as an argument."""

import pytest

from samsa.storage.producer_state import NUM_BATCHES_TO_RETAIN, ProducerStateEntry, ProducerStateManager
from samsa.storage.errors import InvalidProducerEpochException, InvalidTxnStateException, OutOfOrderSequenceException
from samsa.storage.log_validator import AppendOrigin
from samsa.wire.records import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader

PID = 42
INT_MAX = 2**31 - 1
EXPIRATION_MS = 1000


def header(sequence: int, count: int = 1, *, offset: int, epoch: int = 0, pid: int = PID, timestamp: int = 100,
           transactional: bool = False, control: bool = False) -> BatchHeader:
    attributes = (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    return BatchHeader(base_offset=offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attributes, last_offset_delta=count - 1, base_timestamp=timestamp,
                       max_timestamp=timestamp, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       records_count=count)


def append(state: ProducerStateManager, batch: BatchHeader, origin=AppendOrigin.CLIENT):
    """What the log does: prepare, and apply unless it is a duplicate."""
    decided = state.prepare_update(batch, origin)
    if decided.duplicate is None:
        state.update(decided)
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
    append(state, header(-1, offset=1, control=True, timestamp=300), AppendOrigin.REPLICATION)
    entry = state.last_entry(PID)
    assert (entry.current_txn_first_offset, entry.last_timestamp, entry.last_seq) == (None, 300, 0)


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
