"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets through a real broker
on loopback, with its own share coordinator and persister: start offsets set on an empty group, read
back with their lag (KIP-1226: the high watermark less the start offset and the delivered records),
deleted, a group with a member refused, and the ACLs Kafka checks (GROUP and TOPIC)."""

from __future__ import annotations

import uuid

import trio
from loopback import Client, broker_config, create_topic_request, one_batch, run_with_broker

from samsa.coordinator.share_state import SharePartitionState
from samsa.server.security.acl_admin import store_acls
from samsa.server.security.authorizer import ALLOW, DELETE, DESCRIBE, GROUP, READ, TOPIC, AclBinding, PatternType
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

E = ErrorCode
ApiVersions = request_class(ApiKey.API_VERSIONS)
Describe = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
Alter = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
Delete = request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
Produce = request_class(ApiKey.PRODUCE)
ADMIN_APIS = {ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS}
ZERO = uuid.UUID(int=0)
ME = "User:ANONYMOUS"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"



def alter(group: str, topics: dict[str, dict[int, int]]):
    return Alter(group_id=group, topics=[Alter.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
        Alter.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in offsets.items()])
        for name, offsets in topics.items()])


def describe(group: str, topics: dict[str, list[int]] | None = None):
    return Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None if topics is None
                            else [Describe.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                  for t, ps in topics.items()])])


def delete(group: str, *topics: str):
    return Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])


def offsets(group) -> dict[tuple[str, int], tuple]:
    """(topic, partition) -> (start offset, leader epoch, lag, error)."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.leader_epoch, p.lag, p.error_code)
            for t in group.topics for p in t.partitions}


def altered(response) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in response.responses for p in t.partitions}


async def produce(client: Client, topic: str, partition: int, count: int) -> None:
    request = Produce(acks=-1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(name=topic, partition_data=[
        Produce.PartitionProduceData(index=partition, records=one_batch([b"x"] * count))])])
    response = await client.call(request, 9)
    assert response.responses[0].partition_responses[0].error_code == E.NONE


async def prepared(broker, partitions: int = 2) -> Client:
    client = await Client.connect(broker.endpoints[0].port)
    assert (await client.call(create_topic_request("t", partitions), 7)).topics[0].error_code == E.NONE
    return client




def test_alter_describe_and_delete_offsets(tmp_path):
    async def scenario(broker):
        client = await prepared(broker)
        versions = await client.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert [served[k] for k in sorted(ADMIN_APIS)] == [(0, 1), (0, 0), (0, 0)]
        await produce(client, "t", 0, 5)
        await produce(client, "t", 1, 3)
        tid = broker.services.metadata.topics["t"].topic_id

        # Nothing known yet: an unknown group's share partitions have no start offset.
        described = (await client.call(describe("sg", {"t": [0], "nope": [0]}), 1)).groups[0]
        assert described.error_code == E.NONE
        assert offsets(described) == {("t", 0): (-1, 0, -1, E.NONE), ("nope", 0): (-1, 0, -1, E.NONE)}
        assert [t.topic_id for t in described.topics] == [tid, ZERO]
        assert (await client.call(describe("sg"), 1)).groups[0].topics == []

        response = await client.call(alter("sg", {"t": {0: 2, 1: 0, 5: 1}, "nope": {0: 1}}), 0)
        assert response.error_code == E.NONE
        assert altered(response) == {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 0): E.NONE,
                                     ("t", 1): E.NONE, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert [(t.topic_name, t.topic_id) for t in response.responses] == [("nope", ZERO), ("t", tid)]

        # Lag: the high watermark less the start offset (nothing delivered yet).
        all_offsets = (await client.call(describe("sg"), 1)).groups[0]
        assert {k: (v[0], v[3]) for k, v in offsets(all_offsets).items()} == {("t", 0): (2, E.NONE), ("t", 1): (0, E.NONE)}
        assert {k: v[2] for k, v in offsets(all_offsets).items()} == {("t", 0): 3, ("t", 1): 3}
        # v0 has no lag: the default -1.
        v0 = (await client.call(describe("sg", {"t": [0]}), 0)).groups[0]
        assert offsets(v0)[("t", 0)][0] == 2

        # Records delivered for good count against the lag (the share partition writes how many).
        await broker.services.persister.write_state("sg", tid, 0, SharePartitionState(
            state_epoch=1, start_offset=3, leader_epoch=0, delivery_complete_count=1))
        assert offsets((await client.call(describe("sg", {"t": [0]}), 1)).groups[0])[("t", 0)][2] == 5 - 3 - 1

        deleted = await client.call(delete("sg", "t", "nope"), 0)
        assert (deleted.error_code, [(t.topic_name, t.topic_id, t.error_code, t.error_message)
                                     for t in deleted.responses]) == (E.NONE, [
            ("t", tid, E.NONE, None),
            ("nope", ZERO, E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")])
        assert (await client.call(describe("sg"), 1)).groups[0].topics == []
        assert offsets((await client.call(describe("sg", {"t": [0]}), 1)).groups[0])[("t", 0)][0] == -1
        again = await client.call(delete("sg", "t"), 0)
        assert [(t.error_code, t.error_message) for t in again.responses] == [
            (E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]

    run_with_broker(broker_config(tmp_path), scenario)


def test_a_group_with_members_is_refused(tmp_path):
    async def scenario(broker):
        client = await prepared(broker)
        joined = await client.call(Heartbeat(group_id="sg", member_id=str(uuid.uuid4()), member_epoch=0,
                                             subscribed_topic_names=["t"]), 1)
        assert joined.error_code == E.NONE
        refused = await client.call(alter("sg", {"t": {0: 0}}), 0)
        assert (refused.error_code, refused.error_message, refused.responses) == (
            E.NON_EMPTY_GROUP, "The group is not empty.", [])
        refused = await client.call(delete("sg", "t"), 0)
        assert (refused.error_code, refused.error_message) == (E.NON_EMPTY_GROUP, "The group is not empty.")
        refused = await client.call(delete("nosuch", "t"), 0)
        assert (refused.error_code, refused.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nosuch not found.")
        # The heartbeat's share partitions get initialized (start offset -1: by share.auto.offset.reset):
        # described without a start offset, hence without a lag.
        with trio.fail_after(10):
            while not (all_offsets := (await client.call(describe("sg"), 1)).groups[0]).topics:
                await trio.sleep(0.01)
        assert offsets(all_offsets) == {("t", 0): (-1, 0, -1, E.NONE), ("t", 1): (-1, 0, -1, E.NONE)}

    run_with_broker(broker_config(tmp_path), scenario)


def test_acls_on_group_and_topics(tmp_path):
    def grant(broker, *bindings: tuple[int, str, int]) -> None:
        acls = [AclBinding(kind, name, PatternType.LITERAL, ME, "*", operation, ALLOW) for kind, name, operation in
                bindings]
        store_acls(broker.services.metadata, broker.services.authorizer, broker.services.authorizer.acls() + acls)

    async def scenario(broker):
        broker.services.replica_manager.create_topic("t", 1, {}, 1)
        broker.services.replica_manager.create_topic("secret", 1, {}, 1)
        client = await Client.connect(broker.endpoints[0].port)
        refused = await client.call(alter("sg", {"t": {0: 0}}), 0)
        assert (refused.error_code, refused.error_message) == (E.GROUP_AUTHORIZATION_FAILED,
                                                               "Group authorization failed.")
        assert (await client.call(delete("sg", "t"), 0)).error_code == E.GROUP_AUTHORIZATION_FAILED
        assert (await client.call(describe("sg"), 1)).groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED

        grant(broker, (GROUP, "sg", READ), (TOPIC, "t", READ))
        response = await client.call(alter("sg", {"secret": {0: 0}, "t": {0: 0}}), 0)
        assert altered(response) == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED, ("t", 0): E.NONE}
        assert [t.topic_name for t in response.responses] == ["secret", "t"]
        # Deleting needs DELETE on the group; describing, DESCRIBE (READ implies it).
        assert (await client.call(delete("sg", "t"), 0)).error_code == E.GROUP_AUTHORIZATION_FAILED
        described = (await client.call(describe("sg", {"secret": [0], "t": [0]}), 1)).groups[0]
        assert [t.topic_name for t in described.topics] == ["t", "secret"]
        assert offsets(described)[("secret", 0)] == (-1, 0, -1, E.TOPIC_AUTHORIZATION_FAILED)
        grant(broker, (GROUP, "sg", DELETE))
        deleted = await client.call(delete("sg", "secret", "t"), 0)
        assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
            ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("t", E.NONE)]
        grant(broker, (TOPIC, "secret", DESCRIBE))
        assert offsets((await client.call(describe("sg", {"secret": [0]}), 1)).groups[0]) == {
            ("secret", 0): (-1, 0, -1, E.NONE)}

    run_with_broker(broker_config(tmp_path, authorizer_class_name=AUTHORIZER), scenario)
