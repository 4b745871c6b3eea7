"""Client quotas over loopback: AlterClientQuotas and DescribeClientQuotas, throttle times in
responses, muted connections (KIP-219), throttled fetches, controller mutation and connection
quotas.

The broker runs under trio's MockClock with autojump: time passes only when every task waits, so
a muted connection's wait is exact and costs no real time.
"""

from __future__ import annotations

import trio
import trio.testing

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, fetch_request, one_batch, run_broker

Alter = request_class(ApiKey.ALTER_CLIENT_QUOTAS)
Describe = request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
ApiVersions = request_class(ApiKey.API_VERSIONS)
Produce = request_class(ApiKey.PRODUCE)
CreateTopics = request_class(ApiKey.CREATE_TOPICS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)

# Short windows keep the numbers small: a rate is measured over at least one 1 s window.
SHORT_WINDOWS = {"quota_window_num": 2, "controller_quota_window_num": 2}


def run_broker_mock_clock(config, scenario) -> None:
    run_broker(config, scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def entity(**parts):
    return [Alter.EntityData(entity_type=kind.replace("_", "-"), entity_name=name) for kind, name in parts.items()]


def alter_request(entity_parts, ops: dict, validate_only: bool = False):
    return Alter(validate_only=validate_only, entries=[Alter.EntryData(
        entity=entity_parts,
        ops=[Alter.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])])


async def set_quota(client, ops: dict, **parts) -> None:
    response = await client.call(alter_request(entity(**parts), ops), 1)
    assert [e.error_code for e in response.entries] == [ErrorCode.NONE], response


def described(response) -> dict:
    assert response.error_code == ErrorCode.NONE, response
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_alter_and_describe_client_quotas_and_they_survive_a_restart(tmp_path):
    config = broker_config(tmp_path)

    async def alter(port):
        client = await Client.connect(port)
        for version in (0, 1):
            response = await client.call(Alter(validate_only=False, entries=[
                Alter.EntryData(entity=entity(user="alice", client_id=None),
                                ops=[Alter.OpData(key="producer_byte_rate", value=1024.0, remove=False)]),
                Alter.EntryData(entity=entity(client_id="app"),
                                ops=[Alter.OpData(key="bogus", value=1.0, remove=False)]),
                Alter.EntryData(entity=entity(ip="127.0.0.1"),
                                ops=[Alter.OpData(key="connection_creation_rate", value=1.5, remove=False)]),
            ]), version)
            assert [(e.error_code, e.error_message) for e in response.entries] == [
                (ErrorCode.NONE, None),
                (ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus"),
                (ErrorCode.INVALID_REQUEST, "connection_creation_rate cannot be a fractional value."),
            ]
            assert [(d.entity_type, d.entity_name) for d in response.entries[0].entity] == [
                ("user", "alice"), ("client-id", None)]
        await client.call(alter_request(entity(user="bob"), {"request_percentage": 50.0}, validate_only=True), 1)
        await set_quota(client, {"consumer_byte_rate": 2048.0, "controller_mutation_rate": 0.5}, user=None)
        await set_quota(client, {"consumer_byte_rate": None}, user=None)
        everything = await client.call(Describe(components=[], strict=False), 0)
        assert described(everything) == {
            (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0},
            (("user", None),): {"controller_mutation_rate": 0.5},
        }
        Component = Describe.ComponentData
        alice = await client.call(Describe(components=[Component(entity_type="user", match_type=0, match="alice")],
                                           strict=True), 1)
        assert described(alice) == {}
        users = await client.call(Describe(components=[Component(entity_type="user", match_type=2, match=None)],
                                           strict=True), 1)
        assert list(described(users)) == [(("user", None),)]
        bad = await client.call(Describe(components=[Component(entity_type="topic", match_type=2, match=None)],
                                         strict=False), 1)
        assert (bad.error_code, bad.error_message, bad.entries) == (
            ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type topic", None)

    async def after_restart(port):
        client = await Client.connect(port)
        assert len(described(await client.call(Describe(components=[], strict=False), 1))) == 2

    run_broker_mock_clock(config, alter)
    run_broker_mock_clock(config, after_restart)


def big_produce(topic: str, size: int, acks: int = 1):
    batch = one_batch([b"x" * size])
    return Produce(acks=acks, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])


async def limited_client(port, client_id: str, ops: dict):
    """An unlimited admin connection, a topic "t", and a connection of a client-id under `ops`."""
    admin = await Client.connect(port, "admin")
    await admin.call(create_topic_request("t"), 7)
    await set_quota(admin, ops, client_id=client_id)
    return admin, await Client.connect(port, client_id)


def test_a_produce_over_quota_is_appended_answered_at_once_and_its_connection_muted(tmp_path):
    async def scenario(port):
        admin, slow = await limited_client(port, "slow", {"producer_byte_rate": 10_000.0})
        start = trio.current_time()
        await slow.send(big_produce("t", 14_000), 9)
        await slow.send(ApiVersions(), 0)
        produced = await slow.receive()
        answered = trio.current_time() - start
        # About 14.1 KB over at least one 1 s window: (14.1 - 10) / 10 s.
        throttle_ms = produced.throttle_time_ms
        assert 400 <= throttle_ms <= 450
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert answered < throttle_ms / 1000
        # Another client is not held back meanwhile.
        assert (await admin.call(ApiVersions(), 0)).error_code == ErrorCode.NONE
        assert trio.current_time() - start < throttle_ms / 1000
        await slow.receive()  # the pipelined request is read only once the throttle time is over
        # Rounded: the mock clock's times are floats, and 91199.855 - 91199.444 comes out below 0.411.
        assert round(trio.current_time() - start, 6) >= throttle_ms / 1000
        fetched = await admin.call(fetch_request("t", 0), 12)
        assert fetched.responses[0].partitions[0].high_watermark == 1  # appended all the same

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def test_a_version_without_throttle_time_is_muted_all_the_same(tmp_path):
    async def scenario(port):
        admin = await Client.connect(port, "admin")
        await set_quota(admin, {"request_percentage": 1e-6}, client_id="old")
        old = await Client.connect(port, "old")
        start = trio.current_time()
        await old.send(ApiVersions(), 0)  # ApiVersions v0: no throttle_time_ms
        await old.send(ApiVersions(), 0)
        assert (await old.receive()).error_code == ErrorCode.NONE
        assert trio.current_time() == start
        await old.receive()
        assert round(trio.current_time() - start, 6) >= 1.0  # request time is throttled for one window at most

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def test_acks_0_produce_over_quota_mutes_without_a_response(tmp_path):
    async def scenario(port):
        _, client = await limited_client(port, "fire-and-forget", {"producer_byte_rate": 10_000.0})
        start = trio.current_time()
        await client.send_without_response(big_produce("t", 20_000, acks=0), 9)
        versions = await client.call(ApiVersions(), 0)
        assert versions.error_code == ErrorCode.NONE
        assert round(trio.current_time() - start, 6) >= 1.0

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def test_a_fetch_over_quota_gets_an_empty_response_and_is_not_counted(tmp_path):
    async def scenario(port):
        admin, reader = await limited_client(port, "reader", {"consumer_byte_rate": 5_000.0})
        for _ in range(4):
            await admin.call(big_produce("t", 2_430), 9)  # batches of 2,500 bytes
        # Bounded to what one window of the quota allows, 5 KB (two batches), though the client
        # asks for 1 MB.
        first = await reader.call(fetch_request("t", 0), 12)
        assert first.throttle_time_ms == 0
        assert len(first.responses[0].partitions[0].records) == 5_000
        # 10 KB in 1 s against 5 KB/s: nothing sent, a throttle time instead.
        second = await reader.call(fetch_request("t", 2), 12)
        assert second.throttle_time_ms == 1000 and second.responses == []
        # Once the first 5 KB are out of the windows, the next 5 KB go: the empty response
        # counted nothing.
        await trio.sleep(2)
        third = await reader.call(fetch_request("t", 2), 12)
        assert third.throttle_time_ms == 0 and len(third.responses[0].partitions[0].records) == 5_000

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def test_request_time_quota_throttles_for_at_most_one_window(tmp_path):
    async def scenario(port):
        admin = await Client.connect(port, "admin")
        await set_quota(admin, {"request_percentage": 1e-6}, user=None)
        first = await admin.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
        assert first.throttle_time_ms == 1000  # Kafka caps request-time throttling at one window
        await set_quota(admin, {"request_percentage": None}, user=None)  # applies to itself already
        later = await admin.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
        assert later.throttle_time_ms == 0

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def create_topics(version: int, *name_partitions):
    return CreateTopics(timeout_ms=5000, validate_only=False, topics=[
        CreateTopics.CreatableTopic(name=name, num_partitions=n, replication_factor=1)
        for name, n in name_partitions])


def test_controller_mutation_quota_refuses_from_the_strict_versions_and_throttles_before(tmp_path):
    async def scenario(port):
        admin = await Client.connect(port, "admin")
        await set_quota(admin, {"controller_mutation_rate": 1.0}, user=None)
        # A full bucket (2 windows of 1 s at 1/s) takes a topic of 5 partitions, leaving it at -3;
        # then it is exhausted: strict versions refuse.
        created = await admin.call(create_topics(6, ("a", 5), ("b", 1)), 6)
        assert [(t.name, t.error_code) for t in created.topics] == [
            ("a", ErrorCode.NONE), ("b", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
        assert created.topics[1].error_message == "The throttling quota has been exceeded."
        assert created.throttle_time_ms == 3000
        # Read 3 s later: the bucket is back at 0. CreateTopics v5 accepts and throttles.
        old = await admin.call(create_topics(5, ("c", 2)), 5)
        assert old.topics[0].error_code == ErrorCode.NONE and old.throttle_time_ms == 2000
        grown = await admin.call(CreatePartitions(timeout_ms=5000, validate_only=False, topics=[
            CreatePartitions.CreatePartitionsTopic(name="c", count=4, assignments=None)]), 3)
        assert grown.results[0].error_code == ErrorCode.NONE and grown.throttle_time_ms == 0
        refused = await admin.call(DeleteTopics(topics=[DeleteTopics.DeleteTopicState(name="a")], timeout_ms=5000), 6)
        assert refused.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert refused.throttle_time_ms == 2000
        deleted = await admin.call(DeleteTopics(topics=[DeleteTopics.DeleteTopicState(name="a")], timeout_ms=5000), 6)
        assert deleted.responses[0].error_code == ErrorCode.NONE

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def test_connections_over_the_ip_creation_rate_are_closed_unanswered(tmp_path):
    async def scenario(port):
        admin = await Client.connect(port, "admin")
        await set_quota(admin, {"connection_creation_rate": 1.0}, ip="127.0.0.1")
        first = await Client.connect(port)
        assert (await first.call(ApiVersions(), 0)).error_code == ErrorCode.NONE
        refused = await Client.connect(port)
        await refused.send(ApiVersions(), 0)
        try:
            answer = await refused.read_frame()
        except trio.BrokenResourceError:  # closed with the request unread: a reset
            answer = None
        assert answer is None
        assert (await admin.call(ApiVersions(), 0)).error_code == ErrorCode.NONE
        await trio.sleep(2)
        accepted = await Client.connect(port)
        assert (await accepted.call(ApiVersions(), 0)).error_code == ErrorCode.NONE

    run_broker_mock_clock(broker_config(tmp_path, **SHORT_WINDOWS), scenario)


def test_quota_apis_need_cluster_configs_permissions(tmp_path):
    config = broker_config(tmp_path, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer")

    async def scenario(port):
        client = await Client.connect(port)  # User:ANONYMOUS, no ACL: denied
        described = await client.call(Describe(components=[], strict=False), 1)
        assert (described.error_code, described.error_message, described.entries) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", None)
        altered = await client.call(alter_request(entity(user="u"), {"producer_byte_rate": 1.0}), 1)
        assert [e.error_code for e in altered.entries] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]

    run_broker_mock_clock(config, scenario)
