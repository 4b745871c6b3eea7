"""Kafka 4.4's newest versions of the data-plane and admin APIs through a real broker on loopback:
OffsetCommit and OffsetFetch v10 (topics by id), ListOffsets v11, ApiVersions v5, ListTransactions v2,
DescribeCluster v2, DescribeLogDirs v5, DeleteGroups v3, Metadata v13 and Fetch v18. The expected
answers are Kafka 4.4's to the same requests (compat-tests/test_differential.py compares them)."""

from __future__ import annotations

import uuid

from group_requests import FindCoordinator, groups_config
from loopback import Client, broker_config, create_topic_request, fetch_request, one_batch, produce_request, run_broker

from samsa.wire.errors import ErrorCode as E
from samsa.wire.protocol import ApiKey, request_class

ApiVersions = request_class(ApiKey.API_VERSIONS)
Metadata = request_class(ApiKey.METADATA)
OffsetCommit = request_class(ApiKey.OFFSET_COMMIT)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
ListTransactions = request_class(ApiKey.LIST_TRANSACTIONS)
InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)
DescribeCluster = request_class(ApiKey.DESCRIBE_CLUSTER)
DescribeLogDirs = request_class(ApiKey.DESCRIBE_LOG_DIRS)
DeleteGroups = request_class(ApiKey.DELETE_GROUPS)
ZERO_UUID = uuid.UUID(int=0)


async def topic_ids(client: Client, *names: str) -> list[uuid.UUID]:
    metadata = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=n) for n in names],
                                          allow_auto_topic_creation=False), 13)
    assert metadata.error_code == E.NONE
    return [t.topic_id for t in metadata.topics]


def commit_partitions(*offsets: tuple[int, int]):
    return [OffsetCommit.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="m")
            for p, o in offsets]


def partitions_of(topics) -> list[tuple[uuid.UUID, list[tuple[int, int]]]]:
    return [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in topics]


def test_offset_commit_and_fetch_by_topic_id(tmp_path):
    """v10 (KIP-848): topics by id; an unknown (or zero) id gets UNKNOWN_TOPIC_ID, a missing partition
    UNKNOWN_TOPIC_OR_PARTITION; the answer has one topic per id, the refused partitions first (Kafka's
    OffsetCommitResponse.Builder); OffsetFetch lists the refused topics after the coordinator's."""
    async def scenario(port):
        client = await Client.connect(port)
        for name in ("a", "b"):
            await client.call(create_topic_request(name, 2), 7)
        a, b = await topic_ids(client, "a", "b")
        unknown = uuid.uuid4()
        assert (await client.call(FindCoordinator(key_type=0, coordinator_keys=["g"]), 4)).coordinators[0].error_code == 0
        commit = OffsetCommit(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommit.OffsetCommitRequestTopic(topic_id=unknown, partitions=commit_partitions((0, 1), (1, 1))),
            OffsetCommit.OffsetCommitRequestTopic(topic_id=a, partitions=commit_partitions((0, 2), (5, 1))),
            OffsetCommit.OffsetCommitRequestTopic(topic_id=ZERO_UUID, partitions=commit_partitions((0, 1))),
            OffsetCommit.OffsetCommitRequestTopic(topic_id=b, partitions=commit_partitions((1, 3))),
            OffsetCommit.OffsetCommitRequestTopic(topic_id=a, partitions=commit_partitions((0, 4)))])
        committed = await client.call(commit, 10)
        assert partitions_of(committed.topics) == [
            (unknown, [(0, E.UNKNOWN_TOPIC_ID), (1, E.UNKNOWN_TOPIC_ID)]),
            (a, [(5, E.UNKNOWN_TOPIC_OR_PARTITION), (0, E.NONE), (0, E.NONE)]),
            (ZERO_UUID, [(0, E.UNKNOWN_TOPIC_ID)]),
            (b, [(1, E.NONE)])]

        def group(group_id: str, topics):
            return OffsetFetch.OffsetFetchRequestGroup(group_id=group_id, member_epoch=-1, topics=None if topics is None
                                                       else [OffsetFetch.OffsetFetchRequestTopics(topic_id=t,
                                                                                                  partition_indexes=ps)
                                                             for t, ps in topics])
        fetched = await client.call(OffsetFetch(require_stable=True, groups=[
            group("g", [(unknown, [0]), (a, [0, 5]), (ZERO_UUID, [0]), (b, [1])]), group("g", None),
            group("nobody", [(unknown, [0])])]), 10)
        asked, every, nobody = fetched.groups
        assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                for t in asked.topics] == [
            (a, [(0, 4, E.NONE), (5, -1, E.NONE)]), (b, [(1, 3, E.NONE)]),
            (unknown, [(0, -1, E.UNKNOWN_TOPIC_ID)]), (ZERO_UUID, [(0, -1, E.UNKNOWN_TOPIC_ID)])]
        assert sorted((t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions])
                      for t in every.topics) == sorted([(a, [(0, 4)]), (b, [(1, 3)])])
        assert partitions_of(nobody.topics) == [(unknown, [(0, E.UNKNOWN_TOPIC_ID)])]
        # v9 still names topics, and merges a topic asked twice as v10 does.
        by_name = await client.call(OffsetCommit(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommit.OffsetCommitRequestTopic(name=n, partitions=commit_partitions((0, 9)))
            for n in ("a", "nope", "a")]), 9)
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in by_name.topics] == [
            ("nope", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)]), ("a", [(0, E.NONE), (0, E.NONE)])]

    run_broker(groups_config(tmp_path), scenario)


def test_list_offsets_v11_and_the_versions_of_special_timestamps(tmp_path):
    """Earliest pending upload (-6, v11, KIP-1023): -1 without tiered storage; a special timestamp
    older than its version gets UNSUPPORTED_VERSION (latest tiered, -5, before v9)."""
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        await client.call(produce_request("t", one_batch([b"a", b"b"])), 9)

        async def ask(timestamp: int, version: int):
            response = await client.call(ListOffsets(replica_id=-1, topics=[ListOffsets.ListOffsetsTopic(
                name="t", partitions=[ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]),
                version)
            p = response.topics[0].partitions[0]
            return p.error_code, p.timestamp, p.offset, p.leader_epoch

        assert await ask(-6, 11) == (E.NONE, -1, -1, -1)
        assert await ask(-6, 10) == (E.UNSUPPORTED_VERSION, -1, -1, -1)
        assert await ask(-5, 9) == (E.NONE, -1, -1, -1)
        assert await ask(-5, 8) == (E.UNSUPPORTED_VERSION, -1, -1, -1)
        assert await ask(-4, 11) == (E.NONE, -1, 0, 0)
        assert await ask(-1, 11) == (E.NONE, -1, 2, 0)

    run_broker(broker_config(tmp_path), scenario)


def test_api_versions_v5_checks_the_cluster_and_node_the_client_means(tmp_path):
    """KIP-1242: both or neither of cluster id and node id (INVALID_REQUEST); another cluster's or
    node's: REBOOTSTRAP_REQUIRED, nothing listed."""
    async def scenario(port):
        client = await Client.connect(port)
        metadata = await client.call(Metadata(topics=[], allow_auto_topic_creation=False), 13)
        cluster_id, node_id = metadata.cluster_id, metadata.brokers[0].node_id

        async def ask(cluster: str | None, node: int):
            return await client.call(ApiVersions(client_software_name="t", client_software_version="1",
                                                 cluster_id=cluster, node_id=node), 5)

        for cluster, node in ((cluster_id, node_id), (None, -1)):
            answer = await ask(cluster, node)
            assert answer.error_code == E.NONE and answer.api_keys
        for cluster, node, code in ((cluster_id, node_id + 1, E.REBOOTSTRAP_REQUIRED),
                                    ("another", node_id, E.REBOOTSTRAP_REQUIRED), ("", node_id, E.REBOOTSTRAP_REQUIRED),
                                    (cluster_id, -1, E.INVALID_REQUEST), (None, node_id, E.INVALID_REQUEST)):
            answer = await ask(cluster, node)
            assert (answer.error_code, answer.api_keys, answer.finalized_features_epoch) == (code, [], -1)

    run_broker(broker_config(tmp_path), scenario)


def test_list_transactions_v2_filters_by_a_pattern_of_the_whole_id(tmp_path):
    """KIP-1152: the pattern must match the whole transactional id; empty or null lists every one;
    RE2/J's syntax, so a lookahead is INVALID_REGULAR_EXPRESSION, as Kafka answers."""
    async def scenario(port):
        client = await Client.connect(port)
        for transactional_id in ("txa-1", "txb-2"):
            await client.call(FindCoordinator(key_type=1, coordinator_keys=[transactional_id]), 4)
            init = await client.call(InitProducerId(transactional_id=transactional_id, transaction_timeout_ms=60000), 5)
            assert init.error_code == E.NONE

        async def listed(pattern: str | None, version: int = 2, states=()):
            response = await client.call(ListTransactions(state_filters=list(states), producer_id_filters=[],
                                                          duration_filter=-1, transactional_id_pattern=pattern),
                                         version)
            return (response.error_code, response.unknown_state_filters,
                    sorted(s.transactional_id for s in response.transaction_states))

        assert await listed(None) == await listed("") == (E.NONE, [], ["txa-1", "txb-2"])
        assert await listed("txa.*") == (E.NONE, [], ["txa-1"])
        assert await listed("txa") == (E.NONE, [], [])  # the whole id, not a part of it
        assert await listed("(?i)TXB.*", states=["Empty", "Nonsense"]) == (E.NONE, ["Nonsense"], ["txb-2"])
        assert await listed(None, version=1) == (E.NONE, [], ["txa-1", "txb-2"])
        for bad in ("[", "(?=t)txa-1", "a++"):
            assert await listed(bad, states=["Nonsense"]) == (E.INVALID_REGULAR_EXPRESSION, [], [])

    run_broker(broker_config(tmp_path), scenario)


def test_describe_cluster_v2_metadata_v13_fetch_v18_delete_groups_v3(tmp_path):
    async def scenario(port):
        client = await Client.connect(port)
        cluster = await client.call(DescribeCluster(include_fenced_brokers=True), 2)
        assert [(b.is_fenced, b.port) for b in cluster.brokers] == [(False, port)]
        await client.call(create_topic_request("t"), 7)
        await client.call(produce_request("t", one_batch([b"a"])), 9)
        (topic_id,) = await topic_ids(client, "t")
        request = fetch_request("t", 0)
        request.topics[0].topic_id = topic_id
        fetched = await client.call(request, 18)
        assert fetched.responses[0].topic_id == topic_id and fetched.responses[0].partitions[0].records
        request.topics[0].topic_id = uuid.uuid4()
        fetched = await client.call(request, 18)
        assert fetched.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID
        await client.call(FindCoordinator(key_type=0, coordinator_keys=["g"]), 4)
        deleted = await client.call(DeleteGroups(groups_names=["g"]), 3)
        assert [(r.group_id, r.error_code, r.error_message) for r in deleted.results] == [
            ("g", E.GROUP_ID_NOT_FOUND, None)]

    run_broker(broker_config(tmp_path), scenario)


def test_describe_log_dirs_v5_says_which_are_cordoned(tmp_path):
    """KIP-1066: cordoned.log.dirs names the cordoned dirs, "*" every one."""
    first, second = tmp_path / "one", tmp_path / "two"

    async def scenario(port):
        client = await Client.connect(port)
        described = await client.call(DescribeLogDirs(topics=None), 5)
        assert sorted((r.log_dir, r.is_cordoned) for r in described.results) == [
            (str(first.resolve()), False), (str(second.resolve()), True)]

    run_broker(broker_config(tmp_path, log_dirs=f"{first},{second}", cordoned_log_dirs=str(second)), scenario)

    async def every(port):
        client = await Client.connect(port)
        described = await client.call(DescribeLogDirs(topics=None), 5)
        assert [r.is_cordoned for r in described.results] == [True, True]

    run_broker(broker_config(tmp_path, log_dirs=f"{first},{second}", cordoned_log_dirs="*"), every)


def test_metadata_once_asked_by_id_ignores_names(tmp_path):
    """From v12, as Kafka: a topic with an id is asked for by it (its name ignored); once one is, a
    topic named without an id is left out; each id once, the unknown ones first."""
    async def scenario(port):
        client = await Client.connect(port)
        await client.call(create_topic_request("t"), 7)
        (topic_id,) = await topic_ids(client, "t")
        unknown = uuid.uuid4()

        async def ask(*topics: tuple[str | None, uuid.UUID]):
            response = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=n, topic_id=i)
                                                          for n, i in topics], allow_auto_topic_creation=False), 13)
            return [(t.name, t.topic_id, t.error_code) for t in response.topics]

        assert await ask(("t", unknown)) == [(None, unknown, E.UNKNOWN_TOPIC_ID)]
        assert await ask(("t", ZERO_UUID), (None, unknown)) == [(None, unknown, E.UNKNOWN_TOPIC_ID)]
        assert await ask((None, topic_id), ("t", topic_id), (None, unknown)) == [
            (None, unknown, E.UNKNOWN_TOPIC_ID), ("t", topic_id, E.NONE)]
        assert await ask(("t", ZERO_UUID)) == [("t", topic_id, E.NONE)]

    run_broker(broker_config(tmp_path), scenario)
