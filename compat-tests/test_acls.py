"""ACLs with confluent-kafka (librdkafka): AdminClient's create_acls, describe_acls and delete_acls,
and producers and group consumers refused by a missing or a DENY ACL, then let through once the
ACLs allow them, without a restart.

Over PLAINTEXT the broker sees clients as User:ANONYMOUS: those tests name that principal (the
cluster itself has no ACL, so with allow.everyone.if.no.acl.found anyone may manage ACLs). Over
SASL_PLAINTEXT, users alice and bob log in with PLAIN and an admin (a super user) manages ACLs.
"""

from __future__ import annotations

import socket
import time

import pytest
from compat_util import confluent_admin, create_acls, create_topic, delete_acls


T = 15.0
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true", "group.initial.rebalance.delay.ms": 0}
ME = "User:ANONYMOUS"


def acl_types():
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return ResourceType, ResourcePatternType, AclOperation, AclPermissionType


def binding(resource_type, name, operation, permission, pattern=None, principal=ME):
    from confluent_kafka.admin import AclBinding, ResourcePatternType

    return AclBinding(resource_type, name, pattern or ResourcePatternType.LITERAL, principal, "*", operation,
                      permission)


def everything():
    from confluent_kafka.admin import AclBindingFilter

    ResourceType, ResourcePatternType, AclOperation, AclPermissionType = acl_types()
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def create(admin, *bindings) -> None:
    create_acls(admin, list(bindings), T)


def produce_error(bootstrap: str, topic: str, **settings):
    """The delivery error of one message (None when it was written)."""
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **settings})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(T) == 0
    return errors[0]


def consume_error_or_message(bootstrap: str, topic: str, group: str, **settings):
    """The first error a group consumer reports, or the first message it reads."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100, **settings})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                return message.error() or message.value()
        raise AssertionError("the consumer reported neither an error nor a message")
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def authorizing_broker(module_broker_factory):
    """A broker with StandardAuthorizer for the tests that start from no ACLs on topics and
    groups of their own."""
    return module_broker_factory(AUTHORIZER)


def test_admin_client_creates_describes_and_deletes_acls(authorizing_broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AclBindingFilter

    ResourceType, ResourcePatternType, AclOperation, AclPermissionType = acl_types()
    admin = confluent_admin(authorizing_broker.bootstrap)
    # The broker is shared: start from no ACLs at all.
    delete_acls(admin, everything(), T)
    read_orders = binding(ResourceType.TOPIC, "orders", AclOperation.READ, AclPermissionType.ALLOW,
                          principal="User:alice")
    deny_app_groups = binding(ResourceType.GROUP, "app-", AclOperation.ALL, AclPermissionType.DENY,
                              pattern=ResourcePatternType.PREFIXED, principal="User:*")
    create(admin, read_orders, deny_app_groups)
    assert sorted(admin.describe_acls(everything(), request_timeout=T).result(T)) == sorted(
        [read_orders, deny_app_groups])
    matching = AclBindingFilter(ResourceType.GROUP, "app-1", ResourcePatternType.MATCH, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching, request_timeout=T).result(T) == [deny_app_groups]

    # librdkafka names the CLUSTER resource type BROKER; its one name is kafka-cluster.
    bad = binding(ResourceType.BROKER, "not-the-cluster", AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as error:
        admin.create_acls([bad], request_timeout=T)[bad].result(T)
    assert error.value.args[0].code() == KafkaError.INVALID_REQUEST

    topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    assert delete_acls(admin, topics, T) == [read_orders]
    assert admin.describe_acls(everything(), request_timeout=T).result(T) == [deny_app_groups]


def test_acl_apis_without_an_authorizer_are_security_disabled(broker_factory):
    from confluent_kafka import KafkaError, KafkaException

    ResourceType, ResourcePatternType, AclOperation, AclPermissionType = acl_types()
    admin = confluent_admin(broker_factory().bootstrap)
    acl = binding(ResourceType.TOPIC, "t", AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as error:
        admin.create_acls([acl], request_timeout=T)[acl].result(T)
    assert error.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka drops DescribeAcls' top-level error code (rd_kafka_DescribeAclsResponse_parse):
    # SECURITY_DISABLED reaches the application as an empty listing.
    assert admin.describe_acls(everything(), request_timeout=T).result(T) == []


def test_missing_and_deny_acls_refuse_clients_until_an_acl_allows(authorizing_broker, topic_name):
    from confluent_kafka import KafkaError

    ResourceType, ResourcePatternType, AclOperation, AclPermissionType = acl_types()
    b = authorizing_broker
    admin = confluent_admin(b.bootstrap)
    create_topic(b.bootstrap, topic_name)
    # Only alice may write: for ANONYMOUS the ACL is missing.
    create(admin, binding(ResourceType.TOPIC, topic_name, AclOperation.WRITE, AclPermissionType.ALLOW,
                          principal="User:alice"))
    assert produce_error(b.bootstrap, topic_name).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create(admin, binding(ResourceType.TOPIC, topic_name, AclOperation.WRITE, AclPermissionType.ALLOW))
    assert produce_error(b.bootstrap, topic_name) is None

    create(admin, binding(ResourceType.GROUP, "readers", AclOperation.READ, AclPermissionType.DENY))
    refused = consume_error_or_message(b.bootstrap, topic_name, "readers")
    assert isinstance(refused, KafkaError) and refused.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    from confluent_kafka.admin import AclBindingFilter

    deny = AclBindingFilter(ResourceType.GROUP, "readers", ResourcePatternType.LITERAL, ME, "*", AclOperation.READ,
                            AclPermissionType.DENY)
    delete_acls(admin, deny, T)
    create(admin, binding(ResourceType.GROUP, "readers", AclOperation.READ, AclPermissionType.ALLOW),
           binding(ResourceType.TOPIC, topic_name, AclOperation.READ, AclPermissionType.ALLOW))
    assert consume_error_or_message(b.bootstrap, topic_name, "readers") == b"v"


SASL_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
              'user_alice="alice-secret" user_bob="bob-secret";')


def sasl(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret"}


def test_sasl_users_refused_until_an_acl_allows_and_deny_wins(broker_factory, topic_name):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    ResourceType, ResourcePatternType, AclOperation, AclPermissionType = acl_types()
    b = broker_factory({**AUTHORIZER, "allow.everyone.if.no.acl.found": "false", "super.users": "User:admin",
                        "sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config": SASL_USERS}, start=False)
    with socket.socket() as s:  # a second listener beside the PLAINTEXT one the fixture sets up
        s.bind(("127.0.0.1", 0))
        sasl_port = s.getsockname()[1]
    b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    b.start()
    bootstrap = f"127.0.0.1:{sasl_port}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    other = "other-" + topic_name
    for future in admin.create_topics([NewTopic(topic_name, 1, 1), NewTopic(other, 1, 1)],
                                      request_timeout=T).values():
        future.result(T)

    assert produce_error(bootstrap, topic_name, **sasl("alice")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create(admin, binding(ResourceType.TOPIC, topic_name, AclOperation.WRITE, AclPermissionType.ALLOW,
                          principal="User:alice"))
    assert produce_error(bootstrap, topic_name, **sasl("alice")) is None
    assert produce_error(bootstrap, topic_name, **sasl("bob")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    create(admin, binding(ResourceType.TOPIC, topic_name, AclOperation.READ, AclPermissionType.ALLOW,
                          principal="User:alice"))
    refused = consume_error_or_message(bootstrap, topic_name, "alice-readers", **sasl("alice"))
    assert isinstance(refused, KafkaError) and refused.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    create(admin, binding(ResourceType.GROUP, "alice-", AclOperation.READ, AclPermissionType.ALLOW,
                          pattern=ResourcePatternType.PREFIXED, principal="User:alice"))
    assert consume_error_or_message(bootstrap, topic_name, "alice-readers", **sasl("alice")) == b"v"

    # Everyone may write every topic, but a DENY for bob on this one wins.
    create(admin, binding(ResourceType.TOPIC, "*", AclOperation.WRITE, AclPermissionType.ALLOW, principal="User:*"),
           binding(ResourceType.TOPIC, topic_name, AclOperation.WRITE, AclPermissionType.DENY, principal="User:bob"))
    assert produce_error(bootstrap, topic_name, **sasl("bob")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(bootstrap, other, **sasl("bob")) is None
