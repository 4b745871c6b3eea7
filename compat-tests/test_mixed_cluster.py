"""Issue 13's mixed cluster, checked with Kafka's own tools: one ZooKeeper, two Samsa brokers (one
of them the controller) and a Kafka 3.9 broker started after Samsa won /controller, shared by the
module's tests.

* Kafka 3.9.2's kafka-topics --describe shows the leaders and ISRs ZooKeeper has,
  kafka-reassign-partitions --execute then --verify moves a partition from a Samsa broker to Kafka
  and completes (the outcomes read in ZooKeeper, not only the exit codes).
* kafka-reassign-partitions with log_dirs moves a replica between a Samsa broker's two log dirs.
* A Kafka leader killed with kill -9 under an idempotent acks=all producer loses no acknowledged
  record (compat-tests/history.py): a Samsa broker takes over, the same Kafka broker started again
  rejoins every ISR, and kafka-leader-election --election-type preferred hands it its leadership
  back while the producer writes on.

Topics are created through Samsa's CreateTopics, not kafka-topics --create: each tool is a JVM of
a few seconds, and the module must stay short."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from compat_util import wait_for
from history import History
from kafka_oracle import JVM_OPTS, class_path, java
from history_clients import Reader, Writer, assert_nothing_lost
from test_cluster_failover import PARTITIONS
from test_zookeeper_cluster import produce_all, produce_to_new_leader
from server_process import HOST
from test_zookeeper_controller import CreateTopics, controller_id
from wire_client import WireClient

from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

kazoo_client = pytest.importorskip("kazoo.client")
pytest.importorskip("confluent_kafka")

InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)
T = 30
CHROOT = "/mixed"
KAFKA_ID = 0
SAMSA_IDS = (1, 2)
BROKER_IDS = (KAFKA_ID, *SAMSA_IDS)
# ZooKeeper ticks of 500 ms allow 3 s sessions: a killed broker is counted gone 3 s after the kill.
ZOOKEEPER = {"tickTime": 500}
SESSION_TIMEOUT_MS = 3000
# Leadership moves when a test says so, not when the controller's rebalance timer fires.
CLUSTER_SETTINGS = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "auto.leader.rebalance.enable": "false"}
SECOND_LOG_DIR = "data-b"  # beside a Samsa broker's data dir (relative to its working dir)
# Kafka 3.9's scripts run these (bin/kafka-*.sh -> kafka-run-class.sh).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
}
TOOL_JVM_OPTS = [o for o in JVM_OPTS if not o.startswith("-Xmx")] + ["-Xmx256m", "-Xshare:auto"]
# Kafka 3.9 logs with reload4j: warnings to stderr, stdout keeps what the tool prints.
TOOLS_LOG4J = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%p %m (%c)%n
"""


class MixedCluster:
    def __init__(self, pool, work_dir: Path) -> None:
        zk = pool.zookeeper(ZOOKEEPER)
        self.connect = zk.connect + CHROOT
        # Broker 1 has a second log dir (test_kafka_tools_move_a_replica_between_samsa_log_dirs).
        self.samsa = {i: pool({"zookeeper.connect": self.connect, "broker.id": i, **CLUSTER_SETTINGS,
                               "controlled.shutdown.max.retries": 1,
                               **({"log.dirs": f"data,{SECOND_LOG_DIR}"} if i == SAMSA_IDS[0] else {})})
                      for i in SAMSA_IDS}
        self.zk = kazoo_client.KazooClient(hosts=self.connect)
        self.zk.start(timeout=T)
        wait_for(lambda: controller_id(self.zk) in SAMSA_IDS, T, what="a Samsa controller")
        self.kafka = pool.kafka39(self.connect, overrides={"broker.id": KAFKA_ID, **CLUSTER_SETTINGS})
        self.brokers = {KAFKA_ID: self.kafka, **self.samsa}
        self.work_dir = work_dir
        self.log4j = work_dir / "tools-log4j.properties"
        self.log4j.write_text(TOOLS_LOG4J)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def tool(self, tool: str, *args: str) -> str:
        """Kafka 3.9's tool against the cluster: its stdout, once it exited 0."""
        cmd = [java(), *TOOL_JVM_OPTS, f"-Dlog4j.configuration=file:{self.log4j}", "-cp", class_path("kafka39"),
               TOOLS[tool], "--bootstrap-server", self.bootstrap, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=T * 2, cwd=self.work_dir)
        assert proc.returncode == 0, f"{tool} {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def controller_epoch(self) -> int:
        return zk_data.decode_controller_epoch(self.zk.get(zk_data.CONTROLLER_EPOCH)[0])

    def state(self, topic: str, partition: int) -> zk_data.PartitionState:
        return zk_data.decode_partition_state(self.zk.get(zk_data.partition_state_path(topic, partition))[0])

    def replicas(self, topic: str) -> dict[int, tuple[int, ...]]:
        return {p: a.replicas for p, a in zk_data.decode_topic(self.zk.get(zk_data.topic_path(topic))[0]).partitions.items()}

    def wait_full_isrs(self, topic: str) -> None:
        def whole() -> bool:
            return all(set(self.state(topic, p).isr) == set(r) for p, r in self.replicas(topic).items())
        wait_for(whole, T, interval=0.1, what=f"every replica of {topic} in its ISR")

    def create_topic(self, topic: str, assignment: list[list[int]], configs: dict[str, str] | None = None) -> None:
        """CreateTopics through Samsa (a JVM less than kafka-topics --create), every ISR whole."""
        request = CreateTopics(topics=[CreateTopics.CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1,
            assignments=[CreateTopics.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
                         for p, r in enumerate(assignment)],
            configs=[CreateTopics.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
            timeout_ms=T * 1000)
        with WireClient(HOST, self.samsa[SAMSA_IDS[0]].port) as wire:
            (answer,) = wire.call(request, 7).topics
        assert answer.error_code == ErrorCode.NONE, answer
        self.wait_full_isrs(topic)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from conftest import BrokerPool
    pool = BrokerPool(tmp_path_factory, "mixed")
    try:
        cluster = MixedCluster(pool, tmp_path_factory.mktemp("tools"))
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        pool.close()


# Kafka 3.9's TopicCommand: "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0\t..."
DESCRIBED = re.compile(r"Partition: (\d+)\s+Leader: (-?\d+|none)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)")


def described(stdout: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """{partition: (leader, replicas, isr)} as kafka-topics --describe printed them."""
    def ids(text: str) -> tuple[int, ...]:
        return tuple(int(i) for i in text.split(",") if i)
    return {int(p): (int(leader) if leader != "none" else -1, ids(replicas), ids(isr))
            for p, leader, replicas, isr in DESCRIBED.findall(stdout)}


def in_zookeeper(cluster: MixedCluster, topic: str):
    states = {p: cluster.state(topic, p) for p in cluster.replicas(topic)}
    return {p: (s.leader, cluster.replicas(topic)[p], s.isr) for p, s in states.items()}


def test_kafka_tools_on_a_mixed_cluster(cluster, topic_name):
    # An RF 3 topic, each broker the preferred leader of one partition: kafka-topics shows what
    # ZooKeeper has (kafka-leader-election: test_kafka_leader_killed_loses_no_acknowledged_write).
    epoch = cluster.controller_epoch()
    assignment = [[BROKER_IDS[(p + i) % 3] for i in range(3)] for p in range(3)]
    cluster.create_topic(topic_name, assignment)
    shown = described(cluster.tool("kafka-topics", "--describe", "--topic", topic_name))
    assert shown == in_zookeeper(cluster, topic_name)
    assert {p: leader for p, (leader, _, _) in shown.items()} == {p: r[0] for p, r in enumerate(assignment)}

    # A partition moved from Samsa broker 2 to Kafka: --execute, then --verify until complete.
    moved = topic_name + "-moved"
    cluster.create_topic(moved, [[2]])
    assert produce_to_new_leader(cluster.samsa[2].port, moved, [b"m1", b"m2"]) == (ErrorCode.NONE, 0)
    plan = cluster.work_dir / f"{moved}.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[%d]}]}' % (moved, KAFKA_ID))
    cluster.tool("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    verified = wait_for(lambda: (out := cluster.tool("kafka-reassign-partitions", "--verify",
                                                     "--reassignment-json-file", str(plan)))
                        and "is completed" in out and "still in progress" not in out and out, T, interval=0.5,
                        what="kafka-reassign-partitions --verify: completed")
    assert f"Reassignment of partition {moved}-0 is completed" in verified
    assert cluster.replicas(moved) == {0: (KAFKA_ID,)}
    assert (cluster.state(moved, 0).leader, cluster.state(moved, 0).isr) == (KAFKA_ID, (KAFKA_ID,))
    wait_for(lambda: not (cluster.samsa[2].data_dir / f"{moved}-0").exists(), T, what="Samsa's replica deleted")
    assert produce_all(cluster.kafka.port, moved, [b"m3"]) == (ErrorCode.NONE, 2)
    assert described(cluster.tool("kafka-topics", "--describe", "--topic", moved)) == {0: (KAFKA_ID, (KAFKA_ID,), (KAFKA_ID,))}
    # The tools' requests (ListPartitionReassignments among them) never made the controller resign.
    assert cluster.controller_epoch() == epoch


def fetch_values(port: int, topic: str) -> list[bytes]:
    from samsa.wire import records

    Fetch = request_class(ApiKey.FETCH)
    request = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                    session_epoch=-1, topics=[Fetch.FetchTopic(topic=topic, partitions=[
                        Fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    with WireClient(HOST, port) as client:
        data = bytes(client.call(request, 12).responses[0].partitions[0].records or b"")
    values, position = [], 0
    while position < len(data):
        header, batch = records.decode_batch(data[position:])
        values += [r.value for r in batch]
        position += header.size
    return values


def test_kafka_tools_move_a_replica_between_samsa_log_dirs(cluster, topic_name):
    """Kafka 3.9's kafka-reassign-partitions with log_dirs: a Samsa broker of the ZooKeeper cluster
    moves its replica to its other log dir (AlterReplicaLogDirs, as Kafka 3.9's broker serves it)
    while it is produced to; --verify until the move completed."""
    epoch = cluster.controller_epoch()
    topic = topic_name + "-dirs"
    samsa = cluster.samsa[SAMSA_IDS[0]]
    cluster.create_topic(topic, [[SAMSA_IDS[0]]])
    assert produce_to_new_leader(samsa.port, topic, [b"d1", b"d2"]) == (ErrorCode.NONE, 0)
    dirs = [samsa.data_dir.resolve(), (samsa.base_dir / SECOND_LOG_DIR).resolve()]
    (source,) = [d for d in dirs if (d / f"{topic}-0").is_dir()]
    (target,) = [d for d in dirs if d != source]
    plan = cluster.work_dir / f"{topic}.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[%d],"log_dirs":["%s"]}]}'
                    % (topic, SAMSA_IDS[0], target))
    executed = cluster.tool("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    assert f"Successfully started moving log directory to {target}" in executed
    assert produce_all(samsa.port, topic, [b"d3"]) == (ErrorCode.NONE, 2)
    verified = wait_for(lambda: (out := cluster.tool("kafka-reassign-partitions", "--verify",
                                                     "--reassignment-json-file", str(plan)))
                        and "completed successfully" in out and out, T, interval=0.5,
                        what="kafka-reassign-partitions --verify: the log dir move completed")
    assert f"Reassignment of replica {topic}-0-{SAMSA_IDS[0]} completed successfully" in verified
    assert (target / f"{topic}-0").is_dir() and not (source / f"{topic}-0").exists()
    assert fetch_values(samsa.port, topic) == [b"d1", b"d2", b"d3"]
    assert cluster.controller_epoch() == epoch


def test_producer_ids_are_the_clusters(cluster):
    """Idempotent producers' ids come from /latest_producer_id_block through whichever broker they
    ask (Kafka's by AllocateProducerIds to the Samsa controller): never the same id twice."""
    request = InitProducerId(transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1)
    ids = []
    for broker in [*cluster.brokers.values(), *cluster.brokers.values()]:
        with WireClient(HOST, broker.port) as wire:
            answer = wait_for(lambda wire=wire: (a := wire.call(request, 4)).error_code == ErrorCode.NONE and a, T,
                              interval=0.2, what=f"InitProducerId through {broker.kind}")
        ids.append(answer.producer_id)
    assert len(set(ids)) == len(ids), ids


def test_kafka_leader_killed_loses_no_acknowledged_write(cluster, topic_name):
    assignment = [[BROKER_IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)]
    cluster.create_topic(topic_name, assignment, {"min.insync.replicas": "2"})
    assert cluster.state(topic_name, 0).leader == KAFKA_ID

    history = History()
    writer = Writer(cluster.bootstrap, topic_name, history, PARTITIONS)
    reader = Reader(cluster.bootstrap, topic_name, history, PARTITIONS)
    writer.start()
    reader.start()
    try:
        wait_for(lambda: all(history.acked_count(p) > 20 for p in range(PARTITIONS)), T, what="the first writes")
        cluster.kafka.kill()
        killed_at = time.monotonic()
        wait_for(lambda: cluster.state(topic_name, 0).leader in SAMSA_IDS, T, interval=0.1,
                 what="a Samsa broker leading partition 0")
        wait_for(lambda: history.last_ack_after(0, killed_at), T, interval=0.1, what="a write acknowledged by Samsa")
        resumed_after = time.monotonic() - killed_at
        # The same broker (its log dir, its id) started again once its old session is gone.
        wait_for(lambda: not cluster.zk.exists(zk_data.broker_path(KAFKA_ID)), T, what="Kafka's registration gone")
        cluster.kafka.start()
        cluster.wait_full_isrs(topic_name)
        assert cluster.state(topic_name, 0).leader != KAFKA_ID
        # Leadership back to Kafka, the preferred replica, while the producer writes on.
        cluster.tool("kafka-leader-election", "--election-type", "preferred", "--topic", topic_name, "--partition", "0")
        assert cluster.state(topic_name, 0).leader == KAFKA_ID
        since = time.monotonic()
        wait_for(lambda: history.last_ack_after(0, since), T, interval=0.1, what="a write acknowledged by Kafka again")
    finally:
        writer.finish()
        reader.finish()

    assert_nothing_lost(history, cluster.bootstrap, topic_name, PARTITIONS, f"resumed {resumed_after:.1f} s after the kill")
