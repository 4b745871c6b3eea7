"""`samsa dump-log` on files written by storage/ directly: the exact lines Kafka's DumpLogSegments
prints for them (compat-tests/test_dump_log.py holds the same output against Kafka's own tool on
files a real client wrote), and a one-line message with exit code 2 for a file it cannot read."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from pathlib import Path

import pytest

from samsa.cli import BAD_USAGE
from samsa.__main__ import main
from samsa.storage.log import AppendOrigin, Log
from samsa.storage.log_config import LogConfig
from samsa.wire.coordinator_record import CoordinatorRecord, encode_record
from samsa.wire.coordinator_records.group_metadata_key import GroupMetadataKey
from samsa.wire.coordinator_records.group_metadata_value import GroupMetadataValue, MemberMetadata
from samsa.wire.coordinator_records.offset_commit_key import OffsetCommitKey
from samsa.wire.coordinator_records.offset_commit_value import OffsetCommitValue
from samsa.wire.coordinator_records.transaction_log_key import TransactionLogKey
from samsa.wire.coordinator_records.transaction_log_value import PartitionsSchema, TransactionLogValue
from samsa.wire.legacy import LegacyMessage, build_message_set
from samsa.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment, TopicPartition
from samsa.wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from samsa.wire.messages.leader_change_message import LeaderChangeMessage
from samsa.wire.messages.snapshot_footer_record import SnapshotFooterRecord
from samsa.wire.messages.snapshot_header_record import SnapshotHeaderRecord
from samsa.wire.messages.voters_record import VotersRecord
from samsa.wire.metadata_record import encode_metadata_record
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.records import CompressionType, Record, build_batch, build_control_batch

NOW = 1_700_000_000_000
ZEROS = f"{0:020d}"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def open_log(directory: Path) -> Log:
    return Log.open(directory, dataclasses.replace(LogConfig(), index_interval_bytes=0), clock_ms=Clock())


def batch(records, **kwargs) -> bytearray:
    return bytearray(build_batch(records, base_timestamp=NOW, max_timestamp=NOW + len(records) - 1, **kwargs))


def rec(delta: int, key: bytes | None, value: bytes | None, headers=()) -> Record:
    return Record(delta, delta, key, value, list(headers))


@pytest.fixture
def records_log(tmp_path) -> Path:
    """Idempotent records with headers, a gzip batch, a committed and an aborted transaction."""
    log = open_log(tmp_path / "records-0")
    log.append_as_leader(batch([rec(0, b"k0", b"v0", [("h", b"1"), ("n", None)]), rec(1, None, b"v1"),
                                rec(2, b"k2", None)], producer_id=7, producer_epoch=0, base_sequence=0))
    log.append_as_leader(batch([rec(0, b"z0", b"zipped " * 4), rec(1, b"z1", "ünïcode".encode())],
                               compression=CompressionType.GZIP), leader_epoch=1)
    for kind, base_sequence in (("COMMIT", 0), ("ABORT", 1)):
        log.append_as_leader(batch([rec(0, b"t", b"in-txn")], producer_id=9, producer_epoch=2,
                                   base_sequence=base_sequence, is_transactional=True), leader_epoch=1)
        log.append_as_leader(bytearray(build_control_batch(kind, 9, 2, coordinator_epoch=5, base_offset=0,
                                                           timestamp=NOW + 10)),
                             leader_epoch=1, origin=AppendOrigin.COORDINATOR)
    log.close()
    return tmp_path / "records-0"


def dump(capsys, *args) -> tuple[int, str, str]:
    code = main(["dump-log", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err



@pytest.fixture
def coordinator_logs(tmp_path) -> Path:
    """A __consumer_offsets partition (an offset commit, a classic consumer group, a tombstone) and a
    __transaction_state one (an ongoing transaction), as the coordinators write them."""
    subscription = bytearray(b"\x00\x01")
    ConsumerProtocolSubscription(topics=["orders"], user_data=None, owned_partitions=[]).encode(1, subscription)
    assignment = bytearray(b"\x00\x01")
    ConsumerProtocolAssignment(assigned_partitions=[TopicPartition(topic="orders", partitions=[0, 1])],
                               user_data=None).encode(1, assignment)
    group = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m-1",
                               current_state_timestamp=NOW, members=[MemberMetadata(
                                   member_id="m-1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
                                   rebalance_timeout=300000, session_timeout=45000, subscription=bytes(subscription),
                                   assignment=bytes(assignment))])
    offsets = [
        CoordinatorRecord(OffsetCommitKey(group="g", topic="orders", partition=1),
                          OffsetCommitValue(offset=42, leader_epoch=3, metadata="m\"eta\n", commit_timestamp=NOW), 3),
        CoordinatorRecord(GroupMetadataKey(group="g"), group, 4),
        CoordinatorRecord(OffsetCommitKey(group="g", topic="orders", partition=0), None),
    ]
    txn = CoordinatorRecord(TransactionLogKey(transactional_id="tx"), TransactionLogValue(
        producer_id=9, producer_epoch=2, transaction_timeout_ms=60000, transaction_status=1,
        transaction_partitions=[PartitionsSchema(topic="orders", partition_ids=[0, 1])],
        transaction_last_update_timestamp_ms=NOW, transaction_start_timestamp_ms=NOW), 1)
    for name, records in (("__consumer_offsets-0", offsets), ("__transaction_state-0", [txn])):
        log = open_log(tmp_path / name)
        for record in records:
            key, value = encode_record(record)
            log.append_as_leader(batch([rec(0, key, value)]), origin=AppendOrigin.COORDINATOR)
        log.close()
    return tmp_path



def batch_line(base, last, count, seq, producer, txn, control, position, max_ts, size, codec, crc, epoch=1):
    base_sequence, last_sequence = seq
    producer_id, producer_epoch = producer
    return (f"baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {base_sequence} "
            f"lastSequence: {last_sequence} producerId: {producer_id} producerEpoch: {producer_epoch} "
            f"partitionLeaderEpoch: {epoch} isTransactional: {txn} isControl: {control} "
            f"deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: {max_ts} size: {size} magic: 2 "
            f"compresscodec: {codec} crc: {crc} isvalid: true")


BATCHES = [
    batch_line(0, 2, 3, (0, 2), (7, 0), "false", "false", 0, NOW + 2, 97, "none", 2409059080, epoch=0),
    batch_line(3, 4, 2, (-1, -1), (-1, -1), "false", "false", 97, NOW + 1, 117, "gzip", 4095834411),
    batch_line(5, 5, 1, (0, 0), (9, 2), "true", "false", 214, NOW, 75, "none", 1004750205),
    batch_line(6, 6, 1, (-1, -1), (9, 2), "true", "true", 289, NOW + 10, 78, "none", 454298064),
    batch_line(7, 7, 1, (1, 1), (9, 2), "true", "false", 367, NOW, 75, "none", 2195196314),
    batch_line(8, 8, 1, (-1, -1), (9, 2), "true", "true", 442, NOW + 10, 78, "none", 4012564376),
]
RECORDS = [  # (batch, metadata, data)
    (0, f"| offset: 0 CreateTime: {NOW} keySize: 2 valueSize: 2 sequence: 0 headerKeys: [h,n]", " key: k0 payload: v0"),
    (0, f"| offset: 1 CreateTime: {NOW + 1} keySize: -1 valueSize: 2 sequence: 1 headerKeys: []", " payload: v1"),
    (0, f"| offset: 2 CreateTime: {NOW + 2} keySize: 2 valueSize: -1 sequence: 2 headerKeys: []", " key: k2"),
    (1, f"| offset: 3 CreateTime: {NOW} keySize: 2 valueSize: 28 sequence: -1 headerKeys: []",
     " key: z0 payload: zipped zipped zipped zipped "),
    (1, f"| offset: 4 CreateTime: {NOW + 1} keySize: 2 valueSize: 9 sequence: -1 headerKeys: []",
     " key: z1 payload: ünïcode"),
    (2, f"| offset: 5 CreateTime: {NOW} keySize: 1 valueSize: 6 sequence: 0 headerKeys: []", " key: t payload: in-txn"),
    (3, f"| offset: 6 CreateTime: {NOW + 10} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5", ""),
    (4, f"| offset: 7 CreateTime: {NOW} keySize: 1 valueSize: 6 sequence: 1 headerKeys: []", " key: t payload: in-txn"),
    (5, f"| offset: 8 CreateTime: {NOW + 10} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: ABORT coordinatorEpoch: 5", ""),
]


def expected_segment(*, deep: bool, data: bool) -> str:
    lines = [f"Dumping {ZEROS}.log", "Log starting offset: 0"]
    for i, line in enumerate(BATCHES):
        lines.append(line)
        if deep:
            lines += [metadata + (payload if data else "") for b, metadata, payload in RECORDS if b == i]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("options, deep, data", [
    ((), False, False), (("--deep-iteration",), True, False), (("--print-data-log",), True, True),
    (("--print-data-log", "--deep-iteration"), True, True),
])
def test_segment(records_log, capsys, monkeypatch, options, deep, data):
    monkeypatch.chdir(records_log)
    assert dump(capsys, *options, f"{ZEROS}.log") == (0, expected_segment(deep=deep, data=data), "")


def test_record_lines_without_metadata(records_log, capsys, monkeypatch):
    monkeypatch.chdir(records_log)
    _, out, _ = dump(capsys, "--print-data-log", "--skip-record-metadata", f"{ZEROS}.log")
    assert out.splitlines()[3:6] == ["| key: k0 payload: v0", "| payload: v1", "| key: k2"]


def test_indexes_snapshot_transaction_index_and_leader_epochs(records_log, capsys, monkeypatch):
    monkeypatch.chdir(records_log)
    code, out, err = dump(capsys, f"{ZEROS}.index", f"{ZEROS}.timeindex", f"{ZEROS}.txnindex",
                          "leader-epoch-checkpoint", f"{9:020d}.snapshot")
    assert (code, err) == (0, "")
    assert out == f"""Dumping {ZEROS}.index
offset: 4 position: 97
offset: 5 position: 214
offset: 6 position: 289
offset: 7 position: 367
offset: 8 position: 442
Dumping {ZEROS}.timeindex
timestamp: {NOW + 2} offset: 2
timestamp: {NOW + 10} offset: 6
Dumping {ZEROS}.txnindex
version: 0 producerId: 9 firstOffset: 7 lastOffset: 8 lastStableOffset: 9
Dumping leader-epoch-checkpoint
epoch: 0 startOffset: 0
epoch: 1 startOffset: 3
Dumping {9:020d}.snapshot
producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty \
lastTimestamp: {NOW + 2} firstSequence: 0 lastSequence: 2 lastOffset: 2 offsetDelta: 2 timestamp: {NOW + 2}
producerId: 9 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong.empty \
lastTimestamp: {NOW + 10} firstSequence: 1 lastSequence: 1 lastOffset: 7 offsetDelta: 0 timestamp: {NOW + 10}
"""


def test_index_sanity_check_and_verify_only(records_log, capsys, monkeypatch):
    monkeypatch.chdir(records_log)
    assert dump(capsys, "--index-sanity-check", f"{ZEROS}.index", f"{ZEROS}.timeindex") == (0, (
        f"Dumping {ZEROS}.index\n{ZEROS}.index passed sanity check.\n"
        f"Dumping {ZEROS}.timeindex\n{ZEROS}.timeindex passed sanity check.\n"), "")
    assert dump(capsys, "--verify-index-only", f"{ZEROS}.index", f"{ZEROS}.timeindex") == (
        0, f"Dumping {ZEROS}.index\nDumping {ZEROS}.timeindex\n", "")


def test_an_index_entry_that_misses_its_batch_goes_to_stderr(records_log, capsys, monkeypatch):
    monkeypatch.chdir(records_log)
    index = records_log / f"{ZEROS}.index"
    data = bytearray(index.read_bytes())
    data[0:4] = (3).to_bytes(4, "big")  # offset 3 at the position of the batch holding 3-4
    index.write_bytes(data)
    code, out, err = dump(capsys, f"{ZEROS}.index")
    assert out.splitlines()[1] == "offset: 3 position: 97"
    assert err == f"Mismatches in :{index}\n  Index offset: 3, log offset: 4\n"


def test_empty_index_and_trailing_bytes(records_log, capsys, monkeypatch):
    monkeypatch.chdir(records_log)
    Path("00000000000000000100.index").write_bytes(b"")
    with open(f"{ZEROS}.log", "ab") as f:
        f.write(b"torn")
    code, out, _ = dump(capsys, "00000000000000000100.index", f"{ZEROS}.log")
    lines = out.splitlines()
    assert lines[:2] == ["Dumping 00000000000000000100.index", "00000000000000000100.index is empty."]
    assert lines[-1] == f"Found 4 invalid bytes at the end of {ZEROS}.log"


def test_offsets_decoder(coordinator_logs, capsys, monkeypatch):
    monkeypatch.chdir(coordinator_logs / "__consumer_offsets-0")
    code, out, err = dump(capsys, "--offsets-decoder", f"{ZEROS}.log")
    records = [line.split(" headerKeys: [] ", 1)[1] for line in out.splitlines() if line.startswith("|")]
    assert (code, err) == (0, "")
    assert records == [
        'key: {"type":"1","data":{"group":"g","topic":"orders","partition":1}} payload: {"version":"3","data":'
        '{"offset":42,"leaderEpoch":3,"metadata":"m\\"eta\\n","commitTimestamp":1700000000000}}',
        'key: {"type":"2","data":{"group":"g"}} payload: {"version":"4","data":{"protocolType":"consumer",'
        '"generation":3,"protocol":"range","leader":"m-1","currentStateTimestamp":1700000000000,"members":[{'
        '"memberId":"m-1","groupInstanceId":null,"clientId":"c","clientHost":"/127.0.0.1","rebalanceTimeout":300000,'
        '"sessionTimeout":45000,"subscription":{"topics":["orders"],"userData":null,"ownedPartitions":[]},'
        '"assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}],"userData":null}}]}}',
        'key: {"type":"1","data":{"group":"g","topic":"orders","partition":0}} payload: <DELETE>',
    ]


def test_transaction_log_decoder(coordinator_logs, capsys, monkeypatch):
    monkeypatch.chdir(coordinator_logs / "__transaction_state-0")
    code, out, err = dump(capsys, "--transaction-log-decoder", f"{ZEROS}.log")
    assert out.splitlines()[-1].split(" headerKeys: [] ", 1)[1] == (
        'key: {"type":"0","data":{"transactionalId":"tx"}} payload: {"version":"1","data":{"producerId":9,'
        '"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"Ongoing","transactionPartitions":'
        '[{"topic":"orders","partitionIds":[0,1]}],"transactionLastUpdateTimestampMs":1700000000000,'
        '"transactionStartTimestampMs":1700000000000}}')


def test_cluster_metadata_decoder(tmp_path, capsys, monkeypatch):
    log = open_log(tmp_path / "__cluster_metadata-0")
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    log.append_as_leader(batch([rec(0, None, encode_metadata_record(TopicRecord(name="orders", topic_id=topic_id), 0)),
                                rec(1, None, b"\x07junk")]), origin=AppendOrigin.COORDINATOR)
    log.close()
    monkeypatch.chdir(tmp_path / "__cluster_metadata-0")
    _, out, _ = dump(capsys, "--cluster-metadata-decoder", f"{ZEROS}.log")
    records = [line.split(" headerKeys: [] ", 1)[1] for line in out.splitlines() if line.startswith("|")]
    assert records[0] == ('payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders",'
                          '"topicId":"AAECAwQFBgcICQoLDA0ODw"}}')
    assert records[1].startswith("payload: Error at 1, skipping. ")


def test_an_unknown_file_is_ignored(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("x")
    assert dump(capsys, "notes.txt") == (0, "Dumping notes.txt\n", "Ignoring unknown file notes.txt\n")


@pytest.mark.parametrize("make, reason", [
    (lambda d: None, "No such file or directory"),
    (lambda d: d.mkdir(), "Is a directory"),
])
def test_a_file_it_cannot_read_is_bad_usage(tmp_path, capsys, make, reason):
    missing = tmp_path / f"{ZEROS}.log"
    make(missing)
    code, out, err = dump(capsys, "--print-data-log", missing)
    assert (code, out) == (BAD_USAGE, "")
    assert err == f"samsa dump-log: cannot read {missing}: {reason}\n"


def test_no_file_is_bad_usage(capsys):
    code, out, err = dump(capsys)
    assert code == BAD_USAGE and err.count("\n") == 1


def test_damage_is_reported_as_kafka_reports_it(tmp_path, capsys, monkeypatch):
    """A batch failing its CRC (its records still shown), offsets that skip, time index entries off
    their batches: Kafka 4.4's DumpLogSegments printed these same lines for these same files."""
    monkeypatch.chdir(tmp_path)
    first = build_batch([Record(0, 0, b"a", b"1", []), Record(1, 5, b"b", b"2", [("x", b"y")])],
                        base_timestamp=1000, max_timestamp=1005)
    skipped = build_batch([Record(0, 0, b"c", None, [])], base_offset=5, base_timestamp=2000, max_timestamp=2000,
                          has_delete_horizon=True, compression=CompressionType.LZ4)
    appended = build_batch([Record(0, 0, None, b"t", [])], base_offset=6, timestamp_type=1, base_timestamp=3000,
                           max_timestamp=3000, compression=CompressionType.ZSTD)
    broken = bytearray(build_batch([Record(0, 0, b"k", b"v", [])], base_offset=7, base_timestamp=4000,
                                   max_timestamp=4000))
    broken[17] ^= 1  # the CRC's first byte
    Path(f"{ZEROS}.log").write_bytes(first + skipped + appended + broken)
    Path(f"{ZEROS}.index").write_bytes(struct.pack(">iiiiii", 1, 0, 5, 83, 6, 167))
    Path(f"{ZEROS}.timeindex").write_bytes(struct.pack(">qiqiqiqi", 1004, 1, 2000, 5, 1500, 6, 9000, 4))
    code, out, err = dump(capsys, "--deep-iteration", f"{ZEROS}.log", f"{ZEROS}.index", f"{ZEROS}.timeindex")
    lines = out.splitlines()
    assert lines[5].endswith(" deleteHorizonMs: OptionalLong[2000] position: 83 CreateTime: 2000 size: 84 magic: 2 "
                             "compresscodec: lz4 crc: 4004663637 isvalid: true")
    assert lines[8] == "| offset: 6 LogAppendTime: 3000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []"
    assert lines[9].endswith(" crc: 1382950861 isvalid: false")
    assert lines[10] == "| offset: 7 CreateTime: 4000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: []"
    timeindex = tmp_path / f"{ZEROS}.timeindex"
    assert err == f"""Found timestamp mismatch in :{timeindex}
  Index timestamp: 1004, log timestamp: 1005
  Index timestamp: 1500, log timestamp: 3000
Found out of order timestamp in :{timeindex}
  Index timestamp: 1500, Previously indexed timestamp: 2000
The following indexed offsets are not found in :{timeindex}
Indexed offset: 4, found log offset: 5
Non-consecutive offsets in {tmp_path / f"{ZEROS}.log"}
  1 is followed by 5
"""


def test_a_kraft_snapshot_with_its_control_records(tmp_path, capsys, monkeypatch):
    """A __cluster_metadata snapshot: its name gives the end offset and epoch; its control records
    show as Kafka 4.4's tool shows them (checked against it on this file)."""
    monkeypatch.chdir(tmp_path)

    def control(type_id: int, value: bytes, offset: int) -> bytes:
        return build_batch([Record(0, 0, struct.pack(">hh", 0, type_id), value, [])], base_offset=offset,
                           is_control=True, base_timestamp=1000, max_timestamp=1000)

    def encoded(message) -> bytes:
        out = bytearray()
        message.encode(0, out)
        return bytes(out)

    voters = VotersRecord(version=0, voters=[VotersRecord.Voter(
        voter_id=1, voter_directory_id=uuid.UUID(int=5),
        endpoints=[VotersRecord.Endpoint(name="CONTROLLER", host="h", port=9093)],
        k_raft_version_feature=VotersRecord.KRaftVersionFeature(min_supported_version=0, max_supported_version=1))])
    leader = LeaderChangeMessage(version=0, leader_id=1, voters=[LeaderChangeMessage.Voter(voter_id=1)],
                                 granting_voters=[LeaderChangeMessage.Voter(voter_id=1)])
    topic = encode_metadata_record(TopicRecord(name="t", topic_id=uuid.UUID(int=1)), 0)
    Path("00000000000000000010-0000000001.checkpoint").write_bytes(
        control(3, encoded(SnapshotHeaderRecord(version=0, last_contained_log_timestamp=1234)), 0)
        + build_batch([Record(0, 0, None, topic, [])], base_offset=1, base_timestamp=1000, max_timestamp=1000)
        + control(6, encoded(voters), 2) + control(2, encoded(leader), 3) + control(5, struct.pack(">hhB", 0, 1, 0), 4)
        + control(9, b"", 5) + control(4, encoded(SnapshotFooterRecord(version=0)), 6))
    code, out, err = dump(capsys, "--cluster-metadata-decoder", "00000000000000000010-0000000001.checkpoint")
    lines = out.splitlines()
    assert lines[1] == "Snapshot end offset: 10, epoch: 1"
    assert [line.split(" headerKeys: [] ", 1)[1] for line in lines if line.startswith("|")] == [
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}',
        'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"t","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}',
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAABQ","endpoints":'
        '[{"name":"CONTROLLER","host":"h","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,'
        '"maxSupportedVersion":1}}]}',
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}',
        'KRaftVersion {"version":0,"kRaftVersion":1}',
        'controlType: UNKNOWN(9)',
        'SnapshotFooter {"version":0}',
    ]


def test_messages_of_the_legacy_formats(tmp_path, capsys, monkeypatch):
    """Magic 0 and 1 messages (segments an old Kafka wrote), a gzip wrapper opened: the lines Kafka
    4.4's tool printed for this same file."""
    monkeypatch.chdir(tmp_path)
    Path(f"{ZEROS}.log").write_bytes(
        build_message_set([LegacyMessage(0, 0, 0, -1, b"k", b"v0"), LegacyMessage(1, 0, 0, -1, None, b"v1")], magic=0)
        + build_message_set([LegacyMessage(2, 1, 0, 5000, b"k2", b"v2"), LegacyMessage(3, 1, 0, 5001, b"k3", None)],
                            magic=1, compression=CompressionType.GZIP)
        + build_batch([Record(0, 0, b"a", b"b", [])], base_offset=4, base_timestamp=6000, max_timestamp=6000))
    code, out, err = dump(capsys, "--print-data-log", f"{ZEROS}.log")
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[2:6] == [
        "offset: 0 position: 0 NoTimestampType: -1 size: 29 magic: 0 compresscodec: none crc: 374826161 isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 2 isValid: true crc: 374826161 key: k payload: v0",
        "offset: 1 position: 29 NoTimestampType: -1 size: 28 magic: 0 compresscodec: none crc: 1285512130 isvalid: true",
        "| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 2 isValid: true crc: 1285512130 payload: v1",
    ]
    assert lines[6].startswith("offset: 3 position: 57 CreateTime: 5001 size: 93 magic: 1 compresscodec: gzip crc: ")
    assert lines[7:9] == [
        "| offset: 2 CreateTime: 5000 keySize: 2 valueSize: 2 isValid: true crc: 1896235363 key: k2 payload: v2",
        "| offset: 3 CreateTime: 5001 keySize: 2 valueSize: -1 isValid: true crc: 3490617560 key: k3",
    ]
    assert lines[9].startswith("baseOffset: 4 lastOffset: 4 count: 1 ")
