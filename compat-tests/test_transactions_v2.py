"""Transaction version 2 (KIP-890 part 2) with Kafka 4.4's Java client, on Samsa and on Kafka 4.4:
java/TxnV2Transform.java consumes, transforms and produces in transactions (one JVM doing many),
killed with kill -9 once and its broker killed with kill -9 twice; the output read with
read_committed holds every input record exactly once, and the logs show the epoch bump of every
transaction: each marker carries the epoch after its transaction's records' (version 0/1 markers
carry the same), and the transaction log's records say client transaction version 2 with a new
epoch at every completion.
"""

from __future__ import annotations

import collections
import queue
import re
import subprocess
import threading
import time
from pathlib import Path

from compat_util import create_topic, log_batches
from test_java_client import java_client  # noqa: F401 (the fixture)
from test_transactions import KAFKA_QUICK_REREGISTRATION, confluent_producer, read_topic, values_of

from samsa.coordinator.transaction_log import TRANSACTION_STATE_TOPIC, read_record
from samsa.coordinator.transaction_metadata import TransactionState
from samsa.wire import records
from samsa.wire.coordinator_record import RecordFormatError

TOTAL = 1500
PARTITIONS = 2


class Transform:
    """One run of TxnV2Transform (a JVM): its JSON lines gathered by a thread."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.commits = 0
        self.events: list[dict] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        import json
        for line in self.process.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def until(self, predicate, timeout: float, what: str) -> None:
        """Read its lines until `predicate(line)` holds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = {"check": "timeout"}
            if line is None or line["check"] == "timeout":
                raise AssertionError(f"TxnV2Transform: no {what} ({self.commits} commits; exit "
                                     f"{self.process.poll()}); its last events: {self.events[-10:]}\n"
                                     + "".join(self.stderr[-40:]))
            self.events.append(line)
            self.commits += line["check"] == "commit"
            if predicate(line):
                return

    def commits_more(self, n: int, timeout: float) -> None:
        target = self.commits + n
        self.until(lambda line: self.commits >= target, timeout, f"{n} more commits")

    def kill(self) -> None:
        self.process.kill()  # kill -9
        self.process.wait()


def check_markers_bump_the_epoch(data_dir: Path, sink: str) -> int:
    """Every marker of the sink carries the epoch after its transaction's records'; a marker's
    epochs only go up. The number of COMMIT markers, a coordinator's retries left out."""
    commits = 0
    for p in range(PARTITIONS):
        last: dict[int, tuple[bool, int]] = {}  # producer id -> (control?, epoch) of its last batch
        for header, batch_records in log_batches(data_dir, f"{sink}-{p}"):
            if not header.is_control:
                last[header.producer_id] = (False, header.producer_epoch)
                continue
            marker = records.parse_control_record(batch_records[0])
            previous = last.get(header.producer_id)
            if previous is not None and previous[0]:
                # A marker after a marker: the coordinator's retry (same epoch) or a newer ending,
                # of a transaction that added the partition but has no records in it.
                assert header.producer_epoch >= previous[1], (p, header, previous)
                commits += header.producer_epoch > previous[1] and marker.type is records.ControlRecordType.COMMIT
            else:
                assert previous is not None and header.producer_epoch == previous[1] + 1, (
                    f"{sink}-{p}: a {marker.type.name} marker at offset {header.base_offset} with epoch "
                    f"{header.producer_epoch} after records of epoch {previous}: no version 2 epoch bump")
                commits += marker.type is records.ControlRecordType.COMMIT
            last[header.producer_id] = (True, header.producer_epoch)
    return commits


def markers_skipped_by_kafka(broker, sink: str) -> int:
    """How many times Kafka completed a transaction without writing its markers to the sink.

    A Kafka broker restarted after kill -9 is fenced until it registers again; a transaction its
    coordinator completes meanwhile finds no leader for its partitions, and Kafka skips their
    markers ("these partitions are likely deleted already") while it still writes the completion.
    The producer's next marker in that partition then commits those records with its own."""
    skips = re.compile(r"Couldn't find leader endpoint for partitions Set\((.*?)\) while trying to send "
                       r"transaction markers")
    log = Path(broker.log_path).read_text(errors="replace")
    return sum(any(p.strip().startswith(f"{sink}-") for p in match.group(1).split(","))
               for match in skips.finditer(log))


def transaction_log(data_dir: Path, transactional_id: str) -> list:
    """The transactional id's records in `__transaction_state`, in order."""
    found = []
    for directory in sorted(data_dir.glob(f"{TRANSACTION_STATE_TOPIC}-*")):
        for header, batch_records in log_batches(data_dir, directory.name):
            if header.is_control:
                continue
            for record in batch_records:
                try:
                    read = read_record(bytes(record.key), None if record.value is None else bytes(record.value))
                except RecordFormatError:
                    continue
                if read.transactional_id == transactional_id and read.value is not None:
                    found.append(read.value)
    return found


def test_java_producer_on_transaction_version_2_is_exactly_once_through_kill_9(broker_factory, broker_kind,
                                                                                 topic_name, java_client):  # noqa: F811
    broker = broker_factory(overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
                                       **(KAFKA_QUICK_REREGISTRATION if broker_kind == "kafka" else {})})
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    feeder = confluent_producer(broker.bootstrap, **{"enable.idempotence": True})
    for i in range(TOTAL):
        feeder.produce(source, value=b"v%d" % i, partition=i % PARTITIONS)
    assert feeder.flush(30) == 0

    transactional_id = f"{topic_name}-txn"
    command = [*java_client[:-1], "TxnV2Transform", broker.bootstrap, source, sink, f"{topic_name}-group",
               transactional_id, "20"]
    first = Transform(command)
    try:
        first.commits_more(10, 120)
    finally:
        first.kill()  # kill -9 in the middle of its transactions
    second = Transform(command)  # its InitProducerId fences the first and aborts what it left open
    try:
        second.commits_more(10, 120)
        for _ in range(2):
            broker.kill()
            broker.start()
            second.commits_more(5, 180)
        second.until(lambda line: line["check"] == "done", 300, "end")
        assert second.process.wait(30) == 0
    finally:
        if second.process.poll() is None:
            second.kill()

    output = read_topic(broker.bootstrap, sink, "read_committed", settle_s=2.0, partitions=PARTITIONS)
    got = collections.Counter(values_of(output))
    assert got == collections.Counter(b"t:v%d" % i for i in range(TOTAL)), (
        f"{sum(got.values())} output records for {TOTAL} inputs; duplicated: "
        f"{[v for v, n in got.items() if n > 1][:10]}")

    # The logs: a version 2 epoch bump at every transaction.
    committed_markers = check_markers_bump_the_epoch(broker.data_dir, sink)
    skipped = markers_skipped_by_kafka(broker, sink) if broker_kind == "kafka" else 0
    assert committed_markers + skipped >= first.commits + second.commits, (
        f"{committed_markers} COMMIT markers ({skipped} skipped by Kafka) for {first.commits} + "
        f"{second.commits} transactions committed")
    states = transaction_log(broker.data_dir, transactional_id)
    completions = [s for s in states if s.txn_state is TransactionState.COMPLETE_COMMIT]
    assert len(completions) >= first.commits + second.commits
    assert all(s.client_transaction_version == 2 for s in completions)
    epochs = [(s.producer_id, s.producer_epoch) for s in completions]
    assert all(a < b for a, b in zip(epochs, epochs[1:])), f"completions not on ever newer epochs: {epochs}"
    assert broker.starts == 3
