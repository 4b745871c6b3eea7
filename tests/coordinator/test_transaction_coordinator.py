"""The transaction coordinator on an explicit clock: every transition, fencing, timeouts,
expiration, failed writes, and reloading from its own `__transaction_state` records."""

from __future__ import annotations

import itertools

import pytest

from samsa.coordinator.producer_id_manager import ProducerIdsUnavailable
from samsa.coordinator.transaction_coordinator import TransactionConfig, TransactionCoordinator, TxnActions
from samsa.coordinator.transaction_log import encode_key, encode_value, read_record
from samsa.coordinator.transaction_metadata import TransactionState as S
from samsa.coordinator.transaction_metadata import TxnTransitMetadata
from samsa.wire.errors import ErrorCode

from clocked_harness import ClockedHarness

TXN = "txn-a"
TP0, TP1 = ("out", 0), ("out", 1)
OFFSETS_TP = ("__consumer_offsets", 7)


class Harness(ClockedHarness):
    """Drives a TransactionCoordinator as server/coordinators/txn_service.py does: appends kept in memory per
    partition, markers recorded per partition; `fail_appends` (an error code, or a function of the
    append giving one or None) and `marker_errors` inject failures."""

    def __init__(self, now: int = 1_000_000, records=None, **config) -> None:
        self.now = now
        self.config = TransactionConfig(**config)
        self._ids = itertools.count(1000)
        self.coordinator = TransactionCoordinator(self.config, lambda: next(self._ids), now)
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.markers: list[tuple[tuple[str, int], int, int, bool]] = []  # (partition, pid, epoch, commit)
        self.marker_versions: list[int] = []  # the transaction version of each marker written
        self.responses: dict[int, object] = {}
        self.fail_appends: int | None = None
        self.marker_errors: dict[tuple[str, int], int] = {}
        self._tickets = itertools.count()
        for key, value in records or ():
            self.coordinator.replay(key, value)
        self.apply(self.coordinator.load_complete(now))

    def apply(self, actions: TxnActions) -> None:
        pending = [actions]
        while pending:
            actions = pending.pop(0)
            for append in actions.appends:
                error = self.fail_appends(append) if callable(self.fail_appends) else self.fail_appends
                error = ErrorCode.NONE if error is None else error
                if error == ErrorCode.NONE:
                    self.log.setdefault(append.partition, []).extend(append.records)
                pending.append(self.coordinator.complete_append(append, error, self.now))
            for marker in actions.markers:
                errors = {}
                for tp in sorted(marker.partitions):
                    errors[tp] = self.marker_errors.get(tp, ErrorCode.NONE)
                    if errors[tp] == ErrorCode.NONE:
                        self.markers.append((tp, marker.producer_id, marker.producer_epoch, marker.commit))
                        self.marker_versions.append(marker.transaction_version)
                pending.append(self.coordinator.complete_markers(marker, errors, self.now))
            self.record_responses(actions.responses)

    def call(self, method, *args):
        ticket = next(self._tickets)
        self.apply(method(self.now, ticket, *args))
        return self.responses.get(ticket)

    def init(self, txn: str = TXN, timeout_ms: int = 60_000, expected=None):
        return self.call(self.coordinator.init_producer_id, txn, timeout_ms, expected)

    def add(self, pid: int, epoch: int, *partitions, txn: str = TXN, tv: int = 0):
        return self.call(self.coordinator.add_partitions, txn, pid, epoch, partitions or (TP0,), tv)

    def end(self, pid: int, epoch: int, commit: bool = True, txn: str = TXN):
        """A version 0/1 EndTxn: its error (the producer id and epoch are -1)."""
        error, pid, epoch = self.call(self.coordinator.end_transaction, txn, pid, epoch, commit)
        assert (pid, epoch) == (-1, -1)
        return error

    def end_v2(self, pid: int, epoch: int, commit: bool = True, txn: str = TXN):
        """A version 2 EndTxn (v5): (error, producer id, epoch)."""
        return self.call(self.coordinator.end_transaction, txn, pid, epoch, commit, 2)

    def state(self, txn: str = TXN):
        metadata = self.coordinator.transactions[txn]
        return metadata.state, metadata.pending_state

    def records(self, txn: str = TXN) -> list:
        """The states written for `txn`, in order (None for a tombstone)."""
        key = encode_key(txn)
        partition = self.coordinator.partition_for(txn)
        return [None if value is None else read_record(key, value).value.txn_state
                for k, value in self.log.get(partition, []) if k == key]

    def all_records(self):
        return [record for partition in sorted(self.log) for record in self.log[partition]]


def ready(h: Harness, *partitions) -> tuple[int, int]:
    """An initialised producer with an open transaction on `partitions`."""
    error, pid, epoch = h.init()
    assert error == ErrorCode.NONE
    assert h.add(pid, epoch, *(partitions or (TP0,))) == ErrorCode.NONE
    return pid, epoch


# --- InitProducerId ---------------------------------------------------------------------------------

def test_a_new_transactional_id_gets_a_producer_id_at_epoch_zero_and_each_init_bumps_it():
    h = Harness()
    assert h.init() == (ErrorCode.NONE, 1000, 0)
    assert h.state() == (S.EMPTY, None)
    assert h.init() == (ErrorCode.NONE, 1000, 1)
    assert h.records() == [S.EMPTY, S.EMPTY]
    assert h.coordinator.partition_for(TXN) == h.coordinator.partition_for(TXN) < 50


def test_init_refuses_an_empty_id_and_a_timeout_beyond_the_maximum():
    h = Harness(transaction_max_timeout_ms=60_000)
    assert h.init("")[0] == ErrorCode.INVALID_REQUEST
    assert h.init(timeout_ms=60_001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout_ms=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout_ms=60_000)[0] == ErrorCode.NONE


def test_init_during_an_open_transaction_fences_it_and_asks_the_client_to_retry():
    h = Harness()
    pid, epoch = ready(h, TP0, TP1)
    assert h.init() == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    # The open transaction was aborted with the fencing epoch, markers and all.
    assert h.records() == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert sorted(h.markers) == [(TP0, pid, epoch + 1, False), (TP1, pid, epoch + 1, False)]
    assert h.state() == (S.COMPLETE_ABORT, None)
    assert h.init() == (ErrorCode.NONE, pid, epoch + 2)
    # The zombie is fenced everywhere.
    assert h.add(pid, epoch, TP0) == ErrorCode.PRODUCER_FENCED
    assert h.end(pid, epoch) == ErrorCode.PRODUCER_FENCED


def test_kip_360_a_producer_naming_its_epoch_bumps_it_and_a_retry_gets_the_same_answer():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.init(expected=(pid, epoch)) == (ErrorCode.NONE, pid, epoch + 1)
    # The response was lost: the retry names the old epoch, which is the last one.
    assert h.init(expected=(pid, epoch)) == (ErrorCode.NONE, pid, epoch + 1)
    assert h.init(expected=(pid, epoch + 5))[0] == ErrorCode.PRODUCER_FENCED
    assert h.init(expected=(4242, 0))[0] == ErrorCode.PRODUCER_FENCED  # another producer id
    # A plain init forgets the last epoch: the old one is fenced from then on.
    assert h.init() == (ErrorCode.NONE, pid, epoch + 2)
    assert h.init(expected=(pid, epoch))[0] == ErrorCode.PRODUCER_FENCED


def test_kip_360_a_producer_whose_state_is_lost_gets_the_new_id():
    h = Harness()
    assert h.init(expected=(55, 3)) == (ErrorCode.NONE, 1000, 0)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    h = Harness()
    _, pid, _ = h.init()
    h.coordinator.transactions[TXN].producer_epoch = 2**15 - 2
    assert h.init() == (ErrorCode.NONE, pid + 1, 0)
    # A retry naming the exhausted epoch of the old id is answered with the new one.
    h.coordinator.transactions[TXN].producer_epoch = 2**15 - 2
    h.coordinator.transactions[TXN].prev_producer_id = pid + 1
    _, new_pid, epoch = h.init(expected=(pid + 1, 2**15 - 2))
    assert (new_pid, epoch) == (pid + 2, 0)


def test_no_producer_id_at_hand_answers_coordinator_load_in_progress_and_keeps_no_state():
    """Kafka's coordinator answers what its RPCProducerIdManager threw (COORDINATOR_LOAD_IN_PROGRESS
    while the next block is on its way from the controller), for a new transactional id and for a
    rotation of an exhausted epoch alike; the client retries."""
    h = Harness()
    ids = h._ids

    def unavailable():
        raise ProducerIdsUnavailable("Producer ID block is full. Waiting for next block")
    h.coordinator.generate_producer_id = unavailable
    assert h.init() == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert TXN not in h.coordinator.transactions
    h.coordinator.generate_producer_id = lambda: next(ids)
    _, pid, _ = h.init()
    h.coordinator.transactions[TXN].producer_epoch = 2**15 - 2
    h.coordinator.generate_producer_id = unavailable
    assert h.init() == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert h.coordinator.transactions[TXN].producer_id == pid and not h.coordinator.transactions[TXN].pending_transition_in_progress


# --- AddPartitionsToTxn -----------------------------------------------------------------------------

def test_adding_partitions_opens_the_transaction_and_a_known_partition_writes_nothing():
    h = Harness()
    _, pid, epoch = h.init()
    h.advance(5)
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE
    metadata = h.coordinator.transactions[TXN]
    assert (metadata.state, metadata.topic_partitions, metadata.txn_start_timestamp) == (S.ONGOING, {TP0}, h.now)
    started = h.now
    h.advance(5)
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE
    assert h.records() == [S.EMPTY, S.ONGOING]
    assert h.add(pid, epoch, TP1, OFFSETS_TP) == ErrorCode.NONE
    assert metadata.topic_partitions == {TP0, TP1, OFFSETS_TP} and metadata.txn_start_timestamp == started


def test_adding_partitions_checks_the_producer():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.add(pid + 1, epoch) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.add(pid, epoch + 1) == ErrorCode.PRODUCER_FENCED
    assert h.add(pid, epoch, txn="unknown") == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.add(pid, epoch, txn="") == ErrorCode.INVALID_REQUEST


def test_verification_says_which_partitions_the_open_transaction_holds():
    h = Harness()
    pid, epoch = ready(h, TP0)
    verify = h.coordinator.verify_partitions
    assert verify(TXN, pid, epoch, [TP0, TP1]) == {TP0: ErrorCode.NONE, TP1: ErrorCode.TRANSACTION_ABORTABLE}
    assert verify(TXN, pid, epoch - 1, [TP0]) == {TP0: ErrorCode.PRODUCER_FENCED}
    assert verify(TXN, pid + 1, epoch, [TP0]) == {TP0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    h.marker_errors[TP0] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.end(pid, epoch) == ErrorCode.NONE
    assert verify(TXN, pid, epoch, [TP0]) == {TP0: ErrorCode.CONCURRENT_TRANSACTIONS}


# --- EndTxn -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_end_writes_prepare_then_markers_to_every_partition_then_complete(commit):
    h = Harness()
    pid, epoch = ready(h, TP0, TP1, OFFSETS_TP)
    assert h.end(pid, epoch, commit) == ErrorCode.NONE
    prepare, complete = (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    assert h.records() == [S.EMPTY, S.ONGOING, prepare, complete]
    assert sorted(h.markers) == sorted((tp, pid, epoch, commit) for tp in (TP0, TP1, OFFSETS_TP))
    metadata = h.coordinator.transactions[TXN]
    assert (metadata.state, metadata.topic_partitions, metadata.pending_state) == (complete, set(), None)
    # A retry of the same outcome succeeds; the other outcome does not.
    assert h.end(pid, epoch, commit) == ErrorCode.NONE
    assert h.end(pid, epoch, not commit) == ErrorCode.INVALID_TXN_STATE
    # The next transaction starts from Complete.
    assert h.add(pid, epoch, TP1) == ErrorCode.NONE and h.state() == (S.ONGOING, None)


def test_end_without_a_transaction_is_an_invalid_state():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.end(pid, epoch) == ErrorCode.INVALID_TXN_STATE
    assert h.end(pid, epoch + 1) == ErrorCode.PRODUCER_FENCED
    assert h.end(pid + 1, epoch) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_while_markers_are_retried_the_transaction_is_busy():
    h = Harness(retry_backoff_ms=100)
    pid, epoch = ready(h, TP0, TP1)
    h.marker_errors[TP1] = ErrorCode.KAFKA_STORAGE_ERROR
    assert h.end(pid, epoch) == ErrorCode.NONE
    assert h.state() == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert h.coordinator.transactions[TXN].topic_partitions == {TP1}  # TP0's marker is written
    assert h.end(pid, epoch) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.end(pid, epoch, commit=False) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.add(pid, epoch, TP0) == ErrorCode.CONCURRENT_TRANSACTIONS
    # Kafka's handleAddPartitionsToTransaction asks about the pending transition first: a wrong
    # producer hears it too (and retries), not PRODUCER_FENCED / INVALID_PRODUCER_ID_MAPPING.
    assert h.add(pid, epoch - 1, TP0) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.add(pid + 1, epoch, TP0) == ErrorCode.CONCURRENT_TRANSACTIONS
    # Verification does not ask about it: the producer first, then the Prepare state.
    assert h.coordinator.verify_partitions(TXN, pid, epoch - 1, [TP0]) == {TP0: ErrorCode.PRODUCER_FENCED}
    assert h.init() == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    h.advance(1000)
    assert h.markers.count((TP0, pid, epoch, True)) == 1  # only the failed partition is retried
    del h.marker_errors[TP1]
    h.advance(100)
    assert h.state() == (S.COMPLETE_COMMIT, None)
    assert (TP1, pid, epoch, True) in h.markers


def test_a_marker_for_a_deleted_topic_counts_as_written():
    h = Harness()
    pid, epoch = ready(h, TP0, TP1)
    h.marker_errors[TP1] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert h.end(pid, epoch) == ErrorCode.NONE
    assert h.state() == (S.COMPLETE_COMMIT, None)


def test_add_partitions_is_answered_only_once_its_record_is_written_and_an_abort_of_what_never_stuck_is_invalid():
    """The coordinators test's one failure in three with a 10 s transaction timeout (docs/cluster.md):
    AddPartitionsToTxn is answered only when its Ongoing record's write is acknowledged (in a
    cluster: by the ISR); one whose write failed leaves the transactional id as it was, and an
    EndTxn abort then finds no transaction: INVALID_TXN_STATE, as Kafka 3.9 answers. librdkafka
    2.x counts every AddPartitionsToTxn that failed as possibly registered (its txn_req_cnt) and so
    sends that EndTxn when its messages time out first."""
    h = Harness()
    pid, epoch = ready(h, TP0)
    assert h.end(pid, epoch) == ErrorCode.NONE and h.state() == (S.COMPLETE_COMMIT, None)
    again = Harness(records=h.all_records())  # the coordinator moved: a new one loads the log
    actions = again.coordinator.add_partitions(again.now, 99, TXN, pid, epoch, [TP1])
    assert not actions.responses and len(actions.appends) == 1  # not before its write is acknowledged
    again.apply(again.coordinator.complete_append(actions.appends[0], ErrorCode.REQUEST_TIMED_OUT, again.now))
    assert again.responses[99] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert again.state() == (S.COMPLETE_COMMIT, None)
    assert again.end(pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE


# --- transaction version 2 (KIP-890 part 2) ------------------------------------------------------------

def ready_v2(h: Harness, *partitions) -> tuple[int, int]:
    """An initialised producer with a version 2 transaction open on `partitions` (added by the
    partition leader on its behalf)."""
    error, pid, epoch = h.init()
    assert error == ErrorCode.NONE
    assert h.add(pid, epoch, *(partitions or (TP0,)), tv=2) == ErrorCode.NONE
    return pid, epoch


def test_v2_every_end_bumps_the_epoch_which_the_markers_carry_and_the_response_names():
    h = Harness()
    pid, epoch = ready_v2(h, TP0, TP1)
    assert h.end_v2(pid, epoch) == (ErrorCode.NONE, pid, epoch + 1)
    assert sorted(h.markers) == [(TP0, pid, epoch + 1, True), (TP1, pid, epoch + 1, True)]
    assert h.marker_versions == [2, 2]
    assert h.state() == (S.COMPLETE_COMMIT, None)
    metadata = h.coordinator.transactions[TXN]
    assert (metadata.producer_epoch, metadata.last_producer_epoch, metadata.client_transaction_version) == (
        epoch + 1, epoch, 2)
    # The next transaction runs on the new epoch; the old one is fenced.
    assert h.add(pid, epoch, TP0, tv=2) == ErrorCode.PRODUCER_FENCED
    assert h.add(pid, epoch + 1, TP0, tv=2) == ErrorCode.NONE
    assert h.end_v2(pid, epoch + 1, commit=False) == (ErrorCode.NONE, pid, epoch + 2)
    assert h.markers[-1] == (TP0, pid, epoch + 2, False)
    assert h.records() == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING, S.PREPARE_ABORT,
                           S.COMPLETE_ABORT]
    # What the log holds: the bumped epoch, the previous one's producer id, the client's version.
    key = encode_key(TXN)
    prepare = [read_record(key, v).value for k, v in h.log[h.coordinator.partition_for(TXN)] if k == key][2]
    assert (prepare.producer_id, prepare.prev_producer_id, prepare.producer_epoch, prepare.next_producer_id,
            prepare.client_transaction_version) == (pid, pid, epoch + 1, -1, 2)


def test_v2_a_retried_end_hears_the_bumped_epoch_and_a_stale_epoch_is_fenced():
    h = Harness()
    pid, epoch = ready_v2(h)
    assert h.end_v2(pid, epoch) == (ErrorCode.NONE, pid, epoch + 1)
    # The response was lost: the retry names the epoch before the bump.
    assert h.end_v2(pid, epoch) == (ErrorCode.NONE, pid, epoch + 1)
    assert len(h.markers) == 1
    # Committing again on the new epoch, with nothing open, is an invalid state; aborting is allowed.
    assert h.end_v2(pid, epoch + 1) == (ErrorCode.INVALID_TXN_STATE, -1, -1)
    # An epoch older than the one before the bump is a zombie's.
    assert h.end_v2(pid, epoch - 1 if epoch else 7) == (ErrorCode.PRODUCER_FENCED, -1, -1)
    assert h.end_v2(pid + 1, epoch + 1) == (ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, -1)


def test_v2_a_retry_while_the_markers_are_pending_is_concurrent_and_an_old_epoch_fenced():
    h = Harness()
    pid, epoch = ready_v2(h)
    h.marker_errors[TP0] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.end_v2(pid, epoch) == (ErrorCode.NONE, pid, epoch + 1)
    assert h.state() == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert h.end_v2(pid, epoch + 1) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    h.marker_errors.clear()
    h.advance(1000)
    assert h.state() == (S.COMPLETE_COMMIT, None)


def test_v2_an_abort_with_nothing_open_is_written_and_bumps_the_epoch():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.end_v2(pid, epoch, commit=True) == (ErrorCode.INVALID_TXN_STATE, -1, -1)
    assert h.end_v2(pid, epoch, commit=False) == (ErrorCode.NONE, pid, epoch + 1)
    assert h.records() == [S.EMPTY, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert h.markers == []
    # And again from CompleteAbort on the new epoch (not a retry: it names the current epoch).
    assert h.end_v2(pid, epoch + 1, commit=False) == (ErrorCode.NONE, pid, epoch + 2)
    assert h.records()[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]


def test_v2_an_exhausted_epoch_ends_on_a_new_producer_id_and_a_retry_names_the_old_one():
    h = Harness()
    pid, _ = ready_v2(h)
    metadata = h.coordinator.transactions[TXN]
    metadata.producer_epoch = 32766  # the last epoch a producer may use (Kafka keeps 32767 for fencing)
    new_pid = 1001  # the harness's next id
    assert h.end_v2(pid, 32766) == (ErrorCode.NONE, new_pid, 0)
    assert h.markers == [(TP0, pid, 32767, True)]  # the markers fence the old producer id for good
    assert (metadata.producer_id, metadata.prev_producer_id, metadata.producer_epoch, metadata.next_producer_id) == (
        new_pid, pid, 0, -1)
    key = encode_key(TXN)
    values = [read_record(key, v).value for k, v in h.log[h.coordinator.partition_for(TXN)] if k == key]
    assert (values[-2].txn_state, values[-2].producer_id, values[-2].next_producer_id) == (S.PREPARE_COMMIT, pid,
                                                                                           new_pid)
    assert (values[-1].txn_state, values[-1].producer_id, values[-1].prev_producer_id) == (S.COMPLETE_COMMIT,
                                                                                           new_pid, pid)
    # A retry names the old producer id at its last epoch.
    assert h.end_v2(pid, 32766) == (ErrorCode.NONE, new_pid, 0)
    assert h.add(new_pid, 0, TP1, tv=2) == ErrorCode.NONE
    assert h.end_v2(new_pid, 0) == (ErrorCode.NONE, new_pid, 1)


def test_v2_prepared_transaction_reloaded_completes_on_its_next_producer_id():
    h = Harness()
    pid, _ = ready_v2(h)
    h.coordinator.transactions[TXN].producer_epoch = 32766
    h.marker_errors[TP0] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.end_v2(pid, 32766) == (ErrorCode.NONE, 1001, 0)
    reloaded = Harness(records=h.all_records())
    assert reloaded.markers == [(TP0, pid, 32767, True)]
    assert reloaded.marker_versions == [2]
    metadata = reloaded.coordinator.transactions[TXN]
    assert (metadata.state, metadata.producer_id, metadata.producer_epoch) == (S.COMPLETE_COMMIT, 1001, 0)


def test_v1_clients_keep_their_epoch_and_their_markers_say_version_0():
    h = Harness()
    pid, epoch = ready(h)
    assert h.end(pid, epoch) == ErrorCode.NONE
    assert h.markers == [(TP0, pid, epoch, True)]
    assert h.marker_versions == [0]
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE  # same epoch, next transaction
    assert h.end(pid, epoch, commit=False) == ErrorCode.NONE
    assert h.coordinator.transactions[TXN].producer_epoch == epoch


# --- failed writes ------------------------------------------------------------------------------------

def test_a_failed_write_changes_nothing_and_the_request_can_be_retried():
    h = Harness()
    _, pid, epoch = h.init()
    h.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.add(pid, epoch, TP0) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.state() == (S.EMPTY, None)
    h.fail_appends = ErrorCode.KAFKA_STORAGE_ERROR
    assert h.init() == (ErrorCode.NOT_COORDINATOR, -1, -1)
    h.fail_appends = None
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE


def test_a_fence_whose_write_failed_reuses_its_epoch():
    h = Harness(transaction_version_level=1)  # the fence's epoch is the producer's before the abort is written
    pid, epoch = ready(h)
    h.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.init()[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    metadata = h.coordinator.transactions[TXN]
    assert (metadata.state, metadata.producer_epoch, metadata.has_failed_epoch_fence) == (S.ONGOING, epoch + 1, True)
    h.fail_appends = None
    assert h.init()[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.markers == [(TP0, pid, epoch + 1, False)]  # not bumped twice
    assert h.init() == (ErrorCode.NONE, pid, epoch + 2)


def test_a_version_2_fence_whose_write_failed_leaves_the_epoch_and_aborts_on_the_next():
    h = Harness()  # transaction.version 2: the abort itself bumps the epoch
    pid, epoch = ready(h)
    h.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.init()[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    metadata = h.coordinator.transactions[TXN]
    assert (metadata.state, metadata.producer_epoch, metadata.has_failed_epoch_fence) == (S.ONGOING, epoch, True)
    h.fail_appends = None
    assert h.init()[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.markers == [(TP0, pid, epoch + 1, False)]
    assert h.init() == (ErrorCode.NONE, pid, epoch + 2)


def test_a_failed_completion_is_written_again():
    h = Harness(retry_backoff_ms=100)
    pid, epoch = ready(h)

    def fail_completions(append):
        states = [read_record(*record).value.txn_state for record in append.records]
        return ErrorCode.NOT_ENOUGH_REPLICAS if S.COMPLETE_COMMIT in states else None
    h.fail_appends = fail_completions
    assert h.end(pid, epoch) == ErrorCode.NONE
    assert h.state() == (S.PREPARE_COMMIT, None)
    assert h.end(pid, epoch) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.advance(1000)
    assert h.state() == (S.PREPARE_COMMIT, None)  # retried, failed again
    h.fail_appends = None
    h.advance(100)
    assert h.state() == (S.COMPLETE_COMMIT, None)
    assert h.markers == [(TP0, pid, epoch, True)]  # the markers were not written again


# --- timeouts and expiration ---------------------------------------------------------------------------

def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced():
    h = Harness(abort_timed_out_transaction_cleanup_interval_ms=1000, transaction_version_level=1)
    _, pid, epoch = h.init(timeout_ms=5000)
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE
    h.advance(5000)
    assert h.state() == (S.ONGOING, None)  # not yet past its timeout
    h.advance(1000)
    assert h.state() == (S.COMPLETE_ABORT, None)
    assert h.markers == [(TP0, pid, epoch + 1, False)]
    assert h.end(pid, epoch) == ErrorCode.PRODUCER_FENCED
    assert h.add(pid, epoch, TP0) == ErrorCode.PRODUCER_FENCED
    assert h.init(expected=(pid, epoch))[0] == ErrorCode.PRODUCER_FENCED


def test_a_version_2_timeout_abort_bumps_the_epoch_and_lets_the_producer_abort_on():
    """transaction.version 2 (Kafka 4.4's default): the timeout's abort is a version 2 end, whose
    previous epoch is the producer's; the fenced producer's own abort is then a retry of it."""
    h = Harness(abort_timed_out_transaction_cleanup_interval_ms=1000)
    _, pid, epoch = h.init(timeout_ms=5000)
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE
    h.advance(6000)
    assert h.state() == (S.COMPLETE_ABORT, None)
    assert h.markers == [(TP0, pid, epoch + 1, False)]
    assert h.add(pid, epoch, TP0) == ErrorCode.PRODUCER_FENCED
    assert h.end_v2(pid, epoch, commit=True)[0] == ErrorCode.INVALID_TXN_STATE
    assert h.end_v2(pid, epoch, commit=False) == (ErrorCode.NONE, pid, epoch + 1)
    assert h.markers == [(TP0, pid, epoch + 1, False)]  # nothing written again


def test_a_timeout_abort_follows_transaction_version_downgraded_at_runtime():
    """kafka-features downgrades transaction.version to 1 while the coordinator runs: its own
    aborts are not version 2 ones from then on (the producer is fenced)."""
    h = Harness(abort_timed_out_transaction_cleanup_interval_ms=1000)
    h.coordinator.transaction_version_changed(1)
    _, pid, epoch = h.init(timeout_ms=5000)
    assert h.add(pid, epoch, TP0) == ErrorCode.NONE
    h.advance(6000)
    assert h.state() == (S.COMPLETE_ABORT, None)
    assert h.marker_versions != [2]  # not a version 2 end
    assert h.init(expected=(pid, epoch))[0] == ErrorCode.PRODUCER_FENCED  # version 2 would hand on the epoch


def test_an_idle_transactional_id_expires():
    h = Harness(transactional_id_expiration_ms=10_000, remove_expired_transaction_cleanup_interval_ms=1000,
                abort_timed_out_transaction_cleanup_interval_ms=100_000)
    _, pid, _ = h.init("idle")
    ready(h, TP0)  # an open transaction never expires
    h.advance(9_999)
    assert "idle" in h.coordinator.transactions
    h.advance(1)  # the check every second finds it idle for transactional.id.expiration.ms
    assert "idle" not in h.coordinator.transactions and TXN in h.coordinator.transactions
    assert h.records("idle")[-1] is None  # the tombstone
    assert h.init("idle")[1] != pid  # a new producer id for the expired id


def test_an_expiration_whose_tombstone_failed_keeps_the_id():
    h = Harness(transactional_id_expiration_ms=10_000, remove_expired_transaction_cleanup_interval_ms=1000)
    h.init()
    h.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
    h.advance(11_000)
    assert h.state() == (S.EMPTY, None)


# --- loading --------------------------------------------------------------------------------------------

def test_a_reloaded_coordinator_completes_a_prepared_transaction():
    h = Harness()
    pid, epoch = ready(h, TP0, TP1)
    h.marker_errors = {TP0: ErrorCode.NOT_LEADER_OR_FOLLOWER, TP1: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert h.end(pid, epoch, commit=False) == ErrorCode.NONE
    assert h.records()[-1] is S.PREPARE_ABORT
    # The broker crashes here; a new coordinator replays what was written.
    again = Harness(records=h.all_records())
    assert again.state() == (S.COMPLETE_ABORT, None)
    assert sorted(again.markers) == [(TP0, pid, epoch, False), (TP1, pid, epoch, False)]
    assert again.records()[-1] is S.COMPLETE_ABORT
    assert again.init() == (ErrorCode.NONE, pid, epoch + 1)


def test_a_reloaded_open_transaction_is_aborted_at_its_timeout():
    h = Harness()
    _, pid, epoch = h.init(timeout_ms=2000)
    h.add(pid, epoch, TP0)
    again = Harness(now=h.now + 10, records=h.all_records(), abort_timed_out_transaction_cleanup_interval_ms=1000)
    assert again.state() == (S.ONGOING, None)
    again.advance(3000)
    assert again.state() == (S.COMPLETE_ABORT, None)
    assert again.markers == [(TP0, pid, epoch + 1, False)]


def test_requests_before_loading_or_after_unloading_get_not_coordinator():
    h = Harness()
    h.coordinator.unload()
    assert h.init()[0] == ErrorCode.NOT_COORDINATOR
    assert h.add(1000, 0) == ErrorCode.NOT_COORDINATOR
    assert h.coordinator.describe(TXN)[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.list_transactions(h.now, [], [])[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE


# --- DescribeTransactions, ListTransactions -----------------------------------------------------------

def test_describe_and_list_with_their_filters():
    h = Harness()
    pid, epoch = ready(h, TP0, TP1)
    h.advance(10_000)
    _, other_pid, _ = h.init("idle")
    error, metadata = h.coordinator.describe(TXN)
    assert (error, metadata.state, metadata.topic_partitions, metadata.producer_id) == (
        ErrorCode.NONE, S.ONGOING, {TP0, TP1}, pid)
    assert h.coordinator.describe("nope")[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert h.coordinator.describe("")[0] == ErrorCode.INVALID_REQUEST

    def listed(states=(), pids=(), duration=-1):
        error, unknown, found = h.coordinator.list_transactions(h.now, states, pids, duration)
        return error, unknown, sorted(m.transactional_id for m in found)
    assert listed() == (ErrorCode.NONE, [], ["idle", TXN])
    assert listed(states=["Ongoing", "Bogus"]) == (ErrorCode.NONE, ["Bogus"], [TXN])
    assert listed(pids=[other_pid]) == (ErrorCode.NONE, [], ["idle"])
    assert listed(states=["Ongoing"], duration=9_999)[2] == [TXN]
    assert listed(states=["Ongoing"], duration=10_000)[2] == []


# --- the records --------------------------------------------------------------------------------------

def test_records_round_trip_in_kafkas_v1_layout():
    transit = TxnTransitMetadata(7, -1, 3, -1, 60_000, S.ONGOING, frozenset({("b", 1), ("a", 0), ("a", 2)}),
                                 1000, 2000)
    value = encode_value(transit)
    # version 1 (flexible, as Kafka writes from transaction.version 1): producer id, epoch, timeout,
    # state, 2 topics (compact): "a" [0, 2], "b" [1], each with no tagged fields, then the timestamps
    assert value == (b"\x00\x01" + (7).to_bytes(8, "big") + b"\x00\x03" + (60_000).to_bytes(4, "big") + b"\x01"
                     + b"\x03" + b"\x02a" + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x02" + b"\x00"
                     + b"\x02b" + b"\x02" + b"\x00\x00\x00\x01" + b"\x00"
                     + (2000).to_bytes(8, "big") + (1000).to_bytes(8, "big") + b"\x00")
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert read_record(encode_key("tx"), value).value == transit
    empty = TxnTransitMetadata(7, -1, 4, -1, 60_000, S.EMPTY, frozenset(), -1, 3000)
    assert encode_value(empty)[17:18] == b"\x00"  # null partitions
    assert read_record(encode_key("tx"), encode_value(empty)).value == empty
    assert read_record(encode_key("tx"), None).value is None


def test_a_flexible_v1_value_is_read_with_its_tagged_fields_skipped():
    value = (b"\x00\x01" + (9).to_bytes(8, "big") + b"\x00\x01" + (1000).to_bytes(4, "big") + b"\x02"
             + b"\x02" + b"\x02t" + b"\x02" + b"\x00\x00\x00\x05" + b"\x00"  # one topic "t" [5]
             + (20).to_bytes(8, "big") + (10).to_bytes(8, "big")
             + b"\x01" + b"\x00\x08" + (4).to_bytes(8, "big"))  # tag 0: previous producer id
    record = read_record(encode_key("tx"), value).value
    assert (record.producer_id, record.producer_epoch, record.txn_state, record.topic_partitions,
            record.txn_start_timestamp, record.txn_last_update_timestamp, record.prev_producer_id) == (
        9, 1, S.PREPARE_COMMIT, frozenset({("t", 5)}), 10, 20, 4)


def test_the_version_2_fields_are_tagged_as_kafka_writes_them():
    transit = TxnTransitMetadata(7, 6, 0, 32766, 60_000, S.COMPLETE_COMMIT, frozenset(), 1000, 2000,
                                 next_producer_id=8, client_transaction_version=2)
    value = encode_value(transit)
    # tags 0 (previous producer id), 1 (next producer id), 2 (client transaction version)
    assert value.endswith(b"\x03" + b"\x00\x08" + (6).to_bytes(8, "big") + b"\x01\x08" + (8).to_bytes(8, "big")
                          + b"\x02\x02" + b"\x00\x02")
    # The last producer epoch is not in the record (Kafka reads it as -1).
    assert read_record(encode_key("tx"), value).value == TxnTransitMetadata(
        7, 6, 0, -1, 60_000, S.COMPLETE_COMMIT, frozenset(), 1000, 2000, 8, 2)
