"""The group and transaction coordinators of Samsa brokers in a cluster with Kafka 3.9 as the
controller (ZooKeeper mode): they move with the leadership of their `__consumer_offsets` and
`__transaction_state` partitions, loaded from the replicated logs; a consumer group and a
transactional consume-transform-produce (confluent-kafka) go on, exactly once, through a kill -9 of
the Samsa broker leading those partitions; producer ids taken by Samsa and by Kafka from
`/latest_producer_id_block` never collide; Metadata auto-creates a topic through ZooKeeper.

One ZooKeeper, one Kafka 3.9 (broker 0, the controller) and two Samsa brokers (1 and 2) serve the
whole module.
"""

from __future__ import annotations

import time

import pytest
from compat_util import confluent_admin, wait_for
from conftest import BrokerPool
from server_process import HOST
from transactional_transform import Transform, read_committed
from wire_client import WireClient

from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

kazoo_client = pytest.importorskip("kazoo.client")
confluent_kafka = pytest.importorskip("confluent_kafka")

Metadata = request_class(ApiKey.METADATA)
InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
CHROOT = "/kafka/coordinators"
T = 30
RECORDS = 60


class Cluster:
    def __init__(self, pool: BrokerPool) -> None:
        self.zookeeper = pool.zookeeper()
        self.connect = self.zookeeper.connect + CHROOT
        # Every broker maps group ids and transactional ids to the same partitions.
        partitions = {"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1}
        self.kafka = pool.kafka39(self.connect, overrides={"broker.id": 0, **partitions})  # first: the controller
        samsa = {"zookeeper.connect": self.connect, "zookeeper.session.timeout.ms": 6000, **partitions}
        self.samsa = {i: pool({**samsa, "broker.id": i}) for i in (1, 2)}
        self.zk = kazoo_client.KazooClient(hosts=self.connect)
        self.zk.start(timeout=T)
        wait_for(lambda: len(metadata(self.samsa[2].port, []).brokers) == 3, T, what="every broker in the cluster")

    def leader(self, topic: str, partition: int = 0) -> int:
        return zk_data.decode_partition_state(self.zk.get(zk_data.partition_state_path(topic, partition))[0]).leader

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pool = BrokerPool(tmp_path_factory, "coordinators")
    try:
        c = Cluster(pool)
        yield c
        c.close()
    finally:
        pool.close()


def metadata(port: int, topics: list[str] | None, auto_create: bool = False):
    with WireClient(HOST, port) as client:
        return client.call(Metadata(topics=None if topics is None else [Metadata.MetadataRequestTopic(name=t)
                                                                         for t in topics],
                                    allow_auto_topic_creation=auto_create), 12)


def init_producer_id(port: int) -> int:
    """An idempotent producer's id from the broker at `port` (retried while it has no block yet)."""
    def ask():
        with WireClient(HOST, port) as client:
            answer = client.call(InitProducerId(transactional_id=None, transaction_timeout_ms=60000), 4)
        return answer.producer_id if answer.error_code == ErrorCode.NONE else None
    return wait_for(ask, T, what=f"a producer id from {port}")


def test_producer_ids_from_samsa_and_kafka_never_collide(cluster):
    ids = {port: [init_producer_id(port) for _ in range(3)]
           for port in (cluster.kafka.port, cluster.samsa[1].port, cluster.samsa[2].port)}
    everything = [i for taken in ids.values() for i in taken]
    assert len(set(everything)) == len(everything), ids
    # Each broker hands out ids from a block of 1000 of its own, all recorded in the znode.
    blocks = {port: {i // 1000 for i in taken} for port, taken in ids.items()}
    assert all(len(b) == 1 for b in blocks.values()) and len(set.union(*blocks.values())) == 3, blocks
    latest = zk_data.decode_producer_id_block(cluster.zk.get(zk_data.LATEST_PRODUCER_ID_BLOCK)[0])
    assert latest.size == 1000 and latest.last_producer_id >= max(everything)


def test_metadata_auto_creates_a_topic_through_zookeeper(cluster):
    name = f"auto-{time.time_ns()}"
    answer = metadata(cluster.samsa[1].port, [name], auto_create=True)
    assert answer.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    topic = wait_for(lambda: (t := metadata(cluster.samsa[1].port, [name]).topics[0]).error_code == ErrorCode.NONE
                     and t, T, what="the auto-created topic's leader")
    assert len(topic.partitions) == 1
    assert cluster.zk.exists(zk_data.topic_path(name))


def create_topics(cluster, assignments: dict[str, list[list[int]]], configs: dict[str, dict[str, str]]) -> None:
    """Each topic with its partitions' replicas; each partition's first replica leads it."""
    from confluent_kafka.admin import NewTopic

    admin = confluent_admin(cluster.samsa[1].bootstrap)
    topics = [NewTopic(n, len(replicas), replica_assignment=replicas, config=configs.get(n, {}))
              for n, replicas in assignments.items()]
    for future in admin.create_topics(topics, operation_timeout=T).values():
        future.result(timeout=T)
    for name, replicas in assignments.items():
        for index, (preferred, *_) in enumerate(replicas):
            wait_for(lambda n=name, i=index, p=preferred: cluster.zk.exists(zk_data.partition_state_path(n, i))
                     and cluster.leader(n, i) == p, T, what=f"broker {preferred} leading {name}-{index}")


def test_group_and_transactions_survive_their_coordinators_kill(cluster):
    """Consume-transform-produce in transactions, exactly once, while the Samsa broker coordinating
    the group and the transactional id is killed with kill -9. Each transaction writes to
    partitions led by the other brokers (Samsa 2 and Kafka), whose markers the coordinator sends
    them (WriteTxnMarkers), and to `__consumer_offsets`, led by the coordinator itself."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    source, sink = "ctp-in", "ctp-out"
    moving = [[1, 2, 0]]  # Samsa 1 leads, Samsa 2 takes over
    create_topics(cluster, {
        source: moving, "__consumer_offsets": moving, "__transaction_state": moving,
        sink: [[2, 1, 0], [0, 2, 1]],  # led by Samsa 2 and by Kafka throughout
    }, {
        "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer"},
        "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed",
                                "min.insync.replicas": "1", "unclean.leader.election.enable": "false"},
    })
    bootstrap = ",".join(b.bootstrap for b in (cluster.samsa[1], cluster.samsa[2], cluster.kafka))
    feeder = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(RECORDS):
        feeder.produce(source, key=b"%d" % i, value=b"v%d" % i)
    assert feeder.flush(T) == 0

    transform = Transform(bootstrap, source, sink, "ctp", "ctp-txn", partition_of=lambda m: int(m.key()) % 2)
    # The coordinators are where the partitions' leader is: Samsa 1.
    with WireClient(HOST, cluster.samsa[2].port) as client:
        found = client.call(FindCoordinator(key_type=1, coordinator_keys=["ctp-txn"]), 4).coordinators[0]
    assert (found.error_code, found.node_id) == (ErrorCode.NONE, 1)

    done, killed, deadline = 0, False, time.monotonic() + 60
    while done < RECORDS:
        assert time.monotonic() < deadline, f"only {done} of {RECORDS} records processed"
        batch = transform.step()
        if batch is None:
            continue
        done = batch[-1].offset() + 1
        if done >= RECORDS // 3 and not killed:
            cluster.samsa[1].kill()  # kill -9, mid-stream: the coordinators move to Samsa 2
            killed = True
    assert killed
    for name in (source, "__consumer_offsets", "__transaction_state"):
        assert cluster.leader(name) == 2
    assert (cluster.leader(sink, 0), cluster.leader(sink, 1)) == (2, 0)
    transform.close()

    # Exactly once: each input record once in the output, in order within its partition.
    seen = read_committed(bootstrap, sink, 2, RECORDS)
    assert seen == {p: [b"out-v%d" % i for i in range(RECORDS) if i % 2 == p] for p in (0, 1)}

    # The group's committed offset, read from the new coordinator (Samsa 2).
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "enable.auto.commit": False})
    (committed,) = check.committed([TopicPartition(source, 0)], timeout=T)
    check.close()
    assert committed.offset == RECORDS

