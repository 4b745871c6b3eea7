"""Share groups (KIP-932) through a real broker on loopback:
ShareGroupHeartbeat and ShareGroupDescribe, share partitions initialized through a persister before
they are assigned, ListGroups and DescribeGroups of a share group, DeleteGroups deleting its share
state, the ShareGroupListener, group configs (GROUP config resources) and a restart.

The persister here is an in-process one over a dict (the share coordinator's own is tested with
it): it keeps what InitializeShareGroupState and DeleteShareGroupState would keep."""

from __future__ import annotations

import uuid

import trio

from samsa.coordinator.share_state import SharePartitionState
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, run_with_broker

E = ErrorCode
Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
Describe = request_class(ApiKey.SHARE_GROUP_DESCRIBE)
ApiVersions = request_class(ApiKey.API_VERSIONS)
Metadata = request_class(ApiKey.METADATA)
ListGroups = request_class(ApiKey.LIST_GROUPS)
DescribeGroups = request_class(ApiKey.DESCRIBE_GROUPS)
DeleteGroups = request_class(ApiKey.DELETE_GROUPS)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
IncrementalAlterConfigs = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
AlterConfigs = request_class(ApiKey.ALTER_CONFIGS)
DescribeConfigs = request_class(ApiKey.DESCRIBE_CONFIGS)
ListConfigResources = request_class(ApiKey.LIST_CONFIG_RESOURCES)
GROUP = 32


class DictPersister:
    """The persister's contract (server/share/persister.py) over a dict."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], SharePartitionState] = {}
        self.initialized = trio.Event()

    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset) -> int:
        self.states[(group_id, topic_id, partition)] = SharePartitionState(state_epoch, start_offset)
        self.initialized.set()
        return E.NONE

    async def read_state(self, group_id, topic_id, partition, leader_epoch):
        state = self.states.get((group_id, topic_id, partition))
        return (E.NONE, state) if state else (E.UNKNOWN_TOPIC_OR_PARTITION, None)

    async def write_state(self, group_id, topic_id, partition, state) -> int:
        self.states[(group_id, topic_id, partition)] = state
        return E.NONE

    async def delete_state(self, group_id, topic_id, partitions):
        for p in partitions:
            self.states.pop((group_id, topic_id, p), None)
        return {p: E.NONE for p in partitions}

    async def read_summary(self, group_id, topic_id, partition, leader_epoch):
        return await self.read_state(group_id, topic_id, partition, leader_epoch)


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        self.events.append(("leave", group_id, member_id))

    def on_group_empty(self, group_id: str) -> None:
        self.events.append(("empty", group_id))


def config(tmp_path, **overrides):
    return broker_config(tmp_path, **{"group.share.assignment.interval.ms": 0, **overrides})


def beat(member_id: str, epoch: int, topics=None, group="sg"):
    return Heartbeat(group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics)


def assigned(response) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}




def test_share_group_lifecycle(tmp_path):
    persister, listener = DictPersister(), Listener()
    m1, m2 = str(uuid.uuid4()), str(uuid.uuid4())

    async def scenario(broker):
        broker.services.groups.persister = persister
        broker.services.groups.share_group_listener = listener
        client = await Client.connect(broker.endpoints[0].port)
        versions = await client.call(ApiVersions(client_software_name="t", client_software_version="1"), 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[ApiKey.SHARE_GROUP_HEARTBEAT] == served[ApiKey.SHARE_GROUP_DESCRIBE] == (1, 1)
        await client.call(create_topic_request("t", partitions=2), 7)
        metadata = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="t")]), 12)
        tid = metadata.topics[0].topic_id

        first = await client.call(beat(m1, 0, ["t"]), 1)
        assert (first.error_code, first.member_id, first.member_epoch, assigned(first)) == (E.NONE, m1, 2, {})
        with trio.fail_after(5):
            await persister.initialized.wait()
        while len(persister.states) < 2:
            await trio.sleep(0)
        assert {k: (s.state_epoch, s.start_offset) for k, s in persister.states.items()} == {
            ("sg", tid, 0): (2, -1), ("sg", tid, 1): (2, -1)}
        with trio.fail_after(5):
            while not (r := await client.call(beat(m1, first.member_epoch), 1)).assignment:
                await trio.sleep(0.01)
        assert (r.error_code, assigned(r)) == (E.NONE, {tid: [0, 1]})
        second = await client.call(beat(m2, 0, ["t"]), 1)
        r = await client.call(beat(m1, r.member_epoch), 1)
        both = await client.call(beat(m2, second.member_epoch), 1)
        assert both.error_code == E.NONE and both.assignment is None  # unchanged since its join
        assert sorted(assigned(r)[tid] + assigned(second)[tid]) == [0, 1]

        described = (await client.call(Describe(group_ids=["sg", "nosuch"], include_authorized_operations=True), 1)).groups
        assert (described[0].error_code, described[0].group_state, described[0].assignor_name) == (E.NONE, "Stable",
                                                                                                   "simple")
        assert sorted(m.member_id for m in described[0].members) == sorted([m1, m2])
        assert (described[1].error_code, described[1].error_message) == (E.GROUP_ID_NOT_FOUND, "Group nosuch not found.")
        listed = await client.call(ListGroups(states_filter=[], types_filter=["share"]), 5)
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
            ("sg", "share", "Stable", "share")]
        old = await client.call(DescribeGroups(groups=["sg"], include_authorized_operations=False), 6)
        assert old.groups[0].error_code == E.GROUP_ID_NOT_FOUND
        fetched = await client.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="sg", topics=None)],
                                                require_stable=False), 9)
        assert fetched.groups[0].error_code == E.GROUP_ID_NOT_FOUND
        deleted = await client.call(DeleteGroups(groups_names=["sg"]), 2)
        assert deleted.results[0].error_code == E.NON_EMPTY_GROUP

        for member in (m1, m2):
            left = await client.call(beat(member, -1), 1)
            assert (left.error_code, left.member_epoch) == (E.NONE, -1)
        assert listener.events == [("leave", "sg", m1), ("leave", "sg", m2), ("empty", "sg")]
        deleted = await client.call(DeleteGroups(groups_names=["sg"]), 2)
        assert deleted.results[0].error_code == E.NONE
        assert persister.states == {}
        listed = await client.call(ListGroups(states_filter=[], types_filter=[]), 5)
        assert listed.groups == []

    run_with_broker(config(tmp_path), scenario)


def test_group_configs(tmp_path):
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)

        async def alter(group, *configs, version=1):
            request = IncrementalAlterConfigs(resources=[IncrementalAlterConfigs.AlterConfigsResource(
                resource_type=GROUP, resource_name=group, configs=[IncrementalAlterConfigs.AlterableConfig(
                    name=n, config_operation=op, value=v) for n, op, v in configs])], validate_only=False)
            [result] = (await client.call(request, version)).responses
            return result.error_code, result.error_message

        assert await alter("g1", ("share.auto.offset.reset", 0, "earliest"), ("share.delivery.count.limit", 0, "7")) \
            == (E.NONE, None)
        assert await alter("g1", ("share.delivery.count.limit", 0, "70")) == (
            E.INVALID_CONFIG, "share.delivery.count.limit must be in the range 2 to 10 inclusive.")
        assert await alter("g1", ("share.delivery.count.limit", 0, "abc")) == (
            E.INVALID_CONFIG, "Invalid value abc for configuration share.delivery.count.limit: Not a number of type INT")
        assert await alter("g1", ("share.delivery.count.limit", 0, "1")) == (
            E.INVALID_CONFIG, "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2")
        assert await alter("g1", ("share.session.timeout.ms", 0, "1000")) == (
            E.INVALID_CONFIG, "share.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
        assert await alter("g1", ("bogus", 0, "1")) == (E.INVALID_CONFIG, "Unknown group config name: bogus")
        assert await alter("g1", ("share.auto.offset.reset", 0, "foo")) == (
            E.INVALID_CONFIG, "Invalid value foo for configuration share.auto.offset.reset: Invalid value `foo` for "
            "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.")
        assert await alter("g1", ("share.isolation.level", 0, "READ_COMMITTED")) == (
            E.INVALID_CONFIG, "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be "
            "one of: read_committed, read_uncommitted")
        assert await alter("g1", ("share.auto.offset.reset", 2, "x")) == (
            E.INVALID_CONFIG, "Can't APPEND to key share.auto.offset.reset because its type is not LIST.")
        assert await alter("", ("share.auto.offset.reset", 0, "earliest")) == (
            E.INVALID_REQUEST, "Default group resources are not allowed.")
        assert await alter("g2", ("consumer.session.timeout.ms", 0, "50000")) == (E.NONE, None)
        assert await alter("g3", ("share.record.lock.duration.ms", 0, "20000")) == (E.NONE, None)
        assert await alter("g3", ("share.record.lock.duration.ms", 1, None)) == (E.NONE, None)
        replaced = await client.call(AlterConfigs(resources=[AlterConfigs.AlterConfigsResource(
            resource_type=GROUP, resource_name="g4", configs=[AlterConfigs.AlterableConfig(
                name="share.auto.offset.reset", value="by_duration:PT1H")])], validate_only=False), 2)
        assert replaced.responses[0].error_code == E.NONE

        share = broker.services.group_configs.share_config("g1")
        assert (share.auto_offset_reset, share.delivery_count_limit, share.record_lock_duration_ms) == (
            "earliest", 7, 30000)
        described = await client.call(DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
            resource_type=GROUP, resource_name="g1", configuration_keys=[
                "share.auto.offset.reset", "share.delivery.count.limit", "consumer.session.timeout.ms",
                "share.isolation.level"])], include_synonyms=True, include_documentation=False), 4)
        [result] = described.results
        assert result.error_code == E.NONE
        assert [(e.name, e.value, e.config_source, e.config_type, [(s.name, s.value, s.source) for s in e.synonyms])
                for e in result.configs] == [
            ("consumer.session.timeout.ms", "45000", 5, 3, [("group.consumer.session.timeout.ms", "45000", 5)]),
            ("share.auto.offset.reset", "earliest", 8, 2, [("share.auto.offset.reset", "earliest", 8),
                                                           ("share.auto.offset.reset", "latest", 5)]),
            ("share.delivery.count.limit", "7", 8, 3, [("share.delivery.count.limit", "7", 8),
                                                       ("group.share.delivery.count.limit", "5", 5)]),
            ("share.isolation.level", "read_uncommitted", 5, 2, [("share.isolation.level", "read_uncommitted", 5)])]
        everything = await client.call(DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
            resource_type=GROUP, resource_name="none", configuration_keys=None)], include_synonyms=False,
            include_documentation=True), 4)
        assert len(everything.results[0].configs) == 21  # the internal configs only when set
        listed = await client.call(ListConfigResources(resource_types=[GROUP]), 1)
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [
            ("g1", GROUP), ("g2", GROUP), ("g4", GROUP)]

    run_with_broker(config(tmp_path), scenario)
    # Kept in the metadata image across a restart.

    async def after_restart(broker):
        assert broker.services.group_configs.share_config("g1").delivery_count_limit == 7
        assert broker.services.group_configs.group_ids() == ["g1", "g2", "g4"]

    run_with_broker(config(tmp_path), after_restart)
