"""Kafka's own tools (Kafka 4.4's jars) against a mixed KRaft cluster under Apache Kafka 4.4's
controllers (issue 30): what the tools change, the Samsa broker they talk to forwards to the active
controller in an Envelope (server/kraft/forwarding.py), and every broker, Kafka's too, sees the
change in the metadata log.

A static quorum of three Kafka controllers (nodes 11-13), two Samsa brokers (nodes 2 and 3) and a
Kafka 4.4 broker (node 5), started once for the module. Controller and brokers run Kafka's StandardAuthorizer with User:ANONYMOUS a super
user: the controller authorizes the Envelope's sender (CLUSTER_ACTION on the cluster) and then the
forwarded request as the client's principal; the ACL test needs an authorizer on both sides (the
controller stores ACLs, the brokers answer DescribeAcls from the metadata log).

- kafka-topics --create, --describe (which lists the reassignments: ListPartitionReassignments is
  forwarded), --alter --partitions;
- kafka-configs: a topic's config and a broker default set through one Samsa broker, described by
  every broker;
- kafka-acls --add through one Samsa broker, --list through the other and through Kafka's, --remove;
- kafka-features describe, and a dry-run downgrade the controller validates;
- kafka-metadata-quorum --bootstrap-server describe --status (DescribeQuorum forwarded);
- kafka-leader-election (ElectLeaders forwarded) after a broker's restart left a partition led by
  its second replica;
- kafka-reassign-partitions --execute / --verify: a partition moved from a Samsa broker to Kafka's,
  then to the other Samsa broker;
- the controller authorizes the client, not the broker: a SASL user of broker 2 (not a super user)
  may create a topic only once an ACL allows that user from its address;
- last: the active controller killed, a forwarded request reaches the new one (the forwarding
  channel sends it again once the quorum names its new leader).
"""

from __future__ import annotations

import json
import re
import socket

import pytest
from compat_util import wait_for
from kafka_oracle import KafkaController, KafkaKraftBroker, OracleUnavailable, class_path, java
from kraft_nodes import KraftSamsaBroker, controller_quorum, start_together
from server_process import HOST
from test_kafka_tools import TOOLS_LOG4J2, Tools
from wire_client import fetch_once, produce_one, values_by_offset

from samsa.client.blocking import BlockingConnection
from samsa.wire.protocol import ApiKey, request_class

pytestmark = pytest.mark.slow
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}
KAFKA_BROKER = 5  # Kafka 4.4's broker beside the Samsa brokers 2 and 3
SASL_USERS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
ALICE = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
         "sasl.password": "alice-secret"}


class Cluster:
    def __init__(self, controllers: dict[int, KafkaController], brokers: dict[int, KraftSamsaBroker | KafkaKraftBroker],
                 tools_dir,
                 log4j2, sasl_bootstrap: str) -> None:
        self.controllers = controllers
        self.brokers = brokers
        self.sasl_bootstrap = sasl_bootstrap  # broker 2's SASL_PLAINTEXT listener
        self._tools_dir = tools_dir
        self._log4j2 = log4j2

    def tools(self, node: int) -> Tools:
        """Kafka's tools with --bootstrap-server the broker `node`."""
        return Tools(self.brokers[node].bootstrap, self._tools_dir, self._log4j2)

    def run(self, node: int, tool: str, *args: str, ok: bool = True) -> str:
        proc = self.tools(node).run(tool, *args, record=False)
        if ok:
            assert proc.returncode == 0, (f"{tool} {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}"
                                          f"{proc.stderr}\n{self.brokers[node].output_tail()}")
        return proc.stdout

    def wait_printed(self, node: int, tool: str, *args: str, shows: tuple[str, ...] = (),
                     hides: tuple[str, ...] = ()) -> str:
        """What the tool prints through broker `node` once it shows every one of `shows` and none of
        `hides` (the change reached that broker's metadata)."""
        printed = ""

        def done():
            nonlocal printed
            printed = self.run(node, tool, *args)
            return all(s in printed for s in shows) and not any(h in printed for h in hides)
        try:
            wait_for(done, timeout=30, what=f"{tool} {' '.join(args)} through broker {node}")
        except AssertionError as e:
            raise AssertionError(f"{e}\nit printed:\n{printed}") from None
        return printed

    def describe(self, node: int, topic: str) -> str:
        return self.run(node, "kafka-topics", "--describe", "--topic", topic)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("kraft-tools")
    try:
        java()
        class_path("kafka4")
    except OracleUnavailable as e:
        pytest.skip(str(e))
    controllers, voters = controller_quorum(base, (11, 12, 13), properties=AUTHORIZER)
    brokers: dict[int, KraftSamsaBroker | KafkaKraftBroker] = {
        node: KraftSamsaBroker(base / f"samsa-{node}", controllers[11], node_id=node, voters=voters,
                               overrides=AUTHORIZER) for node in (2, 3)}
    brokers[KAFKA_BROKER] = KafkaKraftBroker(base / f"kafka-{KAFKA_BROKER}", KAFKA_BROKER, voters,
                                             controllers[11].cluster_id, properties=AUTHORIZER)
    with socket.socket() as s:  # a SASL_PLAINTEXT listener beside broker 2's PLAINTEXT one
        s.bind(("127.0.0.1", 0))
        sasl_port = s.getsockname()[1]
    brokers[2].overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{brokers[2].port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": SASL_USERS})
    log4j2 = base / "tools-log4j2.properties"
    log4j2.write_text(TOOLS_LOG4J2)
    tools_dir = base / "tools"
    tools_dir.mkdir()
    try:
        start_together(controllers.values())  # they elect together
        for broker in brokers.values():
            broker.start()
        yield Cluster(controllers, brokers, tools_dir, log4j2, f"127.0.0.1:{sasl_port}")
    finally:
        for broker in brokers.values():
            broker.kill()
        for controller in controllers.values():
            controller.kill()


def partitions(described: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """kafka-topics --describe's partitions: index -> (leader, replicas, ISR)."""
    found = {}
    for m in re.finditer(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)", described):
        found[int(m[1])] = (int(m[2]), [int(r) for r in m[3].split(",") if r], [int(r) for r in m[4].split(",") if r])
    return found


def wait_in_sync(cluster: Cluster, node: int, topic: str, count: int) -> dict[int, tuple[int, list[int], list[int]]]:
    """The topic's partitions as broker `node` describes them, once all `count` have a leader and a full ISR."""
    def ready():
        found = partitions(cluster.describe(node, topic))
        return len(found) == count and all(leader >= 0 and sorted(isr) == sorted(replicas)
                                           for leader, replicas, isr in found.values()) and found
    return wait_for(ready, timeout=30, what=f"{topic}'s {count} partitions in sync, as broker {node} says")


def test_topics_create_describe_alter(cluster):
    created = cluster.run(2, "kafka-topics", "--create", "--topic", "tools-topics", "--partitions", "2",
                          "--replication-factor", "2")
    assert created == "Created topic tools-topics.\n"
    found = wait_in_sync(cluster, 3, "tools-topics", 2)  # the other broker sees it, and --describe answers
    assert all(len(set(replicas)) == 2 and set(replicas) <= {2, 3, KAFKA_BROKER} for _, replicas, _ in found.values()), \
        found
    wait_in_sync(cluster, KAFKA_BROKER, "tools-topics", 2)
    described = cluster.describe(3, "tools-topics")
    assert re.search(r"Topic: tools-topics\s+TopicId: \S+\s+PartitionCount: 2\s+ReplicationFactor: 2", described), \
        described
    again = cluster.tools(3).run("kafka-topics", "--create", "--topic", "tools-topics", "--partitions", "1")
    assert "Topic 'tools-topics' already exists." in again.stdout + again.stderr, again  # the controller's refusal

    assert cluster.run(3, "kafka-topics", "--alter", "--topic", "tools-topics", "--partitions", "4") == ""
    wait_in_sync(cluster, 2, "tools-topics", 4)
    refused = cluster.tools(2).run("kafka-topics", "--alter", "--topic", "tools-topics", "--partitions", "3")
    assert refused.returncode != 0
    # The controller's refusal, in its words.
    assert "The topic tools-topics currently has 4 partition(s); 3 would not be an increase." in refused.stdout

    assert cluster.run(2, "kafka-topics", "--delete", "--topic", "tools-topics") == ""
    cluster.wait_printed(3, "kafka-topics", "--list", hides=("tools-topics",))


def test_forwarded_apis_are_advertised_as_far_as_the_controller_serves_them(cluster):
    """Once a broker has forwarded, its ApiVersions narrows the forwarded APIs to the controller's:
    Kafka 4.4's controller no longer serves CreateTopics v0-1 nor DeleteTopics v0, which Samsa
    serves Kafka 3.9's clients elsewhere."""
    broker = cluster.brokers[2]
    cluster.run(2, "kafka-topics", "--create", "--topic", "tools-versions", "--partitions", "1")  # forwarded
    with BlockingConnection.connect(broker.host, broker.port) as connection:
        answer = connection.call(request_class(ApiKey.API_VERSIONS)(client_software_name="test",
                                                                    client_software_version="1"), 3)
    versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert (versions[ApiKey.CREATE_TOPICS], versions[ApiKey.DELETE_TOPICS], versions[ApiKey.DESCRIBE_QUORUM]) == (
        (2, 7), (1, 6), (0, 2))


def test_configs_are_seen_by_every_broker(cluster):
    cluster.run(2, "kafka-topics", "--create", "--topic", "tools-configs", "--partitions", "1",
                "--replication-factor", "2")
    changed = cluster.run(2, "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "tools-configs",
                          "--add-config", "retention.ms=12345,cleanup.policy=compact")
    assert changed == "Completed updating config for topic tools-configs.\n"
    for node in (2, 3, KAFKA_BROKER):
        cluster.wait_printed(node, "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name",
                             "tools-configs", shows=("retention.ms=12345", "cleanup.policy=compact"))

    changed = cluster.run(3, "kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
                          "--add-config", "log.cleaner.backoff.ms=12000")
    assert changed == "Completed updating default config for brokers in the cluster.\n"
    for node in (2, 3, KAFKA_BROKER):
        cluster.wait_printed(node, "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name",
                             str(node), "--all", shows=("log.cleaner.backoff.ms=12000",))

    refused = cluster.tools(2).run("kafka-configs", "--alter", "--entity-type", "topics",
                                   "--entity-name", "tools-configs", "--add-config", "retention.ms=soon")
    assert refused.returncode != 0 and "retention.ms" in refused.stdout + refused.stderr  # the controller validates


def test_acls_added_through_one_broker_are_listed_by_the_other(cluster):
    acl = ["--allow-principal", "User:alice", "--operation", "Read", "--topic", "tools-acl"]
    added = cluster.run(2, "kafka-acls", "--add", *acl)
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added, added
    for node in (3, KAFKA_BROKER):
        listed = cluster.wait_printed(node, "kafka-acls", "--list", "--topic", "tools-acl", shows=("User:alice",))
        assert "resourceType=TOPIC, name=tools-acl, patternType=LITERAL" in listed, listed
    cluster.run(3, "kafka-acls", "--remove", "--force", *acl)
    for node in (2, KAFKA_BROKER):
        cluster.wait_printed(node, "kafka-acls", "--list", "--topic", "tools-acl", hides=("User:alice",))


def test_features(cluster):
    described = cluster.run(2, "kafka-features", "describe")
    assert re.search(r"Feature: metadata\.version\s+SupportedMinVersion: \S+\s+SupportedMaxVersion: \S+\s+"
                     r"FinalizedVersionLevel: 4\.4-IV2", described), described
    # The tool asks any broker of the cluster: a Samsa broker supports share.version up to 1, Kafka's up to 2.
    assert re.search(r"Feature: share\.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: [12]\s+"
                     r"FinalizedVersionLevel: 1", described), described
    # UpdateFeatures is forwarded: the controller validates the downgrade without applying it.
    dry = cluster.run(3, "kafka-features", "downgrade", "--feature", "share.version=0", "--dry-run")
    assert dry == "share.version can be downgraded to 0.\n", dry
    assert "FinalizedVersionLevel: 1" in re.search(r"Feature: share\.version.*", cluster.run(
        3, "kafka-features", "describe"))[0]


def test_metadata_quorum_status_through_a_broker(cluster):
    status = cluster.run(3, "kafka-metadata-quorum", "describe", "--status")
    assert re.search(r"^LeaderId:\s+1[123]$", status, re.M), status
    voters = re.search(r"^CurrentVoters:\s+(.*)$", status, re.M)
    assert voters and {v["id"] for v in json.loads(voters[1])} == {11, 12, 13}, status
    observers = re.search(r"^CurrentObservers:\s+(.*)$", status, re.M)
    assert observers and {o["id"] for o in json.loads(observers[1])} == {2, 3, KAFKA_BROKER}, status


def test_preferred_leader_election(cluster):
    cluster.run(2, "kafka-topics", "--create", "--topic", "tools-election", "--replica-assignment", "3:2")
    assert wait_in_sync(cluster, 2, "tools-election", 1)[0][0] == 3
    elected = cluster.run(2, "kafka-leader-election", "--election-type", "preferred", "--topic", "tools-election",
                          "--partition", "0")
    assert "Valid replica already elected for partitions tools-election-0" in elected, elected

    broker = cluster.brokers[3]  # its restart leaves the partition led by its second replica, 2
    broker.stop()
    wait_for(lambda: partitions(cluster.describe(2, "tools-election"))[0][0] == 2, timeout=30,
             what="broker 2 leading tools-election-0")
    broker.start()
    wait_in_sync(cluster, 2, "tools-election", 1)
    elected = cluster.run(2, "kafka-leader-election", "--election-type", "preferred", "--topic", "tools-election",
                          "--partition", "0")
    assert "Successfully completed leader election (PREFERRED) for partitions tools-election-0" in elected, elected
    wait_for(lambda: partitions(cluster.describe(3, "tools-election"))[0][0] == 3, timeout=30,
             what="broker 3 leading tools-election-0 again")


def test_reassign_partitions(cluster, tmp_path):
    cluster.run(2, "kafka-topics", "--create", "--topic", "tools-reassign", "--replica-assignment", "2")
    wait_in_sync(cluster, 3, "tools-reassign", 1)
    written = {}
    for i in range(10):
        code, offset = produce_one(HOST, cluster.brokers[2].port, "tools-reassign", 0, f"moved-{i}".encode())
        assert code == 0, code
        written[offset] = f"moved-{i}".encode()
    for target in (KAFKA_BROKER, 3):  # Samsa 2 -> Kafka 5 -> Samsa 3: each copies the other kind's log
        plan = tmp_path / f"reassign-{target}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "tools-reassign", "partition": 0, "replicas": [target]}]}))
        executed = cluster.run(3, "kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
        assert "Successfully started partition reassignment for tools-reassign-0" in executed, executed
        wait_for(lambda plan=plan: "Reassignment of partition tools-reassign-0 is completed." in cluster.run(
            2, "kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--verify"),
            timeout=60, what=f"the reassignment to broker {target} completed")
        assert partitions(cluster.describe(2, "tools-reassign"))[0] == (target, [target], [target])
        code, data = fetch_once(HOST, cluster.brokers[target].port, "tools-reassign", 0)
        assert (code, values_by_offset(data)) == (0, written)


def test_the_controller_authorizes_the_client_not_the_broker(cluster):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    alice = AdminClient({"bootstrap.servers": cluster.sasl_bootstrap, **ALICE})

    def create() -> KafkaError | None:
        try:
            alice.create_topics([NewTopic("tools-alice", 1, 1)], request_timeout=30)["tools-alice"].result(30)
        except KafkaException as e:
            return e.args[0]
        return None

    refused = create()  # the broker (ANONYMOUS, a super user) forwards it; the controller refuses alice
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    cluster.run(3, "kafka-acls", "--add", "--allow-principal", "User:alice", "--allow-host", "127.0.0.1",
                "--operation", "Create", "--topic", "tools-alice")
    # Allowed from her address only: the Envelope carries it.
    wait_for(lambda: create() is None, timeout=30, what="alice allowed to create tools-alice")
    wait_in_sync(cluster, 3, "tools-alice", 1)


def test_forwarding_follows_the_new_active_controller(cluster):
    """Last (it kills the active controller): the quorum elects another, and a forwarded request
    reaches it: the forwarding channel's connection to the dead one fails, the quorum observer finds
    the new leader, the request is sent again (Kafka's NodeToControllerRequestThread)."""
    status = cluster.run(2, "kafka-metadata-quorum", "describe", "--status")
    first = int(re.search(r"^LeaderId:\s+(\d+)$", status, re.M)[1])
    cluster.run(2, "kafka-topics", "--create", "--topic", "tools-before-failover", "--partitions", "1")
    cluster.controllers[first].kill()
    created = cluster.run(2, "kafka-topics", "--create", "--topic", "tools-after-failover", "--partitions", "1")
    assert created == "Created topic tools-after-failover.\n"
    wait_in_sync(cluster, 3, "tools-after-failover", 1)
    status = cluster.run(3, "kafka-metadata-quorum", "describe", "--status")
    second = int(re.search(r"^LeaderId:\s+(\d+)$", status, re.M)[1])
    assert second in cluster.controllers and second != first, status
