"""Samsa brokers in KRaft broker mode under Apache Kafka 4.4's controllers, as the KRaft compat tests
start them (test_kraft_broker.py, test_kraft_cluster.py): `KraftSamsaBroker` (`samsa serve` with
process.roles=broker, its log dir formatted by `samsa format` first), a static quorum of
KafkaControllers started together, and Kafka's kafka-metadata-quorum tool.

The controllers are formatted with Kafka 4.4's default feature levels but share.version=1: Kafka 4.4
finalizes share.version 2 (share groups' dead-letter queues) by default, which Samsa does not
implement, and its controller refuses the registration of a broker that does not support every
finalized level (UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import SamsaBroker
from kafka_oracle import JVM_OPTS, KafkaController, OracleUnavailable, class_path, java, random_cluster_id
from server_process import HOST, free_port

from samsa.client.blocking import BlockingConnection
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

TOOL_JVM_OPTS = [o for o in JVM_OPTS if not o.startswith("-Xmx")] + ["-Xmx256m"]
# Levels of Kafka 4.4's defaults that Samsa does not implement (server/features.py).
CONTROLLER_FEATURES = {"share.version": 1}
CreateTopicsRequest = request_class(ApiKey.CREATE_TOPICS)


class KraftSamsaBroker(SamsaBroker):
    """`samsa serve` with process.roles=broker, its log dir formatted by `samsa format` first.
    `voters`: the quorum's controllers (controller.quorum.voters) instead of the one controller's
    bootstrap; `overrides`: more of the broker's settings."""

    def __init__(self, base_dir, controller: KafkaController, node_id: int = 2,
                 voters: dict[int, str] | None = None, overrides: dict[str, object] | None = None):
        quorum = ({"controller.quorum.bootstrap.servers": controller.bootstrap} if voters is None else
                  {"controller.quorum.voters": ",".join(f"{n}@{address}" for n, address in sorted(voters.items()))})
        super().__init__(base_dir, {
            "process.roles": "broker", "node.id": node_id, "controller.listener.names": "CONTROLLER",
            **quorum, "broker.heartbeat.interval.ms": 500,
            "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 3, **(overrides or {}),
        })
        self.node_id = node_id
        self.cluster_id = controller.cluster_id

    def prepare(self) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        cmd = [sys.executable, "-m", "samsa.server.main", "format", "-t", self.cluster_id,
               "--override", f"log.dirs={self.data_dir}", "--override", f"listeners=PLAINTEXT://{self.host}:{self.port}"]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        # (Each other log dir: "Formatting data directory ...", as kafka-storage says.)
        assert proc.stdout.startswith(f"Formatting metadata directory {self.data_dir} with metadata.version 4.4-IV2.\n")


def controller_quorum(base_dir: Path, node_ids: tuple[int, ...], properties: dict[str, object] | None = None
                      ) -> tuple[dict[int, KafkaController], dict[int, str]]:
    """A static quorum of KafkaControllers (not started: `start_together`), all formatted with one
    cluster id, and the voters (node id -> host:port) the brokers are configured with. Node ids are
    unique across controllers and brokers."""
    voters = {n: f"{HOST}:{free_port()}" for n in node_ids}
    cluster_id = random_cluster_id()
    try:
        controllers = {n: KafkaController(base_dir / f"controller{n}", node_id=n, features=CONTROLLER_FEATURES,
                                          voters=voters, cluster_id=cluster_id, port=int(voters[n].rsplit(":", 1)[1]),
                                          properties=properties) for n in node_ids}
    except OracleUnavailable as e:
        pytest.skip(str(e))
    return controllers, voters


def start_together(servers) -> None:
    """Start servers at once (a quorum's controllers elect together; JVM starts overlap)."""
    errors: list[BaseException] = []

    def start(server) -> None:
        try:
            server.start()
        except BaseException as e:  # noqa: BLE001 - raised below
            errors.append(e)

    starting = [threading.Thread(target=start, args=(server,)) for server in servers]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join()
    if errors:
        raise errors[0]


def quorum_tool(controller: KafkaController, *args: str) -> str:
    """kafka-metadata-quorum --bootstrap-controller <controller> describe ARGS."""
    try:
        cmd = [java(), *TOOL_JVM_OPTS, "-cp", class_path("kafka4"), "org.apache.kafka.tools.MetadataQuorumCommand",
               "--bootstrap-controller", controller.bootstrap, "describe", *args]
    except OracleUnavailable as e:
        pytest.skip(str(e))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def create_topic_at_controller(controller: KafkaController, name: str, partitions: int = -1,
                               replication_factor: int = -1, assignments: list[list[int]] | None = None,
                               configs: dict[str, str] | None = None) -> int:
    """CreateTopics to a controller itself (Kafka's Admin with bootstrap.controllers does the same;
    kafka-topics.sh has no --bootstrap-controller): its error code (NOT_CONTROLLER from one that is
    not active). `assignments`: each partition's replicas, the first preferred as its leader."""
    Topic = CreateTopicsRequest.CreatableTopic
    topic = Topic(name=name, num_partitions=partitions, replication_factor=replication_factor,
                  assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=replicas)
                               for i, replicas in enumerate(assignments or [])],
                  configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    with BlockingConnection.connect(controller.host, controller.port) as connection:
        response = connection.call(CreateTopicsRequest(timeout_ms=30000, topics=[topic]), 7)
    assert [t.name for t in response.topics] == [name], response
    return response.topics[0].error_code


def create_topic(controller: KafkaController, name: str, partitions: int) -> None:
    """`name` with `partitions` partitions of one replica, created by `controller`."""
    code = create_topic_at_controller(controller, name, partitions, 1)
    assert code == ErrorCode.NONE, ErrorCode(code).name


def quorum_leader(controller: KafkaController) -> int | None:
    """The quorum's leader (the active controller) as kafka-metadata-quorum describe --status shows it
    from `controller` (None: no leader)."""
    match = re.search(r"^LeaderId:\s+(\d+)", quorum_tool(controller, "--status"), re.M)
    return int(match[1]) if match and int(match[1]) >= 0 else None


def active_controller(controllers: dict[int, KafkaController], topic: str, **creation) -> int | None:
    """The running controller that takes CreateTopics of `topic` (one partition of one replica
    unless `creation` says otherwise: create_topic_at_controller's arguments), the others answering
    NOT_CONTROLLER. A way to wait for a new active controller that is also proof it serves."""
    creation = creation or {"partitions": 1, "replication_factor": 1}
    for n, controller in controllers.items():
        if controller.is_running() and create_topic_at_controller(controller, topic, **creation) in (
                ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return n
    return None
