"""The Kafka fixtures themselves (kafka_oracle.py): ZooKeeper alone, Kafka 3.9 in ZooKeeper mode,
and scripts/kafka-oracle.sh starting and stopping Kafka 4.x by hand. (Kafka 4.x as a `broker` is
exercised by every test that runs with the id `kafka`.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from compat_util import confluent_consume_all, create_topic, wait_for
from confluent_kafka import Producer
from kafka_oracle import server_alive
from wire_client import metadata_controller

REPO = Path(__file__).resolve().parent.parent
T = 15


def produce_and_read_back(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, partitions=2, timeout=T)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(10):
        p.produce(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2)
    assert p.flush(T) == 0
    got = confluent_consume_all(bootstrap, topic, {0: 5, 1: 5})
    assert [m.value() for m in got[0]] == [b"v%d" % i for i in range(0, 10, 2)]


def test_zookeeper_answers_ruok(zookeeper):
    assert zookeeper.four_letter_word("ruok") == "imok"
    zookeeper.stop()
    assert not zookeeper.is_running()


def test_kafka39_in_zookeeper_mode(kafka39_factory, topic_name):
    zk = kafka39_factory.zookeeper()
    kafka = kafka39_factory.kafka39(zk.connect)
    assert "Kafka version: 3.9" in kafka.output()
    # Its listener answers before the controller's UpdateMetadata has told it who the controller
    # is; librdkafka's admin asking then waits for a controller and never sends CreateTopics (CI
    # timed out after 60 s with Kafka idle).
    wait_for(lambda: metadata_controller(kafka.port, kafka.host) == 0, 4 * T, interval=0.1,
             what="Kafka to name itself controller")
    produce_and_read_back(kafka.bootstrap, topic_name)
    kafka.restart()  # same port and log dir: the records are still there
    got = confluent_consume_all(kafka.bootstrap, topic_name, {0: 5, 1: 5})
    assert [m.offset() for m in got[1]] == list(range(5))


def test_script_starts_and_stops_kafka4(tmp_path, topic_name):
    env = {**os.environ, "SAMSA_ORACLE_DIR": str(tmp_path)}
    script = [str(REPO / "scripts" / "kafka-oracle.sh")]
    started = subprocess.run(["bash", *script, "start", "kafka4"], capture_output=True, text=True, env=env,
                             timeout=120)
    state_file = tmp_path / "kafka4" / "state.json"
    try:
        assert started.returncode == 0, started.stderr[-4000:]
        bootstrap = started.stdout.strip()
        assert bootstrap.startswith("127.0.0.1:")
        produce_and_read_back(bootstrap, topic_name)
        again = subprocess.run(["bash", *script, "start", "kafka4"], capture_output=True, text=True, env=env,
                               timeout=60)
        assert again.returncode != 0 and "already running" in again.stderr
    finally:
        stopped = subprocess.run(["bash", *script, "stop", "kafka4"], capture_output=True, text=True, env=env,
                                 timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    (server,) = json.loads(state_file.read_text())["servers"]
    assert not server_alive(server["pid"], Path(server["dir"]))
    assert "Kafka Server started" in Path(server["log"]).read_text()
