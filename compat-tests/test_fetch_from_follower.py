"""Fetch from the closest replica (KIP-392) in a ZooKeeper cluster of two Samsa brokers, racks r1
and r2, with Kafka's RackAwareReplicaSelector: a confluent-kafka consumer with `client.rack=r2`
is sent by the leader (broker 1, r1) to the follower (broker 2, r2) and reads every record there
(librdkafka's statistics name the broker each partition is fetched from)."""

from __future__ import annotations

import json
import time

import pytest
from compat_util import wait_for
from server_process import HOST
from test_zookeeper_cluster import partition_state, produce_all, zk_reader
from test_zookeeper_controller import controller_id, create_topic, samsa_settings

from samsa.wire.errors import ErrorCode

pytest.importorskip("kazoo.client")
confluent_kafka = pytest.importorskip("confluent_kafka")

T = 30
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def test_a_consumer_reads_from_the_follower_in_its_rack(kafka39_factory, topic_name):
    connect = kafka39_factory.zookeeper().connect + "/fetch-from-follower"
    brokers = {i: kafka39_factory({**samsa_settings(connect, i), "broker.rack": rack,
                                   "replica.selector.class": SELECTOR})
               for i, rack in ((1, "r1"), (2, "r2"))}
    values = [b"v%d" % i for i in range(50)]
    with zk_reader(connect) as client:
        wait_for(lambda: controller_id(client), T, what="a controller")
        create_topic(brokers[1].port, topic_name, [[1, 2]])
        wait_for(lambda: client.exists(f"/brokers/topics/{topic_name}/partitions/0/state")
                 and partition_state(client, topic_name).isr == (1, 2), T, what="both replicas in the ISR")
        assert wait_for(lambda: produce_all(brokers[1].port, topic_name, values), T,
                        what="acks=all") == (ErrorCode.NONE, 0)

    fetched_from: list[int] = []

    def statistics(text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(topic_name, {}).get("partitions", {}).get("0")
        if partition is not None:
            fetched_from.append(partition["broker"])

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": f"{HOST}:{brokers[1].port}", "group.id": "compat-unused",
        "enable.auto.commit": False, "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
        "client.rack": "r2", "statistics.interval.ms": 200, "stats_cb": statistics})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic_name, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + T
        while len(got) < len(values) or 2 not in fetched_from:
            assert time.monotonic() < deadline, (len(got), fetched_from[-5:])
            for message in consumer.consume(100, 0.2):
                assert not message.error(), message.error()
                got.append(message.value())
    finally:
        consumer.close()
    assert got == values
    assert fetched_from[-1] == 2  # the follower in the client's rack, not the leader (1)
    for broker in brokers.values():
        broker.kill()  # no controlled shutdown to wait for: the test is over
