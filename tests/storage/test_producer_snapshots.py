"""Producer state snapshot files: Kafka's version 1 layout, CRC32C, corruption detected."""

import struct
from collections import deque

import crc32c
import pytest

from samsa.storage.producer_state import BatchMetadata, ProducerStateEntry
from samsa.storage.errors import CorruptSnapshotException
from samsa.storage.producer_snapshots import ProducerSnapshotFiles, decode_snapshot, encode_snapshot


def entry(producer_id=1, *, epoch=2, last_seq=9, last_offset=19, offset_delta=4, timestamp=1234, txn=None):
    batches = deque([BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] if last_offset >= 0 else [])
    return ProducerStateEntry(producer_id, epoch, -1, timestamp, txn, batches)


def test_layout_is_kafkas_version_1():
    data = encode_snapshot([entry()])
    body = bytes.fromhex(
        "00000001"  # entry count
        "0000000000000001" "0002" "00000009"  # producer id, epoch, last sequence
        "0000000000000013" "00000004" "00000000000004d2"  # last offset, offset delta, timestamp
        "ffffffff" "ffffffffffffffff")  # coordinator epoch, current transaction first offset
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_round_trip_keeps_the_last_batch_of_each_producer():
    entries = [entry(1), entry(2, last_seq=-1, last_offset=-1, offset_delta=0, timestamp=77, txn=5)]
    decoded = decode_snapshot(encode_snapshot(entries))
    assert decoded[0] == entries[0]
    assert (list(decoded[1].batches), decoded[1].last_timestamp, decoded[1].current_txn_first_offset) == ([], 77, 5)
    assert decode_snapshot(encode_snapshot([])) == []


@pytest.mark.parametrize("damage", [
    lambda d: d[:-1],  # torn
    lambda d: d[:3],  # shorter than the header
    lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:],  # a flipped bit
    lambda d: struct.pack(">h", 2) + d[2:],  # another version
    lambda d: b"",
])
def test_damage_is_detected(damage):
    with pytest.raises(CorruptSnapshotException):
        decode_snapshot(damage(encode_snapshot([entry()])))


def test_files_are_named_by_offset_and_found_again(tmp_path):
    files = ProducerSnapshotFiles(tmp_path)
    files.write(30, [entry()], sync=True)
    files.write(5, [], sync=False)
    (tmp_path / "00000000000000000007.snapshot.deleted").write_bytes(b"")
    assert sorted(p.name for p in tmp_path.glob("*.snapshot")) == [
        "00000000000000000005.snapshot", "00000000000000000030.snapshot"]
    again = ProducerSnapshotFiles(tmp_path)
    assert (again.offsets, again.latest_offset) == ([5, 30], 30)
    assert again.read(30) == [entry()]
    again.delete_before(30)
    assert again.offsets == [30] and not again.path(5).exists()


def test_stray_snapshots_go_except_the_latest_above_every_segment(tmp_path):
    files = ProducerSnapshotFiles(tmp_path)
    for offset in (0, 3, 10, 14, 20, 25):
        files.write(offset, [], sync=False)
    files.remove_stray([0, 10, 20])
    assert files.offsets == [0, 10, 20, 25]
    files.remove_stray([0, 10, 30])
    assert files.offsets == [0, 10]
