"""The partition leader's producer state under transaction version 2 (KIP-890 part 2), rule by rule
against Kafka 4.4's ProducerAppendInfo, ProducerStateManager and UnifiedLog: epochs bumped at each
end, markers one epoch above their records, sequences restarting at 0, the verification that a
transactional batch's append must bring back, and a stale producer's late write."""

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from storage_helpers import small_config

from samsa.storage.errors import (
    InvalidProducerEpochException, InvalidTxnStateException, OutOfOrderSequenceException,
)
from samsa.storage.log import Log
from samsa.storage.log_validator import AppendOrigin
from samsa.storage.producer_state import SENTINEL_GUARD, CompletedTxn, ProducerStateManager
from samsa.wire.records import (
    CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, ControlRecord, ControlRecordType, build_control_batch,
)

PID = 42
EXPIRATION_MS = 1000
COMMIT = ControlRecord(ControlRecordType.COMMIT, 0, 5)
ABORT = ControlRecord(ControlRecordType.ABORT, 0, 5)
TV2 = 2


def header(sequence: int, count: int = 1, *, offset: int, epoch: int = 0, pid: int = PID, timestamp: int = 100,
           transactional: bool = True, control: bool = False) -> BatchHeader:
    attributes = (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    return BatchHeader(base_offset=offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attributes, last_offset_delta=count - 1, base_timestamp=timestamp,
                       max_timestamp=timestamp, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       records_count=count)


def marker(offset: int, epoch: int, record: ControlRecord = COMMIT) -> tuple[BatchHeader, ControlRecord]:
    return header(-1, offset=offset, epoch=epoch, control=True), record


@pytest.fixture
def state() -> ProducerStateManager:
    return ProducerStateManager("t-0", producer_id_expiration_ms=EXPIRATION_MS)


def apply(state: ProducerStateManager, decided) -> None:
    state.update(decided)
    if decided.completed_txn is not None:
        state.complete_txn(decided.completed_txn)


def write(state, batch: BatchHeader, guard: int | None = None):
    decided = state.prepare_update(batch, AppendOrigin.CLIENT, verification_guard=guard)
    if decided.duplicate is None:
        apply(state, decided)
    return decided


def end(state, batch_and_marker, transaction_version: int = TV2):
    batch, record = batch_and_marker
    decided = state.prepare_update(batch, AppendOrigin.COORDINATOR, record, transaction_version)
    apply(state, decided)
    return decided


def verify(state, sequence: int, epoch: int, now_ms: int = 0, supports_epoch_bump: bool = True) -> int:
    """What the leader does before asking the coordinator (Kafka's maybeStartTransactionVerification)."""
    if state.has_ongoing_transaction(PID, epoch):
        return SENTINEL_GUARD
    return state.maybe_create_verification_state_entry(PID, sequence, epoch, supports_epoch_bump, now_ms).guard


# --- epochs and sequences at the bump -------------------------------------------------------------------

def test_each_transaction_is_one_epoch_its_marker_the_next_and_the_next_transaction_starts_at_zero(state):
    write(state, header(0, 3, offset=0, epoch=5))
    write(state, header(3, 2, offset=3, epoch=5))
    assert end(state, marker(5, epoch=6)).completed_txn == CompletedTxn(PID, 0, 5, False)
    entry = state.last_entry(PID)
    # The marker's epoch is the producer's now, with no batches: its next transaction starts over.
    assert (entry.producer_epoch, entry.last_seq, entry.current_txn_first_offset) == (6, -1, None)
    with pytest.raises(OutOfOrderSequenceException):
        state.prepare_update(header(5, offset=6, epoch=6))  # the sequence of the epoch before goes on: no
    assert write(state, header(0, offset=6, epoch=6)).started_txn
    assert end(state, marker(7, epoch=7, record=ABORT)).completed_txn == CompletedTxn(PID, 6, 7, True)


def test_a_marker_at_the_records_epoch_is_refused_and_a_retried_marker_passes(state):
    write(state, header(0, offset=0, epoch=5))
    with pytest.raises(InvalidProducerEpochException):
        end(state, marker(1, epoch=5))  # a version 2 end always bumps
    with pytest.raises(InvalidProducerEpochException):
        end(state, marker(1, epoch=4))
    end(state, marker(1, epoch=6))
    assert end(state, marker(2, epoch=6)).completed_txn is None  # the coordinator's retry: idempotent
    with pytest.raises(InvalidProducerEpochException):
        end(state, marker(3, epoch=5))


def test_a_retried_marker_at_the_last_epoch_passes_even_with_a_transaction_open(state):
    """Kafka lets the same epoch through at Short.MAX_VALUE: an abort there cannot bump."""
    write(state, header(0, offset=0, epoch=2**15 - 1))
    assert end(state, marker(1, epoch=2**15 - 1, record=ABORT)).completed_txn == CompletedTxn(PID, 0, 1, True)


def test_a_stale_producers_late_write_after_the_bump_is_refused(state):
    """Jepsen's case (KAFKA-17754): a write of transaction T at epoch e delayed past T's marker. With
    version 2 the marker is at e+1, so the late write is from an older epoch, not a new transaction."""
    write(state, header(0, offset=0, epoch=5))
    end(state, marker(1, epoch=6))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(1, offset=2, epoch=5))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(1, offset=2, epoch=5), verification_guard=SENTINEL_GUARD)
    # Nothing opened: the partition has no transaction for it to hang.
    assert state.first_undecided_offset is None


def test_with_transaction_version_1_the_late_write_opens_a_hanging_transaction_unless_verified(state):
    """The same late write with markers at the records' epoch: only verification refuses it."""
    write(state, header(0, offset=0, epoch=5))
    end(state, marker(1, epoch=5), transaction_version=0)
    late = header(1, offset=2, epoch=5)
    with pytest.raises(InvalidTxnStateException):
        state.prepare_update(late, verification_guard=SENTINEL_GUARD)  # verification required, none done
    assert state.prepare_update(late).started_txn  # unverified, it would open a transaction


# --- the verification's sequence rules (Kafka's ProducerAppendInfo.checkSequence) -------------------------

def test_a_version_2_producer_without_state_here_must_start_at_sequence_zero(state):
    guard = verify(state, 3, epoch=0)
    with pytest.raises(OutOfOrderSequenceException, match="Expected sequence 0"):
        state.prepare_update(header(3, offset=0, epoch=0), verification_guard=guard)
    assert write(state, header(0, offset=0, epoch=0), guard).started_txn


def test_a_version_1_producer_without_state_here_may_start_at_any_sequence(state):
    guard = verify(state, 3, epoch=0, supports_epoch_bump=False)
    assert write(state, header(3, offset=0, epoch=0), guard).started_txn


def test_a_batch_may_not_be_written_before_a_lower_one_verified_with_it(state):
    verify(state, 0, epoch=0, supports_epoch_bump=False)
    guard = verify(state, 4, epoch=0, supports_epoch_bump=False)  # the same verification: lowest stays 0
    assert state.verification_state_entry(PID).lowest_sequence == 0
    with pytest.raises(OutOfOrderSequenceException, match="earliest seen sequence"):
        state.prepare_update(header(4, offset=0, epoch=0), verification_guard=guard)
    write(state, header(0, 4, offset=0, epoch=0), guard)
    # Written: the verification is used up, the next batch is in the open transaction.
    assert state.verification_state_entry(PID) is None
    assert verify(state, 4, epoch=0) == SENTINEL_GUARD
    write(state, header(4, offset=4, epoch=0), SENTINEL_GUARD)


def test_a_verification_at_a_newer_epoch_starts_its_lowest_sequence_over(state):
    verify(state, 7, epoch=0, supports_epoch_bump=False)
    verify(state, 2, epoch=1, supports_epoch_bump=False)
    entry = state.verification_state_entry(PID)
    assert (entry.epoch, entry.lowest_sequence) == (1, 2)
    verify(state, 9, epoch=0, supports_epoch_bump=False)  # an older epoch changes nothing
    assert (entry.epoch, entry.lowest_sequence) == (1, 2)


# --- the verification guard (Kafka's UnifiedLog.batchMissingRequiredVerification) -------------------------

def test_a_marker_between_verification_and_append_voids_the_verification(state):
    write(state, header(0, offset=0, epoch=0, transactional=True), verify(state, 0, epoch=0))
    end(state, marker(1, epoch=0), transaction_version=0)
    guard = verify(state, 1, epoch=0, supports_epoch_bump=False)  # the next transaction's first batch
    write(state, header(1, offset=2, epoch=0, pid=PID + 1, transactional=False))  # others do not matter
    end(state, marker(3, epoch=0), transaction_version=0)  # a late retry of the marker clears it
    with pytest.raises(InvalidTxnStateException, match="not part of an ongoing transaction"):
        state.prepare_update(header(1, offset=4, epoch=0), verification_guard=guard)


def test_the_next_version_2_transaction_verified_before_the_last_ones_marker_keeps_its_verification(state):
    """KIP-890 part 2: the producer bumps to e+1 as soon as EndTxn answers and may start its next
    transaction before the markers of the last one (at e+1) are written."""
    write(state, header(0, offset=0, epoch=5), verify(state, 0, epoch=5))
    guard = verify(state, 0, epoch=6)
    end(state, marker(1, epoch=6))
    assert state.verification_state_entry(PID).verifies(guard)
    assert write(state, header(0, offset=2, epoch=6), guard).started_txn
    assert state.verification_state_entry(PID) is None


def test_an_older_epoch_opening_a_transaction_is_refused_before_the_verification(state):
    write(state, header(0, offset=0, epoch=3, transactional=False))
    with pytest.raises(InvalidProducerEpochException):
        state.prepare_update(header(0, offset=1, epoch=2), verification_guard=SENTINEL_GUARD)


def test_verification_is_not_asked_of_a_batch_in_an_open_transaction_nor_of_replicas(state):
    write(state, header(0, offset=0, epoch=0), verify(state, 0, epoch=0))
    write(state, header(1, offset=1, epoch=0), SENTINEL_GUARD)
    decided = state.prepare_update(header(0, offset=2, epoch=0, pid=PID + 1), AppendOrigin.REPLICATION,
                                   verification_guard=SENTINEL_GUARD)
    assert decided.started_txn


def test_an_unused_verification_expires_with_the_producers(state):
    verify(state, 0, epoch=0, now_ms=100)
    state.remove_expired_producers(100 + EXPIRATION_MS - 1)
    assert state.verification_state_entry(PID) is not None
    state.remove_expired_producers(100 + EXPIRATION_MS)
    assert state.verification_state_entry(PID) is None


# --- the log -------------------------------------------------------------------------------------------------

def txn_batch(epoch: int, sequence: int, count: int = 1, pid: int = PID) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 30)
    for delta in range(count):
        builder.append(delta, timestamp=1000, key=b"k", value=b"v", headers=[])
    return bytearray(builder.build())


def test_the_log_verifies_appends_and_refuses_a_stale_producer_before_asking_anyone(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", small_config(), clock_ms=clock, had_clean_shutdown=True, recovery_point=0)
    guard = log.maybe_start_transaction_verification(PID, 0, 5, supports_epoch_bump=True)
    assert guard != SENTINEL_GUARD
    log.append_as_leader(txn_batch(5, 0, 2), verification_guard=guard)
    assert log.maybe_start_transaction_verification(PID, 2, 5, supports_epoch_bump=True) == SENTINEL_GUARD
    log.append_as_leader(bytearray(build_control_batch("COMMIT", PID, 6, 0, 0, 1000)),
                         origin=AppendOrigin.COORDINATOR, transaction_version=TV2)
    with pytest.raises(InvalidProducerEpochException):
        log.maybe_start_transaction_verification(PID, 2, 5, supports_epoch_bump=True)
    with pytest.raises(InvalidProducerEpochException):
        log.append_as_leader(txn_batch(5, 2), verification_guard=SENTINEL_GUARD)
    guard = log.maybe_start_transaction_verification(PID, 3, 6, supports_epoch_bump=True)
    with pytest.raises(OutOfOrderSequenceException):
        log.append_as_leader(txn_batch(6, 3), verification_guard=guard)
    assert log.append_as_leader(txn_batch(6, 0), verification_guard=guard).first_offset == 3
    assert log.log_end_offset == 4
