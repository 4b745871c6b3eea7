"""Kafka's kafka-share-groups.sh (ShareGroupCommand, from the Kafka 4.4 jars) against Samsa and against
Kafka 4.4: the same commands on both, their transcripts equal once ids, hosts and times are masked
(test_kafka_tools.py runs the tools and normalizes what they print).

The share group's offsets are set by the tool's own --reset-offsets (AlterShareGroupOffsets on an
empty group, which creates it), described (ShareGroupDescribe, DescribeShareGroupOffsets with the
lag of KIP-1226) before and after kafka-console-share-consumer took every record, reset again,
deleted by topic (DeleteShareGroupOffsets) and with the group (DeleteGroups). A member that joins with ShareGroupHeartbeat (sent here as a share consumer sends
it; no records are fetched) makes the group non-empty for --describe --members and for the
refusals of the commands that need an empty group.

Both brokers keep `__share_group_state` at one replica (a single node); Samsa serves share groups
with `unstable.feature.versions.enable=true`, Kafka 4.4 by default.
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
    overrides = {"samsa": {**SINGLE_NODE_STATE_TOPIC, "unstable.feature.versions.enable": "true"},
                 "kafka": SINGLE_NODE_STATE_TOPIC}
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in kinds]
    try:
        yield {kind: pool(overrides[kind]) for kind, pool in zip(kinds, pools)}
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
