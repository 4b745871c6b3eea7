"""Kafka's kafka-share-groups.sh (ShareGroupCommand, from the Kafka 4.4 jars) against Samsa and against
Kafka 4.4: the same commands on both, their transcripts equal once ids, hosts and times are masked
(test_kafka_tools.py runs the tools and normalizes what they print).

The share group's offsets are set by the tool's own --reset-offsets (AlterShareGroupOffsets on an
empty group, which creates it), described (ShareGroupDescribe, DescribeShareGroupOffsets with the
lag of KIP-1226) before and after kafka-console-share-consumer took every record, reset again,
deleted by topic (DeleteShareGroupOffsets) and with the group (DeleteGroups). A member that joins
with ShareGroupHeartbeat (sent here as a share consumer sends it; it fetches nothing) makes the
group non-empty for --describe --members and for the refusals of the commands that need an empty
group. Then the three admin APIs are sent to both brokers request by request, their answers
compared field by field.

Both brokers keep `__share_group_state` at one replica (a single node).
"""

from __future__ import annotations

import uuid

import pytest
from compat_util import wait_for
from conftest import BrokerPool
from server_process import HOST
import test_kafka_tools
from test_kafka_tools import KEYED_LINES, PRODUCE_KEYED, Tools, assert_same, create_topic, run_on_both
from wire_client import WireClient

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
SINGLE_NODE_STATE_TOPIC = {"share.coordinator.state.topic.replication.factor": 1,
                           "share.coordinator.state.topic.min.isr": 1}
TOPIC = "tools-share"
kinds = test_kafka_tools.kinds  # the fixtures of the tools' tests, this module's too
log4j2 = test_kafka_tools.log4j2
GROUP = "tools-share-group"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, kinds):
    """A Samsa broker and a Kafka broker serving share groups, shared by the module's scenarios."""
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in kinds]
    try:
        yield {kind: pool(SINGLE_NODE_STATE_TOPIC) for kind, pool in zip(kinds, pools)}
    finally:
        for pool in pools:
            pool.close()


class ShareMember:
    """One member of a share group, heartbeating as KafkaShareConsumer does (ShareGroupHeartbeat v1,
    its own member id), on one connection."""

    def __init__(self, bootstrap: str, group: str, topics: list[str]) -> None:
        self.client = WireClient(HOST, int(bootstrap.rsplit(":", 1)[1]), client_id="share-member")
        self.group, self.topics = group, topics
        self.member_id = str(uuid.uuid4())
        self.epoch = 0

    def heartbeat(self):
        response = self.client.call(Heartbeat(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            subscribed_topic_names=self.topics if self.epoch == 0 else None), 1)
        assert response.error_code == ErrorCode.NONE, response
        self.epoch = response.member_epoch
        return response

    def join(self, partitions: int) -> None:
        """Heartbeat until the member holds `partitions` share partitions (the coordinator assigns
        once their state is initialized and the assignment interval allows)."""
        def assigned() -> bool:
            response = self.heartbeat()
            return response.assignment is not None and sum(
                len(tp.partitions) for tp in response.assignment.topic_partitions) == partitions

        wait_for(assigned, timeout=30, interval=0.2, what=f"an assignment of {partitions} partitions")

    def leave(self) -> None:
        self.epoch = -1
        self.heartbeat()
        self.client.close()


def share_groups_scenario(t: Tools) -> None:
    create_topic(t, TOPIC, 3)
    # 3 records on each partition
    t.run("kafka-console-producer", "--topic", TOPIC, *PRODUCE_KEYED, stdin=KEYED_LINES * 3, record=False)
    s = "kafka-share-groups"
    g = ["--group", GROUP]
    t.run(s, "--list")
    t.run(s, "--describe", *g)  # no such group
    t.run(s, "--reset-offsets", *g, "--topic", TOPIC, "--to-earliest")  # neither --dry-run nor --execute
    # a dry run prints the plan and creates nothing
    t.run(s, "--reset-offsets", *g, "--topic", TOPIC, "--to-earliest", "--dry-run")
    t.run(s, "--list")
    t.run(s, "--reset-offsets", *g, "--topic", TOPIC, "--to-earliest", "--execute")
    t.run(s, "--list")
    t.run(s, "--list", "--state")
    t.run(s, "--list", "--state", "Stable")
    t.run(s, "--describe", *g)
    t.run(s, "--describe", *g, "--offsets", "--verbose")
    t.run(s, "--describe", *g, "--state", "--verbose", errors=True)
    t.run(s, "--describe", *g, "--members", errors=True)
    # A share consumer takes every record and accepts it (implicit acknowledgement): the lag is gone.
    t.run_sorted("kafka-console-share-consumer", "--topic", TOPIC, "--group", GROUP, "--max-messages", "9",
                 "--timeout-ms", "30000")
    t.run(s, "--describe", *g, "--offsets", "--verbose")
    t.run(s, "--reset-offsets", *g, "--topic", f"{TOPIC}:1", "--to-offset", "2", "--execute")
    t.run(s, "--describe", *g)
    t.run(s, "--reset-offsets", *g, "--all-topics", "--to-latest", "--execute")
    t.run(s, "--describe", *g)
    # every record is newer than the year 2000: the first offsets
    t.run(s, "--reset-offsets", *g, "--topic", f"{TOPIC}:0", "--to-datetime", "2000-01-01T00:00:00.000", "--execute")
    t.run(s, "--describe", *g, "--offsets")
    t.run(s, "--reset-offsets", *g, "--all-topics", "--to-latest", "--dry-run")
    t.run(s, "--describe", "--all-groups", "--state")

    member = ShareMember(t.bootstrap, GROUP, [TOPIC])
    try:
        member.join(3)
        t.run(s, "--describe", *g, "--members", "--verbose")
        member.heartbeat()
        t.run(s, "--describe", *g, "--state")
        member.heartbeat()
        t.run(s, "--reset-offsets", *g, "--topic", TOPIC, "--to-earliest", "--execute", errors=True)
        member.heartbeat()
        t.run(s, "--delete-offsets", *g, "--topic", TOPIC)
        member.heartbeat()
        t.run(s, "--delete", *g)
    finally:
        member.leave()
    t.run(s, "--describe", *g, "--state", errors=True)
    t.run(s, "--delete-offsets", *g, "--topic", TOPIC, "--topic", "no-such-topic")
    t.run(s, "--describe", *g)
    t.run(s, "--delete-offsets", *g, "--topic", TOPIC)
    t.run(s, "--delete", *g)
    t.run(s, "--list")
    t.run(s, "--delete-offsets", *g, "--topic", TOPIC)


def test_kafka_share_groups(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, share_groups_scenario, tmp_path, log4j2), tmp_path)


# -- the three admin APIs, request by request, answered alike -------------------------------------

Describe = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
Alter = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
Delete = request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
OffsetCommit = request_class(ApiKey.OFFSET_COMMIT)
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
WIRE_TOPIC, WIRE_OTHER = "wire-share", "wire-share-other"


def describe(group: str, topics: dict[str, list[int]] | None = None):
    return Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None if topics is None
                            else [Describe.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                  for t, ps in topics.items()])])


def alter(group: str, topics: dict[str, dict[int, int]]):
    return Alter(group_id=group, topics=[Alter.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
        Alter.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in offsets.items()])
        for name, offsets in topics.items()])


def delete(group: str, *topics: str):
    return Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])


def commit(group: str):
    """A simple (classic) group's offset commit: the group id then names a group of another type."""
    return OffsetCommit(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommit.OffsetCommitRequestTopic(name=WIRE_TOPIC, partitions=[
            OffsetCommit.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])


# (what, request, version, wait): each answer compared; `wait`: until the group's share partitions
# are recorded as initialized (Kafka records that after it answers the alter).
WIRE_SEQUENCE = [
    ("describe all of an unknown group", describe("wire-g"), 1, False),
    # (A partition the topic lacks is left out: both brokers' persisters retry its summary for ~15 s.)
    ("describe topics of an unknown group", describe("wire-g", {WIRE_TOPIC: [0, 1], "nope": [0]}), 1, False),
    ("describe no topics", describe("wire-g", {}), 1, False),
    ("alter an empty group id", alter("", {WIRE_TOPIC: {0: 0}}), 0, False),
    ("alter creates the group", alter("wire-g", {"nope": {0: 1}, WIRE_TOPIC: {0: 1, 1: 0, 4: 2}}), 0, False),
    ("describe all", describe("wire-g"), 1, True),
    ("describe all v0", describe("wire-g"), 0, True),
    ("describe topics", describe("wire-g", {WIRE_TOPIC: [1, 0], "nope": [2]}), 1, False),
    ("alter again, another topic", alter("wire-g", {WIRE_OTHER: {0: 3}, WIRE_TOPIC: {1: 2}}), 0, False),
    ("describe both topics", describe("wire-g", {WIRE_TOPIC: [0, 1], WIRE_OTHER: [0]}), 1, False),
    ("delete an empty group id", delete("", WIRE_TOPIC), 0, False),
    ("delete of an unknown group", delete("wire-nosuch", WIRE_TOPIC), 0, False),
    ("delete a topic and an unknown one", delete("wire-g", WIRE_TOPIC, "nope"), 0, False),
    ("delete it again", delete("wire-g", WIRE_TOPIC), 0, False),
    ("describe the topic deleted", describe("wire-g", {WIRE_TOPIC: [0, 1]}), 1, False),
    ("a classic group's id", commit("wire-classic"), 9, False),
    ("alter a classic group", alter("wire-classic", {WIRE_TOPIC: {0: 0}}), 0, False),
    ("delete a classic group's", delete("wire-classic", WIRE_TOPIC), 0, False),
    ("describe a classic group's", describe("wire-classic"), 1, False),
]


def masked(response, topic_ids: dict) -> dict:
    """The answer's plain form with each topic id named by its topic (they differ between the brokers)
    and lists of topics and partitions sorted (Kafka's come from hash maps)."""
    from test_differential import normalize

    def walk(value):
        if isinstance(value, dict):
            return {k: (topic_ids.get(v, v) if k == "topic_id" else walk(v)) for k, v in value.items()}
        if isinstance(value, list):
            items = [walk(v) for v in value]
            if items and all(isinstance(i, dict) and "topic_name" in i for i in items):
                items.sort(key=lambda i: (i["topic_name"] or "", str(i.get("topic_id"))))
            elif items and all(isinstance(i, dict) and "partition_index" in i for i in items):
                items.sort(key=lambda i: i["partition_index"])
            return items
        return value

    return walk(normalize(response))


def prepared(broker) -> tuple[WireClient, dict]:
    """A client of the broker, with the topics created and records in them (3 in partition 0, 5 in 1),
    its group coordinator ready; and the topic ids' names."""
    from wire_client import produce_one

    Metadata = request_class(ApiKey.METADATA)
    CreateTopics = request_class(ApiKey.CREATE_TOPICS)
    client = WireClient(HOST, broker.port)
    for name, partitions in ((WIRE_TOPIC, 2), (WIRE_OTHER, 1)):
        created = client.call(CreateTopics(topics=[CreateTopics.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=10000), 7)
        assert created.topics[0].error_code == ErrorCode.NONE, created

    def known():
        answer = client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=WIRE_TOPIC),
                                              Metadata.MetadataRequestTopic(name=WIRE_OTHER)]), 12)
        return all(t.error_code == ErrorCode.NONE for t in answer.topics) and answer

    topic_ids = {t.topic_id: f"<{t.name}>" for t in wait_for(known, what="the topics").topics}
    for partition, count in ((0, 3), (1, 5)):
        for _ in range(count):
            assert produce_one(HOST, broker.port, WIRE_TOPIC, partition, b"x")[0] == ErrorCode.NONE
    # As a client finds the group's coordinator first: Kafka creates __consumer_offsets then, and
    # answers NOT_COORDINATOR until it has loaded its partitions.
    find = FindCoordinator(key_type=0, coordinator_keys=["wire-g", "wire-classic", "wire-nosuch", ""])
    wait_for(lambda: all(x.error_code == ErrorCode.NONE for x in client.call(find, 4).coordinators),
             timeout=30, what="the group coordinator")
    wait_for(lambda: client.call(describe("wire-g"), 1).groups[0].error_code == ErrorCode.NONE,
             timeout=30, what="the group coordinator loaded")
    return client, topic_ids


def test_share_group_offsets_apis_answer_as_kafkas(brokers):
    from test_differential import differences

    clients, topic_ids = {}, {}
    for kind, broker in brokers.items():
        clients[kind], topic_ids[kind] = prepared(broker)
    try:
        for what, request, version, wait in WIRE_SEQUENCE:
            answers = {}
            for kind, client in clients.items():
                if wait:
                    wait_for(lambda c=client: c.call(describe("wire-g"), 1).groups[0].topics, timeout=30,
                             what=f"{kind}'s share partitions initialized")
                answers[kind] = masked(client.call(request, version), topic_ids[kind])
            diff = differences(answers["samsa"], answers["kafka"])
            assert not diff, f"{what}: Samsa and Kafka answer differently:\n" + "\n".join(diff)
    finally:
        for client in clients.values():
            client.close()
