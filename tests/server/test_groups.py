"""Consumer groups through a real broker on loopback sockets: FindCoordinator, the classic group
protocol at several versions, offsets, and what a restart keeps."""

from __future__ import annotations

import trio
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, create_topic_request, run_broker
from group_requests import (
    ApiVersions, DeleteGroups, DescribeGroups, E, FindCoordinator, Heartbeat, LeaveGroup, ListGroups, OffsetFetch,
    SyncGroup, commit_request, fetch_request, groups_config, join_and_sync, join_request,
)


def test_find_coordinator_every_shape_and_the_offsets_topic_it_creates(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        v0 = await client.call(FindCoordinator(key="g"), 0)
        assert (v0.error_code, v0.node_id, v0.host, v0.port) == (E.NONE, 0, "127.0.0.1", port)
        v3 = await client.call(FindCoordinator(key="tx", key_type=1), 3)
        assert (v3.error_code, v3.node_id, v3.port, v3.error_message) == (E.NONE, 0, port, "NONE")
        v4 = await client.call(FindCoordinator(key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(c.key, c.error_code, c.node_id, c.port) for c in v4.coordinators] == [
            ("a", E.NONE, 0, port), ("b", E.NONE, 0, port)]
        bad = await client.call(FindCoordinator(key_type=7, coordinator_keys=["a"]), 6)
        assert bad.coordinators[0].error_code == E.INVALID_REQUEST

    config = broker_config(tmp_path)
    run_broker(config, scenario)
    metadata = (tmp_path / "data" / "__samsa_metadata.json").read_text()
    assert '"name": "__consumer_offsets"' in metadata and '"num_partitions": 50' in metadata
    assert '"cleanup.policy": "compact"' in metadata and '"segment.bytes": "104857600"' in metadata


def test_api_versions_advertises_the_group_apis(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        response = await client.call(ApiVersions(), 0)
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert served[ApiKey.FIND_COORDINATOR] == (0, 6)
        assert served[ApiKey.JOIN_GROUP] == (0, 9)
        assert served[ApiKey.SYNC_GROUP] == (0, 5)
        assert served[ApiKey.OFFSET_COMMIT] == (0, 10)
        assert served[ApiKey.OFFSET_FETCH] == (0, 10)
        for api in (ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
                    ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE):
            assert api in served

    run_broker(broker_config(tmp_path), scenario)


def test_join_sync_heartbeat_commit_fetch_at_old_and_new_versions(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        assert (await client.call(create_topic_request("topic", 3), 4)).topics[0].error_code == E.NONE
        for join_version, commit_version, fetch_version in ((0, 2, 1), (3, 5, 4), (5, 7, 7), (9, 9, 8)):
            group = f"g{join_version}"
            member_id, generation = await join_and_sync(client, join_version, group)
            heartbeat = await client.call(Heartbeat(group_id=group, generation_id=generation, member_id=member_id),
                                          min(join_version, 4))
            assert heartbeat.error_code == E.NONE
            committed = await client.call(commit_request(group, member_id, generation, {0: 5, 1: 7}), commit_version)
            assert [p.error_code for p in committed.topics[0].partitions] == [E.NONE, E.NONE]
            stale = await client.call(commit_request(group, member_id, generation + 1, {0: 6}), commit_version)
            assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
            if fetch_version < 8:
                fetched = await client.call(fetch_request(group, [0, 1, 2]), fetch_version)
                assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
                    (0, 5, "m"), (1, 7, "m"), (2, -1, "")]
            else:
                fetched = await client.call(OffsetFetch(groups=[
                    OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=None),
                    OffsetFetch.OffsetFetchRequestGroup(group_id="nobody", topics=[
                        OffsetFetch.OffsetFetchRequestTopics(name="topic", partition_indexes=[0])])]), fetch_version)
                assert [(g.group_id, [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions])
                        for g in fetched.groups] == [(group, [(0, 5), (1, 7)]), ("nobody", [(0, -1)])]
        unknown = await client.call(commit_request("g0", "", -1, {0: 1}, topic="no-such-topic"), 8)
        assert unknown.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION

    run_broker(groups_config(tmp_path), scenario)


def test_a_second_member_rebalances_the_group_over_two_connections(tmp_path):
    async def scenario(port):
        first, second = await Client.connect(port), await Client.connect(port)
        member_a, generation = await join_and_sync(first, 5)
        joined_b = {}

        async def join_b():
            response = await second.call(join_request(), 5)
            response = await second.call(join_request(response.member_id), 5)
            joined_b["response"] = response

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join_b)
            while (await first.call(DescribeGroups(groups=["g"]), 5)).groups[0].group_state != "PreparingRebalance":
                await trio.sleep(0.01)  # until b is parked, waiting for a
            heartbeat = await first.call(Heartbeat(group_id="g", generation_id=generation, member_id=member_a), 4)
            assert heartbeat.error_code == E.REBALANCE_IN_PROGRESS
            rejoined = await first.call(join_request(member_a), 5)
        b = joined_b["response"]
        assert rejoined.generation_id == b.generation_id == generation + 1
        assert rejoined.leader == member_a and len(rejoined.members) == 2 and b.members == []
        described = await first.call(DescribeGroups(groups=["g"]), 5)
        assert described.groups[0].group_state == "CompletingRebalance"
        left = await second.call(LeaveGroup(group_id="g", members=[LeaveGroup.MemberIdentity(member_id=b.member_id)]),
                                 5)
        assert [m.error_code for m in left.members] == [E.NONE]

    run_broker(groups_config(tmp_path), scenario)


def test_restart_reloads_groups_and_offsets(tmp_path):
    state = {}

    async def before(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("topic", 3), 4)
        member_id, generation = await join_and_sync(client, 5)
        committed = await client.call(commit_request("g", member_id, generation, {0: 42, 2: 9}), 8)
        assert [p.error_code for p in committed.topics[0].partitions] == [E.NONE, E.NONE]
        simple = await client.call(commit_request("simple", "", -1, {1: 3}), 8)
        assert simple.topics[0].partitions[0].error_code == E.NONE
        gone = await client.call(commit_request("gone", "", -1, {1: 3}), 8)
        assert gone.topics[0].partitions[0].error_code == E.NONE
        deleted = await client.call(DeleteGroups(groups_names=["gone"]), 2)
        assert deleted.results[0].error_code == E.NONE
        state["member"], state["generation"] = member_id, generation

    async def after(port):
        client = await Client.connect(port)
        fetched = await client.call(fetch_request("g", None), 7)
        assert [(p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions] == [(0, 42), (2, 9)]
        simple = await client.call(fetch_request("simple", [1]), 7)
        assert simple.topics[0].partitions[0].committed_offset == 3
        gone = await client.call(fetch_request("gone", None), 7)
        assert gone.topics == []
        described = await client.call(DescribeGroups(groups=["g"]), 5)
        group = described.groups[0]
        assert (group.group_state, group.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.member_assignment) for m in group.members] == [(state["member"], b"all")]
        # The member carries on without rejoining.
        heartbeat = await client.call(Heartbeat(group_id="g", generation_id=state["generation"],
                                                member_id=state["member"]), 4)
        assert heartbeat.error_code == E.NONE
        listed = await client.call(ListGroups(states_filter=["Stable", "Empty"]), 4)
        assert sorted((g.group_id, g.group_state) for g in listed.groups) == [("g", "Stable"), ("simple", "Empty")]

    config = groups_config(tmp_path)
    run_broker(config, before)
    run_broker(config, after)


def minimal_request(api_key: int, version: int):
    """A request every version can carry, naming group "g" and topic "topic"."""
    if api_key == ApiKey.FIND_COORDINATOR:
        return FindCoordinator(coordinator_keys=["g"]) if version >= 4 else FindCoordinator(key="g")
    if api_key == ApiKey.JOIN_GROUP:
        return join_request(group=f"join-v{version}")  # a group of its own: nobody to wait for
    if api_key == ApiKey.SYNC_GROUP:
        return SyncGroup(group_id="g", generation_id=1, member_id="m")
    if api_key == ApiKey.HEARTBEAT:
        return Heartbeat(group_id="g", generation_id=1, member_id="m")
    if api_key == ApiKey.LEAVE_GROUP:
        if version >= 3:
            return LeaveGroup(group_id="g", members=[LeaveGroup.MemberIdentity(member_id="m")])
        return LeaveGroup(group_id="g", member_id="m")
    if api_key == ApiKey.OFFSET_COMMIT:
        return commit_request("g", "", -1, {0: 1})
    if api_key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="g", topics=[
                OffsetFetch.OffsetFetchRequestTopics(name="topic", partition_indexes=[0])])])
        return fetch_request("g", [0])
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return DescribeGroups(groups=["g"])
    if api_key == ApiKey.LIST_GROUPS:
        return ListGroups()
    if api_key == ApiKey.DELETE_GROUPS:
        return DeleteGroups(groups_names=["nope"])
    OffsetDelete = request_class(ApiKey.OFFSET_DELETE)
    return OffsetDelete(group_id="g", topics=[OffsetDelete.OffsetDeleteRequestTopic(
        name="topic", partitions=[OffsetDelete.OffsetDeleteRequestPartition(partition_index=0)])])


GROUP_APIS = (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
              ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
              ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE)


def test_every_version_of_every_group_api_is_answered(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("topic", 1), 4)
        versions = {k.api_key: (k.min_version, k.max_version) for k in (await client.call(ApiVersions(), 0)).api_keys}
        for api_key in GROUP_APIS:
            low, high = versions[api_key]
            for version in range(low, high + 1):
                response = await client.call(minimal_request(api_key, version), version)
                assert response is not None, (api_key, version)

    run_broker(groups_config(tmp_path), scenario)
