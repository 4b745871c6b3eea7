"""A Samsa broker in a KRaft cluster (process.roles=broker) under Apache Kafka 4.4's controller (issue
30's first milestone): one Kafka controller (process.roles=controller, the quorum's only voter) and
one Samsa broker, formatted with `samsa format -t <the cluster id>`, both on 127.0.0.1.

- Kafka's kafka-metadata-quorum shows the Samsa broker as an observer of the metadata log, caught up;
- a topic created through the controller appears in the Samsa broker's Metadata, led by it;
- confluent-kafka produces to it (idempotent, acks=all: its producer id from a block the controller
  handed out) and consumes from it through the Samsa broker;
- kafka-topics.sh --bootstrap-server <the Samsa broker> --create: the broker has the controller
  create it; a consumer group's coordinator topic (__consumer_offsets) is created the same way, and
  a subscribed consumer reads and commits through it;
- SIGTERM: a controlled shutdown the controller logs and grants, then exit code 0;
- two Samsa brokers replicate a partition and hand its leadership over (second test);
- a broker that starts behind the metadata log's start fetches the controller's snapshot (third);
- with a quorum of three controllers, the broker follows the quorum leader after the active
  controller is killed (fourth);
- with two log dirs, the replicas' directories go to the controller (AssignReplicasToDirs) and a
  failed log dir is reported in the heartbeats, its replicas' leaderships taken away (fifth);
- the broker keeps the metadata log on disk: restarted, it loads its snapshot (which Kafka's
  kafka-dump-log reads) and the log after it and fetches from its end; a copy that diverged from the
  quorum's is truncated where the leader says (sixth).

The controller is formatted with Kafka 4.4's default levels but share.version=1: Kafka 4.4 finalizes
share.version 2 (share groups' dead-letter queues) by default, which Samsa does not implement, and
its controller refuses the registration of a broker that does not support every finalized level
(UNSUPPORTED_VERSION). eligible.leader.replicas.version is at its default, 1 (KIP-966): the second
test checks a partition's eligible leader replicas as the Samsa brokers answer them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from compat_util import wait_for
from kafka_oracle import KafkaController, OracleUnavailable, class_path, java
from kraft_nodes import (CONTROLLER_FEATURES, TOOL_JVM_OPTS, KraftSamsaBroker, controller_quorum, create_topic,
                         create_topic_at_controller, quorum_leader, quorum_tool, start_together, active_controller)
from conftest import SamsaBroker
from server_process import HOST
from wire_client import produce_one

from samsa.client.blocking import BlockingConnection
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.slow
BROKER_ID = 2
DescribeTopicPartitionsRequest = request_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
ApiVersionsRequest = request_class(ApiKey.API_VERSIONS)
DescribeLogDirsRequest = request_class(ApiKey.DESCRIBE_LOG_DIRS)


def topics_tool(broker: SamsaBroker, *args: str) -> str:
    cmd = [java(), *TOOL_JVM_OPTS, "-cp", class_path("kafka4"), "org.apache.kafka.tools.TopicCommand",
           "--bootstrap-server", broker.bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}\n{broker.output_tail()}"
    return proc.stdout


@pytest.fixture
def cluster(tmp_path):
    try:
        controller = KafkaController(tmp_path / "controller", features=CONTROLLER_FEATURES)
    except OracleUnavailable as e:
        pytest.skip(str(e))
    broker = KraftSamsaBroker(tmp_path / "samsa", controller)
    try:
        controller.start()
        broker.start()
        yield controller, broker
    finally:
        broker.kill()
        controller.kill()


def test_samsa_broker_under_a_kafka_controller(cluster):
    controller, broker = cluster
    # The Samsa broker fetches the metadata log as an observer, caught up (no lag).
    replication = wait_for(lambda: (out := quorum_tool(controller, "--replication")) and re.search(
        rf"^{BROKER_ID}\s+\S+\s+(\d+)\s+0\s+.*Observer", out, re.M) and out, timeout=30, what="an observer")
    assert re.search(r"^1\s+\S+\s+\d+\s+0\s+.*Leader", replication, re.M), replication
    status = quorum_tool(controller, "--status")
    assert re.search(rf'CurrentObservers:\s+\[\{{"id": {BROKER_ID}, ', status), status

    create_topic(controller, "kraft-orders", 3)
    config = {"bootstrap.servers": broker.bootstrap}

    def led_here():
        topic = admin.AdminClient(config).list_topics("kraft-orders", timeout=10).topics["kraft-orders"]
        return topic.error is None and len(topic.partitions) == 3 and all(
            p.leader == BROKER_ID and p.replicas == [BROKER_ID] and p.isrs == [BROKER_ID]
            for p in topic.partitions.values())

    wait_for(led_here, timeout=30, what="kraft-orders led by the Samsa broker in its Metadata")

    producer = confluent_kafka.Producer({**config, "enable.idempotence": True, "acks": "all"})
    delivered = []
    for i in range(300):
        producer.produce("kraft-orders", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(30) == 0
    assert [d for d in delivered if d[0] is not None] == [] and len(delivered) == 300

    consumer = confluent_kafka.Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("kraft-orders", p, 0) for p in range(3)])
    received = []
    try:
        while len(received) < 300:
            message = consumer.poll(10)
            assert message is not None, f"only {len(received)} of 300 records came back"
            assert message.error() is None, message.error()
            received.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    assert sorted(v for _, _, v in received) == sorted(f"v{i}".encode() for i in range(300))
    for p in range(3):  # each partition's records in order, from offset 0
        assert [o for q, o, _ in received if q == p] == list(range(100))

    # Created through the Samsa broker, which has the controller create it.
    assert topics_tool(broker, "--create", "--topic", "kraft-created", "--partitions", "2",
                       "--replication-factor", "1") == "Created topic kraft-created.\n"
    # (kafka-topics --describe also lists reassignments, which the broker does not forward yet.)
    created = admin.AdminClient(config).list_topics("kraft-created", timeout=10).topics["kraft-created"]
    assert sorted((p.id, p.leader, p.replicas) for p in created.partitions.values()) == [
        (0, BROKER_ID, [BROKER_ID]), (1, BROKER_ID, [BROKER_ID])]

    # A consumer group: its coordinator's topic created on first need, then offsets committed to it.
    group = confluent_kafka.Consumer({**config, "group.id": "kraft-group", "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False})
    group.subscribe(["kraft-orders"])
    consumed = 0
    try:
        while consumed < 300:
            message = group.poll(15)
            assert message is not None, f"the group read only {consumed} of 300 records"
            assert message.error() is None, message.error()
            consumed += 1
        group.commit(asynchronous=False)
        committed = group.committed([confluent_kafka.TopicPartition("kraft-orders", p) for p in range(3)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [100, 100, 100]
    finally:
        group.close()
    assert "__consumer_offsets" in admin.AdminClient(config).list_topics(timeout=10).topics

    assert broker.stop(timeout=30) == 0
    log = controller.output()
    assert f"Unfenced broker {BROKER_ID} has requested and been granted a controlled shutdown" in log
    assert re.search(rf"The request from broker {BROKER_ID} to shut down has been granted", log)
    assert f"[BrokerLifecycleManager id={BROKER_ID}] Beginning controlled shutdown." in broker.output()


@pytest.fixture
def two_brokers(tmp_path):
    try:
        controller = KafkaController(tmp_path / "controller", features=CONTROLLER_FEATURES)
    except OracleUnavailable as e:
        pytest.skip(str(e))
    brokers = [KraftSamsaBroker(tmp_path / f"samsa{n}", controller, node_id=n) for n in (2, 3)]
    try:
        controller.start()
        for broker in brokers:
            broker.start()
        yield controller, brokers
    finally:
        for broker in brokers:
            broker.kill()
        controller.kill()


def test_two_samsa_brokers_replicate_and_hand_over_leadership(two_brokers):
    """Leaders and followers as the partition registrations say: the follower fetches from the leader,
    a controlled shutdown of the leader moves the leadership to the other broker, which has every
    acknowledged record, and the restarted broker is added back to the ISR by the new leader's
    AlterPartition. With eligible.leader.replicas.version 1 (KIP-966), the shut down broker is an
    eligible leader replica of a partition whose ISR it left below min.insync.replicas, as
    DescribeTopicPartitions answers, until it is back in the ISR."""
    controller, brokers = two_brokers
    for name, min_isr in (("replicated", 1), ("replicated-elr", 2)):
        assert create_topic_at_controller(controller, name, assignments=[[2, 3]],
                                          configs={"min.insync.replicas": str(min_isr)}) == ErrorCode.NONE
    config = {"bootstrap.servers": ",".join(b.bootstrap for b in brokers)}
    # The controller finalized eligible.leader.replicas.version 1 (its default), which the brokers support.
    with BlockingConnection.connect(brokers[1].host, brokers[1].port) as connection:
        versions = connection.call(ApiVersionsRequest(client_software_name="compat", client_software_version="1"), 3)
    assert {(f.name, f.max_version_level) for f in versions.finalized_features} >= {
        ("eligible.leader.replicas.version", 1)}, versions.finalized_features
    assert {(f.name, f.max_version) for f in versions.supported_features} >= {
        ("eligible.leader.replicas.version", 1)}, versions.supported_features

    def elr(broker: SamsaBroker) -> tuple:
        """replicated-elr-0 as DescribeTopicPartitions answers: (leader, ISR, ELR, last known ELR)."""
        with BlockingConnection.connect(broker.host, broker.port) as connection:
            answer = connection.call(DescribeTopicPartitionsRequest(topics=[
                DescribeTopicPartitionsRequest.TopicRequest(name="replicated-elr")], response_partition_limit=10), 0)
        p = answer.topics[0].partitions[0]
        return p.leader_id, sorted(p.isr_nodes), sorted(p.eligible_leader_replicas), sorted(p.last_known_elr)

    wait_for(lambda: elr(brokers[1]) == (2, [2, 3], [], []), timeout=30,
             what="replicated-elr-0 led by broker 2, both brokers in its ISR, no ELR")


    def partition():
        topic = admin.AdminClient(config).list_topics("replicated", timeout=10).topics["replicated"]
        return None if topic.error is not None else topic.partitions.get(0)

    wait_for(lambda: (p := partition()) and p.leader == 2 and sorted(p.isrs) == [2, 3], timeout=30,
             what="replicated-0 led by broker 2 with both brokers in its ISR")
    producer = confluent_kafka.Producer({**config, "enable.idempotence": True, "acks": "all"})
    delivered = []
    for i in range(200):
        producer.produce("replicated", value=f"r{i}".encode(),
                         on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0 and delivered == [None] * 200

    assert brokers[0].stop(timeout=30) == 0  # the leader's controlled shutdown
    assert "Unfenced broker 2 has requested and been granted a controlled shutdown" in controller.output()
    wait_for(lambda: (p := partition()) and p.leader == 3, timeout=30, what="broker 3 leading replicated-0")
    # Broker 2 left the ISR of replicated-elr-0 below its min.insync.replicas: an eligible leader replica.
    wait_for(lambda: elr(brokers[1]) == (3, [3], [2], []), timeout=30, what="broker 2 in the ELR of replicated-elr-0")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": brokers[1].bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("replicated", 0, 0)])
    received = []
    try:
        while len(received) < 200:
            message = consumer.poll(10)
            assert message is not None, f"only {len(received)} of 200 records came back from broker 3"
            assert message.error() is None, message.error()
            received.append(message.value())
    finally:
        consumer.close()
    assert received == [f"r{i}".encode() for i in range(200)]

    # Broker 2 back: a follower of broker 3, which adds it to the ISR again (AlterPartition).
    brokers[0].start()
    wait_for(lambda: (p := partition()) and p.leader == 3 and sorted(p.isrs) == [2, 3], timeout=30,
             what="broker 2 back in the ISR of replicated-0")
    wait_for(lambda: elr(brokers[0]) == (3, [2, 3], [], []), timeout=30,
             what="broker 2 back in the ISR of replicated-elr-0, out of its ELR")
    # (Only the leader's AlterPartition adds a replica to an ISR; its answer and the metadata log's
    # PartitionChangeRecord reach broker 3 in either order, so its log lines vary.)


# The controller snapshots every second, rolls its metadata log every second and keeps almost none
# of it: its raft cleaner (every 60 s) moves the log start past offset 0.
SNAPSHOTTING = {"metadata.log.segment.ms": 1000, "metadata.log.max.snapshot.interval.ms": 1000,
                "metadata.max.retention.ms": 1000, "metadata.max.retention.bytes": 1}


def test_a_broker_behind_the_log_start_fetches_the_snapshot(tmp_path):
    try:
        controller = KafkaController(tmp_path / "controller", features=CONTROLLER_FEATURES, properties=SNAPSHOTTING)
    except OracleUnavailable as e:
        pytest.skip(str(e))
    broker = KraftSamsaBroker(tmp_path / "samsa", controller)
    try:
        controller.start()
        # A record for the snapshot to hold: a client quota (no broker is needed for it).
        Alter = request_class(ApiKey.ALTER_CLIENT_QUOTAS)
        with BlockingConnection.connect(controller.host, controller.port) as connection:
            response = connection.call(Alter(entries=[Alter.EntryData(
                entity=[Alter.EntityData(entity_type="user", entity_name="alice")],
                ops=[Alter.OpData(key="producer_byte_rate", value=1024.0)])]), 1)
        assert [e.error_code for e in response.entries] == [ErrorCode.NONE], response
        wait_for(lambda: re.search(r"Incremented log start offset to [1-9]\d* due to snapshot generated",
                                   controller.output()), timeout=120, interval=1, what="the metadata log truncated")
        broker.start()
        assert re.search(r"Fetching snapshot \d{20}-\d{10} of __cluster_metadata-0", broker.output())
        # What the snapshot holds (the quota), then what the log holds past it (a topic).
        Describe = request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
        with BlockingConnection.connect(broker.host, broker.port) as connection:
            quotas = connection.call(Describe(components=[Describe.ComponentData(entity_type="user", match_type=0,
                                                                                 match="alice")]), 1)
        assert [(e.entity[0].entity_name, [(v.key, v.value) for v in e.values]) for e in quotas.entries] == [
            ("alice", [("producer_byte_rate", 1024.0)])], quotas
        create_topic(controller, "after-the-snapshot", 1)
        config = {"bootstrap.servers": broker.bootstrap}
        wait_for(lambda: "after-the-snapshot" in admin.AdminClient(config).list_topics(timeout=10).topics,
                 timeout=30, what="the topic created after the snapshot")
        assert broker.stop(timeout=30) == 0
    finally:
        broker.kill()
        controller.kill()


def test_the_broker_follows_the_quorum_leader(tmp_path):
    """A static quorum of three Kafka controllers (controller.quorum.voters, on the Samsa broker
    too): the active controller killed with SIGKILL, the broker finds the new quorum leader, fetches
    the metadata log from it (a topic created there appears) and stays registered (it still serves
    produces: unfenced)."""
    controllers, voters = controller_quorum(tmp_path, (11, 12, 13))
    broker = KraftSamsaBroker(tmp_path / "samsa", controllers[11], voters=voters)
    try:
        start_together(controllers.values())  # they elect together
        broker.start()
        config = {"bootstrap.servers": broker.bootstrap}

        first = wait_for(lambda: quorum_leader(controllers[11]), timeout=30, what="a quorum leader")
        create_topic(controllers[first], "before-failover", 1)
        wait_for(lambda: "before-failover" in admin.AdminClient(config).list_topics(timeout=10).topics, timeout=30,
                 what="before-failover in the broker's metadata")

        controllers[first].kill()

        second = wait_for(lambda: active_controller(controllers, "after-failover"), timeout=60,
                          interval=0.5, what="a new active controller")
        wait_for(lambda: (t := admin.AdminClient(config).list_topics(timeout=10).topics.get("after-failover"))
                 and t.partitions[0].leader == BROKER_ID, timeout=60, what="after-failover led by the broker")
        producer = confluent_kafka.Producer({**config, "acks": "all"})
        delivered = []
        producer.produce("after-failover", value=b"x", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0 and delivered == [None]
        assert "Completed transition to FollowerState(epoch=" in broker.output()
        assert re.search(rf"leaderId={second}\) as an observer", broker.output())
    finally:
        broker.kill()
        for controller in controllers.values():
            controller.kill()


def test_a_failed_log_dir_is_reported_and_its_replicas_lose_their_leadership(tmp_path):
    """Two log dirs, the second a 4 MB tmpfs (root only: skipped otherwise, before any JVM starts).
    Registered with two directories, the broker gets its new replicas' directories UNASSIGNED and
    tells the controller where each log went (AssignReplicasToDirs, Kafka's AssignmentsManager).
    When the tmpfs fills up, the dir goes offline; the next heartbeat names it (offline_log_dirs)
    and the controller takes the leadership of the replicas in it away (no other replica: leader
    -1), while those of the other dir stay led by the broker."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "storage"))
    from small_disk import mounted_tmpfs

    with mounted_tmpfs(tmp_path / "small", "4m") as small:
        try:
            controller = KafkaController(tmp_path / "controller", features=CONTROLLER_FEATURES)
        except OracleUnavailable as e:
            pytest.skip(str(e))
        broker = KraftSamsaBroker(tmp_path / "samsa", controller)
        broker.overrides["log.dirs"] = f"{broker.data_dir},{small}"
        try:
            controller.start()
            broker.start()
            config = {"bootstrap.servers": broker.bootstrap}
            # Until the controller unfenced the broker, it refuses the topic (no broker to place it on).
            wait_for(lambda: admin.AdminClient(config).list_topics(timeout=10).brokers, timeout=30,
                     what="the broker unfenced")
            create_topic(controller, "two-dirs", 4)

            def leaders() -> dict[int, int]:
                topic = admin.AdminClient(config).list_topics("two-dirs", timeout=10).topics["two-dirs"]
                return {} if topic.error is not None else {p.id: p.leader for p in topic.partitions.values()}

            wait_for(lambda: leaders() == {p: BROKER_ID for p in range(4)}, timeout=30, what="two-dirs led here")
            with BlockingConnection.connect(broker.host, broker.port) as connection:
                dirs = connection.call(DescribeLogDirsRequest(topics=None), 4)
            in_small = {p.partition_index for r in dirs.results if Path(r.log_dir) == small for t in r.topics
                        if t.name == "two-dirs" for p in t.partitions}
            assert 0 < len(in_small) < 4, dirs  # spread over both dirs
            wait_for(lambda: sum(int(n) for n in re.findall(r"maybeSendAssignments: sending (\d+) assignments",
                                                            broker.output())) >= 4, timeout=30,
                     what="the four replicas' directories sent to the controller")
            assert "handleResponse" not in broker.output()  # no refusal, no failed request

            stats = os.statvfs(small)
            with open(small / "filler", "wb") as f:  # all but 600 KB taken
                os.posix_fallocate(f.fileno(), 0, stats.f_bavail * stats.f_frsize - 600 * 1024)
            partition = min(in_small)
            for _ in range(64):
                code, _ = produce_one(HOST, broker.port, "two-dirs", partition, os.urandom(64 * 1024))
                if code != ErrorCode.NONE:
                    break
            assert code == ErrorCode.KAFKA_STORAGE_ERROR
            wait_for(lambda: leaders() == {p: -1 if p in in_small else BROKER_ID for p in range(4)}, timeout=30,
                     what="the replicas of the failed dir without a leader, the others led here")
            assert re.search(rf"Directories \[\S+\] in broker {BROKER_ID} marked offline", controller.output())
            assert "failed: reporting it to the controller" in broker.output()
        finally:
            broker.kill()
            controller.kill()


def _disk_log_end(metadata_dir) -> int:
    """The end offset of a metadata log on disk, read without opening it (its owner may run)."""
    from samsa.wire.records import iter_batch_headers
    segments = sorted(metadata_dir.glob("*.log"))
    end = 0
    for _, header in iter_batch_headers(segments[-1].read_bytes()) if segments else ():
        end = header.next_offset
    return end


def dump_log(path) -> str:
    """Kafka's kafka-dump-log --cluster-metadata-decoder on a file of a metadata log."""
    cmd = [java(), *TOOL_JVM_OPTS, "-cp", class_path("kafka4"), "org.apache.kafka.tools.DumpLogSegments",
           "--cluster-metadata-decoder", "--files", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _try_create_topic(controller: KafkaController, name: str) -> bool:
    """CreateTopics, False while no broker is unfenced (INVALID_REPLICATION_FACTOR)."""
    code = create_topic_at_controller(controller, name, 1, 1)
    assert code in (ErrorCode.NONE, ErrorCode.INVALID_REPLICATION_FACTOR), code
    return code == ErrorCode.NONE


def test_the_broker_keeps_the_metadata_log_on_disk(tmp_path):
    """The broker's copy of the metadata log is on disk (`<log dir>/__cluster_metadata-0`): restarted,
    it loads it and fetches from its end; a copy that diverged from the quorum's (records of an epoch
    past where the quorum's leader ended that epoch: as when a leader lost its uncommitted records)
    is truncated where the leader says, and what was cut is never replayed."""
    import uuid

    from samsa.storage.metadata_log import MetadataLog, MetadataLogConfig
    from samsa.wire.metadata_record import encode_metadata_record
    from samsa.wire.metadata_records.topic_record import TopicRecord
    from samsa.wire.records import Record, build_batch

    try:
        # No NoOpRecords: the controller's log grows only with what the test does.
        controller = KafkaController(tmp_path / "controller", features=CONTROLLER_FEATURES,
                                     properties={"metadata.max.idle.interval.ms": 0})
    except OracleUnavailable as e:
        pytest.skip(str(e))
    broker = KraftSamsaBroker(tmp_path / "samsa", controller)
    broker.overrides["metadata.log.max.snapshot.interval.ms"] = 1  # a snapshot of its own at each commit
    metadata_dir = broker.data_dir / "__cluster_metadata-0"
    config = {"bootstrap.servers": broker.bootstrap}
    try:
        controller.start()
        broker.start()
        wait_for(lambda: _try_create_topic(controller, "before-restart"), timeout=30,
                 what="before-restart created (the broker unfenced)")
        wait_for(lambda: "before-restart" in admin.AdminClient(config).list_topics(timeout=10).topics, timeout=30,
                 what="before-restart in the broker's metadata")
        assert broker.stop(timeout=30) == 0
        stopped_at = _disk_log_end(metadata_dir)
        assert stopped_at > 0 and (metadata_dir / "quorum-state").exists()
        state = (metadata_dir / "quorum-state").read_text()
        assert '"leaderId":1' in state and '"leaderEpoch":1' in state and '"data_version":1' in state, state

        # The broker snapshotted its image: Kafka's tool reads the snapshot.
        snapshots = sorted(metadata_dir.glob("*.checkpoint"))
        assert snapshots, sorted(p.name for p in metadata_dir.iterdir())
        assert re.search(r"Created snapshot \d{20}-\d{10}", broker.output())
        dumped = dump_log(snapshots[-1])
        end_offset, epoch = (int(part) for part in snapshots[-1].stem.split("-"))
        assert f"Snapshot end offset: {end_offset}, epoch: {epoch}" in dumped, dumped
        assert '"type":"TOPIC_RECORD"' in dumped and '"name":"before-restart"' in dumped, dumped
        assert "SnapshotHeader" in dumped and "SnapshotFooter" in dumped, dumped

        broker.start()  # loads its snapshot and the log after it, and fetches only what it lacks
        assert f"snapshot {end_offset}-{epoch}, log 0 to {stopped_at} (epoch 1)" in broker.output(), \
            broker.output_tail()
        wait_for(lambda: _try_create_topic(controller, "after-restart"), timeout=30,
                 what="after-restart created (the broker unfenced again)")
        wait_for(lambda: "after-restart" in admin.AdminClient(config).list_topics(timeout=10).topics, timeout=30,
                 what="after-restart in the broker's metadata")

        # Both stop once the broker has every record the controller wrote at epoch 1.
        controller_dir = controller.data_dir / "__cluster_metadata-0"
        wait_for(lambda: _disk_log_end(metadata_dir) == _disk_log_end(controller_dir), timeout=30,
                 what="the broker's copy as long as the controller's")
        controller.kill()
        broker.kill()
        epoch_end = _disk_log_end(controller_dir)
        # The broker's copy gains a record of epoch 1 the quorum never had at that offset.
        metadata_log = MetadataLog.in_log_dir(broker.data_dir, MetadataLogConfig(), lambda: 0)
        assert metadata_log.end_offset == epoch_end and metadata_log.last_fetched_epoch == 1
        phantom = encode_metadata_record(TopicRecord(name="phantom", topic_id=uuid.uuid4()), 0)
        metadata_log.append_as_follower(build_batch([Record(0, 0, None, phantom, [])], base_offset=epoch_end,
                                                    partition_leader_epoch=1, base_timestamp=0))
        metadata_log.close()

        controller.start()  # leader at epoch 2 from offset `epoch_end`
        broker.start()
        output = broker.output()
        assert f"log 0 to {epoch_end + 1} (epoch 1)" in output, broker.output_tail()
        wait_for(lambda: f"Truncated to offset {epoch_end} from Fetch response" in broker.output(), timeout=30,
                 what="the diverging record truncated")
        wait_for(lambda: _try_create_topic(controller, "after-truncation"), timeout=30,
                 what="after-truncation created (the broker unfenced again)")
        wait_for(lambda: "after-truncation" in admin.AdminClient(config).list_topics(timeout=10).topics, timeout=30,
                 what="after-truncation in the broker's metadata")
        topics = admin.AdminClient(config).list_topics(timeout=10).topics
        assert "phantom" not in topics and {"before-restart", "after-restart"} <= set(topics)
        assert broker.stop(timeout=30) == 0
    finally:
        broker.kill()
        controller.kill()
