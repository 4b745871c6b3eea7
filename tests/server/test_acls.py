"""ACLs over loopback: CreateAcls, DescribeAcls and DeleteAcls at every version with Kafka's
errors, ACLs in force at once and kept across a restart, and the operations each API checks.

Every connection here is User:ANONYMOUS from 127.0.0.1 (no SASL in these tests): the ACLs are
written for that principal, and `grant` puts them in force in-process, as CreateAcls does.
"""

from __future__ import annotations

from samsa.server.security.acl_admin import store_acls
from samsa.server.security.authorizer import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    SUPPORTED_OPERATIONS,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclBinding,
    AclOperation,
    PatternType,
    operations_bit_field,
)
from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from security_helpers import PLAIN_JAAS, config, sasl_plain
from security_helpers import run as run_listeners
from loopback import (
    Client, broker_config, create_topic_request, fetch_request, one_batch, produce_request, run_with_broker,
)
from group_requests import (
    DeleteGroups, DescribeGroups, FindCoordinator, Heartbeat, LeaveGroup, ListGroups, OffsetFetch, SyncGroup,
    commit_request, groups_config, join_and_sync, join_request,
)
from group_requests import fetch_request as offset_fetch_request

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ANY_TYPE, ANY_PATTERN, MATCH, ANY_OP, ANY_PERMISSION = 1, 1, 2, 1, 1

CreateAcls = request_class(ApiKey.CREATE_ACLS)
DescribeAcls = request_class(ApiKey.DESCRIBE_ACLS)
DeleteAcls = request_class(ApiKey.DELETE_ACLS)
Metadata = request_class(ApiKey.METADATA)


def secured(tmp_path, **overrides):
    return broker_config(tmp_path, authorizer_class_name=AUTHORIZER, **overrides)


def acl(resource_type, name, operation, permission=ALLOW, pattern=LITERAL, principal=ME, host="*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def grant(broker, *acls: AclBinding) -> None:
    store_acls(broker.services.metadata, broker.services.authorizer, broker.services.authorizer.acls() + list(acls))


def run(config, scenario, acls=(), topics=()) -> None:
    """A broker with `topics` (one partition each) and `acls` in force; `scenario(broker, client)`."""

    async def with_client(broker):
        for name in topics:
            broker.services.replica_manager.create_topic(name, 1, {}, 1)
        if acls:
            grant(broker, *acls)
        await scenario(broker, await Client.connect(broker.endpoints[0].port))

    run_with_broker(config, with_client)


def creation(resource_type, name, operation, permission=ALLOW, pattern=LITERAL, principal=ME, host="*"):
    return CreateAcls.AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                                  principal=principal, host=host, operation=operation, permission_type=permission)


def describe_filter(resource_type=ANY_TYPE, name=None, pattern=ANY_PATTERN, principal=None, host=None,
                    operation=ANY_OP, permission=ANY_PERMISSION):
    return DescribeAcls(resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
                        principal_filter=principal, host_filter=host, operation=operation, permission_type=permission)


def delete_filter(resource_type=ANY_TYPE, name=None, pattern=ANY_PATTERN, principal=None, host=None,
                  operation=ANY_OP, permission=ANY_PERMISSION):
    return DeleteAcls.DeleteAclsFilter(resource_type_filter=resource_type, resource_name_filter=name,
                                       pattern_type_filter=pattern, principal_filter=principal, host_filter=host,
                                       operation=operation, permission_type=permission)


def described(response) -> set[tuple]:
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


# --- the ACL APIs ---------------------------------------------------------------------------------


def test_acl_apis_without_an_authorizer_answer_security_disabled(tmp_path):
    async def scenario(broker, client):
        for version in range(4):
            created = await client.call(CreateAcls(creations=[creation(TOPIC, "t", READ)]), version)
            assert [(r.error_code, r.error_message) for r in created.results] == [
                (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]
            listed = await client.call(describe_filter(pattern=LITERAL), version)
            assert (listed.error_code, listed.error_message, listed.resources) == (
                ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
            deleted = await client.call(DeleteAcls(filters=[delete_filter(pattern=LITERAL)]), version)
            assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]

    run(broker_config(tmp_path), scenario)


def test_acl_apis_need_alter_or_describe_on_the_cluster(tmp_path):
    async def scenario(broker, client):
        created = await client.call(CreateAcls(creations=[creation(TOPIC, "t", READ)] * 2), 3)
        assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
        assert (await client.call(describe_filter(), 3)).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        deleted = await client.call(DeleteAcls(filters=[delete_filter()]), 3)
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        # DESCRIBE on the cluster lets one list the ACLs, not change them.
        grant(broker, acl(CLUSTER, "kafka-cluster", DESCRIBE))
        assert described(await client.call(describe_filter(), 3)) == {
            (CLUSTER, "kafka-cluster", LITERAL, ME, "*", DESCRIBE, ALLOW)}
        created = await client.call(CreateAcls(creations=[creation(TOPIC, "t", READ)]), 3)
        assert created.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert broker.services.authorizer.acls() == [acl(CLUSTER, "kafka-cluster", DESCRIBE)]

    run(secured(tmp_path), scenario)


def test_create_describe_delete_at_every_version(tmp_path):
    async def scenario(broker, client):
        for version in range(4):
            name = f"v{version}"
            creations = [creation(TOPIC, name, READ), creation(TOPIC, name, READ),
                         creation(3, name, WRITE, DENY, principal="User:bob", host="10.0.0.1")]
            if version >= 1:
                creations.append(creation(TOPIC, f"{name}-", ALL, pattern=PREFIXED))
            created = await client.call(CreateAcls(creations=creations), version)
            assert [(r.error_code, r.error_message) for r in created.results] == [(ErrorCode.NONE, None)] * len(creations)

            pattern = LITERAL if version == 0 else ANY_PATTERN
            listed = await client.call(describe_filter(name=name, pattern=pattern), version)
            assert listed.error_code == ErrorCode.NONE
            assert described(listed) == {(TOPIC, name, LITERAL, ME, "*", READ, ALLOW),
                                         (3, name, LITERAL, "User:bob", "10.0.0.1", WRITE, DENY)}
            if version >= 1:
                matching = await client.call(describe_filter(resource_type=TOPIC, name=f"{name}-x", pattern=MATCH),
                                             version)
                assert described(matching) == {(TOPIC, f"{name}-", PREFIXED, ME, "*", ALL, ALLOW)}

            deleted = await client.call(DeleteAcls(filters=[
                delete_filter(name=name, pattern=LITERAL, principal="User:bob"),
                delete_filter(resource_type=TOPIC, name=name, pattern=LITERAL)]), version)
            assert [[(m.resource_type, m.resource_name, m.principal, m.operation) for m in r.matching_acls]
                    for r in deleted.filter_results] == [[(3, name, "User:bob", WRITE)], [(TOPIC, name, ME, READ)]]
            assert described(await client.call(describe_filter(name=name, pattern=LITERAL), version)) == set()
        assert [(a.name, a.pattern_type) for a in broker.services.authorizer.acls()] == [
            ("v1-", PREFIXED), ("v2-", PREFIXED), ("v3-", PREFIXED)]

    run(secured(tmp_path, super_users=ME), scenario)


def test_create_acls_refuses_invalid_bindings_one_by_one(tmp_path):
    async def scenario(broker, client):
        created = await client.call(CreateAcls(creations=[
            creation(CLUSTER, "other", ALTER),
            creation(TOPIC, "", READ),
            creation(ANY_TYPE, "t", READ),
            creation(TOPIC, "t", READ, pattern=MATCH),
            creation(TOPIC, "t", ANY_OP),
            creation(TOPIC, "t", READ, permission=99),
            creation(TOPIC, "t", READ, principal="bob"),
            creation(TOPIC, "t", READ),
        ]), 3)
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
            (ErrorCode.INVALID_REQUEST, "Invalid resourceType ANY"),
            (ErrorCode.INVALID_REQUEST, "Invalid patternType MATCH"),
            (ErrorCode.INVALID_REQUEST, "Invalid operation ANY"),
            (ErrorCode.INVALID_REQUEST, "Invalid permissionType UNKNOWN"),
            (ErrorCode.INVALID_REQUEST, "Could not parse principal from `bob` (no colon is present separating "
                                        "the principal type from the principal name)"),
            (ErrorCode.NONE, None),
        ]
        assert broker.services.authorizer.acls() == [acl(TOPIC, "t", READ)]

    run(secured(tmp_path, super_users=ME), scenario)


def test_filters_with_unknown_elements_are_invalid_requests(tmp_path):
    async def scenario(broker, client):
        listed = await client.call(describe_filter(operation=0), 3)
        assert (listed.error_code, listed.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")
        deleted = await client.call(DeleteAcls(filters=[delete_filter(resource_type=99), delete_filter()]), 3)
        assert [(r.error_code, r.error_message, len(r.matching_acls)) for r in deleted.filter_results] == [
            (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.", 0), (ErrorCode.NONE, None, 1)]
        assert broker.services.authorizer.acls() == []

    run(secured(tmp_path, super_users=ME), scenario, acls=[acl(TOPIC, "t", READ)])


def test_acls_apply_at_once_and_survive_a_restart(tmp_path):
    config = secured(tmp_path, allow_everyone_if_no_acl_found="true")

    async def produce_error(client, topic):
        produced = await client.call(produce_request(topic, one_batch([b"x"])), 9)
        return produced.responses[0].partition_responses[0].error_code

    async def deny(broker, client):
        # No ACL on the cluster: everyone may create ACLs, until one is there.
        created = await client.call(CreateAcls(creations=[creation(TOPIC, "secret", WRITE, DENY)]), 3)
        assert created.results[0].error_code == ErrorCode.NONE
        assert await produce_error(client, "secret") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert await produce_error(client, "public") == ErrorCode.NONE

    async def after_restart(broker, client):
        assert await produce_error(client, "secret") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        deleted = await client.call(DeleteAcls(filters=[delete_filter(resource_type=TOPIC)]), 3)
        assert len(deleted.filter_results[0].matching_acls) == 1
        assert await produce_error(client, "secret") == ErrorCode.NONE
        # An ACL on the cluster for someone else: now ANONYMOUS may not change ACLs.
        await client.call(CreateAcls(creations=[creation(CLUSTER, "kafka-cluster", ALTER, principal="User:admin")]), 3)
        refused = await client.call(CreateAcls(creations=[creation(TOPIC, "secret", WRITE, DENY)]), 3)
        assert refused.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    run(config, deny, topics=["secret", "public"])
    run(config, after_restart)


# --- what each API checks -------------------------------------------------------------------------


def test_metadata_hides_unauthorized_topics_and_refuses_named_ones(tmp_path):
    async def scenario(broker, client):
        listed = await client.call(Metadata(topics=None), 12)
        assert sorted(t.name for t in listed.topics) == ["app-1", "seen"]
        asked = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name=n)
                                                   for n in ("seen", "hidden", "nowhere")],
                                           allow_auto_topic_creation=False), 12)
        by_name = {t.name: t for t in asked.topics}
        assert by_name["seen"].error_code == ErrorCode.NONE
        for name in ("hidden", "nowhere"):  # whether it exists is not disclosed
            assert (by_name[name].error_code, by_name[name].topic_id.int) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0)
        hidden_id = broker.services.metadata.topics["hidden"].topic_id
        by_id = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(topic_id=hidden_id, name=None)]), 12)
        assert [(t.error_code, t.name, t.topic_id) for t in by_id.topics] == [
            (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, hidden_id)]
        ops = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="seen")],
                                         include_cluster_authorized_operations=True,
                                         include_topic_authorized_operations=True), 10)
        assert ops.topics[0].topic_authorized_operations == operations_bit_field([READ, DESCRIBE])
        assert ops.cluster_authorized_operations == 0  # no DESCRIBE on the cluster

    run(secured(tmp_path), scenario, topics=["seen", "hidden", "app-1"],
        acls=[acl(TOPIC, "seen", READ), acl(TOPIC, "app-", DESCRIBE, pattern=PREFIXED)])


def test_metadata_auto_creates_only_with_create_on_the_cluster_or_topic(tmp_path):
    async def scenario(broker, client):
        asked = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="new-1")]), 12)
        assert asked.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "new-1" not in broker.services.metadata.topics
        grant(broker, acl(TOPIC, "new-1", CREATE))
        asked = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="new-1")]), 12)
        assert asked.topics[0].error_code == ErrorCode.NONE and "new-1" in broker.services.metadata.topics
        grant(broker, acl(CLUSTER, "kafka-cluster", CREATE))
        asked = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="new-2")]), 12)
        assert asked.topics[0].error_code == ErrorCode.NONE and "new-2" in broker.services.metadata.topics

    run(secured(tmp_path), scenario, acls=[acl(TOPIC, "new-", DESCRIBE, pattern=PREFIXED)])


def test_produce_needs_write_and_deny_wins(tmp_path):
    async def scenario(broker, client):
        produced = await client.call(produce_request("t", one_batch([b"x"])), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        produced = await client.call(produce_request("locked", one_batch([b"x"])), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert broker.services.replica_manager.get("locked", 0).log.high_watermark == 0
        # A transactional batch needs WRITE on its transactional id first, whatever the topic.
        batch = records.build_batch([records.Record(0, 0, None, b"x", [])], producer_id=1, producer_epoch=0,
                                    base_sequence=0, is_transactional=True)
        request = produce_request("t", batch)
        request.transactional_id = "txn"
        produced = await client.call(request, 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    run(secured(tmp_path), scenario, topics=["t", "locked"],
        acls=[acl(TOPIC, "*", ALL), acl(TOPIC, "locked", WRITE, DENY)])


def test_acl_hosts_match_the_client_address(tmp_path):
    async def scenario(broker, client):
        for topic, code in (("from-here", ErrorCode.NONE), ("from-elsewhere", ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
            produced = await client.call(produce_request(topic, one_batch([b"x"])), 9)
            assert produced.responses[0].partition_responses[0].error_code == code

    run(secured(tmp_path), scenario, topics=["from-here", "from-elsewhere"],
        acls=[acl(TOPIC, "from-here", WRITE, host="127.0.0.1"), acl(TOPIC, "from-elsewhere", WRITE, host="10.9.9.9")])


def test_fetch_and_list_offsets_need_read_and_describe(tmp_path):
    ListOffsets = request_class(ApiKey.LIST_OFFSETS)

    def list_offsets(topic):
        return ListOffsets(replica_id=-1, topics=[ListOffsets.ListOffsetsTopic(name=topic, partitions=[
            ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=-1)])])

    async def scenario(broker, client):
        fetched = await client.call(fetch_request("readable", 0), 12)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE
        fetched = await client.call(fetch_request("writable", 0), 12)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        follower = fetch_request("readable", 0)
        follower.replica_id = 1  # a follower needs CLUSTER_ACTION
        fetched = await client.call(follower, 12)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for topic, code in (("readable", ErrorCode.NONE), ("writable", ErrorCode.NONE),
                            ("other", ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
            listed = await client.call(list_offsets(topic), 7)
            assert listed.topics[0].partitions[0].error_code == code  # READ and WRITE imply DESCRIBE

    run(secured(tmp_path), scenario, topics=["readable", "writable", "other"],
        acls=[acl(TOPIC, "readable", READ), acl(TOPIC, "writable", WRITE)])


def test_topic_admin_apis(tmp_path):
    Delete = request_class(ApiKey.DELETE_TOPICS)
    CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
    DeleteRecords = request_class(ApiKey.DELETE_RECORDS)

    async def scenario(broker, client):
        created = await client.call(create_topic_request("mine-1"), 7)
        result = created.topics[0]
        assert (result.error_code, result.topic_config_error_code, result.configs, result.num_partitions) == (
            ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, [], -1)
        grant(broker, acl(TOPIC, "mine-", DESCRIBE_CONFIGS, pattern=PREFIXED))
        result = (await client.call(create_topic_request("mine-2"), 7)).topics[0]
        assert (result.error_code, result.topic_config_error_code, result.num_partitions) == (ErrorCode.NONE, 0, 1)
        assert result.configs
        result = (await client.call(create_topic_request("theirs"), 7)).topics[0]
        assert (result.error_code, result.error_message) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                             "Authorization failed.")

        grown = await client.call(CreatePartitions(topics=[
            CreatePartitions.CreatePartitionsTopic(name=n, count=2, assignments=None) for n in ("mine-1", "theirs")], timeout_ms=5000), 3)
        assert [(r.name, r.error_code) for r in grown.results] == [
            ("mine-1", ErrorCode.NONE), ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]

        trimmed = await client.call(DeleteRecords(topics=[
            DeleteRecords.DeleteRecordsTopic(name=n, partitions=[DeleteRecords.DeleteRecordsPartition(
                partition_index=0, offset=0)]) for n in ("mine-1", "theirs")], timeout_ms=5000), 2)
        assert [t.partitions[0].error_code for t in trimmed.topics] == [
            ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED]

        theirs_id = broker.services.metadata.topics["theirs"].topic_id
        deleted = await client.call(Delete(topics=[Delete.DeleteTopicState(name="mine-1"),
                                                   Delete.DeleteTopicState(name="theirs"),
                                                   Delete.DeleteTopicState(name=None, topic_id=theirs_id)],
                                           timeout_ms=5000), 6)
        assert [(r.name, r.error_code) for r in deleted.responses] == [
            ("mine-1", ErrorCode.NONE), ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]  # asked by id without DESCRIBE: no name
        assert "theirs" in broker.services.metadata.topics

    run(secured(tmp_path), scenario, topics=["theirs"],
        acls=[acl(TOPIC, "mine-", CREATE, pattern=PREFIXED), acl(TOPIC, "mine-", ALTER, pattern=PREFIXED),
              acl(TOPIC, "mine-", DELETE, pattern=PREFIXED)])


def test_config_apis_check_the_topic_or_the_cluster(tmp_path):
    Describe = request_class(ApiKey.DESCRIBE_CONFIGS)
    Incremental = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    Alter = request_class(ApiKey.ALTER_CONFIGS)
    topic_type, broker_type, logger_type = 2, 4, 8

    async def scenario(broker, client):
        described = await client.call(Describe(resources=[
            Describe.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=["cleanup.policy"])
            for t, n in ((topic_type, "tuned"), (topic_type, "other"), (broker_type, "0"), (logger_type, "0"))]), 4)
        assert [(r.error_code, r.error_message) for r in described.results] == [
            (ErrorCode.NONE, ""), (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")]
        changed = await client.call(Incremental(resources=[
            Incremental.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
                Incremental.AlterableConfig(name=key, config_operation=0, value=value)])
            for t, n, key, value in ((topic_type, "tuned", "retention.ms", "1000"),
                                     (topic_type, "other", "retention.ms", "1000"),
                                     (broker_type, "", "log.retention.ms", "1000"),
                                     (logger_type, "0", "samsa", "DEBUG"))]), 1)
        assert [r.error_code for r in changed.responses] == [
            ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        assert broker.services.metadata.topics["tuned"].configs == {"retention.ms": "1000"}
        assert broker.services.metadata.broker_configs == {"": {"min.insync.replicas": "1"}}  # only what formatting wrote
        replaced = await client.call(Alter(resources=[
            Alter.AlterConfigsResource(resource_type=broker_type, resource_name="0", configs=[])]), 2)
        assert replaced.responses[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    run(secured(tmp_path), scenario, topics=["tuned", "other"], acls=[acl(TOPIC, "tuned", ALTER_CONFIGS)])


def test_cluster_apis(tmp_path):
    DescribeLogDirs = request_class(ApiKey.DESCRIBE_LOG_DIRS)
    DescribeCluster = request_class(ApiKey.DESCRIBE_CLUSTER)
    InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)

    async def scenario(broker, client):
        dirs = await client.call(DescribeLogDirs(topics=None), 4)
        assert (dirs.error_code, dirs.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        assert (await client.call(DescribeLogDirs(topics=None), 1)).results == []
        cluster = await client.call(DescribeCluster(include_cluster_authorized_operations=True), 1)
        assert cluster.cluster_authorized_operations == 0
        init = await client.call(InitProducerId(transactional_id=None, transaction_timeout_ms=60000), 4)
        assert init.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        init = await client.call(InitProducerId(transactional_id="txn", transaction_timeout_ms=60000), 4)
        assert init.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

        grant(broker, acl(CLUSTER, "kafka-cluster", DESCRIBE), acl(TOPIC, "logs-", WRITE, pattern=PREFIXED),
              acl(TRANSACTIONAL_ID, "txn", WRITE))
        assert (await client.call(DescribeLogDirs(topics=None), 4)).error_code == ErrorCode.NONE
        cluster = await client.call(DescribeCluster(include_cluster_authorized_operations=True), 1)
        assert cluster.cluster_authorized_operations == operations_bit_field([DESCRIBE])
        # WRITE on some topic is enough for an idempotent producer (KIP-679), as is IDEMPOTENT_WRITE.
        init = await client.call(InitProducerId(transactional_id=None, transaction_timeout_ms=60000), 4)
        assert init.error_code == ErrorCode.NONE
        init = await client.call(InitProducerId(transactional_id="txn", transaction_timeout_ms=60000), 4)
        assert init.error_code == ErrorCode.NONE  # authorized: WRITE on the transactional id

    run(secured(tmp_path), scenario)


def test_describe_topic_partitions_hides_a_listing_and_refuses_named_topics(tmp_path):
    Describe = request_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)

    async def scenario(broker, client):
        listed = await client.call(Describe(topics=[]), 0)
        assert [(t.name, t.error_code) for t in listed.topics] == [("seen", ErrorCode.NONE)]
        assert listed.topics[0].topic_authorized_operations == operations_bit_field([DESCRIBE])
        asked = await client.call(Describe(topics=[Describe.TopicRequest(name=n) for n in ("seen", "hidden")]), 0)
        assert [(t.name, t.error_code) for t in asked.topics] == [
            ("hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED), ("seen", ErrorCode.NONE)]

    run(secured(tmp_path), scenario, topics=["seen", "hidden"], acls=[acl(TOPIC, "seen", DESCRIBE)])


def test_super_users_and_allow_everyone_if_no_acl_found(tmp_path):
    async def as_super_user(broker, client):
        produced = await client.call(produce_request("t", one_batch([b"x"])), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    run(secured(tmp_path / "a", super_users=f"User:admin;{ME}"), as_super_user, topics=["t"],
        acls=[acl(TOPIC, "*", ALL, DENY, principal="User:*")])

    async def everyone(broker, client):
        for topic, code in (("open", ErrorCode.NONE), ("guarded", ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
            produced = await client.call(produce_request(topic, one_batch([b"x"])), 9)
            assert produced.responses[0].partition_responses[0].error_code == code

    run(secured(tmp_path / "b", allow_everyone_if_no_acl_found="true"), everyone, topics=["open", "guarded"],
        acls=[acl(TOPIC, "guarded", WRITE, principal="User:someone-else")])


def test_without_an_authorizer_every_supported_operation_is_reported(tmp_path):
    async def scenario(broker, client):
        response = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="t")],
                                              include_cluster_authorized_operations=True,
                                              include_topic_authorized_operations=True), 10)
        assert response.topics[0].topic_authorized_operations == operations_bit_field(SUPPORTED_OPERATIONS[TOPIC])
        assert response.cluster_authorized_operations == operations_bit_field(
            [CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE])
        assert AclOperation.WRITE not in SUPPORTED_OPERATIONS[CLUSTER]

    run(broker_config(tmp_path), scenario, topics=["t"])


def test_group_apis(tmp_path):
    OffsetDelete = request_class(ApiKey.OFFSET_DELETE)
    denied = ErrorCode.GROUP_AUTHORIZATION_FAILED

    async def scenario(broker, client):
        broker.services.replica_manager.create_topic("topic", 2, {}, 1)
        found = await client.call(FindCoordinator(key_type=0, coordinator_keys=["g", "other"]), 4)
        assert [c.error_code for c in found.coordinators] == [ErrorCode.NONE, denied]
        assert (await client.call(FindCoordinator(key="other"), 3)).error_code == denied
        found = await client.call(FindCoordinator(key_type=1, coordinator_keys=["tx"]), 4)
        assert found.coordinators[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

        joined = await client.call(join_request(group="other"), 7)
        assert (joined.error_code, joined.member_id, joined.protocol_name) == (denied, "", None)
        assert (await client.call(SyncGroup(group_id="other", generation_id=1, member_id="m"), 3)).error_code == denied
        assert (await client.call(Heartbeat(group_id="other", generation_id=1, member_id="m"), 4)).error_code == denied
        assert (await client.call(LeaveGroup(group_id="other", member_id="m"), 2)).error_code == denied
        member_id, generation = await join_and_sync(client, 9, "g")
        # A group nobody but a super user could see: joined while an ACL allowed it.
        grant(broker, acl(GROUP, "hidden", READ))
        await join_and_sync(client, 9, "hidden")
        store_acls(broker.services.metadata, broker.services.authorizer, [a for a in broker.services.authorizer.acls() if a.name != "hidden"])

        committed = await client.call(commit_request("g", member_id, generation, {0: 5}), 8)
        secret = await client.call(commit_request("g", member_id, generation, {0: 5}, topic="secret"), 8)
        other = await client.call(commit_request("other", "", -1, {0: 5}), 8)
        assert [r.topics[0].partitions[0].error_code for r in (committed, secret, other)] == [
            ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied]

        fetched = await client.call(OffsetFetch(groups=[
            OffsetFetch.OffsetFetchRequestGroup(group_id="g", topics=None),
            OffsetFetch.OffsetFetchRequestGroup(group_id="g", topics=[
                OffsetFetch.OffsetFetchRequestTopics(name="secret", partition_indexes=[0])]),
            OffsetFetch.OffsetFetchRequestGroup(group_id="other", topics=None)]), 8)
        assert [(g.error_code, [(t.name, p.committed_offset, p.error_code) for t in g.topics for p in t.partitions])
                for g in fetched.groups] == [
            (ErrorCode.NONE, [("topic", 5, ErrorCode.NONE)]),
            (ErrorCode.NONE, [("secret", -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]),
            (denied, [])]
        old = await client.call(offset_fetch_request("other", [0]), 1)  # no top-level error before v2
        assert old.topics[0].partitions[0].error_code == denied

        described = await client.call(DescribeGroups(groups=["g", "hidden"], include_authorized_operations=True), 5)
        assert [(g.group_id, g.error_code) for g in described.groups] == [("g", ErrorCode.NONE), ("hidden", denied)]
        assert described.groups[0].authorized_operations == operations_bit_field([READ, DESCRIBE])
        listed = await client.call(ListGroups(), 4)
        assert [g.group_id for g in listed.groups] == ["g"]

        grant(broker, acl(GROUP, "g", DELETE))
        deleted = await client.call(DeleteGroups(groups_names=["hidden", "g"]), 2)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("hidden", denied), ("g", ErrorCode.NON_EMPTY_GROUP)]
        offsets_deleted = await client.call(OffsetDelete(group_id="g", topics=[
            OffsetDelete.OffsetDeleteRequestTopic(name=n, partitions=[
                OffsetDelete.OffsetDeleteRequestPartition(partition_index=0)]) for n in ("topic", "secret")]), 0)
        assert [t.partitions[0].error_code for t in offsets_deleted.topics] == [
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        assert (await client.call(OffsetDelete(group_id="hidden", topics=[]), 0)).error_code == denied

    run(groups_config(tmp_path, authorizer_class_name=AUTHORIZER), scenario, topics=["secret"],
        acls=[acl(GROUP, "g", READ), acl(TOPIC, "topic", READ)])


def test_streams_group_topology_description_update_needs_read_on_the_group(tmp_path):
    Update = request_class(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)

    async def scenario(broker, client):
        def update(group):
            return Update(group_id=group, member_id="m", topology_epoch=0,
                          topology_description=Update.TopologyDescription())
        denied = await client.call(update("other"), 0)
        assert (denied.error_code, denied.error_message) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        # Allowed, then refused as Kafka refuses it without a topology description plugin.
        assert (await client.call(update("app"), 0)).error_code == ErrorCode.UNSUPPORTED_VERSION

    run(groups_config(tmp_path, authorizer_class_name=AUTHORIZER), scenario, acls=[acl(GROUP, "app", READ)])


# --- principals authenticated with SASL PLAIN -------------------------------------------------------


def test_sasl_users_get_what_their_acls_allow(tmp_path):
    DescribeScram = request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    AlterScram = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)

    async def login(port, user):
        client = await Client.connect(port)
        assert (await sasl_plain(client, user, f"{user}-secret")).error_code == ErrorCode.NONE
        return client

    async def produce_error(client, topic):
        produced = await client.call(produce_request(topic, one_batch([b"x"])), 9)
        return produced.responses[0].partition_responses[0].error_code

    async def scenario(broker, ports):
        port = ports["SASL_PLAINTEXT"]
        admin, alice, bob = [await login(port, user) for user in ("admin", "alice", "bob")]
        assert (await admin.call(create_topic_request("orders"), 7)).topics[0].error_code == ErrorCode.NONE
        created = await admin.call(CreateAcls(creations=[
            creation(TOPIC, "orders", WRITE, principal="User:alice"),
            creation(TOPIC, "ord", ALL, pattern=PREFIXED, principal="User:bob"),
            creation(TOPIC, "orders", WRITE, DENY, principal="User:bob")]), 3)
        assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 3
        assert await produce_error(alice, "orders") == ErrorCode.NONE
        assert await produce_error(bob, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # deny wins
        fetched = await bob.call(fetch_request("orders", 0), 12)  # the prefixed ALL still allows READ
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE
        fetched = await alice.call(fetch_request("orders", 0), 12)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

        refused = await alice.call(CreateAcls(creations=[creation(TOPIC, "orders", READ, principal="User:alice")]), 3)
        assert refused.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        described = await alice.call(DescribeScram(users=None), 0)
        assert (described.error_code, described.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        assert (await admin.call(DescribeScram(users=None), 0)).error_code == ErrorCode.NONE
        altered = await alice.call(AlterScram(deletions=[AlterScram.ScramCredentialDeletion(name="bob", mechanism=1)],
                                              upsertions=[]), 0)
        assert [(r.user, r.error_code) for r in altered.results] == [("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]

        # The admin grants alice READ: in force for her open connection at once.
        await admin.call(CreateAcls(creations=[creation(TOPIC, "orders", READ, principal="User:alice")]), 3)
        fetched = await alice.call(fetch_request("orders", 0), 12)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE

    run_listeners(config(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0", **{
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}), scenario)
