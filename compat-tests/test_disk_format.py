"""One disk format with Apache Kafka (issue 12).

* Kafka's DumpLogSegments (kafka-dump-log) reads the files a broker wrote: the same scenario is
  written by `samsa serve` and by Kafka 4.4 (`[samsa]`, `[kafka]`), the broker is stopped with
  SIGTERM, and the same assertions hold on both: every record of the segment at its offset with its
  timestamp, key, value and header keys; the offset and time indexes point at batches of the log;
  the producer snapshot holds the idempotent producer; `__consumer_offsets` decodes to the group's
  commit and `__transaction_state` to the transactional producer's states; the tool reports no
  corruption and no index mismatch.
* `samsa serve` starts on the log dir the scenario left (a copy of it) and serves it: records,
  read_committed, the group's offsets, the producers' state; the idempotent producer continues
  without a duplicate, new producers get ids never handed out, the topic keeps its id and configs.
  On Samsa's own dir that is a restart; on Kafka's dir it is the issue's "Samsa starts on a log dir
  that Kafka 4.x wrote" (its topics from Kafka's `__cluster_metadata`, whose files stay untouched;
  refused, saying what to run, when Kafka did not shut down cleanly).
* Both write `partition.metadata` (the topic id) in every partition directory.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from compat_util import Rec, confluent_admin, create_topic, make_records, wait_for
from conftest import BrokerPool
from confluent_kafka import Consumer, Producer, TopicPartition
import class_sharing
from kafka_oracle import JVM_OPTS, OracleUnavailable, class_path, java
from server_process import HOST, BrokerStartError
from wire_client import WireClient

from samsa.wire import records as wire_records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

T = 20
TOPIC = "disk-records"
GROUP = "disk-group"
TXN_ID = "disk-txn"
COMMITTED_OFFSET = 17
N_IDEMPOTENT = 24
COMMITTED_VALUES = [b"committed-0", b"committed-1", b"committed-2"]
ABORTED_VALUES = [b"aborted-0", b"aborted-1"]
# What makes the tool say a file is not what Kafka writes.
TROUBLE = re.compile(r"isvalid: false|[Mm]ismatch|invalid bytes|[Cc]orrupt|Exception|is not the first|"
                     r"not monoton|Found \d+ ")


def java_tool(main_class: str, *args: str, timeout: float = 60) -> str:
    """A Kafka tool from the kafka4 jars; its stdout (stderr appended), failing on a non-zero exit."""
    try:
        cmd = [java(), *JVM_OPTS, *class_sharing.options("kafka4"), "-cp", class_path("kafka4"), main_class, *args]
    except OracleUnavailable as e:
        pytest.skip(str(e))
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, f"{main_class} {args} exited {proc.returncode}\n{out}\n{proc.stderr.decode()}"
    return out


def dump_log(*files: Path, options: tuple[str, ...] = ()) -> str:
    return java_tool("org.apache.kafka.tools.DumpLogSegments", *options, "--files", ",".join(map(str, files)))


@dataclass
class Written:
    """What the scenario wrote, and where."""

    kind: str
    data_dir: Path
    records: list[Rec]
    topic_id: str | None = None
    cluster_id: str | None = None
    producer_ids: dict[str, int] = field(default_factory=dict)  # "idempotent", "transactional"
    batches: list[dict] = field(default_factory=list)  # of the segment, as DumpLogSegments shows them

    def partition_dir(self, topic: str = TOPIC, partition: int = 0) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def non_empty_logs(self, topic: str) -> list[Path]:
        return sorted(p for p in self.data_dir.glob(f"{topic}-*/*.log") if p.stat().st_size > 0)


def write_scenario(bootstrap: str) -> tuple[list[Rec], str | None]:
    """An idempotent producer with keys, headers and timestamps; a committed and an aborted
    transaction; a group's committed offset."""
    # index.interval.bytes 1: every batch gets an index entry, whatever the client's batching.
    create_topic(bootstrap, TOPIC, 1, config={"index.interval.bytes": "1"})
    recs = make_records(N_IDEMPOTENT, seed=12)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for r in recs:
        p.produce(TOPIC, r.value, r.key, headers=r.headers, timestamp=r.timestamp)
    assert p.flush(T) == 0

    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    tp.init_transactions(T)
    tp.begin_transaction()
    for v in COMMITTED_VALUES:
        tp.produce(TOPIC, v, b"txn")
    tp.commit_transaction(T)
    tp.begin_transaction()
    for v in ABORTED_VALUES:
        tp.produce(TOPIC, v, b"txn")
    assert tp.flush(T) == 0  # on the log before the abort, not purged from the client's queue
    tp.abort_transaction(T)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:  # Kafka answers NOT_COORDINATOR while it loads a new __consumer_offsets partition
        wait_for(lambda: c.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED_OFFSET, metadata="disk-meta")],
                                  asynchronous=False), T, what="offset commit")
    finally:
        c.close()
    admin = confluent_admin(bootstrap)
    topic_id = None
    try:
        from confluent_kafka import TopicCollection
        desc = admin.describe_topics(TopicCollection([TOPIC]), request_timeout=T)[TOPIC].result(T)
        topic_id = str(desc.topic_id)
    except (ImportError, AttributeError):
        pass
    return recs, topic_id


@pytest.fixture(scope="module")
def written(tmp_path_factory, broker_kind) -> Written:
    """The scenario written by a broker of this module's kind, which is then stopped (SIGTERM)."""
    pool = BrokerPool(tmp_path_factory, f"disk-{broker_kind}", broker_kind)
    try:
        b = pool()
        recs, topic_id = write_scenario(b.bootstrap)
        cluster_id = confluent_admin(b.bootstrap).list_topics(timeout=T).cluster_id
        rc = b.stop(30)
        # The JVM exits 143 after its shutdown hooks ran on SIGTERM; Samsa exits 0.
        assert rc in (0, 143) and not b.sigterm_timed_out, f"{b.kind} exit code {rc} after SIGTERM"
        assert (b.data_dir / ".kafka_cleanshutdown").exists(), "no clean-shutdown marker"
        w = Written(broker_kind, b.data_dir, recs, topic_id, cluster_id)
        w.batches = batches = parse_batches(dump_log(w.partition_dir() / f"{0:020d}.log"))
        w.producer_ids = {
            "idempotent": batches[0]["producerId"],
            "transactional": next(b["producerId"] for b in batches if b["isTransactional"] == "true"),
        }
        yield w
    finally:
        pool.close()


# -- reading DumpLogSegments' output ------------------------------------------------------------

_BATCH = re.compile(r"^baseOffset: (?P<baseOffset>\d+) lastOffset: (?P<lastOffset>\d+) count: \d+ "
                    r"baseSequence: (?P<baseSequence>-?\d+) .*"
                    r"producerId: (?P<producerId>-?\d+) producerEpoch: (?P<producerEpoch>-?\d+) "
                    r".*isTransactional: (?P<isTransactional>\w+) "
                    r"isControl: (?P<isControl>\w+) .*position: (?P<position>\d+) "
                    r"(?:CreateTime|LogAppendTime): (?P<maxTimestamp>-?\d+) .*isvalid: (?P<isvalid>\w+)", re.M)
_RECORD = re.compile(r"^\| offset: (?P<offset>\d+) (?:CreateTime|LogAppendTime): (?P<timestamp>-?\d+) "
                     r"keySize: (?P<keySize>-?\d+) valueSize: (?P<valueSize>-?\d+) sequence: -?\d+ "
                     r"headerKeys: \[(?P<headerKeys>[^\]]*)\](?: endTxnMarker: (?P<marker>\w+))?", re.M)


def parse_batches(out: str) -> list[dict]:
    rows = []
    for m in _BATCH.finditer(out):
        d = m.groupdict()
        rows.append({k: int(v) if v.lstrip("-").isdigit() else v for k, v in d.items()})
    assert rows, f"no batches in\n{out[:3000]}"
    return rows


def parse_records(out: str) -> dict[int, dict]:
    return {int(m["offset"]): m.groupdict() for m in _RECORD.finditer(out)}


def decoded(out: str) -> list[tuple[dict, dict | None]]:
    """(key, payload) of every record an --offsets-decoder / --transaction-log-decoder dump shows."""
    rows = []
    for m in re.finditer(r"^\| offset: \d+ .* key: (\{.*?\}) payload: (.*)$", out, re.M):
        payload = m.group(2).strip()
        rows.append((json.loads(m.group(1)), json.loads(payload) if payload.startswith("{") else None))
    return rows


def assert_no_trouble(out: str) -> None:
    bad = [line for line in out.splitlines() if TROUBLE.search(line)]
    assert not bad, "DumpLogSegments reports a problem:\n" + "\n".join(bad[:20])


# -- kafka-dump-log reads the files -------------------------------------------------------------

def expected_offsets(w: Written) -> dict[int, tuple]:
    """offset -> (key, value, header keys, timestamp or None) of every data record."""
    exp = {i: (r.key, r.value, [h for h, _ in r.headers], r.timestamp) for i, r in enumerate(w.records)}
    n = len(w.records)
    for i, v in enumerate(COMMITTED_VALUES):
        exp[n + i] = (b"txn", v, [], None)
    first_aborted = n + len(COMMITTED_VALUES) + 1  # after the commit marker
    for i, v in enumerate(ABORTED_VALUES):
        exp[first_aborted + i] = (b"txn", v, [], None)
    return exp


def test_dump_log_segment_records(written):
    out = dump_log(written.partition_dir() / f"{0:020d}.log", options=("--deep-iteration", "--print-data-log"))
    assert_no_trouble(out)
    recs = parse_records(out)
    exp = expected_offsets(written)
    n = len(written.records)
    commit_marker, abort_marker = n + len(COMMITTED_VALUES), max(exp) + 1
    assert sorted(recs) == sorted([*exp, commit_marker, abort_marker]), "offsets in the segment"
    assert recs[commit_marker]["marker"] == "COMMIT" and recs[abort_marker]["marker"] == "ABORT"
    for off, (key, value, header_keys, ts) in exp.items():
        r = recs[off]
        assert int(r["keySize"]) == (-1 if key is None else len(key)), off
        assert int(r["valueSize"]) == (-1 if value is None else len(value)), off
        assert (r["headerKeys"].split(",") if r["headerKeys"] else []) == header_keys, off
        if ts is not None:
            assert int(r["timestamp"]) == ts, off
        text = lambda b: b.decode()  # noqa: E731
        if key is not None and value is not None and value.isascii():
            assert f"key: {text(key)} payload: {text(value)}" in out, off
    batches = parse_batches(out)
    assert all(b["isvalid"] == "true" for b in batches)
    txn = [b for b in batches if b["isTransactional"] == "true"]
    assert [b["isControl"] for b in txn][-1] == "true" and {b["producerId"] for b in txn} == {
        written.producer_ids["transactional"]}


def test_dump_log_indexes(written):
    d = written.partition_dir()
    log_out = dump_log(d / f"{0:020d}.log")
    batches = parse_batches(log_out)
    by_last = {b["lastOffset"]: b for b in batches}
    out = dump_log(d / f"{0:020d}.index", d / f"{0:020d}.timeindex")
    assert_no_trouble(out)
    index_part, time_part = out.split(".timeindex", 1)
    entries = [(int(o), int(p)) for o, p in re.findall(r"^offset: (\d+) position: (\d+)$", index_part, re.M)]
    assert entries, f"empty offset index:\n{out}"
    for off, pos in entries:  # each entry: a batch's last offset and that batch's position
        assert off in by_last and by_last[off]["position"] == pos, (off, pos)
    times = [(int(t), int(o)) for t, o in re.findall(r"^timestamp: (-?\d+) offset: (\d+)$", time_part, re.M)]
    assert times, f"empty time index:\n{out}"
    assert times == sorted(times) and len({t for t, _ in times}) == len(times)
    for ts, off in times:  # the largest timestamp so far, at the batch that holds it
        assert by_last[off]["maxTimestamp"] == ts, (ts, off)
    assert times[-1][0] == max(b["maxTimestamp"] for b in batches), "close() appends the largest timestamp"


def test_dump_producer_snapshot(written):
    snapshots = sorted(written.partition_dir().glob("*.snapshot"))
    assert snapshots, f"no producer snapshot in {written.partition_dir()}"
    end = max(expected_offsets(written)) + 2  # the log end offset after the abort marker
    assert snapshots[-1].name == f"{end:020d}.snapshot"
    out = dump_log(snapshots[-1])
    assert_no_trouble(out)
    producers = {int(m["producerId"]): m.groupdict() for m in re.finditer(
        r"^producerId: (?P<producerId>\d+) producerEpoch: (?P<producerEpoch>\d+) coordinatorEpoch: (?P<ce>-?\d+) "
        r"currentTxnFirstOffset: (?P<txnFirst>\S+) lastTimestamp: -?\d+ firstSequence: (?P<firstSequence>-?\d+) "
        r"lastSequence: (?P<lastSequence>-?\d+) lastOffset: (?P<lastOffset>-?\d+)", out, re.M)}
    idem = producers[written.producer_ids["idempotent"]]
    assert (int(idem["lastSequence"]), int(idem["lastOffset"])) == (N_IDEMPOTENT - 1, N_IDEMPOTENT - 1)
    assert idem["txnFirst"] == "OptionalLong.empty"
    txn = producers[written.producer_ids["transactional"]]
    assert txn["txnFirst"] == "OptionalLong.empty", "no transaction left open"


def test_dump_consumer_offsets(written):
    out = dump_log(*written.non_empty_logs("__consumer_offsets"), options=("--offsets-decoder",))
    assert_no_trouble(out)
    commits = [(k, v) for k, v in decoded(out)
               if k.get("type") == "1" and k["data"].get("group") == GROUP]
    assert commits, f"no offset commit of {GROUP}:\n{out[:3000]}"
    key, value = commits[-1]
    assert key["data"] == {"group": GROUP, "topic": TOPIC, "partition": 0}
    assert value["data"]["offset"] == COMMITTED_OFFSET
    # confluent-kafka 2.x sends the metadata string with its C terminator: both brokers store "disk-meta\0".
    assert value["data"]["metadata"].rstrip("\0") == "disk-meta"


def test_dump_transaction_state(written):
    out = dump_log(*written.non_empty_logs("__transaction_state"), options=("--transaction-log-decoder",))
    assert_no_trouble(out)
    states = [v["data"] for k, v in decoded(out) if k["data"].get("transactionalId") == TXN_ID and v]
    assert states, f"no state of {TXN_ID}:\n{out[:3000]}"
    assert {s["producerId"] for s in states} == {written.producer_ids["transactional"]}
    seq = [s["transactionStatus"] for s in states]
    for a, b in [("Ongoing", "PrepareCommit"), ("PrepareCommit", "CompleteCommit"),
                 ("CompleteCommit", "PrepareAbort"), ("PrepareAbort", "CompleteAbort")]:
        assert seq.index(a) < seq.index(b, seq.index(a)), seq
    assert seq[-1] == "CompleteAbort"
    assert states[-1]["transactionPartitions"] == []
    prepare_commit = states[seq.index("PrepareCommit")]
    assert prepare_commit["transactionPartitions"] == [{"topic": TOPIC, "partitionIds": [0]}]


# -- samsa serve on the log dir -----------------------------------------------------------------

@pytest.fixture
def written_copy(written, tmp_path_factory) -> Path:
    """A copy of the scenario's log dir (the module's other tests keep the original)."""
    copy = tmp_path_factory.mktemp("disk-copy") / "logs"
    shutil.copytree(written.data_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    return copy


@pytest.fixture
def samsa_on_written(written_copy, tmp_path_factory):
    """`samsa serve` on the copy of the scenario's log dir."""
    pool = BrokerPool(tmp_path_factory, "disk-serve", "samsa")
    try:
        yield pool(overrides={"log.dirs": str(written_copy)})
    finally:
        pool.close()


def test_partition_metadata_names_the_topic_id(written):
    if written.topic_id is None:
        pytest.skip("this confluent-kafka does not describe topic ids")
    # confluent-kafka prints a Uuid in standard base64; Kafka's Uuid.toString is the URL-safe one.
    kafka_uuid = written.topic_id.replace("+", "-").replace("/", "_")
    text = (written.partition_dir() / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {kafka_uuid}"
    offsets = {(p / "partition.metadata").read_text() for p in written.data_dir.glob("__consumer_offsets-*")}
    assert len(offsets) == 1 and kafka_uuid not in offsets.pop()


def consume(bootstrap: str, isolation: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "enable.auto.commit": False,
                  "auto.offset.reset": "error", "isolation.level": isolation, "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got = []
        wait_for(lambda: got.extend(m for m in c.consume(100, 0.5) if not m.error()) or len(got) >= n, T,
                 what=f"{n} {isolation} records")
        return got
    finally:
        c.close()


def test_samsa_serves_the_log_dir(written, samsa_on_written):
    s = samsa_on_written
    admin = confluent_admin(s.bootstrap)
    md = admin.list_topics(timeout=T)
    assert md.cluster_id == written.cluster_id, "cluster id from meta.properties"
    assert TOPIC in md.topics and md.topics[TOPIC].error is None, f"topics served: {sorted(md.topics)}"
    if written.topic_id is not None:
        from confluent_kafka import TopicCollection
        desc = admin.describe_topics(TopicCollection([TOPIC]), request_timeout=T)[TOPIC].result(T)
        assert str(desc.topic_id) == written.topic_id

    exp = expected_offsets(written)
    got = consume(s.bootstrap, "read_uncommitted", len(exp))
    assert [m.offset() for m in got] == sorted(exp)
    for m in got:
        key, value, header_keys, ts = exp[m.offset()]
        assert (m.key(), m.value()) == (key, value), m.offset()
        assert [h for h, _ in (m.headers() or [])] == header_keys, m.offset()
        if ts is not None:
            assert m.timestamp()[1] == ts, m.offset()
    for m, r in zip(got, written.records):
        assert (m.headers() or []) == r.headers, m.offset()
    committed = consume(s.bootstrap, "read_committed", len(exp) - len(ABORTED_VALUES))
    assert [m.value() for m in committed if m.key() == b"txn"] == COMMITTED_VALUES, "aborted records skipped"

    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tp = wait_for(lambda: c.committed([TopicPartition(TOPIC, 0)], timeout=5), T, what="committed offsets")[0]
    finally:
        c.close()
    assert (tp.offset, tp.metadata.rstrip("\0")) == (COMMITTED_OFFSET, "disk-meta")

    out = java_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", s.bootstrap,
                    "describe-producers", "--topic", TOPIC, "--partition", "0")
    rows = {int(line.split()[0]): line.split() for line in out.splitlines()[1:] if line.strip()}
    # ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
    assert rows[written.producer_ids["idempotent"]][3] == str(N_IDEMPOTENT - 1), out
    assert rows[written.producer_ids["transactional"]][5] == "None", out
    assert s.stop() == 0


Produce = request_class(ApiKey.PRODUCE)


def produce_as(bootstrap_port: int, producer_id: int, epoch: int, base_sequence: int, count: int):
    """A Produce (v9) of `count` records as the given idempotent producer: its partition response."""
    batch = wire_records.build_batch(
        [wire_records.Record(i, 0, b"again", b"again-%d" % i, []) for i in range(count)],
        producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence, base_timestamp=0)
    request = Produce(acks=-1, timeout_ms=10000, topic_data=[Produce.TopicProduceData(
        name=TOPIC, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
    with WireClient(HOST, bootstrap_port) as client:
        return client.call(request, 9).responses[0].partition_responses[0]


def test_samsa_continues_the_log_dir(written, written_copy, samsa_on_written):
    """The idempotent producer's retry of its last batch is a duplicate (answered with the offset it
    has), its next batch is appended; a new producer gets an id none of the old had; the topic's
    configs are served; Kafka's metadata log is left as it was."""
    s = samsa_on_written
    idempotent = [b for b in written.batches if b["producerId"] == written.producer_ids["idempotent"]]
    last = idempotent[-1]
    pid, epoch = last["producerId"], last["producerEpoch"]
    end = max(expected_offsets(written)) + 2  # the log end offset after the abort marker
    retry = produce_as(s.port, pid, epoch, last["baseSequence"], last["lastOffset"] - last["baseOffset"] + 1)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, last["baseOffset"]), "a duplicate"
    following = produce_as(s.port, pid, epoch, N_IDEMPOTENT, 1)
    assert (following.error_code, following.base_offset) == (ErrorCode.NONE, end)
    got = consume(s.bootstrap, "read_uncommitted", len(expected_offsets(written)) + 1)
    assert [m.offset() for m in got][-1] == end and len(got) == len(expected_offsets(written)) + 1

    p = Producer({"bootstrap.servers": s.bootstrap, "enable.idempotence": True})
    p.produce(TOPIC, b"new-producer")
    assert p.flush(T) == 0
    out = java_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", s.bootstrap,
                    "describe-producers", "--topic", TOPIC, "--partition", "0")
    ids = {int(line.split()[0]) for line in out.splitlines()[1:] if line.strip()}
    new = ids - set(written.producer_ids.values())
    assert len(new) == 1 and min(new) > max(written.producer_ids.values()), out

    from confluent_kafka.admin import ConfigResource
    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    admin = confluent_admin(s.bootstrap)  # held: a collected client fails its futures
    configs = admin.describe_configs([res], request_timeout=T)[res].result(T)
    assert configs["index.interval.bytes"].value == "1"
    assert s.stop() == 0
    kraft = written.data_dir / "__cluster_metadata-0"
    if kraft.exists():
        for f in kraft.iterdir():
            assert (written_copy / kraft.name / f.name).read_bytes() == f.read_bytes(), f.name


def test_a_kafka_dir_without_a_clean_shutdown_is_refused(written, written_copy, tmp_path_factory):
    if written.kind != "kafka":
        pytest.skip("Samsa recovers its own log dir after an unclean shutdown (test_recovery, test_lifecycle)")
    (written_copy / ".kafka_cleanshutdown").unlink()
    pool = BrokerPool(tmp_path_factory, "disk-unclean", "samsa")
    try:
        with pytest.raises(BrokerStartError):
            pool(overrides={"log.dirs": str(written_copy)})
        out = pool.brokers[-1].output()
        assert "did not shut down cleanly" in out and "kafka-server-stop.sh" in out, out[-3000:]
        assert not (written_copy / "__samsa_metadata.json").exists()
    finally:
        pool.close()
