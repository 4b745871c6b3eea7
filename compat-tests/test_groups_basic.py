"""Consumer groups with real clients: subscribe, consume, commit, restart the broker, resume from
the committed offsets. confluent-kafka (librdkafka), kafka-python, aiokafka and kafkajs each run
the same scenario; two confluent-kafka members share a topic's partitions, with an eager and a
cooperative assignor."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
from compat_util import NODE_DIR, confluent_admin, create_topic, node_script, wait_for

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}
TIMEOUT = 45.0


@pytest.fixture(scope="module")
def group_broker(module_broker_factory):
    """A broker with GROUP_SETTINGS shared by the tests that do not restart it (each has its own
    topic and group)."""
    return module_broker_factory(overrides=GROUP_SETTINGS)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(15) == 0


def confluent_consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(count, 0.5):
                assert not m.error(), m.error()
                got.append(m.value().decode())
        c.commit(asynchronous=False)
        return got
    finally:
        c.close()


def kafka_python_consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got += [r.value.decode() for r in records]
        c.commit()
        return got
    finally:
        c.close()


def aiokafka_consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    from aiokafka import AIOKafkaConsumer

    async def run():
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100)
        await c.start()
        try:
            got = []
            deadline = time.monotonic() + TIMEOUT
            while len(got) < count and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got += [r.value.decode() for r in records]
            await c.commit()
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


def kafkajs_consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    if shutil.which("node") is None or not (Path(NODE_DIR) / "node_modules" / "kafkajs").is_dir():
        pytest.skip("node or kafkajs missing (compat-tests/install.sh)")
    import base64

    result = node_script("kafkajs_ops.js", {"brokers": [bootstrap], "globalTimeoutMs": 85_000, "ops": [
        {"op": "consumeGroup", "topic": topic, "groupId": group, "count": count, "commit": True,
         "timeoutMs": int(TIMEOUT * 1000)}]}, timeout=90)["results"][0]
    assert "error" not in result, result["error"]
    return [base64.b64decode(m["value"]).decode() for m in result["ok"]]


CLIENTS = {
    "confluent-kafka": confluent_consume,
    "kafka-python": kafka_python_consume,
    "aiokafka": aiokafka_consume,
    "kafkajs": kafkajs_consume,
}


def committed(bootstrap: str, topic: str, group: str, partitions: int) -> list[int]:
    """The group's committed offsets. Right after a start Kafka's coordinator may still be loading
    its partition of __consumer_offsets and answer NOT_COORDINATOR: retriable, so a new consumer
    (librdkafka's keeps the answer) asks again."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    not_yet = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
               KafkaError.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + 30
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                    timeout=15)]
        except KafkaException as e:
            if e.args[0].code() not in not_yet or time.monotonic() > deadline:
                raise
        finally:
            c.close()
        time.sleep(0.5)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_group_consumer_resumes_from_its_committed_offsets_after_a_restart(broker_factory, topic_name, client):
    consume = CLIENTS[client]
    broker = broker_factory(overrides=GROUP_SETTINGS)
    group = f"group-{topic_name}"
    create_topic(broker.bootstrap, topic_name, partitions=3)
    first = [f"first-{i}" for i in range(30)]
    produce(broker.bootstrap, topic_name, first, 3)
    assert sorted(consume(broker.bootstrap, topic_name, group, len(first))) == sorted(first)
    assert committed(broker.bootstrap, topic_name, group, 3) == [10, 10, 10]

    broker.restart()
    assert committed(broker.bootstrap, topic_name, group, 3) == [10, 10, 10]
    second = [f"second-{i}" for i in range(15)]
    produce(broker.bootstrap, topic_name, second, 3)
    assert sorted(consume(broker.bootstrap, topic_name, group, len(second))) == sorted(second)
    assert committed(broker.bootstrap, topic_name, group, 3) == [15, 15, 15]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_members_share_the_partitions_of_a_topic(group_broker, topic_name, strategy):
    """Eager and cooperative (KIP-429, client-side over the same JoinGroup/SyncGroup) assignors."""
    from confluent_kafka import Consumer

    broker = group_broker
    create_topic(broker.bootstrap, topic_name, partitions=4)
    values = [f"v-{i}" for i in range(40)]
    produce(broker.bootstrap, topic_name, values, 4)
    group = f"group-{topic_name}"
    members = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "partition.assignment.strategy": strategy}) for _ in range(2)]
    try:
        for m in members:
            m.subscribe([topic_name])

        def both_assigned():
            for m in members:
                m.poll(0.2)
            assignments = [{tp.partition for tp in m.assignment()} for m in members]
            return assignments if all(len(a) == 2 for a in assignments) else None

        first, second = wait_for(both_assigned, TIMEOUT, what="two members with two partitions each")
        assert first.isdisjoint(second) and first | second == {0, 1, 2, 3}
        admin = confluent_admin(broker.bootstrap)  # kept: a dropped client cancels its requests
        description = admin.describe_consumer_groups([group])[group].result(15)
        assert str(description.state).endswith("STABLE") and len(description.members) == 2
    finally:
        for m in members:
            m.close()


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(group_broker, topic_name):
    """group.instance.id (KIP-345): librdkafka's static member closes without leaving; its new
    incarnation takes the old one's place and the other member sees no rebalance."""
    from confluent_kafka import Consumer

    broker = group_broker
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"group-{topic_name}"

    def member(instance: str, rebalances: list) -> Consumer:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.instance.id": instance,
                      "session.timeout.ms": 30_000, "enable.auto.commit": False})
        c.subscribe([topic_name], on_assign=lambda _, parts: rebalances.append(sorted(p.partition for p in parts)))
        return c

    stays_rebalances, restarts_rebalances = [], []
    stays, restarts = member("stays", stays_rebalances), member("restarts", restarts_rebalances)
    try:
        def settled():
            for c in (stays, restarts):
                c.poll(0.2)
            return all(len(c.assignment()) == 2 for c in (stays, restarts))

        wait_for(settled, TIMEOUT, what="two static members with two partitions each")
        before = sorted(p.partition for p in restarts.assignment())
        seen = len(stays_rebalances)
        restarts.close()
        restarted_rebalances: list = []
        restarts = member("restarts", restarted_rebalances)
        wait_for(lambda: restarts.poll(0.2) or restarted_rebalances, TIMEOUT, what="the restarted member's assignment")
        assert restarted_rebalances[-1] == before
        for _ in range(5):
            stays.poll(0.2)
        assert len(stays_rebalances) == seen  # no rebalance for the member that stayed
    finally:
        stays.close()
        restarts.close()
