"""Transactions in the log: open transactions hold the last stable offset back, ABORT markers go to
the segment's transaction index, read_committed reads get the aborted transactions of their range,
and the index and the open transactions survive restarts, crashes and truncation."""

import shutil

import pytest
from storage_helpers import small_config

from samsa.storage.errors import InvalidProducerEpochException, TransactionCoordinatorFencedException
from samsa.storage.log import AppendOrigin, Log
from samsa.storage.transaction_index import AbortedTxn, TransactionIndex
from samsa.wire.records import Record, build_batch, build_control_batch, iter_batch_headers


def open_log(directory, clock, *, clean: bool = True, recovery_point: int = 0, **overrides) -> Log:
    return Log.open(directory, small_config(**overrides), clock_ms=clock, had_clean_shutdown=clean,
                    recovery_point=recovery_point)


class Producer:
    """A transactional producer writing to one log, and the coordinator's markers for it."""

    def __init__(self, log: Log, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.sequence = log, pid, epoch, 0

    def send(self, count: int = 1):
        batch = bytearray(build_batch([Record(i, 0, b"k", b"v", []) for i in range(count)], producer_id=self.pid,
                                      producer_epoch=self.epoch, base_sequence=self.sequence, is_transactional=True,
                                      base_timestamp=1_000_000))
        self.sequence += count
        return self._append(batch, AppendOrigin.CLIENT)

    def end(self, kind: str, *, coordinator_epoch: int = 0, epoch: int | None = None):
        marker = build_control_batch(kind, self.pid, self.epoch if epoch is None else epoch, coordinator_epoch, 0,
                                     1_000_000)
        return self._append(bytearray(marker), AppendOrigin.COORDINATOR)

    def _append(self, batch, origin):
        info = self.log.append_as_leader(batch, origin=origin)
        self.log.high_watermark = self.log.log_end_offset
        return info


def test_an_open_transaction_holds_the_last_stable_offset_at_its_first_record(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a, b = Producer(log, 1), Producer(log, 2)
    assert log.last_stable_offset == 0 and log.first_unstable_offset is None
    a.send(2)
    b.send()
    a.send()
    assert (log.high_watermark, log.first_unstable_offset, log.last_stable_offset) == (4, 0, 0)
    a.end("COMMIT")
    assert log.last_stable_offset == 2  # b's transaction
    b.end("ABORT")
    assert log.last_stable_offset == log.high_watermark == 6
    assert log.segments[-1].txn_index.entries == (AbortedTxn(2, 2, 5, 6),)


def test_read_committed_reads_get_the_aborted_transactions_of_their_range(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a, b = Producer(log, 1), Producer(log, 2)
    a.send()        # 0
    b.send()        # 1
    a.end("ABORT")  # 2: a aborted [0, 2], the LSO then b's first offset
    b.end("COMMIT")  # 3
    a.send()        # 4
    a.end("ABORT")  # 5
    info = log.read(0, 1 << 20, isolation_max_offset=log.last_stable_offset, include_aborted_txns=True)
    assert info.aborted_transactions == [AbortedTxn(1, 0, 2, 1), AbortedTxn(1, 4, 5, 6)]
    assert log.read(3, 1 << 20, include_aborted_txns=True).aborted_transactions == [AbortedTxn(1, 4, 5, 6)]
    assert log.read(0, 1 << 20).aborted_transactions is None
    assert log.read(6, 1 << 20, include_aborted_txns=True).aborted_transactions == []


def test_a_transaction_spanning_segments_is_found_from_its_first_segment(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, segment_bytes=200)
    a = Producer(log, 1)
    for _ in range(4):
        a.send()
    a.end("ABORT")
    assert len(log.segments) > 2
    marker_segment = log.segments[-1]
    assert marker_segment.txn_index.entries == (AbortedTxn(1, 0, 4, 5),)
    assert all(not s.txn_index.entries for s in log.segments[:-1])
    # A read of the first segment only: the abort recorded three segments later still applies.
    info = log.read(0, 10, include_aborted_txns=True)
    assert info.aborted_transactions == [AbortedTxn(1, 0, 4, 5)]


def test_a_read_in_the_last_segment_gets_only_the_aborted_transactions_indexed_there(tmp_path, clock):
    """An aborted transaction is indexed in the segment of its marker, and a read looks from the
    segment of its fetch offset on: a read in the last segment, whose index is empty, gets none
    (without looking further), one whose index has the abort gets it."""
    log = open_log(tmp_path / "t-0", clock, segment_bytes=500)
    a, b = Producer(log, 1), Producer(log, 2)
    a.send()
    a.end("ABORT")  # indexed in the first segment
    while len(log.segments) < 2:
        b.send()
        b.end("COMMIT")
    assert log.segments[0].txn_index.entries and not log.segments[-1].txn_index.entries
    last = log.segments[-1].base_offset
    assert log.read(last, 1 << 20, include_aborted_txns=True).aborted_transactions == []
    b.send()
    b.end("ABORT")
    assert log.segments[-1].base_offset == last  # the abort is indexed in the same last segment
    aborted = log.read(last, 1 << 20, include_aborted_txns=True).aborted_transactions
    assert [(t.producer_id, t.last_offset) for t in aborted] == [(2, log.log_end_offset - 1)]


def test_the_transaction_index_survives_a_restart_and_is_rebuilt_after_a_crash(tmp_path, clock):
    directory = tmp_path / "t-0"
    log = open_log(directory, clock, segment_bytes=300)
    a, b = Producer(log, 1), Producer(log, 2)
    for _ in range(3):
        a.send()
        b.send()
    a.end("ABORT")
    b.send()
    b.end("ABORT")
    a.send()  # left open
    expected = [s.txn_index.entries for s in log.segments]
    assert sum(map(len, expected)) == 2
    log.flush()
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(directory, crashed)
    log.close()

    reopened = open_log(directory, clock, segment_bytes=300)
    assert [s.txn_index.entries for s in reopened.segments] == expected
    reopened.high_watermark = reopened.log_end_offset
    assert reopened.last_stable_offset == 9  # a's open transaction, from the snapshot taken on close

    for path in crashed.glob("*.txnindex"):
        path.unlink()
    recovered = open_log(crashed, clock, clean=False, recovery_point=0, segment_bytes=300)
    assert [s.txn_index.entries for s in recovered.segments] == expected
    recovered.high_watermark = recovered.log_end_offset
    assert recovered.last_stable_offset == 9


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a = Producer(log, 1)
    a.send()
    a.send()
    a.end("ABORT")
    assert log.segments[0].txn_index.entries
    log.truncate_to(2)
    assert log.segments[0].txn_index.entries == ()
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset == 0  # the transaction is open again


def test_markers_from_a_stale_coordinator_or_producer_epoch_are_refused(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a = Producer(log, 1, epoch=3)
    a.send()
    a.end("COMMIT", coordinator_epoch=2)
    a.send()
    with pytest.raises(TransactionCoordinatorFencedException):
        a.end("ABORT", coordinator_epoch=1)
    with pytest.raises(InvalidProducerEpochException):
        a.end("ABORT", coordinator_epoch=2, epoch=2)
    a.end("ABORT", coordinator_epoch=2, epoch=4)  # the coordinator fences the producer with a bumped epoch
    assert log.last_producer_entry(1).producer_epoch == 4
    assert log.first_unstable_offset is None


def test_a_torn_index_entry_is_dropped(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    index.append(AbortedTxn(1, 0, 3, 4))
    index.close()
    with open(path, "ab") as f:
        f.write(b"\0\0\0")
    reread = TransactionIndex(path, 0)
    assert reread.entries == (AbortedTxn(1, 0, 3, 4),)
    reread.append(AbortedTxn(1, 5, 6, 7))
    reread.close()
    assert path.stat().st_size == 68
    with pytest.raises(ValueError):
        TransactionIndex(path, 0).append(AbortedTxn(1, 5, 6, 7))


def test_batches_keep_their_transactional_flags(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    a = Producer(log, 1)
    a.send()
    a.end("COMMIT")
    data = log.segments[0].log.read_bytes()
    assert [(h.is_transactional, h.is_control) for _, h in iter_batch_headers(data)] == [(True, False), (True, True)]
