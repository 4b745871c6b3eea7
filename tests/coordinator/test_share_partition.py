"""The share partition state machine (KIP-932), driven deterministically by an explicit clock."""

import uuid

import pytest

from samsa.coordinator.share_partition import (
    UNINITIALIZED_START_OFFSET, AbortedTransaction, AcknowledgeType, AcquiredRecords, FetchedBatch,
    PendingWrite, ShareAcknowledgementBatch, ShareAcquiredRecords, ShareAcquireMode, SharePartition,
    SharePartitionConfig, SharePartitionError, SharePartitionStatus,
)
from samsa.coordinator.share_state import PersisterStateBatch, RecordState, SharePartitionState
from samsa.wire.errors import ErrorCode

ACCEPT, RELEASE, REJECT, RENEW, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                       AcknowledgeType.RENEW, AcknowledgeType.GAP)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                                               RecordState.ARCHIVED)
LOCK_MS = 30_000
TOPIC_ID = uuid.UUID(int=7)


def new_partition(state: SharePartitionState | None = None, start_offset: int | None = None,
                  **config) -> SharePartition:
    sp = SharePartition("g", TOPIC_ID, 0, leader_epoch=3, config=SharePartitionConfig(**config))
    assert sp.start_initializing()
    sp.initialize(state if state is not None else SharePartitionState(0, 0), start_offset)
    return sp


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(first, last) for first, last in ranges]


def acquire(sp: SharePartition, *args, **kwargs) -> ShareAcquiredRecords:
    """sp.acquire(...), its write committed (the shell answers the records once it is)."""
    result = sp.acquire(*args, **kwargs)
    assert (result.write is None) == (not result.acquired_records)
    if result.write is not None:
        commit(sp, result.write)
    return result


def fetch(sp: SharePartition, member: str, log: list[FetchedBatch], now: int = 0, max_records: int = 500,
          batch_size: int = 500, **kwargs) -> list[AcquiredRecords]:
    """What a fetch from next_fetch_offset() acquires of the log's batches (those reaching it), its
    write committed."""
    offset = sp.next_fetch_offset()
    read = [b for b in log if b.last_offset >= offset]
    return acquire(sp, member, offset, read, now, max_fetch_records=max_records, batch_size=batch_size,
                   **kwargs).acquired_records


def ack(first: int, last: int, *types: int) -> ShareAcknowledgementBatch:
    return ShareAcknowledgementBatch(first, last, list(types))


def states(sp: SharePartition) -> list[tuple[int, int, RecordState, int]]:
    return [(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
            for b in sp.snapshot().state_batches]


def written(write: PendingWrite | None) -> list[tuple[int, int, RecordState, int]]:
    assert write is not None
    return [(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
            for b in write.state.state_batches]


def commit(sp: SharePartition, write: PendingWrite | None) -> None:
    assert write is not None
    assert sp.complete_write(write.write_id).error_code is ErrorCode.NONE


def refused(error: ErrorCode, call, *args) -> None:
    with pytest.raises(SharePartitionError) as raised:
        call(*args)
    assert raised.value.error_code is error


LOG = batches((0, 4), (5, 9), (10, 14))


# -- initialization -----------------------------------------------------------------------------


def test_a_new_share_partition_needs_the_offset_its_auto_offset_reset_resolves():
    sp = SharePartition("g", TOPIC_ID, 0)
    assert sp.status is SharePartitionStatus.EMPTY
    assert sp.start_initializing()
    refused(ErrorCode.LEADER_NOT_AVAILABLE, sp.start_initializing)
    refused(ErrorCode.UNKNOWN_SERVER_ERROR, sp.initialize, SharePartitionState(0, UNINITIALIZED_START_OFFSET))
    assert sp.status is SharePartitionStatus.FAILED
    refused(ErrorCode.UNKNOWN_SERVER_ERROR, sp.start_initializing)

    sp = new_partition(SharePartitionState(1, UNINITIALIZED_START_OFFSET), start_offset=42)
    assert sp.status is SharePartitionStatus.ACTIVE and not sp.start_initializing()
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset(), sp.in_flight_records) == (42, 42, 42, 0)
    assert sp.state_epoch == 1


def test_invalid_persisted_state_batches_fail_the_partition():
    for bad in (PersisterStateBatch(5, 9, 0, 1), PersisterStateBatch(12, 11, 0, 1)):
        sp = SharePartition("g", TOPIC_ID, 0)
        sp.start_initializing()
        refused(ErrorCode.UNKNOWN_SERVER_ERROR, sp.initialize, SharePartitionState(0, 10, state_batches=[bad]))
        assert sp.status is SharePartitionStatus.FAILED


def test_a_fenced_or_unloaded_partition_acquires_nothing():
    sp = SharePartition("g", TOPIC_ID, 0)
    assert not sp.maybe_acquire_fetch_lock("f1")
    assert acquire(sp, "m1", 0, LOG, 0, max_fetch_records=500, batch_size=500).acquired_records == []
    sp = new_partition()
    assert sp.maybe_acquire_fetch_lock("f1") and not sp.maybe_acquire_fetch_lock("f2")
    sp.release_fetch_lock("f1")
    assert sp.maybe_acquire_fetch_lock("f2")
    sp.mark_fenced()
    assert fetch(sp, "m1", LOG) == []
    refused(ErrorCode.LEADER_NOT_AVAILABLE, sp.start_initializing)


# -- acquisition --------------------------------------------------------------------------------


def test_new_batches_are_acquired_whole_with_a_lock_and_delivery_count_one():
    sp = new_partition()
    assert fetch(sp, "m1", LOG, now=1000) == [AcquiredRecords(0, 14, 1)]
    assert (sp.start_offset, sp.end_offset, sp.in_flight_records) == (0, 14, 15)
    assert states(sp) == [(0, 14, ACQUIRED, 1)]
    assert sp.next_fetch_offset() == 15
    assert sp.next_deadline() == 1000 + LOCK_MS
    # Nothing more to take: another member gets nothing from the same read.
    assert acquire(sp, "m2", 0, LOG, 1000, max_fetch_records=500, batch_size=500).acquired_records == []


def test_batch_size_cuts_the_answer_along_log_batches():
    sp = new_partition()
    log = batches((0, 2), (3, 5), (6, 8), (9, 11))
    assert fetch(sp, "m1", log, batch_size=4) == [
        AcquiredRecords(0, 5, 1), AcquiredRecords(6, 11, 1)]
    assert len(sp.snapshot().state_batches) == 1  # one state for all, kept as two in-flight batches


def test_max_records_rounds_up_to_a_batch_end_in_batch_optimized_mode():
    sp = new_partition()
    result = acquire(sp, "m1", 0, LOG, 0, max_fetch_records=7, batch_size=500)
    assert result.acquired_records == [AcquiredRecords(0, 9, 1)] and result.count == 10
    assert sp.next_fetch_offset() == 10


def test_the_strict_record_limit_acquires_exactly_max_records_and_leaves_the_rest_available():
    sp = new_partition()
    result = acquire(sp, "m1", 0, LOG, 0, max_fetch_records=7, batch_size=500,
                        share_acquire_mode=ShareAcquireMode.RECORD_LIMIT)
    assert result.acquired_records == [AcquiredRecords(0, 6, 1)] and result.count == 7
    assert states(sp) == [(0, 6, ACQUIRED, 1), (7, 9, AVAILABLE, 0)]
    assert sp.next_fetch_offset() == 7
    # The next fetch takes the rest of that batch first, then new records up to its limit.
    result = acquire(sp, "m2", 7, LOG[1:], 0, max_fetch_records=4, batch_size=500,
                        share_acquire_mode=ShareAcquireMode.RECORD_LIMIT)
    assert result.acquired_records == [AcquiredRecords(7, 9, 1), AcquiredRecords(10, 10, 1)]
    assert result.count == 4
    assert states(sp) == [(0, 10, ACQUIRED, 1), (11, 14, AVAILABLE, 0)]


def test_record_limit_mode_does_not_take_a_whole_in_flight_batch_larger_than_the_limit():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    commit(sp, sp.acknowledge("m1", [ack(0, 14, RELEASE)], 0))
    result = acquire(sp, "m2", 0, LOG, 0, max_fetch_records=4, batch_size=500,
                        share_acquire_mode=ShareAcquireMode.RECORD_LIMIT)
    assert result.acquired_records == [AcquiredRecords(0, 3, 2)] and result.count == 4
    assert states(sp) == [(0, 3, ACQUIRED, 2), (4, 14, AVAILABLE, 1)]


def test_the_window_limits_the_records_in_flight():
    sp = new_partition(max_in_flight_records=8)
    log = batches((0, 3), (4, 7), (8, 11), (12, 15))
    assert fetch(sp, "m1", log) == [AcquiredRecords(0, 7, 1)]
    assert sp.in_flight_records == 8 and not sp.can_acquire_records()
    assert fetch(sp, "m2", log) == []
    # Released records are acquirable again though the window is full.
    commit(sp, sp.acknowledge("m1", [ack(4, 7, RELEASE)], 0))
    assert sp.can_acquire_records() and sp.next_fetch_offset() == 4
    assert fetch(sp, "m2", log) == [AcquiredRecords(4, 7, 2)]
    # Acknowledging the start moves the SPSO and frees the window.
    commit(sp, sp.acknowledge("m1", [ack(0, 3, ACCEPT)], 0))
    assert (sp.start_offset, sp.in_flight_records) == (4, 4) and sp.can_acquire_records()
    assert fetch(sp, "m1", log) == [AcquiredRecords(8, 11, 1)]


# -- acknowledgement ----------------------------------------------------------------------------


def test_accept_acknowledges_and_moves_the_start_offset_once_persisted():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    write = sp.acknowledge("m1", [ack(0, 14, ACCEPT)], 10)
    assert write is not None and written(write) == [(0, 14, ACKNOWLEDGED, 1)]
    assert write.state.start_offset == 0 and write.state.state_epoch == 0 and write.state.leader_epoch == 3
    assert write.state.delivery_complete_count == 15
    assert sp.start_offset == 0  # not before the persister has it
    done = sp.complete_write(write.write_id)
    assert done.error_code is ErrorCode.NONE and done.fetchable
    assert (sp.start_offset, sp.end_offset, sp.in_flight_records, sp.next_fetch_offset()) == (15, 15, 0, 15)
    assert sp.next_deadline() is None and sp.delivery_complete_count == 0


def test_release_makes_records_available_again_with_their_delivery_count():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    write = sp.acknowledge("m1", [ack(5, 9, RELEASE)], 0)
    assert written(write) == [(5, 9, AVAILABLE, 1)]
    assert sp.next_fetch_offset() == 15  # in transition: not acquirable before the write completes
    assert sp.complete_write(write.write_id).fetchable
    assert sp.next_fetch_offset() == 5
    assert fetch(sp, "m2", LOG) == [AcquiredRecords(5, 9, 2)]
    assert states(sp) == [(0, 4, ACQUIRED, 1), (5, 9, ACQUIRED, 2), (10, 14, ACQUIRED, 1)]


def test_reject_and_gap_archive():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    write = sp.acknowledge("m1", [ack(0, 4, REJECT), ack(5, 9, GAP, ACCEPT, GAP, ACCEPT, ACCEPT)], 0)
    # Adjacent changes with one state and count are written as one batch.
    assert written(write) == [(0, 5, ARCHIVED, 1), (6, 6, ACKNOWLEDGED, 1), (7, 7, ARCHIVED, 1),
                              (8, 9, ACKNOWLEDGED, 1)]
    commit(sp, write)
    assert sp.start_offset == 10 and states(sp) == [(10, 14, ACQUIRED, 1)]


def test_one_acknowledge_type_per_offset_splits_the_batch():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    commit(sp, sp.acknowledge("m1", [ack(2, 6, ACCEPT, RELEASE, REJECT, ACCEPT, RELEASE)], 0))
    assert states(sp) == [(0, 1, ACQUIRED, 1), (2, 2, ACKNOWLEDGED, 1), (3, 3, AVAILABLE, 1), (4, 4, ARCHIVED, 1),
                          (5, 5, ACKNOWLEDGED, 1), (6, 6, AVAILABLE, 1), (7, 14, ACQUIRED, 1)]
    assert sp.next_fetch_offset() == 3
    assert fetch(sp, "m2", LOG) == [AcquiredRecords(3, 3, 2), AcquiredRecords(6, 6, 2)]
    # The split batch acknowledged in parts moves the SPSO offset by offset.
    commit(sp, sp.acknowledge("m1", [ack(0, 1, ACCEPT)], 0))
    assert sp.start_offset == 3
    assert sp.delivery_complete_count == 2  # 4 and 5


def test_renew_extends_the_lock_without_a_write():
    sp = new_partition()
    fetch(sp, "m1", LOG, now=0)
    assert sp.acknowledge("m1", [ack(0, 14, RENEW)], 20_000) is None
    assert sp.next_deadline() == 20_000 + LOCK_MS
    assert sp.expire_locks(LOCK_MS) is None
    assert states(sp) == [(0, 14, ACQUIRED, 1)]
    # Renewing part of a batch locks those offsets on their own.
    assert sp.acknowledge("m1", [ack(3, 4, RENEW)], 40_000) is None
    assert sp.expire_locks(20_000 + LOCK_MS) is not None
    assert states(sp) == [(0, 2, AVAILABLE, 1), (3, 4, ACQUIRED, 1), (5, 14, AVAILABLE, 1)]

    sp = new_partition(renew_acknowledge_enabled=False)
    fetch(sp, "m1", LOG)
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(0, 14, RENEW)], 0)


def test_only_the_acquiring_member_may_acknowledge_and_a_refusal_changes_nothing():
    sp = new_partition()
    fetch(sp, "m1", batches((0, 4)))
    fetch(sp, "m2", batches((5, 9)))
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m2", [ack(0, 4, ACCEPT)], 0)
    # The first batch's acknowledgement is undone with the second's refusal.
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(0, 4, ACCEPT), ack(5, 9, ACCEPT)], 0)
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(0, 4, ACCEPT), ack(7, 7, ACCEPT)], 0)
    assert states(sp) == [(0, 9, ACQUIRED, 1)]
    commit(sp, sp.acknowledge("m1", [ack(0, 4, ACCEPT)], 0))
    assert sp.start_offset == 5


def test_bad_ranges_and_types_are_refused():
    sp = new_partition(SharePartitionState(0, 100))
    fetch(sp, "m1", batches((100, 104), (105, 109)))
    invalid_request = [
        [ack(100, 110, ACCEPT)],  # past the acquired records
        [ack(110, 112, ACCEPT)],
        [ack(100, 104, 5)],  # no such type
        [ack(100, 102, ACCEPT, ACCEPT)],  # types neither one nor one per offset
        [ack(104, 100, ACCEPT)],
    ]
    for request in invalid_request:
        refused(ErrorCode.INVALID_REQUEST, sp.acknowledge, "m1", request, 0)
    # Below the SPSO: already done, nothing to write.
    assert sp.acknowledge("m1", [ack(50, 60, ACCEPT)], 0) is None
    # Twice: the second finds the records in transition, then no longer acquired.
    write = sp.acknowledge("m1", [ack(100, 104, ACCEPT)], 0)
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(100, 104, ACCEPT)], 0)
    commit(sp, write)
    assert sp.acknowledge("m1", [ack(100, 104, ACCEPT)], 0) is None  # below the SPSO now
    # Available records are not the member's to acknowledge.
    commit(sp, sp.acknowledge("m1", [ack(105, 109, RELEASE)], 0))
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(105, 109, ACCEPT)], 0)
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(106, 107, ACCEPT)], 0)
    assert states(sp) == [(105, 109, AVAILABLE, 1)]
    # Nothing in flight there: never acquired.
    fetch(sp, "m1", batches((105, 109)))
    commit(sp, sp.acknowledge("m1", [ack(105, 109, ACCEPT)], 0))
    assert sp.in_flight_records == 0
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(110, 112, ACCEPT)], 0)


def test_a_failed_write_rolls_the_acknowledgement_back():
    sp = new_partition()
    fetch(sp, "m1", LOG, now=0)
    write = sp.acknowledge("m1", [ack(0, 14, ACCEPT)], 0)
    done = sp.complete_write(write.write_id, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert done.error_code is ErrorCode.COORDINATOR_NOT_AVAILABLE and not done.fetchable
    assert states(sp) == [(0, 14, ACQUIRED, 1)] and sp.start_offset == 0
    # Still the member's, under its lock: it may acknowledge again.
    assert sp.next_deadline() == LOCK_MS
    write = sp.acknowledge("m1", [ack(0, 14, REJECT)], 0)
    assert sp.complete_write(write.write_id, ErrorCode.FENCED_STATE_EPOCH).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert sp.complete_write(
        sp.acknowledge("m1", [ack(0, 14, REJECT)], 0).write_id, 9999).error_code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_a_lock_running_out_while_the_write_is_pending_makes_a_rollback_available():
    sp = new_partition()
    fetch(sp, "m1", LOG, now=0)
    write = sp.acknowledge("m1", [ack(0, 14, ACCEPT)], 100)
    assert sp.expire_locks(LOCK_MS) is None  # in transition: left to the write's completion
    assert sp.complete_write(write.write_id, ErrorCode.UNKNOWN_SERVER_ERROR).fetchable
    assert states(sp) == [(0, 14, AVAILABLE, 1)] and sp.next_fetch_offset() == 0
    assert sp.next_deadline() is None

    sp = new_partition()
    fetch(sp, "m1", LOG, now=0)
    write = sp.acknowledge("m1", [ack(0, 14, ACCEPT)], 100)
    sp.expire_locks(LOCK_MS)
    commit(sp, write)  # the write made it: acknowledged after all
    assert sp.start_offset == 15 and sp.in_flight_records == 0


# -- locks and delivery counts ------------------------------------------------------------------


def test_locks_expire_by_the_clock():
    sp = new_partition()
    fetch(sp, "m1", batches((0, 4)), now=1000)
    fetch(sp, "m2", batches((5, 9)), now=2000)
    assert sp.next_deadline() == 1000 + LOCK_MS
    assert sp.expire_locks(1000 + LOCK_MS - 1) is None
    write = sp.expire_locks(1000 + LOCK_MS)
    assert written(write) == [(0, 4, AVAILABLE, 1)]
    assert states(sp) == [(0, 4, AVAILABLE, 1), (5, 9, ACQUIRED, 1)]
    assert sp.next_deadline() == 2000 + LOCK_MS
    assert not sp.complete_write(write.write_id).fetchable  # nothing terminal: the SPSO stays
    # The expired member's acknowledgement comes too late.
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(0, 4, ACCEPT)], 0)
    assert fetch(sp, "m3", batches((0, 4), (5, 9)), now=40_000) == [AcquiredRecords(0, 4, 2)]


def test_a_failed_expiry_write_still_releases():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    write = sp.expire_locks(LOCK_MS)
    assert sp.complete_write(write.write_id, ErrorCode.COORDINATOR_NOT_AVAILABLE).error_code is not ErrorCode.NONE
    assert states(sp) == [(0, 14, AVAILABLE, 1)]


def test_records_released_at_the_delivery_count_limit_are_archived():
    sp = new_partition(delivery_count_limit=2)
    log = batches((0, 4))
    fetch(sp, "m1", log)
    commit(sp, sp.acknowledge("m1", [ack(0, 4, RELEASE)], 0))
    assert fetch(sp, "m1", log) == [AcquiredRecords(0, 4, 2)]
    write = sp.acknowledge("m1", [ack(0, 4, RELEASE)], 0)
    assert written(write) == [(0, 4, ARCHIVED, 2)]
    commit(sp, write)
    assert (sp.start_offset, sp.in_flight_records) == (5, 0)
    assert fetch(sp, "m1", log) == []


def test_a_lock_expiring_at_the_delivery_count_limit_archives():
    sp = new_partition(delivery_count_limit=3)
    log = batches((0, 0), (1, 1))
    now = 0
    for delivery in (1, 2, 3):
        assert fetch(sp, "m1", log, now=now, max_records=1) == [AcquiredRecords(0, 0, delivery)]
        now += LOCK_MS
        write = sp.expire_locks(now)
        assert sp.complete_write(write.write_id).error_code is ErrorCode.NONE
    assert written(write) == [(0, 0, ARCHIVED, 3)]
    assert sp.start_offset == 1 and sp.next_fetch_offset() == 1


def test_records_near_the_delivery_limit_go_out_alone():
    # Limit 5: from delivery count 3 on, records are throttled; a record on its last attempt goes alone.
    sp = new_partition(delivery_count_limit=5)
    log = batches((0, 3), (4, 7), (8, 11))
    assert fetch(sp, "m1", log, max_records=8) == [AcquiredRecords(0, 7, 1)]  # one in-flight batch
    commit(sp, sp.acknowledge("m1", [ack(0, 7, RELEASE)], 0))
    for delivery in (2, 3):
        assert fetch(sp, "m1", log, max_records=8) == [AcquiredRecords(0, 7, delivery)]
        commit(sp, sp.acknowledge("m1", [ack(0, 7, RELEASE)], 0))
    # At count 3 (half the limit) the batch goes out in halves (8 >> 1), and nothing else with it.
    assert fetch(sp, "m1", log) == [AcquiredRecords(0, 3, 4)]
    assert fetch(sp, "m2", log) == [AcquiredRecords(4, 7, 4)]
    assert fetch(sp, "m2", log) == [AcquiredRecords(8, 11, 1)]
    commit(sp, sp.acknowledge("m1", [ack(0, 3, RELEASE)], 0))
    commit(sp, sp.acknowledge("m2", [ack(4, 7, RELEASE)], 0))
    # At count 4 (the limit - 1) a record goes out alone: its last attempt.
    assert fetch(sp, "m1", log) == [AcquiredRecords(0, 0, 5)]
    assert fetch(sp, "m1", log) == [AcquiredRecords(1, 1, 5)]
    commit(sp, sp.acknowledge("m1", [ack(0, 1, RELEASE)], 0))
    assert sp.start_offset == 2  # archived at the limit
    assert states(sp) == [(2, 7, AVAILABLE, 4), (8, 11, ACQUIRED, 1)]


def test_a_throttled_batch_is_not_delivered_with_others():
    sp = new_partition(delivery_count_limit=5)
    log = batches((0, 3), (4, 7))
    assert fetch(sp, "m1", log, max_records=4) == [AcquiredRecords(0, 3, 1)]  # held meanwhile
    for delivery in (1, 2, 3):
        assert fetch(sp, "m2", log, max_records=4) == [AcquiredRecords(4, 7, delivery)]
        commit(sp, sp.acknowledge("m2", [ack(4, 7, RELEASE)], 0))
    commit(sp, sp.acknowledge("m1", [ack(0, 3, RELEASE)], 0))
    assert fetch(sp, "m3", log) == [AcquiredRecords(0, 3, 2)]
    assert fetch(sp, "m3", log) == [AcquiredRecords(4, 5, 4)]


def test_release_of_everything_a_member_holds():
    sp = new_partition()
    fetch(sp, "m1", batches((0, 4)))
    fetch(sp, "m2", batches((5, 9)))
    fetch(sp, "m1", batches((10, 14)))
    commit(sp, sp.acknowledge("m1", [ack(2, 3, ACCEPT)], 0))
    write = sp.release_acquired_records("m1", 0)
    assert written(write) == [(0, 1, AVAILABLE, 1), (4, 4, AVAILABLE, 1), (10, 14, AVAILABLE, 1)]
    commit(sp, write)
    assert states(sp) == [(0, 1, AVAILABLE, 1), (2, 3, ACKNOWLEDGED, 1), (4, 4, AVAILABLE, 1),
                          (5, 9, ACQUIRED, 1), (10, 14, AVAILABLE, 1)]
    assert sp.release_acquired_records("m1", 0) is None
    assert sp.release_acquired_records("nobody", 0) is None


# -- read_committed -----------------------------------------------------------------------------


def test_read_committed_archives_aborted_transactions_and_never_delivers_them():
    log = [
        FetchedBatch(0, 1),  # not transactional
        FetchedBatch(2, 4, producer_id=7, is_transactional=True),  # aborted
        FetchedBatch(5, 6, producer_id=8, is_transactional=True),  # committed
        FetchedBatch(7, 7, producer_id=7, is_transactional=True, is_control=True),  # ABORT
        FetchedBatch(8, 8, producer_id=8, is_transactional=True, is_control=True),  # COMMIT
        FetchedBatch(9, 10, producer_id=7, is_transactional=True),  # a later, committed transaction of 7
        FetchedBatch(11, 11, producer_id=7, is_transactional=True, is_control=True),
    ]
    aborted = [AbortedTransaction(7, 2)]
    sp = new_partition()
    result = acquire(sp, "m1", 0, log, 0, max_fetch_records=500, batch_size=500, read_committed=True,
                        aborted_transactions=aborted)
    # Control batches are acquired as Kafka does: the consumer acknowledges them as gaps.
    assert result.acquired_records == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 11, 1)]
    assert result.count == 9
    assert states(sp) == [(0, 1, ACQUIRED, 1), (2, 4, ARCHIVED, 1), (5, 11, ACQUIRED, 1)]
    commit(sp, sp.acknowledge("m1", [ack(0, 1, ACCEPT)], 0))
    assert sp.start_offset == 5  # over the aborted records too
    # read_uncommitted delivers them.
    sp = new_partition()
    result = acquire(sp, "m1", 0, log, 0, max_fetch_records=500, batch_size=500, aborted_transactions=aborted)
    assert result.acquired_records == [AcquiredRecords(0, 11, 1)]


def test_a_window_of_aborted_records_does_not_stall_the_partition():
    sp = new_partition(max_in_flight_records=4)
    log = [FetchedBatch(0, 3, producer_id=1, is_transactional=True),
           FetchedBatch(4, 4, producer_id=1, is_transactional=True, is_control=True),
           FetchedBatch(5, 6)]
    aborted = [AbortedTransaction(1, 0)]
    assert acquire(sp, "m1", 0, log, 0, max_fetch_records=500, batch_size=500, read_committed=True,
                      aborted_transactions=aborted).acquired_records == []
    assert sp.start_offset == 4 and sp.can_acquire_records()
    assert fetch(sp, "m1", log, read_committed=True, aborted_transactions=aborted) == [AcquiredRecords(4, 6, 1)]


# -- the log under the share partition ----------------------------------------------------------


def test_a_log_start_offset_past_the_spso_archives_what_is_below():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    commit(sp, sp.acknowledge("m1", [ack(0, 4, RELEASE)], 0))
    sp.update_cache_and_offsets(7)
    assert (sp.start_offset, sp.in_flight_records) == (7, 8)
    assert states(sp) == [(7, 14, ACQUIRED, 1)]
    # Acknowledgements below the new start are done already (Kafka skips them), and the records
    # acquired there do not hold the SPSO back (Kafka's would until their lock ran out).
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], 0) is None
    write = sp.acknowledge("m1", [ack(5, 14, ACCEPT)], 0)
    assert written(write) == [(7, 14, ACKNOWLEDGED, 1)]
    commit(sp, write)
    assert (sp.start_offset, sp.in_flight_records) == (15, 0)
    assert sp.next_deadline() is None and sp.expire_locks(LOCK_MS) is None
    # Past everything in flight.
    sp.update_cache_and_offsets(100)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (100, 100, 100)
    sp.update_cache_and_offsets(50)  # never backwards
    assert sp.start_offset == 100


def test_records_acquired_below_a_moved_log_start_are_dropped():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    sp.update_cache_and_offsets(20)
    assert (sp.start_offset, sp.end_offset, sp.in_flight_records, sp.next_fetch_offset()) == (20, 20, 0, 20)
    # Kafka keeps them until their lock runs out, then writes them ARCHIVED: the SPSO is past them.
    assert sp.next_deadline() is None
    assert sp.acknowledge("m1", [ack(0, 14, ACCEPT)], 0) is None


def test_in_flight_records_the_log_no_longer_has_are_archived_by_the_next_fetch():
    sp = new_partition()
    fetch(sp, "m1", LOG)
    commit(sp, sp.acknowledge("m1", [ack(0, 14, RELEASE)], 0))
    # The log now starts at 10 (compaction or retention): a read from 0 answers from 10.
    assert acquire(sp, "m2", 0, batches((10, 14)), 0, max_fetch_records=500,
                      batch_size=500).acquired_records == [AcquiredRecords(10, 14, 2)]
    assert sp.start_offset == 10
    assert states(sp) == [(10, 14, ACQUIRED, 2)]


# -- restart: the persisted state is all a new leader knows -------------------------------------


class FakePersister:
    """The share coordinator's view: the start offset and the state of each offset past it, as the
    writes leave it."""

    def __init__(self, state: SharePartitionState) -> None:
        self.start_offset = state.start_offset
        self.offsets: dict[int, tuple[int, int]] = {}
        self.write(state)

    def write(self, state: SharePartitionState) -> None:
        if state.start_offset != UNINITIALIZED_START_OFFSET:
            self.start_offset = max(self.start_offset, state.start_offset)
        for batch in state.state_batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                self.offsets[offset] = (batch.delivery_state, batch.delivery_count)
        self.offsets = {o: s for o, s in self.offsets.items() if o >= self.start_offset}

    def read(self) -> SharePartitionState:
        batches: list[PersisterStateBatch] = []
        for offset, (state, count) in sorted(self.offsets.items()):
            last = batches[-1] if batches else None
            if last and (last.last_offset + 1, last.delivery_state, last.delivery_count) == (offset, state, count):
                batches[-1] = PersisterStateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(PersisterStateBatch(offset, offset, state, count))
        return SharePartitionState(1, self.start_offset, state_batches=batches)


def test_a_new_leader_resumes_from_the_persisted_state():
    persister = FakePersister(SharePartitionState(1, 0))
    sp = new_partition(persister.read(), delivery_count_limit=5)
    log = batches((0, 4), (5, 9), (10, 14), (15, 19))

    def persist(write):
        persister.write(write.state)
        sp.complete_write(write.write_id)

    def take(member: str, max_records: int = 500) -> list[AcquiredRecords]:
        offset = sp.next_fetch_offset()
        result = sp.acquire(member, offset, [b for b in log if b.last_offset >= offset], 0,
                            max_fetch_records=max_records, batch_size=500)
        if result.write is not None:
            persist(result.write)
        return result.acquired_records

    take("m1", max_records=15)
    persist(sp.acknowledge("m1", [ack(0, 4, ACCEPT)], 0))  # done
    persist(sp.acknowledge("m1", [ack(5, 9, RELEASE)], 0))  # to be delivered again
    persist(sp.acknowledge("m1", [ack(10, 10, REJECT)], 0))  # never again
    assert take("m1") == [AcquiredRecords(5, 9, 2), AcquiredRecords(15, 19, 1)]  # when the leader dies
    unpersisted = sp.acknowledge("m1", [ack(11, 14, ACCEPT)], 0)  # never written
    assert unpersisted is not None

    sp = new_partition(persister.read(), delivery_count_limit=5)
    assert sp.start_offset == 5
    # The deliveries in flight were written as they were made (AVAILABLE, their count raised).
    assert states(sp) == [(5, 9, AVAILABLE, 2), (10, 10, ARCHIVED, 1), (11, 19, AVAILABLE, 1)]
    # Nothing acknowledged is delivered again; everything not acknowledged is, its count going on.
    assert take("m2") == [AcquiredRecords(5, 9, 3), AcquiredRecords(11, 19, 2)]
    persist(sp.acknowledge("m2", [ack(5, 9, ACCEPT), ack(11, 19, ACCEPT)], 0))
    assert (sp.start_offset, sp.in_flight_records) == (20, 0)
    assert (persister.start_offset, persister.offsets.keys() <= set(range(20))) == (5, True)
    sp = new_partition(persister.read(), delivery_count_limit=5)
    assert take("m3") == []  # nothing left: all acknowledged or archived


def test_an_acquisition_is_written_and_its_records_are_delivered_once_it_is():
    sp = new_partition()
    result = sp.acquire("m1", 0, LOG, 0, max_fetch_records=7, batch_size=500)
    assert result.acquired_records == [AcquiredRecords(0, 9, 1)]
    assert written(result.write) == [(0, 9, AVAILABLE, 1)]
    assert (result.write.state.start_offset, result.write.state.leader_epoch) == (0, 3)
    # Until the write is committed the records are the member's but in transition: nobody
    # acquires them, nor may the member acknowledge records it has not been given.
    assert sp.acquire("m2", 10, LOG[2:], 0, max_fetch_records=500, batch_size=500).acquired_records == [
        AcquiredRecords(10, 14, 1)]
    assert sp.next_fetch_offset() == 15
    refused(ErrorCode.INVALID_RECORD_STATE, sp.acknowledge, "m1", [ack(0, 4, ACCEPT)], 0)
    commit(sp, result.write)
    assert states(sp) == [(0, 14, ACQUIRED, 1)] and sp.next_deadline() == LOCK_MS
    commit(sp, sp.acknowledge("m1", [ack(0, 9, ACCEPT)], 0))


def test_a_failed_acquisition_write_delivers_nothing_and_keeps_the_count():
    sp = new_partition(delivery_count_limit=3)
    fetch(sp, "m1", LOG)
    commit(sp, sp.acknowledge("m1", [ack(0, 4, RELEASE)], 0))
    result = sp.acquire("m2", 0, LOG, 0, max_fetch_records=500, batch_size=500)
    assert result.acquired_records == [AcquiredRecords(0, 4, 2)]
    done = sp.complete_write(result.write.write_id, ErrorCode.NOT_COORDINATOR)
    assert done.error_code is ErrorCode.COORDINATOR_NOT_AVAILABLE and done.fetchable
    assert states(sp)[0] == (0, 4, AVAILABLE, 1) and sp.next_fetch_offset() == 0
    # New records whose write failed are in flight with no delivery.
    result = sp.acquire("m2", 15, batches((15, 19)), 0, max_fetch_records=500, batch_size=500)
    sp.complete_write(result.write.write_id, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert states(sp)[-1] == (15, 19, AVAILABLE, 0)
    assert fetch(sp, "m2", LOG + batches((15, 19))) == [AcquiredRecords(0, 4, 2), AcquiredRecords(15, 19, 1)]
    assert sp.next_deadline() == LOCK_MS


def test_records_released_or_unlocked_while_their_acquisition_is_written_are_released_once_it_is():
    sp = new_partition(delivery_count_limit=2)
    first = sp.acquire("m1", 0, LOG[:1], 0, max_fetch_records=500, batch_size=500)
    second = sp.acquire("m1", 5, LOG[1:2], 0, max_fetch_records=500, batch_size=500)
    assert sp.release_acquired_records("m1", 0) is None  # nothing to write: they are being acquired
    assert sp.expire_locks(LOCK_MS) is None
    assert sp.complete_write(first.write.write_id).fetchable
    # AVAILABLE with the count written: nothing more to write.
    assert states(sp) == [(0, 4, AVAILABLE, 1), (5, 9, ACQUIRED, 1)]
    sp.complete_write(second.write.write_id, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert states(sp) == [(0, 4, AVAILABLE, 1), (5, 9, AVAILABLE, 0)]
    # At the limit, released means archived.
    third = sp.acquire("m1", 0, LOG[:2], LOCK_MS, max_fetch_records=500, batch_size=500)
    assert third.acquired_records == [AcquiredRecords(0, 4, 2), AcquiredRecords(5, 9, 1)]
    sp.expire_locks(2 * LOCK_MS)
    commit(sp, third.write)
    assert states(sp) == [(5, 9, AVAILABLE, 1)] and sp.start_offset == 5


def test_a_new_leader_archives_what_its_last_delivery_went_out_for():
    persister = FakePersister(SharePartitionState(1, 0))
    sp = new_partition(persister.read(), delivery_count_limit=2)
    for count in (1, 2):
        result = sp.acquire("m1", 0, LOG[:1], 0, max_fetch_records=500, batch_size=500)
        assert result.acquired_records == [AcquiredRecords(0, 4, count)]
        persister.write(result.write.state)
        commit(sp, result.write)
        if count == 1:
            commit(sp, sp.acknowledge("m1", [ack(0, 4, RELEASE)], 0))
    # The leader dies holding them on their last delivery: the new one never delivers them again.
    sp = new_partition(persister.read(), delivery_count_limit=2)
    assert states(sp) == [] and sp.start_offset == 5
    assert fetch(sp, "m2", LOG) == [AcquiredRecords(5, 14, 1)]


def test_an_archived_record_stays_archived_across_a_restart():
    persister = FakePersister(SharePartitionState(1, 0))
    sp = new_partition(persister.read(), delivery_count_limit=2)
    log = batches((0, 0), (1, 1))
    for _ in range(2):
        fetch(sp, "m1", log, max_records=1)
        write = sp.acknowledge("m1", [ack(0, 0, RELEASE)], 0)
        persister.write(write.state)
        sp.complete_write(write.write_id)
    assert persister.offsets[0] == (ARCHIVED, 2)
    sp = new_partition(persister.read(), delivery_count_limit=2)
    assert fetch(sp, "m1", log) == [AcquiredRecords(1, 1, 1)]


def test_gaps_in_the_persisted_state_are_acquired_in_order():
    # Offsets 13..14 and 18..19 have no state: never delivered.
    state = SharePartitionState(2, 10, state_batches=[
        PersisterStateBatch(10, 12, ACKNOWLEDGED, 1),
        PersisterStateBatch(15, 17, AVAILABLE, 2),
        PersisterStateBatch(20, 21, ARCHIVED, 5),
        PersisterStateBatch(22, 22, AVAILABLE, 1)])
    sp = new_partition(state)
    assert sp.start_offset == 13 and sp.end_offset == 22
    assert sp.next_fetch_offset() == 13
    log = batches((10, 14), (15, 19), (20, 24))
    read = [b for b in log if b.last_offset >= 13]
    result = acquire(sp, "m1", 13, read, 0, max_fetch_records=500, batch_size=500)
    assert result.acquired_records == [
        AcquiredRecords(13, 14, 1), AcquiredRecords(15, 17, 3), AcquiredRecords(18, 19, 1),
        AcquiredRecords(22, 22, 2), AcquiredRecords(23, 24, 1)]
    assert sp.end_offset == 24


def test_a_filled_persisted_gap_does_not_hold_the_spso_back():
    state = SharePartitionState(2, 0, state_batches=[
        PersisterStateBatch(0, 1, AVAILABLE, 1), PersisterStateBatch(4, 5, AVAILABLE, 1)])
    sp = new_partition(state)
    log = batches((0, 1), (2, 3), (4, 5))
    assert fetch(sp, "m1", log) == [AcquiredRecords(0, 1, 2), AcquiredRecords(2, 3, 1), AcquiredRecords(4, 5, 2)]
    commit(sp, sp.acknowledge("m1", [ack(0, 5, ACCEPT)], 0))
    # No new record needed to move it (Kafka's gap window would hold it at 4 until one came).
    assert (sp.start_offset, sp.in_flight_records) == (6, 0)


def test_a_rollback_archiving_at_the_limit_moves_the_spso():
    sp = new_partition(delivery_count_limit=2, max_in_flight_records=2)
    log = batches((0, 1), (2, 3))
    fetch(sp, "m1", log)
    commit(sp, sp.acknowledge("m1", [ack(0, 1, RELEASE)], 0))
    assert fetch(sp, "m1", log, now=0) == [AcquiredRecords(0, 1, 2)]
    write = sp.acknowledge("m1", [ack(0, 1, ACCEPT)], 0)
    assert sp.expire_locks(LOCK_MS) is None
    # The write fails after the lock ran out: archived at the limit, and the window frees up.
    sp.complete_write(write.write_id, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert (sp.start_offset, sp.in_flight_records) == (2, 0) and sp.can_acquire_records()
    assert fetch(sp, "m1", log) == [AcquiredRecords(2, 3, 1)]


def test_locks_of_split_batches_expire_offset_by_offset():
    sp = new_partition()
    fetch(sp, "m1", LOG, now=0)
    commit(sp, sp.acknowledge("m1", [ack(3, 4, ACCEPT)], 1000))
    assert sp.acknowledge("m1", [ack(10, 14, RENEW)], 5000) is None
    write = sp.expire_locks(LOCK_MS)
    assert written(write) == [(0, 2, AVAILABLE, 1), (5, 9, AVAILABLE, 1)]
    commit(sp, write)
    assert states(sp) == [(0, 2, AVAILABLE, 1), (3, 4, ACKNOWLEDGED, 1), (5, 9, AVAILABLE, 1), (10, 14, ACQUIRED, 1)]
    assert sp.next_deadline() == 5000 + LOCK_MS


def test_describe_figures():
    sp = new_partition()
    assert (sp.start_offset, sp.end_offset, sp.in_flight_records, sp.delivery_complete_count) == (0, 0, 0, 0)
    fetch(sp, "m1", LOG)
    write = sp.acknowledge("m1", [ack(5, 9, ACCEPT)], 0)
    assert sp.delivery_complete_count == 5 and write.state.delivery_complete_count == 5
    sp.complete_write(write.write_id, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert sp.delivery_complete_count == 0
    snapshot = sp.snapshot()
    assert snapshot.start_offset == 0 and snapshot.leader_epoch == 3


# -- the rule, by random runs: nothing lost, nothing delivered past the limit ---------------------
# Every delivery of every leader counts: a record is delivered at most `limit` times in all, whatever
# writes fail and however often the leader restarts.


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_lose_nothing_and_respect_the_delivery_limit(seed):
    import random

    rng = random.Random(seed)
    limit = rng.choice([2, 3, 5])
    config = dict(delivery_count_limit=limit, max_in_flight_records=rng.choice([6, 20, 2000]),
                  record_lock_duration_ms=1000)
    read_committed = rng.random() < 0.5
    log: list[FetchedBatch] = []
    aborted: list[tuple[AbortedTransaction, int]] = []  # with the offset of its ABORT marker
    aborted_offsets: set[int] = set()
    while not log or log[-1].last_offset < 80:
        first = log[-1].last_offset + 1 if log else 0
        last = first + rng.randint(0, 4)
        kind = rng.random()
        if kind < 0.8:
            log.append(FetchedBatch(first, last))
            continue
        # A transaction: its data batch, then its marker.
        producer_id = 1 if kind < 0.9 else 2
        log.append(FetchedBatch(first, last, producer_id, is_transactional=True))
        log.append(FetchedBatch(last + 1, last + 1, producer_id, is_transactional=True, is_control=True))
        if producer_id == 1:
            aborted.append((AbortedTransaction(producer_id, first), last + 1))
            aborted_offsets.update(range(first, last + 1))
    log_end = log[-1].last_offset + 1
    log_start = 0
    persister = FakePersister(SharePartitionState(1, 0))
    sp = new_partition(persister.read(), **config)
    now = 0
    held: dict[str, list[AcquiredRecords]] = {m: [] for m in ("m1", "m2", "m3")}
    pending: list[PendingWrite] = []  # acknowledgements' writes the persister has not answered yet
    # Acquisitions whose write is pending: the member gets the records once it succeeded.
    acquiring: list[tuple[str, ShareAcquiredRecords]] = []
    deliveries = dict.fromkeys(range(log_end), 0)  # by every leader, in all
    attempts = dict.fromkeys(range(log_end), 0)  # the highest delivery count delivered or persisted
    finished: set[int] = set()  # persisted ACKNOWLEDGED or ARCHIVED

    def persist(write: PendingWrite) -> None:
        persister.write(write.state)
        for b in write.state.state_batches:
            if b.delivery_state in (ACKNOWLEDGED, ARCHIVED):
                finished.update(range(b.first_offset, b.last_offset + 1))
            for o in range(b.first_offset, b.last_offset + 1):
                attempts[o] = max(attempts[o], b.delivery_count)

    def complete(write: PendingWrite, ok: bool) -> None:
        if ok:
            persist(write)
        sp.complete_write(write.write_id, ErrorCode.NONE if ok else ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def deliver(member: str, result: ShareAcquiredRecords, ok: bool) -> None:
        """The acquisition's write answered: on success the member gets the records."""
        assert result.write is not None
        complete(result.write, ok)
        if not ok:
            return
        for acquired in result.acquired_records:
            for o in range(acquired.first_offset, acquired.last_offset + 1):
                assert o not in finished, f"offset {o} delivered after it was done"
                assert acquired.delivery_count <= limit
                deliveries[o] += 1
                attempts[o] = max(attempts[o], acquired.delivery_count)
                # The rule: across every leader, never more deliveries than the limit.
                assert deliveries[o] <= limit, f"offset {o} delivered {deliveries[o]} times"
                # The count the member is told counts every delivery so far (more only if a write
                # that failed reached the persister).
                assert acquired.delivery_count >= deliveries[o], (o, acquired, deliveries[o])
        held[member].extend(result.acquired_records)

    def do_fetch(member: str, draining: bool = False) -> None:
        if not sp.can_acquire_records():
            return
        offset = sp.next_fetch_offset()
        if offset < log_start:
            sp.update_cache_and_offsets(log_start)  # the shell, on OFFSET_OUT_OF_RANGE
            return
        read = [b for b in log if b.last_offset >= offset and b.base_offset >= log_start][:rng.randint(1, 4)]
        if not read:
            return
        # The log's aborted transactions of the range read (those not ended before it).
        in_range = [txn for txn, marker in aborted if marker >= read[0].base_offset]
        result = sp.acquire(member, offset, read, now, max_fetch_records=rng.choice([1, 3, 10, 500]),
                            batch_size=rng.choice([1, 4, 500]),
                            share_acquire_mode=rng.choice(list(ShareAcquireMode)),
                            read_committed=read_committed, aborted_transactions=in_range)
        for acquired in result.acquired_records:
            for o in range(acquired.first_offset, acquired.last_offset + 1):
                assert o >= log_start
                assert not (read_committed and o in aborted_offsets), f"aborted offset {o} delivered"
        if not result.acquired_records:
            assert result.write is None
        elif draining:
            deliver(member, result, True)
        elif rng.random() < 0.3:
            acquiring.append((member, result))
        else:
            deliver(member, result, rng.random() < 0.85)

    def do_ack(member: str, ack_type: int | None = None) -> None:
        if not held[member]:
            return
        records = held[member].pop(rng.randrange(len(held[member])) if ack_type is None else 0)
        types = [ack_type if ack_type is not None else rng.choice([ACCEPT, RELEASE, REJECT, RENEW])]
        if ack_type is None and rng.random() < 0.3:
            types = [rng.choice([ACCEPT, RELEASE, REJECT, GAP]) for _ in
                     range(records.first_offset, records.last_offset + 1)]
        try:
            write = sp.acknowledge(member, [ack(records.first_offset, records.last_offset, *types)], now)
        except SharePartitionError:
            return  # the lock ran out and the records went elsewhere
        if write is not None:
            if ack_type is None and rng.random() < 0.5:
                pending.append(write)
            else:
                complete(write, ack_type is not None or rng.random() < 0.8)

    for _ in range(400):
        op = rng.random()
        member = rng.choice(list(held))
        if op < 0.35:
            do_fetch(member)
        elif op < 0.65:
            do_ack(member)
        elif op < 0.8:
            now += rng.randint(100, 800)
            write = sp.expire_locks(now)
            if write is not None:
                complete(write, True)
        elif op < 0.85 and pending:
            complete(pending.pop(rng.randrange(len(pending))), rng.random() < 0.8)
        elif op < 0.9 and acquiring:
            deliver(*acquiring.pop(rng.randrange(len(acquiring))), rng.random() < 0.8)
        elif op < 0.93:
            write = sp.release_acquired_records(member, now)
            held[member].clear()
            if write is not None:
                complete(write, True)
        elif op < 0.945:
            # Retention deletes the log's first batches.
            later = [b.base_offset for b in log if b.base_offset > log_start]
            if later:
                log_start = later[min(len(later) - 1, rng.randint(0, 2))]
        elif op < 0.96:
            # The leader dies: pending writes reached the persister or not (an acquisition's
            # records never reached its member), and a new leader loads.
            for write in pending + [result.write for _, result in acquiring if result.write is not None]:
                if rng.random() < 0.5:
                    persist(write)
            pending.clear()
            acquiring.clear()
            for records in held.values():
                records.clear()
            sp = new_partition(persister.read(), **config)

    # Drain: everything pending completes, one member accepts whatever it gets.
    held["drain"] = []
    for write in pending:
        complete(write, True)
    for member, result in acquiring:
        deliver(member, result, True)
    for _ in range(2000):
        if sp.start_offset >= log_end and sp.in_flight_records == 0:
            break
        now += 1000
        write = sp.expire_locks(now)
        if write is not None:
            complete(write, True)
        for records in held.values():
            records.clear()
        do_fetch("drain", draining=True)
        while held["drain"]:
            do_ack("drain", ACCEPT)
    assert sp.start_offset == log_end and sp.in_flight_records == 0
    # Retention may delete records, read_committed skips aborted ones; no other is left behind.
    lost = [o for o in range(log_start, log_end) if o not in finished and attempts[o] < limit
            and not (read_committed and o in aborted_offsets)]
    assert not lost, f"offsets neither acknowledged nor archived: {lost}"
