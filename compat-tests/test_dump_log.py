"""`samsa dump-log` against Kafka's own DumpLogSegments (kafka-dump-log.sh), the oracle (issue 15).

Real clients write to `samsa serve` (test_disk_format's scenario: an idempotent producer with keys,
headers and timestamps, a committed and an aborted transaction, a group's commit; and one batch per
compression codec), the broker stops, then both tools read the same files and must print the same
lines: a segment with --print-data-log and --deep-iteration, its offset and time indexes, the
producer snapshot, a `__consumer_offsets` segment with --offsets-decoder and a `__transaction_state`
one with --transaction-log-decoder. Kafka's tool runs once per option set, the three at once.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from compat_util import CODECS, create_topic
from conftest import BrokerPool
from confluent_kafka import Producer
from test_disk_format import TOPIC, T, dump_log, write_scenario

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


def first_log(partition_dir: Path) -> Path:
    return partition_dir / f"{0:020d}.log"


def internal_log(data_dir: Path, topic: str) -> Path:
    """The one non-empty segment of an internal topic (the scenario uses one group, one transactional id)."""
    logs = [p for p in sorted(data_dir.glob(f"{topic}-*/*.log")) if p.stat().st_size > 0]
    assert len(logs) == 1, logs
    return logs[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[tuple[str, ...], list[Path]]:
    """Files to dump by the options to dump them with, written by `samsa serve` and then stopped."""
    pool = BrokerPool(tmp_path_factory, "dump-log")
    try:
        b = pool()
        write_scenario(b.bootstrap)
        produce_compressed(b.bootstrap)
        assert b.stop(30) == 0
        records_dir = b.data_dir / f"{TOPIC}-0"
        snapshots = sorted(records_dir.glob("*.snapshot"))
        yield {
            DATA_OPTIONS: [first_log(records_dir), records_dir / f"{0:020d}.index",
                           records_dir / f"{0:020d}.timeindex", first_log(b.data_dir / f"{COMPRESSED}-0"),
                           *snapshots],
            ("--offsets-decoder",): [internal_log(b.data_dir, "__consumer_offsets")],
            ("--transaction-log-decoder",): [internal_log(b.data_dir, "__transaction_state")],
        }
    finally:
        pool.close()


def samsa_dump_log(files: list[Path], options: tuple[str, ...]) -> str:
    proc = subprocess.run([sys.executable, "-m", "samsa.server.cli", "dump-log", *options, *map(str, files)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"samsa dump-log exited {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def test_dump_log_prints_what_kafka_prints(files):
    with ThreadPoolExecutor(len(files)) as pool:
        kafka = dict(zip(files, pool.map(lambda item: dump_log(*item[1], options=item[0]), files.items())))
    for options, paths in files.items():
        ours = samsa_dump_log(paths, options)
        theirs = kafka[options]
        assert ours == theirs, f"samsa dump-log {' '.join(options)} differs from Kafka's:\n" + "".join(
            difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "kafka", "samsa"))
