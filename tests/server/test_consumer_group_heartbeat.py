"""KIP-848 consumer groups through a real broker on loopback: ConsumerGroupHeartbeat at v0 and v1,
ConsumerGroupDescribe, a topic change reaching the group, offsets with member epochs, a restart."""

from __future__ import annotations

import uuid

import trio

from samsa.server.security.acl_admin import store_acls
from samsa.server.security.authorizer import ALLOW, DESCRIBE, GROUP, READ, TOPIC, AclBinding, PatternType
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, run_broker, run_with_broker

E = ErrorCode
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
Heartbeat = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
Describe = request_class(ApiKey.CONSUMER_GROUP_DESCRIBE)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
OffsetCommit = request_class(ApiKey.OFFSET_COMMIT)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
ApiVersions = request_class(ApiKey.API_VERSIONS)
Metadata = request_class(ApiKey.METADATA)


def join(member_id: str, topics=("topic",), **fields):
    return Heartbeat(group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
                     subscribed_topic_names=list(topics), topic_partitions=[], **fields)


def beat(member_id: str, epoch: int, owned: dict[uuid.UUID, list[int]] | None = None):
    return Heartbeat(group_id="g", member_id=member_id, member_epoch=epoch, topic_partitions=None if owned is None else [
        Heartbeat.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()])


def owned(response) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


async def topic_id(client: Client, name: str) -> uuid.UUID:
    metadata = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=name)]), 12)
    return metadata.topics[0].topic_id


def test_heartbeat_versions_describe_and_topic_growth(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        versions = await client.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
        assert served[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)
        await client.call(create_topic_request("topic", partitions=4), 7)
        tid = await topic_id(client, "topic")

        # v0: the coordinator names the member.
        a = await client.call(join("", server_assignor="range"), 0)
        assert (a.error_code, a.member_epoch, a.heartbeat_interval_ms) == (E.NONE, 1, 5000)
        assert owned(a) == {tid: [0, 1, 2, 3]}
        member_a = a.member_id
        uuid.UUID(member_a)
        # v1: the member names itself, and a regex may stand for topic names.
        b = await client.call(join("member-b", topics=(), subscribed_topic_regex="top.*"), 1)
        assert (b.error_code, b.member_id, b.member_epoch, owned(b)) == (E.NONE, "member-b", 2, {})
        bad = await client.call(join("member-c", subscribed_topic_regex="("), 1)
        assert bad.error_code == E.INVALID_REGULAR_EXPRESSION
        a = await client.call(beat(member_a, 1, {tid: [0, 1, 2, 3]}), 0)
        assert (a.member_epoch, owned(a)) == (1, {tid: [0, 1]})  # range: a keeps the lower half
        a = await client.call(beat(member_a, 1, {tid: [0, 1]}), 0)
        assert a.member_epoch == 2
        b = await client.call(beat("member-b", 2), 1)
        assert owned(b) == {tid: [2, 3]}

        described = await client.call(Describe(group_ids=["g", "unknown"], include_authorized_operations=True), 0)
        g, unknown = described.groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
            E.NONE, "Stable", 2, 2, "range")
        members = {m.member_id: m for m in g.members}
        assert members["member-b"].subscribed_topic_regex == "top.*"
        assert [(tp.topic_name, tp.partitions) for tp in members[member_a].assignment.topic_partitions] == [
            ("topic", [0, 1])]
        assert members[member_a].client_host == "/127.0.0.1" and g.authorized_operations != -2147483648
        assert (unknown.error_code, unknown.error_message) == (E.GROUP_ID_NOT_FOUND, "Group unknown not found.")
        # v1 (KIP-1099): each member's type, 1 for the consumer protocol; v0 has no such field.
        assert {m.member_type for m in g.members} == {-1}
        described = await client.call(Describe(group_ids=["g"], include_authorized_operations=False), 1)
        assert {m.member_type for m in described.groups[0].members} == {1}

        # Partitions added to the topic: the group rebalances without any member asking.
        grown = await client.call(CreatePartitions(topics=[CreatePartitions.CreatePartitionsTopic(
            name="topic", count=6, assignments=None)], timeout_ms=5000), 3)
        assert grown.results[0].error_code == E.NONE
        a = await client.call(beat(member_a, 2), 1)
        b = await client.call(beat("member-b", 2), 1)
        assert (a.member_epoch, b.member_epoch) == (3, 3)
        assert (owned(a)[tid], owned(b)[tid]) == ([0, 1, 4], [2, 3, 5])  # sticky: each keeps its own

        left = await client.call(Heartbeat(group_id="g", member_id="member-b", member_epoch=-1), 1)
        assert (left.error_code, left.member_epoch) == (E.NONE, -1)

    # Every heartbeat may assign (the assignment interval is another test's subject).
    run_broker(broker_config(tmp_path, group_consumer_assignment_interval_ms=0), scenario)


def test_offsets_with_member_epochs_and_the_group_after_a_restart(tmp_path):
    config = broker_config(tmp_path)
    state = {}

    def commit(member_id, epoch, offset):
        return OffsetCommit(group_id="g", generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
            OffsetCommit.OffsetCommitRequestTopic(name="topic", partitions=[
                OffsetCommit.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])

    async def before(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("topic", partitions=2), 7)
        a = await client.call(join("m"), 1)
        state["tid"] = tid = await topic_id(client, "topic")
        assert owned(a) == {tid: [0, 1]}
        committed = await client.call(commit("m", 1, 42), 9)
        assert committed.topics[0].partitions[0].error_code == E.NONE
        stale = await client.call(commit("m", 5, 43), 9)
        assert stale.topics[0].partitions[0].error_code == E.STALE_MEMBER_EPOCH
        old = await client.call(commit("m", 1, 43), 8)
        assert old.topics[0].partitions[0].error_code == E.UNSUPPORTED_VERSION

    async def after(port):
        client = await Client.connect(port)
        # The member is still known, at its epoch, with its partitions.
        a = await client.call(beat("m", 1, {state["tid"]: [0, 1]}), 1)
        assert (a.error_code, a.member_epoch) == (E.NONE, 1)
        fetched = await client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(
            group_id="g", member_id="m", member_epoch=1, topics=None)]), 9)
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 42
        stale = await client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(
            group_id="g", member_id="m", member_epoch=0, topics=None)]), 9)
        assert stale.groups[0].error_code == E.STALE_MEMBER_EPOCH

    run_broker(config, before)
    run_broker(config, after)


def test_consumer_protocol_disabled(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        refused = await client.call(join("m"), 1)
        assert refused.error_code == E.UNSUPPORTED_VERSION
        described = await client.call(Describe(group_ids=["g"]), 0)
        assert described.groups[0].error_code == E.UNSUPPORTED_VERSION

    run_broker(broker_config(tmp_path, group_coordinator_rebalance_protocols="classic"), scenario)


def test_group_consumer_configs_are_checked_as_kafka_checks_them():
    import pytest

    from samsa.server.config.kafka_config import ConfigError, KafkaConfig
    from samsa.server.coordinators.consumer_groups import consumer_group_config

    config = consumer_group_config(KafkaConfig({}).get)
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.assignment_interval_ms,
            config.assignors) == (45_000, 5_000, 1_000, ("uniform", "range"))
    assert consumer_group_config(KafkaConfig({"group.consumer.assignors": "range"}).get).assignors == ("range",)
    for props, name, message in [
        ({"group.consumer.heartbeat.interval.ms": "16000"}, "group.consumer.heartbeat.interval.ms",
         "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        ({"group.consumer.session.timeout.ms": "5000", "group.consumer.min.session.timeout.ms": "5000",
          "group.consumer.min.heartbeat.interval.ms": "5000"}, "group.consumer.heartbeat.interval.ms",
         "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
        ({"group.consumer.assignment.interval.ms": "16000"}, "group.consumer.assignment.interval.ms",
         "group.consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
        ({"group.consumer.min.assignment.interval.ms": "2000"}, "group.consumer.assignment.interval.ms",
         "group.consumer.assignment.interval.ms must be greater than or equal to group.consumer.min.assignment.interval.ms"),
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors", "Class sticky could not be found."),
        ({"group.coordinator.rebalance.protocols": "consumer"}, "group.coordinator.rebalance.protocols",
         "Disabling the 'classic' protocol is not supported."),
    ]:
        with pytest.raises(ConfigError) as e:
            KafkaConfig(props)
        assert (e.value.name, e.value.message) == (name, message)


def test_a_regex_resolves_to_the_topics_the_member_may_describe(tmp_path):
    """Kafka's TopicRegexResolver: every topic the regex matches, internal ones included, less those
    the heartbeat's sender may not DESCRIBE."""
    def grant(broker, *bindings: tuple[int, str, int]) -> None:
        acls = [AclBinding(kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", operation, ALLOW)
                for kind, name, operation in bindings]
        store_acls(broker.services.metadata, broker.services.authorizer, acls)

    async def scenario(broker):
        for name in ("orders", "orders-secret", "orders-v2"):
            broker.services.replica_manager.create_topic(name, 1, {}, 1)
        grant(broker, (GROUP, "g", READ), (TOPIC, "orders", DESCRIBE), (TOPIC, "orders-v2", DESCRIBE),
              (TOPIC, "__consumer_offsets", DESCRIBE))
        client = await Client.connect(broker.endpoints[0].port)
        ids = {name: await topic_id(client, name) for name in ("orders", "orders-v2")}
        member = await client.call(join("m", topics=(), subscribed_topic_regex="orders.*|__consumer_offsets"), 1)
        assert member.error_code == E.NONE
        with trio.fail_after(10):  # __consumer_offsets is created by the group's first write
            while "__consumer_offsets" not in broker.services.metadata.topics:
                await trio.sleep(0.01)
        offsets_id = broker.services.metadata.topics["__consumer_offsets"].topic_id
        # A change of topics: the regex resolves again (orders-new: no DESCRIBE either).
        broker.services.replica_manager.create_topic("orders-new", 1, {}, 1)
        assigned = set(owned(member))
        with trio.fail_after(10):
            while assigned != {*ids.values(), offsets_id}:  # a heartbeat answers an assignment that changed
                await trio.sleep(0.01)
                member = await client.call(beat("m", member.member_epoch), 1)
                assert member.error_code == E.NONE
                if member.assignment is not None:
                    assigned = set(owned(member))

    run_with_broker(broker_config(tmp_path, authorizer_class_name=AUTHORIZER, super_users="User:admin",
                                  offsets_topic_num_partitions=1), scenario)
