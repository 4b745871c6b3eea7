"""The log cleaner and transactions, as Kafka's cleaner treats them: aborted records go, committed
transactional records are compacted like others, a marker goes (after a delete horizon) once its
transaction has no batch left, the cleaned segment's transaction index keeps the aborts whose
markers stay, and nothing past the last stable offset is cleaned."""

from storage_helpers import batches, cleaner_for, small_config

from samsa.storage.log import AppendOrigin, Log
from samsa.storage.transaction_index import AbortedTxn
from samsa.wire.records import Record, build_batch, build_control_batch, decode_batch, parse_control_record

RETENTION_MS = 1000


def open_log(tmp_path, clock) -> Log:
    return Log.open(tmp_path / "t-0", small_config(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01,
                                                   delete_retention_ms=RETENTION_MS), clock_ms=clock)


def write(log: Log, key: bytes, value: bytes, producer: int | None = None, sequence: int = 0) -> None:
    if producer is None:
        batch = build_batch([Record(0, 0, key, value, [])], base_timestamp=1_000_000)
    else:
        batch = build_batch([Record(0, 0, key, value, [])], producer_id=producer, producer_epoch=0,
                            base_sequence=sequence, is_transactional=True, base_timestamp=1_000_000)
    log.append_as_leader(bytearray(batch))
    log.high_watermark = log.log_end_offset


def end(log: Log, producer: int, kind: str) -> None:
    log.append_as_leader(bytearray(build_control_batch(kind, producer, 0, 0, 0, 1_000_000)),
                         origin=AppendOrigin.COORDINATOR)
    log.high_watermark = log.log_end_offset


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record; markers left out."""
    out = []
    for header, data in batches(log):
        if not header.is_control:
            out += [(header.record_offset(r), r.key, r.value) for r in decode_batch(data)[1]]
    return out


def markers(log: Log) -> list[tuple[int, str, bool]]:
    """(offset, COMMIT/ABORT, has a delete horizon) of every marker still holding its record."""
    out = []
    for header, data in batches(log):
        if header.is_control:
            _, records = decode_batch(data)
            if records:
                out.append((header.base_offset, parse_control_record(records[0]).type.name, header.has_delete_horizon))
    return out


def dirty_pass(log: Log, cleaner, n: int) -> None:
    """A new plain record in a segment of its own, so that there is something dirty, then a pass."""
    write(log, b"filler-%d" % n, b"x")
    log.roll()
    write(log, b"active", b"x")
    assert cleaner.clean_filthiest_log()


def test_aborted_records_go_and_markers_follow_their_transactions(tmp_path, clock):
    log = open_log(tmp_path, clock)
    write(log, b"k1", b"aborted", producer=1)      # 0
    write(log, b"k1", b"committed", producer=2)    # 1
    write(log, b"k2", b"aborted", producer=1, sequence=1)  # 2
    end(log, 1, "ABORT")                           # 3
    end(log, 2, "COMMIT")                          # 4
    write(log, b"k3", b"plain")                    # 5
    log.roll()
    write(log, b"active", b"x")
    assert log.last_stable_offset == log.high_watermark
    cleaner = cleaner_for(tmp_path, clock, log)
    assert cleaner.clean_filthiest_log()

    records = [(offset, key, value) for offset, key, value in contents(log) if key != b"active"]
    assert records[:2] == [(1, b"k1", b"committed"), (5, b"k3", b"plain")]
    # The abort's records went in this pass, so its marker stays, indexed in the cleaned segment.
    assert markers(log) == [(3, "ABORT", False), (4, "COMMIT", False)]
    assert log.segments[0].txn_index.entries == (AbortedTxn(1, 0, 3, 1),)
    assert log.read(0, 1 << 20, include_aborted_txns=True).aborted_transactions == [AbortedTxn(1, 0, 3, 1)]

    # The producers expire: their last batches need not stay. Passes go on.
    log.remove_expired_producers(clock.now + 10 * 86_400_000)
    dirty_pass(log, cleaner, 1)  # producer 1's emptied batch goes: its marker still stays this pass
    assert markers(log) == [(3, "ABORT", False), (4, "COMMIT", False)]
    dirty_pass(log, cleaner, 2)  # nothing of the abort left: its marker gets a delete horizon
    assert markers(log) == [(3, "ABORT", True), (4, "COMMIT", False)]
    assert log.segments[0].txn_index.entries == ()
    clock.now += RETENTION_MS
    dirty_pass(log, cleaner, 3)
    assert markers(log) == [(4, "COMMIT", False)]  # the commit holds "committed": it stays

    write(log, b"k1", b"newer")  # "committed" is compacted away like any record
    dirty_pass(log, cleaner, 4)
    dirty_pass(log, cleaner, 5)
    assert markers(log) == [(4, "COMMIT", True)]
    clock.now += RETENTION_MS
    dirty_pass(log, cleaner, 6)
    assert markers(log) == []
    assert (1, b"k1", b"committed") not in contents(log)


def test_nothing_past_the_last_stable_offset_is_cleaned(tmp_path, clock):
    log = open_log(tmp_path, clock)
    write(log, b"k", b"1")
    write(log, b"k", b"2")
    log.roll()
    write(log, b"t", b"open", producer=9)  # a transaction left open at offset 2
    write(log, b"k", b"3")
    log.roll()
    write(log, b"k", b"4")
    log.roll()
    write(log, b"active", b"x")
    assert log.last_stable_offset == 2
    cleaner = cleaner_for(tmp_path, clock, log)
    assert cleaner.clean_filthiest_log()
    assert [value for _, key, value in contents(log) if key == b"k"] == [b"2", b"3", b"4"]
    end(log, 9, "COMMIT")
    dirty_pass(log, cleaner, 1)
    assert [value for _, key, value in contents(log) if key == b"k"] == [b"4"]
    assert (2, b"t", b"open") in contents(log)
