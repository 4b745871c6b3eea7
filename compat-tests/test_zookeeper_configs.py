"""The metadata brokers of a ZooKeeper cluster share through ZooKeeper, between a Kafka 3.9 broker
and a Samsa broker in one chroot: a topic's config overrides, client quotas, SCRAM credentials and
ACLs set through either broker are answered the same by both (DescribeConfigs, DescribeClientQuotas,
DescribeUserScramCredentials, DescribeAcls), the znodes Samsa writes are byte for byte the ones
Kafka writes for the same change, and a SCRAM user created through Kafka signs in to Samsa. Client
metrics (KIP-714), which need KRaft, are refused by both alike."""

from __future__ import annotations

import hashlib

import pytest
from compat_util import wait_for
from server_process import HOST, free_port
from test_zookeeper_cluster import zk_reader
from wire_client import WireClient

from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

pytest.importorskip("kazoo.client")

CreateTopics = request_class(ApiKey.CREATE_TOPICS)
Metadata = request_class(ApiKey.METADATA)
DescribeConfigs = request_class(ApiKey.DESCRIBE_CONFIGS)
IncrementalAlterConfigs = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
AlterClientQuotas = request_class(ApiKey.ALTER_CLIENT_QUOTAS)
DescribeClientQuotas = request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
AlterScram = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
DescribeScram = request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
CreateAcls = request_class(ApiKey.CREATE_ACLS)
DescribeAcls = request_class(ApiKey.DESCRIBE_ACLS)
DeleteAcls = request_class(ApiKey.DELETE_ACLS)

CHROOT = "/kafka/configs"
T = 30
TOPIC_RESOURCE, BROKER_RESOURCE, SET, DELETE = 2, 4, 0, 1
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
# One salt and password for every user: the credentials both brokers store are then the same.
SCRAM_SHA_256, ITERATIONS, SALT, PASSWORD = 1, 4096, b"a fixed salt", b"secret"
ACL_TOPIC, ACL_GROUP, LITERAL, PREFIXED, ANY, READ, DESCRIBE, ALLOW = 2, 3, 3, 4, 1, 3, 8, 3
SECURED = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


def call(port: int, request, version: int):
    with WireClient(HOST, port) as client:
        return client.call(request, version)


def described(port: int, resource_type: int, name: str, sources=(DYNAMIC_TOPIC_CONFIG,)) -> dict[str, tuple]:
    (result,) = call(port, DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)]), 4).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs if c.config_source in sources}


def topic_overrides(port: int, topic: str) -> dict[str, str]:
    return {name: value for name, (value, _) in described(port, TOPIC_RESOURCE, topic).items()}


def alter_broker_configs(port: int, changes: dict[str, dict[str, str]]) -> None:
    """IncrementalAlterConfigs SET on BROKER resources: resource name -> {config: value}."""
    response = call(port, IncrementalAlterConfigs(resources=[IncrementalAlterConfigs.AlterConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=name, configs=[
            IncrementalAlterConfigs.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items()])
        for name, configs in changes.items()], validate_only=False), 1)
    assert [(r.error_code, r.error_message) for r in response.responses] == [(ErrorCode.NONE, None)] * len(changes)


def quotas(port: int) -> dict:
    response = call(port, DescribeClientQuotas(components=[], strict=False), 1)
    assert response.error_code == ErrorCode.NONE, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def scram_users(port: int) -> dict:
    response = call(port, DescribeScram(users=None), 0)
    assert response.error_code == ErrorCode.NONE, response.error_message
    return {r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in response.results}


def acls(port: int) -> set:
    response = call(port, DescribeAcls(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY,
                                       principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY), 3)
    assert response.error_code == ErrorCode.NONE, response.error_message
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


def answers(port: int, topic: str) -> tuple:
    return topic_overrides(port, topic), quotas(port), scram_users(port), acls(port)


def set_everything(port: int, topic: str, user: str, client_id: str, group: str) -> None:
    """A topic override, quotas (a user's, a client id's, a user's client id's), a SCRAM credential for
    the user (beside its quota in one znode), literal and prefixed ACLs."""
    (result,) = call(port, IncrementalAlterConfigs(resources=[IncrementalAlterConfigs.AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[
            IncrementalAlterConfigs.AlterableConfig(name="retention.ms", config_operation=SET, value="123456"),
            IncrementalAlterConfigs.AlterableConfig(name="cleanup.policy", config_operation=SET, value="compact")])],
        validate_only=False), 1).responses
    assert result.error_code == ErrorCode.NONE, result.error_message
    entry, entity, op = AlterClientQuotas.EntryData, AlterClientQuotas.EntityData, AlterClientQuotas.OpData
    response = call(port, AlterClientQuotas(entries=[
        entry(entity=[entity(entity_type="user", entity_name=user)],
              ops=[op(key="producer_byte_rate", value=1024.0, remove=False)]),
        entry(entity=[entity(entity_type="client-id", entity_name=client_id)],
              ops=[op(key="request_percentage", value=12.5, remove=False),
                   op(key="consumer_byte_rate", value=20_000_000.0, remove=False)]),
        entry(entity=[entity(entity_type="user", entity_name=user), entity(entity_type="client-id", entity_name=client_id)],
              ops=[op(key="controller_mutation_rate", value=10.0, remove=False)]),
    ], validate_only=False), 1)
    assert [e.error_code for e in response.entries] == [ErrorCode.NONE] * 3
    response = call(port, AlterScram(deletions=[], upsertions=[AlterScram.ScramCredentialUpsertion(
        name=user, mechanism=SCRAM_SHA_256, iterations=ITERATIONS, salt=SALT,
        salted_password=hashlib.pbkdf2_hmac("sha256", PASSWORD, SALT, ITERATIONS))]), 0)
    assert [r.error_code for r in response.results] == [ErrorCode.NONE], response.results
    creation = CreateAcls.AclCreation
    response = call(port, CreateAcls(creations=[
        creation(resource_type=ACL_TOPIC, resource_name=topic, resource_pattern_type=LITERAL,
                 principal=f"User:{user}", host="*", operation=READ, permission_type=ALLOW),
        creation(resource_type=ACL_TOPIC, resource_name=topic, resource_pattern_type=LITERAL,
                 principal=f"User:{user}", host="*", operation=DESCRIBE, permission_type=ALLOW),
        creation(resource_type=ACL_GROUP, resource_name=group, resource_pattern_type=PREFIXED,
                 principal=f"User:{user}", host="127.0.0.1", operation=READ, permission_type=ALLOW),
    ]), 3)
    assert [r.error_code for r in response.results] == [ErrorCode.NONE] * 3, response.results


def create_topic(port: int, topic: str) -> None:
    response = call(port, CreateTopics(topics=[CreateTopics.CreatableTopic(
        name=topic, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[CreateTopics.CreatableReplicaAssignment(partition_index=0, broker_ids=[0, 1])])],
        timeout_ms=T * 1000), 7)
    assert response.topics[0].error_code == ErrorCode.NONE, response.topics[0].error_message


def znodes(client, topic: str, user: str, client_id: str, group: str) -> list[bytes]:
    """What the change of set_everything left in ZooKeeper, in its order."""
    paths = [zk_data.config_entity_path("topics", topic), zk_data.config_entity_path("users", user),
             zk_data.config_entity_path("clients", client_id),
             zk_data.config_entity_path("users", f"{user}/clients/{client_id}"),
             zk_data.acl_resource_path("LITERAL", "Topic", topic), zk_data.acl_resource_path("PREFIXED", "Group", group)]
    return [client.get(path)[0] for path in paths]


def notifications(client, path: str) -> list[bytes]:
    return [client.get(f"{path}/{child}")[0] for child in sorted(client.get_children(path))]


def test_kafka_and_samsa_share_configs_quotas_scram_users_and_acls(kafka39_factory, topic_name):
    from confluent_kafka.admin import AdminClient

    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT
    kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0, **SECURED})
    samsa = kafka39_factory(start=False)
    sasl_port = free_port()
    samsa.overrides.update({
        "zookeeper.connect": connect, "broker.id": 1, **SECURED,
        "listeners": f"PLAINTEXT://{HOST}:{samsa.port},SASL_PLAINTEXT://{HOST}:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    samsa.start()
    by_kafka, by_samsa = f"{topic_name}-k", f"{topic_name}-s"
    create_topic(kafka.port, by_kafka)
    create_topic(kafka.port, by_samsa)
    wait_for(lambda: {by_kafka, by_samsa} <= {t.name for t in call(samsa.port, Metadata(
        topics=None, allow_auto_topic_creation=False), 12).topics}, T, what="both topics in Samsa's metadata")

    # Set through Kafka: Samsa sees it, by the notifications.
    set_everything(kafka.port, by_kafka, "alice", "app-k", "readers-k")
    expected = answers(kafka.port, by_kafka)
    assert expected == (
        {"retention.ms": "123456", "cleanup.policy": "compact"},
        {(("user", "alice"),): {"producer_byte_rate": 1024.0},
         (("client-id", "app-k"),): {"request_percentage": 12.5, "consumer_byte_rate": 20_000_000.0},
         (("client-id", "app-k"), ("user", "alice")): {"controller_mutation_rate": 10.0}},
        {"alice": (ErrorCode.NONE, [(SCRAM_SHA_256, ITERATIONS)])},
        {(ACL_TOPIC, by_kafka, LITERAL, "User:alice", "*", READ, ALLOW),
         (ACL_TOPIC, by_kafka, LITERAL, "User:alice", "*", DESCRIBE, ALLOW),
         (ACL_GROUP, "readers-k", PREFIXED, "User:alice", "127.0.0.1", READ, ALLOW)})
    wait_for(lambda: answers(samsa.port, by_kafka) == expected, T, what="Samsa to answer as Kafka")
    wait_for(lambda: "Processing override for entityPath: topics/" + by_kafka in samsa.output(), T,
             what="the topic's override applied to Samsa's log")

    # A SCRAM user made through Kafka signs in to Samsa.
    admin = AdminClient({"bootstrap.servers": f"{HOST}:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                         "sasl.password": PASSWORD.decode()})
    assert by_kafka in admin.list_topics(timeout=T).topics  # alice may describe it

    # Set through Samsa: Kafka sees it, and the znodes are the ones Kafka wrote for the same change.
    set_everything(samsa.port, by_samsa, "bob", "app-s", "readers-s")
    expected = answers(samsa.port, by_samsa)
    wait_for(lambda: answers(kafka.port, by_samsa) == expected, T, what="Kafka to answer as Samsa")
    assert answers(kafka.port, by_kafka) == answers(samsa.port, by_kafka)
    with zk_reader(connect) as client:
        kafkas = znodes(client, by_kafka, "alice", "app-k", "readers-k")
        samsas = znodes(client, by_samsa, "bob", "app-s", "readers-s")
        assert [z.replace(b"alice", b"bob").replace(b"app-k", b"app-s") for z in kafkas[1:]] == samsas[1:]
        assert kafkas[0] == samsas[0]
        changes = notifications(client, zk_data.CONFIG_CHANGES)
        assert changes[-4:] == [zk_data.encode_config_change(p) for p in (
            "users/bob", "clients/app-s", "users/bob/clients/app-s", "users/bob")]
        assert zk_data.encode_config_change(f"topics/{by_samsa}") in changes
        assert notifications(client, zk_data.LITERAL_ACL_CHANGES)[-1] == f"TOPIC:{by_samsa}".encode()
        assert notifications(client, zk_data.EXTENDED_ACL_CHANGES)[-1] == zk_data.encode_extended_acl_change(
            "GROUP", "readers-s", "PREFIXED")

    # Deleted through Samsa: the ACL znode and an emptied quota entity go, as Kafka removes them.
    response = call(samsa.port, DeleteAcls(filters=[DeleteAcls.DeleteAclsFilter(
        resource_type_filter=ACL_GROUP, resource_name_filter="readers-s", pattern_type_filter=PREFIXED,
        principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)]), 3)
    assert [len(r.matching_acls) for r in response.filter_results] == [1]
    entry, entity, op = AlterClientQuotas.EntryData, AlterClientQuotas.EntityData, AlterClientQuotas.OpData
    response = call(samsa.port, AlterClientQuotas(entries=[entry(
        entity=[entity(entity_type="user", entity_name="bob"), entity(entity_type="client-id", entity_name="app-s")],
        ops=[op(key="controller_mutation_rate", value=0.0, remove=True)])], validate_only=False), 1)
    assert response.entries[0].error_code == ErrorCode.NONE
    with zk_reader(connect) as client:
        assert not client.exists(zk_data.acl_resource_path("PREFIXED", "Group", "readers-s"))
        assert not client.exists(zk_data.config_entity_path("users", "bob/clients"))
        assert client.exists(zk_data.config_entity_path("users", "bob"))
    wait_for(lambda: answers(kafka.port, by_samsa) == answers(samsa.port, by_samsa), T, what="the same answers")

    # Dynamic broker configs: the cluster default set through Kafka reaches Samsa; a broker's own
    # set through Samsa is stored as Kafka stores its own.
    alter_broker_configs(kafka.port, {"": {"log.retention.bytes": "1073741824"}, "0": {"message.max.bytes": "2000000"}})
    alter_broker_configs(samsa.port, {"1": {"message.max.bytes": "2000000"}})
    defaults = described(kafka.port, BROKER_RESOURCE, "", (DYNAMIC_DEFAULT_BROKER_CONFIG,))
    assert defaults == {"log.retention.bytes": ("1073741824", DYNAMIC_DEFAULT_BROKER_CONFIG)}
    wait_for(lambda: described(samsa.port, BROKER_RESOURCE, "", (DYNAMIC_DEFAULT_BROKER_CONFIG,)) == defaults, T,
             what="Samsa to take the cluster default")
    own = described(samsa.port, BROKER_RESOURCE, "1", (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG))
    assert own == {"message.max.bytes": ("2000000", DYNAMIC_BROKER_CONFIG), **defaults}
    with zk_reader(connect) as client:
        assert client.get(zk_data.config_entity_path("brokers", "1"))[0] == client.get(
            zk_data.config_entity_path("brokers", "0"))[0]
        assert notifications(client, zk_data.CONFIG_CHANGES)[-1] == zk_data.encode_config_change("brokers/1")



CLIENT_METRICS_RESOURCE = 16
GetTelemetrySubscriptions = request_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
AlterConfigs = request_class(ApiKey.ALTER_CONFIGS)
ApiVersions = request_class(ApiKey.API_VERSIONS)


def client_metrics_answers(port: int) -> tuple:
    """What a broker of a ZooKeeper cluster says to client-metrics resources and telemetry."""
    def describe(name):
        (result,) = call(port, DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
            resource_type=CLIENT_METRICS_RESOURCE, resource_name=name, configuration_keys=None)]), 4).results
        return result.error_code, result.error_message

    (incremental,) = call(port, IncrementalAlterConfigs(resources=[IncrementalAlterConfigs.AlterConfigsResource(
        resource_type=CLIENT_METRICS_RESOURCE, resource_name="subscription", configs=[
            IncrementalAlterConfigs.AlterableConfig(name="metrics", config_operation=SET, value="*")])]), 1).responses
    (legacy,) = call(port, AlterConfigs(resources=[AlterConfigs.AlterConfigsResource(
        resource_type=CLIENT_METRICS_RESOURCE, resource_name="subscription", configs=[
            AlterConfigs.AlterableConfig(name="metrics", value="*")])]), 2).responses
    advertised = {k.api_key for k in call(port, ApiVersions(), 0).api_keys}
    with WireClient(HOST, port) as client:  # an API the broker does not serve: the connection closes
        client.send(GetTelemetrySubscriptions(), 0)
        closed = client.frame_or_none() is None
    return (describe("subscription"), describe(""), (incremental.error_code, incremental.error_message),
            (legacy.error_code, legacy.error_message), advertised & {71, 72, 74}, closed)


def test_client_metrics_are_refused_in_a_zookeeper_cluster_as_kafka_39_refuses_them(kafka39_factory):
    """KIP-714 needs KRaft: Kafka 3.9 in ZooKeeper mode neither lists nor serves the telemetry APIs
    and refuses client-metrics config resources; a Samsa broker in a ZooKeeper cluster does the same."""
    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT + "-metrics"
    kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0})
    samsa = kafka39_factory(overrides={"zookeeper.connect": connect, "broker.id": 1})
    expected = (
        (ErrorCode.INVALID_REQUEST, "Config type client-metrics is only supported on KRaft clusters"),
        (ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty"),
        (ErrorCode.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, but resource type is "
                                    "CLIENT_METRICS"),
        (ErrorCode.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, but resource type is "
                                    "CLIENT_METRICS"),
        set(), True)
    assert client_metrics_answers(kafka.port) == expected
    assert client_metrics_answers(samsa.port) == expected
