"""Differential checks (issue 12): the same request, encoded by Samsa's own codec, sent to Samsa and
to Apache Kafka 4.4; the decoded answers compared field by field once the values that legitimately
differ between two instances (ids, ports, epochs of the metadata log) are removed (`normalize`).

One Samsa and one Kafka for the whole module (their factories directly, not the `broker`
parametrization: each test needs both at once). Every topic is created with the same CreateTopics
request on both, under the same name. Each API is asked at the newest version both serve and at an
older one. A case where Samsa answers differently is xfail(strict=True), the difference in its reason.
"""

from __future__ import annotations

import uuid

import pytest
from compat_util import wait_for
from conftest import BrokerPool, broker_kinds
from kafka_oracle import OracleUnavailable
from server_process import HOST
from wire_client import WireClient

from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, decode_response, request_class

ApiVersions = request_class(ApiKey.API_VERSIONS)
Metadata = request_class(ApiKey.METADATA)
CreateTopics = request_class(ApiKey.CREATE_TOPICS)
DescribeConfigs = request_class(ApiKey.DESCRIBE_CONFIGS)
Produce = request_class(ApiKey.PRODUCE)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
Fetch = request_class(ApiKey.FETCH)
DescribeGroups = request_class(ApiKey.DESCRIBE_GROUPS)
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
StreamsHeartbeat = request_class(ApiKey.STREAMS_GROUP_HEARTBEAT)
StreamsDescribe = request_class(ApiKey.STREAMS_GROUP_DESCRIBE)

# Fields whose values belong to one instance, removed before comparing, and why.
INSTANCE_SPECIFIC = {
    "cluster_id": "random, chosen when the cluster's storage is formatted",
    "topic_id": "random, chosen when the topic is created",
    "port": "each broker listens on its own free port",
    "finalized_features_epoch": "the offset in Kafka's metadata log of the last feature change",
}

# ApiVersions: what one serves and the other does not, {api key: (Samsa's range, Kafka's range)}
# (None: not served). Samsa keeps versions Kafka 4.x dropped (KIP-896: Produce v0-2, Fetch v0-3, ...)
# and does not serve Kafka's KRaft-controller, delegation-token and reassignment APIs, nor
# StreamsGroupTopologyDescriptionUpdate (KIP-1331); Kafka 4.4 has newer versions of some APIs than
# Samsa serves.
API_VERSIONS_DIFFERENCES = {
    ApiKey.PRODUCE: ((0, 11), (0, 13)),
    ApiKey.FETCH: ((0, 17), (4, 18)),
    ApiKey.LIST_OFFSETS: ((0, 10), (1, 11)),
    ApiKey.METADATA: ((0, 12), (0, 13)),
    ApiKey.OFFSET_COMMIT: ((0, 9), (2, 10)),
    ApiKey.OFFSET_FETCH: ((0, 9), (1, 10)),
    ApiKey.API_VERSIONS: ((0, 4), (0, 5)),
    ApiKey.CREATE_TOPICS: ((0, 7), (2, 7)),
    ApiKey.DELETE_TOPICS: ((0, 6), (1, 6)),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ((0, 4), (2, 4)),
    ApiKey.END_TXN: ((0, 4), (0, 5)),
    ApiKey.WRITE_TXN_MARKERS: ((0, 1), (1, 2)),
    ApiKey.TXN_OFFSET_COMMIT: ((0, 4), (0, 6)),
    ApiKey.DESCRIBE_ACLS: ((0, 3), (1, 3)),
    ApiKey.CREATE_ACLS: ((0, 3), (1, 3)),
    ApiKey.DELETE_ACLS: ((0, 3), (1, 3)),
    ApiKey.DESCRIBE_CONFIGS: ((0, 4), (1, 4)),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (None, (1, 2)),
    ApiKey.DESCRIBE_LOG_DIRS: ((0, 4), (1, 5)),
    ApiKey.CREATE_DELEGATION_TOKEN: (None, (1, 3)),
    ApiKey.RENEW_DELEGATION_TOKEN: (None, (1, 2)),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (None, (1, 2)),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: (None, (1, 3)),
    ApiKey.DELETE_GROUPS: ((0, 2), (0, 3)),
    ApiKey.ELECT_LEADERS: (None, (0, 2)),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (None, (0, 1)),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (None, (0, 0)),
    ApiKey.DESCRIBE_QUORUM: (None, (0, 2)),
    ApiKey.UPDATE_FEATURES: (None, (0, 2)),
    ApiKey.DESCRIBE_CLUSTER: ((0, 1), (0, 2)),
    ApiKey.UNREGISTER_BROKER: (None, (0, 0)),
    ApiKey.LIST_TRANSACTIONS: ((0, 1), (0, 2)),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ((0, 0), (0, 1)),
    # KIP-714: Kafka lists the telemetry APIs only with a ClientTelemetryReceiver plugin configured;
    # Samsa's receiver is built in (server/metrics/client_telemetry.py).
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: ((0, 0), None),
    ApiKey.PUSH_TELEMETRY: ((0, 0), None),
    ApiKey.ADD_RAFT_VOTER: (None, (0, 1)),
    ApiKey.REMOVE_RAFT_VOTER: (None, (0, 0)),
    ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: (None, (0, 0)),
    ApiKey.UNREGISTER_CONTROLLER: (None, (0, 0)),
}

BASE_TIMESTAMP = 1_700_000_000_000


def normalize(value):
    """A response's plain form (to_dict()) without the INSTANCE_SPECIFIC fields; record fields
    (memoryviews) as bytes."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items() if k not in INSTANCE_SPECIFIC}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def differences(samsa, kafka, path: str = "") -> list[str]:
    """Every leaf where the two plain forms differ, as 'path: samsa=... kafka=...'."""
    if isinstance(samsa, dict) and isinstance(kafka, dict):
        out = []
        for k in sorted(set(samsa) | set(kafka)):
            out += differences(samsa.get(k, "<absent>"), kafka.get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(samsa, list) and isinstance(kafka, list) and by_name(samsa) and by_name(kafka):
        return differences(by_name(samsa), by_name(kafka), path)  # configs: matched by name
    if isinstance(samsa, list) and isinstance(kafka, list) and len(samsa) == len(kafka):
        return [d for i, (a, b) in enumerate(zip(samsa, kafka)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if samsa == kafka else [f"{path or '.'}: samsa={samsa!r} kafka={kafka!r}"]


def by_name(items: list) -> dict | None:
    """{name: item} for a list of dicts with unique names (configs), else None."""
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    if not items or None in names or len(set(names)) != len(names):
        return None
    return dict(zip(names, items))


def assert_same(samsa_response, kafka_response) -> None:
    diff = differences(normalize(samsa_response), normalize(kafka_response))
    assert not diff, "Samsa and Kafka answer differently:\n" + "\n".join(diff)


class Pair:
    """A Samsa and a Kafka, a WireClient to each."""

    def __init__(self, samsa, kafka) -> None:
        self.samsa = WireClient(HOST, samsa.port)
        self.kafka = WireClient(HOST, kafka.port)

    def both(self, message, version: int):
        """(Samsa's answer, Kafka's answer) to the same request."""
        return self.samsa.call(message, version), self.kafka.call(message, version)

    def create_topic(self, partitions: int = 1, prefix: str = "diff", configs: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        for answer in self.both(create_topics_request(name, partitions, configs), 7):
            assert answer.topics[0].error_code == 0, answer
        # Kafka's broker learns of the topic from the controller's log a moment after the answer.
        wait_for(lambda: self.kafka.call(metadata_request(name), 12).topics[0].error_code == 0,
                 what=f"Kafka's metadata to show {name}")
        return name


def create_topics_request(name: str, partitions: int, configs: dict[str, str] | None = None):
    return CreateTopics(topics=[CreateTopics.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[CreateTopics.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()])], timeout_ms=10000)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    if {"samsa", "kafka"} - set(broker_kinds()):
        pytest.skip("differential checks need both brokers (SAMSA_COMPAT_BROKERS)")
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in ("samsa", "kafka")]
    try:
        try:
            samsa, kafka = (pool() for pool in pools)
        except OracleUnavailable as e:
            pytest.skip(str(e))
        yield Pair(samsa, kafka)
    finally:
        for pool in pools:
            pool.close()


# -- ApiVersions -------------------------------------------------------------------------------------

def api_ranges(response) -> dict[int, tuple[int, int]]:
    return {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}


@pytest.mark.parametrize("version", [4, 2])
def test_api_versions_ranges(pair, version):
    """The APIs both serve with the same ranges, apart from the listed differences."""
    samsa, kafka = pair.both(ApiVersions(client_software_name="samsa-differential",
                                         client_software_version="1"), version)
    assert samsa.error_code == kafka.error_code == 0
    s, k = api_ranges(samsa), api_ranges(kafka)
    found = {ApiKey(key): (s.get(key), k.get(key)) for key in set(s) | set(k) if s.get(key) != k.get(key)}
    assert found == API_VERSIONS_DIFFERENCES


# ApiVersions v3+ features (KIP-584) where Samsa stays below Kafka 4.4, which supports and finalizes
# its highest level: {feature: (Samsa's highest level, finalized too), why}; 0 is not finalized.
FEATURES_SAMSA_LOWER = {
    "kraft.version": (0, "no KRaft quorum (KIP-853)"),
    "share.version": (1, "2 is share groups' dead-letter queues (KIP-1191)"),
    "transaction.version": (1, "2 is KIP-890 part 2 (EndTxn v5, an epoch bump per transaction)"),
    "eligible.leader.replicas.version": (0, "no eligible leader replicas (KIP-966)"),
}


def test_api_versions_features(pair):
    samsa, kafka = pair.both(ApiVersions(client_software_name="samsa-differential",
                                         client_software_version="1"), 4)
    for response in (samsa, kafka):
        response.api_keys = []  # compared by test_api_versions_ranges
    for name, (level, _) in FEATURES_SAMSA_LOWER.items():
        (supported,) = [f for f in samsa.supported_features if f.name == name]
        assert (supported.min_version, supported.max_version) == (0, level), name
        finalized = [(f.min_version_level, f.max_version_level) for f in samsa.finalized_features if f.name == name]
        assert finalized == ([(level, level)] if level else []), name
        for response in (samsa, kafka):
            response.supported_features = [f for f in response.supported_features if f.name != name]
            response.finalized_features = [f for f in response.finalized_features if f.name != name]
    assert_same(samsa, kafka)


# -- topics: CreateTopics, Metadata, DescribeConfigs ------------------------------------------------------

def metadata_request(name: str, version: int = 12):
    return Metadata(topics=[Metadata.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False,
                    include_topic_authorized_operations=version >= 8)  # KIP-430, v8+


@pytest.mark.parametrize("version", [12, 4])
def test_metadata_of_a_new_topic(pair, version):
    name = pair.create_topic(partitions=3)
    assert_same(*pair.both(metadata_request(name, version), version))


@pytest.mark.parametrize("version", [7, 5])
def test_create_topics_answer(pair, version):
    """From v5 CreateTopics returns the new topic's configs (KIP-525)."""
    name = f"diff-create-{uuid.uuid4().hex[:8]}"
    assert_same(*pair.both(create_topics_request(name, 2), version))


@pytest.mark.parametrize("version", [4, 1])
@pytest.mark.parametrize("synonyms", [True, False])
def test_describe_configs_of_a_new_topic(pair, version, synonyms):
    """Every config of a new topic: value, source, sensitivity, read-only flag, synonyms."""
    name = pair.create_topic()
    request = DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
        resource_type=2, resource_name=name, configuration_keys=None)], include_synonyms=synonyms)
    samsa, kafka = pair.both(request, version)
    for response in (samsa, kafka):  # the same order: Kafka sorts by name, a client does not care
        response.results[0].configs.sort(key=lambda c: c.name)
    assert_same(samsa, kafka)


# -- the same batch produced on both: Produce, ListOffsets, Fetch ----------------------------------------

def the_batch() -> bytes:
    """Three records at BASE_TIMESTAMP + 0, 10, 20 ms, keys, values and a header; no producer id."""
    return records.build_batch([records.Record(i, i * 10, b"key-%d" % i, b"value-%d" % i, [("h", b"%d" % i)])
                                for i in range(3)], base_timestamp=BASE_TIMESTAMP)


def produce_request(name: str, batch: bytes):
    return Produce(acks=-1, timeout_ms=10000, topic_data=[Produce.TopicProduceData(
        name=name, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])


@pytest.fixture(scope="module")
def produced(pair) -> str:
    """A topic holding the_batch() at offset 0 on both brokers. It keeps it: BASE_TIMESTAMP (2023) is
    past retention.ms's 7 days, and a broker's retention check (every 5 minutes) would otherwise delete
    it whenever it ran during the module, on one broker and not the other."""
    name = pair.create_topic(prefix="diff-produced", configs={"retention.ms": "-1"})
    assert_same(*pair.both(produce_request(name, the_batch()), 11))
    return name


@pytest.mark.parametrize("version", [11, 3])
def test_produce_answer(pair, version):
    name = pair.create_topic()
    assert_same(*pair.both(produce_request(name, the_batch()), version))


def list_offsets_request(name: str, timestamp: int):
    return ListOffsets(replica_id=-1, isolation_level=0, topics=[ListOffsets.ListOffsetsTopic(
        name=name, partitions=[ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])


LIST_OFFSETS_CASES = {
    "earliest": -2,
    "latest": -1,
    "between-records": BASE_TIMESTAMP + 5,
    "at-a-record": BASE_TIMESTAMP + 20,
    "after-every-record": BASE_TIMESTAMP + 100,
    "max-timestamp": -3,  # KIP-734, v7+
}


@pytest.mark.parametrize("version", [10, 4])
@pytest.mark.parametrize("case", LIST_OFFSETS_CASES)
def test_list_offsets(pair, produced, version, case):
    timestamp = LIST_OFFSETS_CASES[case]
    if timestamp == -3 and version < 7:
        pytest.skip("max-timestamp is v7+")
    assert_same(*pair.both(list_offsets_request(produced, timestamp), version))


def fetch_request(name: str, topic_id, offset: int):
    return Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(
                     topic=name, topic_id=topic_id, partitions=[Fetch.FetchPartition(
                         partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def fetch_both(pair, name: str, version: int, offset: int = 0, topic_ids=None):
    """Fetch by name (v12-) or by each broker's own topic id (v13+)."""
    if version < 13:
        return pair.both(fetch_request(name, None, offset), version)
    if topic_ids is None:
        topic_ids = [client.call(metadata_request(name), 12).topics[0].topic_id
                     for client in (pair.samsa, pair.kafka)]
    return tuple(client.call(fetch_request(name, topic_id, offset), version)
                 for client, topic_id in zip((pair.samsa, pair.kafka), topic_ids))


@pytest.mark.parametrize("version", [17, 4])
def test_fetch_the_same_batch(pair, produced, version):
    """The record batch comes back byte for byte the same (both write the producer's batch as it came,
    with the base offset and partition leader epoch set), and every other field too."""
    samsa, kafka = fetch_both(pair, produced, version)
    assert samsa.responses[0].partitions[0].records is not None
    assert_same(samsa, kafka)


# -- errors ---------------------------------------------------------------------------------------------

def unknown_topic() -> str:
    return f"diff-unknown-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("version", [12, 4])
def test_metadata_of_an_unknown_topic(pair, version):
    samsa, kafka = pair.both(metadata_request(unknown_topic(), version), version)
    assert kafka.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert_same(samsa, kafka)


@pytest.mark.parametrize("version", [10, 4])
def test_list_offsets_of_the_same_partition_twice(pair, produced, version):
    request = list_offsets_request(produced, -2)
    partition = request.topics[0].partitions[0]
    request.topics[0].partitions.append(ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=-1))
    assert partition.partition_index == 0
    assert_same(*pair.both(request, version))


@pytest.mark.parametrize("version", [6, 5])
def test_describe_an_unknown_group(pair, version):
    """From v6 (KIP-1043) Kafka answers GROUP_ID_NOT_FOUND; before, a Dead group."""
    group = f"diff-no-group-{uuid.uuid4().hex[:8]}"
    request = DescribeGroups(groups=[group], include_authorized_operations=True)
    # Kafka's group coordinator answers once __consumer_offsets exists (FindCoordinator creates it)
    # and its partition is loaded.
    find = FindCoordinator(key_type=0, coordinator_keys=[group])
    not_ready = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
    for client in (pair.samsa, pair.kafka):
        wait_for(lambda c=client: c.call(find, 4).coordinators[0].error_code == 0
                 and c.call(request, version).groups[0].error_code not in not_ready, what="the group coordinator")
    assert_same(*pair.both(request, version))


@pytest.mark.parametrize("version", [10, 4])
def test_list_offsets_of_an_unknown_topic(pair, version):
    samsa, kafka = pair.both(list_offsets_request(unknown_topic(), -1), version)
    assert kafka.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert_same(samsa, kafka)


@pytest.mark.parametrize("version", [11, 3])
def test_produce_to_an_unknown_topic(pair, version):
    samsa, kafka = pair.both(produce_request(unknown_topic(), the_batch()), version)
    assert kafka.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert_same(samsa, kafka)


def test_fetch_an_unknown_topic_by_name(pair):
    samsa, kafka = fetch_both(pair, unknown_topic(), 12)
    assert_same(samsa, kafka)


def test_fetch_an_unknown_topic_id(pair):
    unknown_id = uuid.uuid4()
    samsa, kafka = fetch_both(pair, "", 17, topic_ids=[unknown_id, unknown_id])
    assert_same(samsa, kafka)


@pytest.mark.parametrize("version", [17, 4])
def test_fetch_out_of_range_offset(pair, produced, version):
    samsa, kafka = fetch_both(pair, produced, version, offset=1000)
    assert kafka.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert_same(samsa, kafka)


@pytest.mark.parametrize("partitions", [0, -5])
@pytest.mark.parametrize("version", [7, 2])
def test_create_topics_with_invalid_partitions(pair, version, partitions):
    samsa, kafka = pair.both(create_topics_request(f"diff-invalid-{uuid.uuid4().hex[:8]}", partitions), version)
    assert kafka.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert_same(samsa, kafka)


def test_api_versions_at_an_unsupported_version(pair):
    """KIP-511: an ApiVersions request too new for the broker gets a v0 answer with
    UNSUPPORTED_VERSION and the broker's ranges."""
    answers = [client.call_bytes(ApiKey.API_VERSIONS, 127, flexible=True) for client in (pair.samsa, pair.kafka)]
    samsa, kafka = (decode_response(frame, ApiKey.API_VERSIONS, 0)[1] for frame in answers)
    assert samsa.error_code == kafka.error_code == ErrorCode.UNSUPPORTED_VERSION
    for response in (samsa, kafka):
        response.api_keys = []  # compared by test_api_versions_ranges
    assert_same(samsa, kafka)


def test_metadata_at_an_unsupported_version(pair):
    """Any other API at a version the broker does not serve: the connection is closed, no answer."""
    with WireClient(HOST, pair.samsa.sock.getpeername()[1]) as samsa, \
            WireClient(HOST, pair.kafka.sock.getpeername()[1]) as kafka:
        assert [c.call_bytes(ApiKey.METADATA, 127) for c in (samsa, kafka)] == [None, None]


# -- streams groups (KIP-1071): StreamsGroupHeartbeat, StreamsGroupDescribe ---------------------------

def wait_for_group_coordinator(pair, group: str) -> None:
    """Kafka's group coordinator answers once __consumer_offsets exists and its partition is loaded."""
    find = FindCoordinator(key_type=0, coordinator_keys=[group])
    probe = StreamsDescribe(group_ids=[group])
    not_ready = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
    for client in (pair.samsa, pair.kafka):
        wait_for(lambda c=client: c.call(find, 4).coordinators[0].error_code == 0
                 and c.call(probe, 0).groups[0].error_code not in not_ready, what="the group coordinator")


def streams_join(group: str, member_id: str, source: str, epoch: int = 0):
    """A Kafka Streams client's first heartbeat: a count by key of `source` (a repartition topic, a
    changelog topic), as KafkaStreams sends it."""
    H = StreamsHeartbeat
    topology = H.Topology(epoch=0, subtopologies=[
        H.Subtopology(subtopology_id="0", source_topics=[source], repartition_sink_topics=[f"{group}-rep"]),
        H.Subtopology(subtopology_id="1", repartition_source_topics=[H.TopicInfo(name=f"{group}-rep")],
                      state_changelog_topics=[H.TopicInfo(name=f"{group}-store-changelog", topic_configs=[
                          H.KeyValue("cleanup.policy", "compact")])])])
    return H(group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30000,
             process_id="00000000-0000-0000-0000-000000000001", topology=topology if epoch == 0 else None,
             active_tasks=[], standby_tasks=[], warmup_tasks=[], client_tags=[])


@pytest.mark.parametrize("version", [1, 0])
def test_streams_group_heartbeat_with_missing_source_topics(pair, version):
    """The first member of a new group: its assignment waits for the initial rebalance delay, and
    the topology is not configured (its source topic does not exist); then the group described."""
    group = f"diff-streams-{uuid.uuid4().hex[:8]}"
    wait_for_group_coordinator(pair, group)
    samsa, kafka = pair.both(streams_join(group, "member-1", unknown_topic()), version)
    assert [s.status_code for s in kafka.status] == [5, 1], kafka  # ASSIGNMENT_DELAYED, MISSING_SOURCE_TOPICS
    assert_same(samsa, kafka)
    # One group a request: Kafka answers groups of several coordinator partitions in no set order.
    for describe_version in (1, 0):
        for group_id in (group, f"{group}-none"):
            request = StreamsDescribe(group_ids=[group_id], include_authorized_operations=True)
            assert_same(*pair.both(request, describe_version))


def test_streams_group_heartbeat_errors(pair):
    group = f"diff-streams-{uuid.uuid4().hex[:8]}"
    wait_for_group_coordinator(pair, group)
    unknown = streams_join(group, "member-1", "in", epoch=1)
    assert_same(*pair.both(unknown, 1))  # GROUP_ID_NOT_FOUND
    no_topology = streams_join(group, "member-1", "in")
    no_topology.topology = None
    assert_same(*pair.both(no_topology, 1))  # INVALID_REQUEST
    bad = streams_join(group, "member-1", "in")
    bad.topology.subtopologies[1].state_changelog_topics[0].partitions = 3
    assert_same(*pair.both(bad, 1))  # STREAMS_INVALID_TOPOLOGY
