"""Crash recovery: a torn or corrupt tail is cut, indexes are rebuilt, every complete batch before
the damage keeps its offsets."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_helpers import make_batch, small_config

from samsa.storage.log import Log
from samsa.storage.log_segment import LogSegment
from samsa.wire.records import is_crc_valid, iter_batch_headers

BATCH_TIMESTAMPS = [[1000 + i, 1000 + i] for i in range(12)]


def build_log(directory: Path, clock, **overrides) -> tuple[Log, list[int]]:
    """A closed log of three segments of four 2-record batches; returns the batch end positions
    within the last segment."""
    config = small_config(segment_bytes=4 * len(make_batch(BATCH_TIMESTAMPS[0])) + 10, **overrides)
    log = Log.open(directory, config, clock_ms=clock)
    for timestamps in BATCH_TIMESTAMPS:
        log.append_as_leader(make_batch(timestamps))
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    ends = []
    for position, header in iter_batch_headers(log.active_segment.log.read_bytes()):
        ends.append(position + header.size)
    log.flush()
    log.close()
    return log, ends


def reopen(directory: Path, clock, recovery_point: int = 0, **overrides) -> Log:
    config = small_config(segment_bytes=4 * len(make_batch(BATCH_TIMESTAMPS[0])) + 10, **overrides)
    return Log.open(directory, config, clock_ms=clock, had_clean_shutdown=False, recovery_point=recovery_point)


def assert_intact(log: Log, end_offset: int) -> None:
    """Offsets 0..end_offset-1 readable, in order, every batch valid; appends continue there."""
    assert log.log_end_offset == end_offset
    data = b"".join(s.log.read_bytes() for s in log.segments)
    headers = list(iter_batch_headers(data))
    assert sum(h.size for _, h in headers) == len(data)
    assert [h.base_offset for _, h in headers] == [0] + [h.next_offset for _, h in headers[:-1]]
    assert (headers[-1][1].next_offset if headers else 0) == end_offset
    assert all(is_crc_valid(data, position, h) for position, h in headers)
    for offset in range(0, end_offset, 3):
        first = next(iter_batch_headers(log.read(offset, 1).records.read_bytes()))[1]
        assert first.base_offset <= offset <= first.last_offset
    log.high_watermark = log.log_end_offset
    assert log.append_as_leader(make_batch()).first_offset == end_offset


def test_recovery_from_a_tail_torn_at_every_byte(tmp_path, clock):
    original = tmp_path / "original" / "t-0"
    _, ends = build_log(original, clock)
    last_log = original / "00000000000000000016.log"
    positions = sorted(set(range(0, ends[-1] + 1, 7)) | set(ends) | {e - 1 for e in ends} | {e + 1 for e in ends})
    for cut in positions:
        copy = tmp_path / f"cut{cut}" / "t-0"
        shutil.copytree(original, copy)
        os.truncate(copy / last_log.name, min(cut, ends[-1]))
        log = reopen(copy, clock, recovery_point=16)
        complete = sum(1 for end in ends if end <= cut)
        assert (copy / last_log.name).stat().st_size == ([0] + ends)[complete]
        assert_intact(log, 16 + 2 * complete)
        log.close()


def test_recovery_cuts_at_a_corrupt_batch_and_drops_later_segments(tmp_path, clock):
    directory = tmp_path / "t-0"
    _, ends = build_log(directory, clock)
    middle = directory / "00000000000000000008.log"
    data = bytearray(middle.read_bytes())
    flip_at = ends[1] + 70  # inside the records of the third batch of the middle segment
    data[flip_at] ^= 0x10
    middle.write_bytes(data)
    log = reopen(directory, clock, recovery_point=8)
    assert_intact(log, 8 + 2 * 2)
    assert [s.base_offset for s in log.segments] == [0, 8]
    assert not (directory / "00000000000000000016.log").exists()


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path, clock):
    directory = tmp_path / "t-0"
    build_log(directory, clock)
    first = directory / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[-5] ^= 0xFF  # damage the recovery point says was flushed: not looked at
    first.write_bytes(data)
    log = reopen(directory, clock, recovery_point=16)
    assert log.log_end_offset == 24


def test_a_preallocated_segment_left_by_a_crash_is_trimmed(tmp_path, clock):
    directory = tmp_path / "t-0"
    log = Log.open(directory, small_config(preallocate=True, segment_bytes=1 << 20), clock_ms=clock)
    for timestamps in BATCH_TIMESTAMPS[:3]:
        log.append_as_leader(make_batch(timestamps))
    size = log.active_segment.size
    log.flush()  # no close: the file keeps its preallocated length
    assert (directory / "00000000000000000000.log").stat().st_size == 1 << 20
    recovered = Log.open(directory, small_config(preallocate=True), clock_ms=clock, had_clean_shutdown=False)
    assert recovered.log_end_offset == 6
    assert (directory / "00000000000000000000.log").stat().st_size == size


@pytest.mark.parametrize("damage", ["missing", "unordered", "garbage"])
def test_a_missing_or_corrupt_index_is_rebuilt(tmp_path, clock, damage):
    directory = tmp_path / "t-0"
    build_log(directory, clock)
    index = directory / "00000000000000000008.index"
    expected = index.read_bytes()
    assert len(expected) >= 16
    if damage == "missing":
        index.unlink()
        (directory / "00000000000000000008.timeindex").unlink()
    elif damage == "unordered":
        index.write_bytes(expected[8:16] + expected[:8] + expected[16:])
    else:
        index.write_bytes(b"\xff" * 12)
    log = Log.open(directory, small_config(segment_bytes=10_000), clock_ms=clock, had_clean_shutdown=True)
    for offset in range(8, 16):
        header = next(iter_batch_headers(log.read(offset, 1).records.read_bytes()))[1]
        assert header.base_offset <= offset <= header.last_offset
    log.close()
    assert index.read_bytes() == expected
    assert (directory / "00000000000000000008.timeindex").stat().st_size > 0


def test_a_clean_shutdown_loads_without_recovery(tmp_path, clock, monkeypatch):
    directory = tmp_path / "t-0"
    build_log(directory, clock)

    def no_scan(self):
        raise AssertionError("recovered after a clean shutdown")
    monkeypatch.setattr(LogSegment, "recover", no_scan)
    log = Log.open(directory, small_config(), clock_ms=clock, had_clean_shutdown=True)
    assert (log.log_end_offset, log.recovery_point) == (24, 24)


def test_leftovers_of_a_crash_are_removed(tmp_path, clock):
    directory = tmp_path / "t-0"
    build_log(directory, clock)
    (directory / "00000000000000000030.index").write_bytes(b"")  # an index without its log
    (directory / "00000000000000000004.log.deleted").write_bytes(b"x")
    (directory / "00000000000000000004.log.cleaned").write_bytes(b"x")
    log = Log.open(directory, small_config(), clock_ms=clock, had_clean_shutdown=True)
    assert log.log_end_offset == 24
    kept = ("00000000000000000000", "00000000000000000008", "00000000000000000016", "leader-epoch-checkpoint",
            "00000000000000000024.snapshot")  # producer state at the log end, written by the load
    assert [p.name for p in directory.iterdir() if not p.name.startswith(kept)] == []


CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {helpers!r})
    from storage_helpers import make_batch, small_config
    from samsa.storage.log_manager import LogManager

    manager = LogManager([{log_dir!r}], small_config(segment_bytes=4096), lambda: int(time.time() * 1000))
    manager.startup()
    log = manager.{open_log}
    for i in range(200):
        log.append_as_leader(make_batch([int(time.time() * 1000)] * 3))
        log.high_watermark = log.log_end_offset
        if i == 149:
            log.flush()
            manager.checkpoint()
            print(log.recovery_point, flush=True)
    print(log.log_end_offset, flush=True)
    time.sleep(60)
""")


def run_until_killed(log_dir: Path, open_log: str) -> tuple[int, int]:
    """Run CHILD on `log_dir` and SIGKILL it; returns what it flushed and what it wrote."""
    script = CHILD.format(helpers=str(Path(__file__).resolve().parent), log_dir=str(log_dir), open_log=open_log)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        return int(child.stdout.readline()), int(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_sigkill_after_fsync_loses_nothing_acknowledged(tmp_path, clock):
    log_dir = tmp_path / "logs"
    flushed, written = run_until_killed(log_dir, 'create_log("t", 0)')
    assert (flushed, written) == (450, 600)

    from samsa.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    manager = LogManager([log_dir], small_config(segment_bytes=4096), clock)
    manager.startup()
    log = manager.get_log("t", 0)
    assert log.log_end_offset >= flushed
    assert_intact(log, log.log_end_offset)
    manager.shutdown()
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()


def test_a_torn_time_index_is_rebuilt_when_retention_reads_it(tmp_path, clock):
    directory = tmp_path / "t-0"
    build_log(directory, clock)
    (directory / "00000000000000000000.timeindex").write_bytes(b"\x00\x00\x00\x00\x00")
    log = Log.open(directory, small_config(), clock_ms=clock)
    assert log.segments[0].largest_timestamp() == 1003


def test_sigkill_after_a_clean_start_loses_nothing_acknowledged(tmp_path, clock):
    """A clean start opens logs on first use: those it never opened keep their data, the one
    written since keeps what it flushed."""
    from samsa.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
    log_dir = tmp_path / "logs"
    manager = LogManager([log_dir], small_config(segment_bytes=4096), clock)
    manager.startup()
    for topic in ("idle", "busy"):
        log = manager.create_log(topic, 0)
        for _ in range(100):  # several segments
            log.append_as_leader(make_batch([1000] * 3))
    manager.shutdown()

    flushed, written = run_until_killed(log_dir, 'get_log("busy", 0)')
    assert (flushed, written) == (750, 900)

    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    manager = LogManager([log_dir], small_config(segment_bytes=4096), clock)
    manager.startup()
    assert_intact(manager.get_log("idle", 0), 300)
    busy = manager.get_log("busy", 0)
    assert busy.log_end_offset >= flushed
    assert_intact(busy, busy.log_end_offset)
    manager.shutdown()


# -- crash leftovers of a roll and of a deletion (Kafka's LogLoader on what LocalLog leaves)
PRODUCER_ID, PRODUCER_EPOCH = 7, 0


def producer_log(directory: Path, clock) -> tuple[Log, list[bytearray]]:
    """An idempotent producer's 2-record batches over three segments (0, 8, 16), the first two
    flushed, the last two batches not: the state a kill -9 leaves after a roll."""
    config = small_config(segment_bytes=4 * len(make_batch(BATCH_TIMESTAMPS[0])) + 10)
    log = Log.open(directory, config, clock_ms=clock)
    sent = []
    for sequence, timestamps in enumerate(BATCH_TIMESTAMPS):
        batch = make_batch(timestamps, producer=(PRODUCER_ID, PRODUCER_EPOCH, 2 * sequence))
        sent.append(bytearray(batch))
        log.append_as_leader(batch)
        if sequence == 9:
            log.flush()
    assert [s.base_offset for s in log.segments] == [0, 8, 16] and log.recovery_point == 20
    return log, sent


def assert_producer_continues(log: Log, sent: list[bytearray]) -> None:
    """A retry of the producer's last batch is a duplicate (its offsets come back, nothing is
    written); its next sequence appends at the log end."""
    end = log.log_end_offset
    assert log.append_as_leader(bytearray(sent[-1])).first_offset == end - 2
    assert log.log_end_offset == end
    following = make_batch([2000, 2000], producer=(PRODUCER_ID, PRODUCER_EPOCH, 2 * len(sent)))
    assert log.append_as_leader(following).first_offset == end


def crash_copy(directory: Path, tmp_path: Path, name: str) -> Path:
    """The log directory as a kill -9 leaves it: what was written, flushed or not (the page cache
    survives the process), with the open segments' indexes at their preallocated size."""
    return shutil.copytree(directory, tmp_path / name / directory.name)


@pytest.mark.parametrize("leftover", ["preallocated indexes", "no indexes", "torn snapshot", "empty snapshot"])
def test_a_crash_in_the_middle_of_a_roll_loses_nothing(tmp_path, clock, leftover):
    """Kafka's roll creates the new segment's log and indexes (preallocated), then writes the
    producer snapshot at its base offset, unflushed; a crash can stop anywhere in between."""
    original, sent = producer_log(tmp_path / "original" / "t-0", clock)
    directory = crash_copy(original.dir, tmp_path, "crash")
    index, snapshot = directory / "00000000000000000016.index", directory / "00000000000000000016.snapshot"
    assert index.stat().st_size > 0 and snapshot.exists()
    if leftover == "no indexes":
        index.unlink()
        (directory / "00000000000000000016.timeindex").unlink()
    elif leftover == "torn snapshot":
        os.truncate(snapshot, snapshot.stat().st_size // 2)
    elif leftover == "empty snapshot":
        os.truncate(snapshot, 0)
    log = reopen(directory, clock, recovery_point=original.recovery_point)
    assert_intact_without_appending(log, 24)
    assert_producer_continues(log, sent)


def test_a_crash_right_after_a_roll_created_an_empty_segment(tmp_path, clock):
    """The new segment's files exist, nothing is in them yet: it is kept, empty, as the active one."""
    original, sent = producer_log(tmp_path / "original" / "t-0", clock)
    original.roll()
    assert original.active_segment.base_offset == 24
    directory = crash_copy(original.dir, tmp_path, "crash")
    log = reopen(directory, clock, recovery_point=original.recovery_point)
    assert [s.base_offset for s in log.segments] == [0, 8, 16, 24]
    assert_intact_without_appending(log, 24)
    assert_producer_continues(log, sent)


@pytest.mark.parametrize("renamed", [1, 2, 4])
def test_a_crash_in_the_middle_of_a_segment_deletion_loses_nothing_kept(tmp_path, clock, renamed):
    """Retention renames a segment's files to `.deleted` one by one (log, offset index, time
    index, transaction index) and unlinks them later: a crash after `renamed` of the renames
    leaves the rest under their own names. Loading removes both; the log starts at the next
    segment even if the log start offset checkpoint was not written."""
    original, sent = producer_log(tmp_path / "original" / "t-0", clock)
    directory = crash_copy(original.dir, tmp_path, "crash")
    (directory / "00000000000000000000.txnindex").touch()  # Kafka creates it with the segment
    for suffix in (".log", ".index", ".timeindex", ".txnindex")[:renamed]:
        os.rename(directory / f"00000000000000000000{suffix}", directory / f"00000000000000000000{suffix}.deleted")
    log = reopen(directory, clock, recovery_point=original.recovery_point)
    assert not [p.name for p in directory.iterdir() if p.name.startswith("00000000000000000000.")]
    assert [s.base_offset for s in log.segments] == [8, 16] and log.log_start_offset == 8
    assert [next(iter_batch_headers(log.read(o, 1).records.read_bytes()))[1].base_offset for o in (8, 22)] == [8, 22]
    assert log.log_end_offset == 24
    log.high_watermark = log.log_end_offset
    assert_producer_continues(log, sent)


def assert_intact_without_appending(log: Log, end_offset: int) -> None:
    assert log.log_end_offset == end_offset
    data = b"".join(s.log.read_bytes() for s in log.segments)
    headers = list(iter_batch_headers(data))
    assert [h.base_offset for _, h in headers] == list(range(0, end_offset, 2))
    assert all(is_crc_valid(data, position, h) for position, h in headers)
    log.high_watermark = log.log_end_offset
