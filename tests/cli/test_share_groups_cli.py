"""samsa groups with share groups (KIP-932) against a real broker serving them: list by type with
states, and describe's two tables as kafka-share-groups --describe prints them (each share
partition's start offset and lag, then the members and their assignments)."""

from __future__ import annotations

import io
import sys
import uuid

import pytest
import trio
from broker_thread import BrokerThread
from group_requests import groups_config
from loopback import Client

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Alter = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
TOPIC = "shared"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker serving share groups, with topic `shared` (2 partitions: 4 records, then 1)."""
    config = groups_config(tmp_path_factory.mktemp("broker"), group_share_assignment_interval_ms=0)
    thread = BrokerThread().start(config)
    yield f"127.0.0.1:{thread.ports['PLAINTEXT']}"
    thread.stop()


@pytest.fixture(scope="module")
def topic(broker):
    from samsa.__main__ import main
    assert main(["topics", "create", TOPIC, "-p", "2", "-b", broker]) == 0
    for partition, count in ((0, 4), (1, 1)):
        stdin = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(b"x\n" * count))
        try:
            assert main(["produce", TOPIC, "-p", str(partition), "-b", broker]) == 0
        finally:
            sys.stdin = stdin
    return TOPIC


def call(broker: str, request, version: int):
    async def once():
        client = await Client.connect(int(broker.rpartition(":")[2]), client_id="share-member")
        try:
            return await client.call(request, version)
        finally:
            await client.aclose()

    return trio.run(once)


def test_describe_and_list_a_share_group(broker, samsa, topic):
    altered = call(broker, Alter(group_id="sg", topics=[Alter.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[Alter.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=1)])]),
        0)
    assert altered.error_code == ErrorCode.NONE and altered.responses[0].partitions[0].error_code == ErrorCode.NONE
    code, out, err = samsa("groups", "describe", "sg", "-b", broker)
    assert code == 0, err
    assert out == ("\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG\n"
                   "sg              shared          0          1             3\n")
    assert err == "\nShare group 'sg' has no active members.\n"

    # A member joins: the other partition's share state is initialized, at offset 0 as Kafka
    # initializes a new partition of a topic the group knows.
    member = str(uuid.uuid4())
    joined = call(broker, Heartbeat(group_id="sg", member_id=member, member_epoch=0, subscribed_topic_names=[topic]), 1)
    assert joined.error_code == ErrorCode.NONE
    for _ in range(100):
        beat = call(broker, Heartbeat(group_id="sg", member_id=member, member_epoch=joined.member_epoch), 1)
        if beat.assignment is not None and sum(len(t.partitions) for t in beat.assignment.topic_partitions) == 2:
            break
    else:
        pytest.fail("the member got no assignment of both partitions")
    code, out, err = samsa("groups", "describe", "sg", "-b", broker)
    assert code == 0 and err == ""
    assert out == ("\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG\n"
                   "sg              shared          0          1             3\n"
                   "sg              shared          1          0             1\n"
                   "\nGROUP           CONSUMER-ID                          HOST            CLIENT-ID       #PARTITIONS  "
                   "ASSIGNMENT\n"
                   f"sg              {member} /127.0.0.1      share-member    2            shared:0,1\n")

    assert samsa("groups", "list", "-b", broker)[1] == ""  # consumer groups only
    assert samsa("groups", "list", "--type", "share", "-b", broker)[1] == "sg\n"
    code, out, _ = samsa("groups", "list", "--type", "share", "--type", "consumer", "--state", "-b", broker)
    assert (code, out) == (0, "GROUP           TYPE       STATE\nsg              share      Stable\n")
    assert samsa("groups", "describe", "nosuch", "-b", broker)[0] == 1
