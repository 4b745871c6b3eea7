"""`samsa dump-log` against Kafka's own DumpLogSegments (kafka-dump-log.sh), the oracle (issue 15).

Real clients write to `samsa serve` (test_disk_format's scenario: an idempotent producer with keys,
headers and timestamps, a committed and an aborted transaction, a group's commit; one batch per
compression codec; a classic consumer group that joins and commits), the broker stops, then both
tools read the same files and must print the same lines: a segment with --print-data-log and
--deep-iteration, its offset, time and transaction indexes, the producer snapshot, the
`__consumer_offsets` segments with --offsets-decoder, the `__transaction_state` one with
--transaction-log-decoder, and a `__cluster_metadata` segment written by storage/ (Samsa's broker
writes none) with --cluster-metadata-decoder. Kafka's tool runs once per option set, all at once.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import uuid

import pytest
from compat_util import CODECS, create_topic, wait_for
from conftest import BrokerPool
from confluent_kafka import Consumer, Producer
from test_disk_format import TOPIC, T, dump_log, write_scenario

from samsa.storage.log import AppendOrigin, Log
from samsa.storage.log_config import LogConfig
from samsa.wire.metadata_record import encode_metadata_record
from samsa.wire.metadata_records.client_quota_record import ClientQuotaRecord, EntityData
from samsa.wire.metadata_records.feature_level_record import FeatureLevelRecord
from samsa.wire.metadata_records.partition_record import PartitionRecord
from samsa.wire.metadata_records.register_broker_record import BrokerEndpoint, BrokerFeature, RegisterBrokerRecord
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.metadata_records.user_scram_credential_record import UserScramCredentialRecord
from samsa.wire.records import Record, build_batch

COMPRESSED = "dump-compressed"
DATA_OPTIONS = ("--print-data-log", "--deep-iteration")


def produce_compressed(bootstrap: str) -> None:
    """One batch per codec, each with keys, headers and a null value."""
    create_topic(bootstrap, COMPRESSED, 1)
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50})
        for i in range(4):
            p.produce(COMPRESSED, None if i == 3 else f"{codec}-value-{i}".encode() * 3, f"k{i}".encode(),
                      headers=[("codec", codec.encode()), ("n", None)])
        assert p.flush(T) == 0


def join_classic_group(bootstrap: str) -> None:
    """A consumer group of the classic protocol: its GroupMetadata record carries the member's
    subscription and assignment, which --offsets-decoder shows decoded."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-classic", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([COMPRESSED])
        wait_for(lambda: c.poll(0.2) is not None and c.assignment(), T, what="an assignment")
        c.commit(asynchronous=False)
    finally:
        c.close()


def write_cluster_metadata(directory: Path) -> Path:
    """A __cluster_metadata segment of records of many field types (UUIDs, arrays, structs, a
    float64, bytes, tagged fields), written by storage/ as a controller would."""
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    records = [
        (FeatureLevelRecord(name="metadata.version", feature_level=27), 0),
        (RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=7), broker_epoch=5, end_points=[
            BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092, security_protocol=0)],
            features=[BrokerFeature(name="metadata.version", min_supported_version=7, max_supported_version=27)],
            rack=None, fenced=False, log_dirs=[uuid.UUID(int=9)]), 3),
        (TopicRecord(name="orders", topic_id=topic_id), 0),
        (PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                         partition_epoch=0, directories=[uuid.UUID(int=9)]), 1),
        (ClientQuotaRecord(entity=[EntityData(entity_type="user", entity_name="alice")], key="producer_byte_rate",
                           value=1048576.5), 0),
        (UserScramCredentialRecord(name="alice", mechanism=1, salt=b"salt", stored_key=bytes(32),
                                   server_key=bytes(range(32)), iterations=4096), 0),
    ]
    log = Log.open(directory, LogConfig(), clock_ms=lambda: 1_700_000_000_000)
    log.append_as_leader(bytearray(build_batch(
        [Record(i, 0, None, encode_metadata_record(record, version), []) for i, (record, version) in enumerate(records)],
        base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_000)), origin=AppendOrigin.COORDINATOR)
    log.close()
    return first_log(directory)


def first_log(partition_dir: Path) -> Path:
    return partition_dir / f"{0:020d}.log"


def internal_logs(data_dir: Path, topic: str) -> list[Path]:
    """The non-empty segments of an internal topic."""
    logs = [p for p in sorted(data_dir.glob(f"{topic}-*/*.log")) if p.stat().st_size > 0]
    assert logs, f"{topic} has no records"
    return logs


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[tuple[str, ...], list[Path]]:
    """Files to dump by the options to dump them with, written by `samsa serve` and then stopped."""
    pool = BrokerPool(tmp_path_factory, "dump-log")
    try:
        b = pool()
        write_scenario(b.bootstrap)
        produce_compressed(b.bootstrap)
        join_classic_group(b.bootstrap)
        assert b.stop(30) == 0
        records_dir = b.data_dir / f"{TOPIC}-0"
        snapshots = sorted(records_dir.glob("*.snapshot"))
        yield {
            DATA_OPTIONS: [first_log(records_dir), records_dir / f"{0:020d}.index",
                           records_dir / f"{0:020d}.timeindex", records_dir / f"{0:020d}.txnindex",
                           first_log(b.data_dir / f"{COMPRESSED}-0"), *snapshots],
            ("--offsets-decoder",): internal_logs(b.data_dir, "__consumer_offsets"),
            ("--transaction-log-decoder",): internal_logs(b.data_dir, "__transaction_state"),
            ("--cluster-metadata-decoder",): [
                write_cluster_metadata(tmp_path_factory.mktemp("kraft") / "__cluster_metadata-0")],
        }
    finally:
        pool.close()


def samsa_dump_log(files: list[Path], options: tuple[str, ...]) -> str:
    proc = subprocess.run([sys.executable, "-m", "samsa", "dump-log", *options, *map(str, files)],
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"samsa dump-log exited {proc.returncode}\n{proc.stderr.decode()}"
    # Decoded as java_tool decodes Kafka's: the random values hold bytes such as '\r' that text
    # mode would turn into line ends.
    return proc.stdout.decode(errors="replace")


def test_dump_log_prints_what_kafka_prints(files):
    with ThreadPoolExecutor(len(files)) as pool:
        kafka = dict(zip(files, pool.map(lambda item: dump_log(*item[1], options=item[0]), files.items())))
    for options, paths in files.items():
        ours = samsa_dump_log(paths, options)
        theirs = kafka[options]
        assert ours == theirs, f"samsa dump-log {' '.join(options)} differs from Kafka's:\n" + "".join(
            difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "kafka", "samsa"))
