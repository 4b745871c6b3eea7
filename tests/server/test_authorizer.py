"""The ACL authorizer, pure: matching of literal, wildcard and prefixed patterns, principals and
hosts; deny over allow; implied operations; super users; the no-ACL default; filters; ACL changes;
and the authorizer configs."""

from __future__ import annotations

import pytest

from samsa.server.security.authorizer import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
    create_acls,
    delete_acls,
    host_address,
    operations_bit_field,
)
from samsa.server.config.kafka_config import ConfigError, KafkaConfig
from samsa.wire.acl import enum_value

LITERAL, PREFIXED, MATCH, ANY = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(resource_type=TOPIC, name="orders", pattern=LITERAL, principal=ALICE, host="*", operation=READ,
        permission=ALLOW) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def allows(authorizer, operation=READ, name="orders", principal=ALICE, host=HOST, resource_type=TOPIC) -> bool:
    return authorizer.authorize(principal, host, operation, resource_type, name)


def test_no_acl_denies_unless_allow_everyone():
    assert not allows(StandardAuthorizer())
    assert allows(StandardAuthorizer(allow_everyone_if_no_acl_found=True))


def test_acls_on_the_resource_for_others_deny_even_with_allow_everyone():
    authorizer = StandardAuthorizer(allow_everyone_if_no_acl_found=True, acls=[acl(principal=BOB)])
    assert not allows(authorizer)  # the resource has ACLs, none for alice
    assert allows(authorizer, name="payments")  # no ACL at all on this one


def test_literal_acl_matches_only_its_name():
    authorizer = StandardAuthorizer(acls=[acl(name="orders")])
    assert allows(authorizer, name="orders")
    assert not allows(authorizer, name="orders2")
    assert not allows(authorizer, name="order")


def test_wildcard_resource_and_principal():
    authorizer = StandardAuthorizer(acls=[acl(name="*", principal="User:*")])
    assert allows(authorizer, name="anything", principal=BOB)
    assert allows(authorizer, name="*")


def test_prefixed_acl_matches_names_starting_with_it():
    authorizer = StandardAuthorizer(acls=[acl(name="app-", pattern=PREFIXED)])
    assert allows(authorizer, name="app-orders")
    assert allows(authorizer, name="app-")
    assert not allows(authorizer, name="app")
    assert not allows(authorizer, name="other-app-orders")


def test_deny_wins_over_allow_from_any_pattern():
    authorizer = StandardAuthorizer(acls=[
        acl(name="*", principal="User:*"),
        acl(name="app-secret", pattern=PREFIXED, permission=DENY),
    ])
    assert allows(authorizer, name="app-public")
    assert not allows(authorizer, name="app-secret-1")
    assert allows(authorizer, name="app-secret-1", principal=BOB)  # the deny names alice only


def test_wildcard_deny_beats_literal_allow():
    authorizer = StandardAuthorizer(acls=[acl(), acl(name="*", operation=ALL, permission=DENY)])
    assert not allows(authorizer)


def test_hosts_are_written_as_java_prints_addresses():
    assert host_address("10.0.0.1") == "10.0.0.1"
    assert host_address("::1") == "0:0:0:0:0:0:0:1"
    assert host_address("fe80::0db8:1") == "fe80:0:0:0:0:0:db8:1"
    assert host_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert host_address("not-an-address") == "not-an-address"


def test_host_must_match_or_be_wildcard():
    authorizer = StandardAuthorizer(acls=[acl(host="10.0.0.1")])
    assert allows(authorizer, host="10.0.0.1")
    assert not allows(authorizer, host="10.0.0.2")


def test_implied_operations_only_for_allow():
    for operation in (READ, WRITE, DELETE, ALTER, DESCRIBE):
        assert allows(StandardAuthorizer(acls=[acl(operation=operation)]), DESCRIBE)
    assert not allows(StandardAuthorizer(acls=[acl(operation=CREATE)]), DESCRIBE)
    assert allows(StandardAuthorizer(acls=[acl(operation=ALTER_CONFIGS)]), DESCRIBE_CONFIGS)
    assert not allows(StandardAuthorizer(acls=[acl(operation=ALTER_CONFIGS)]), ALTER)
    assert not allows(StandardAuthorizer(acls=[acl(operation=READ)]), WRITE)
    # A DENY for READ does not deny DESCRIBE (StandardAuthorizerData.findResult).
    authorizer = StandardAuthorizer(acls=[acl(operation=DESCRIBE), acl(operation=READ, permission=DENY)])
    assert allows(authorizer, DESCRIBE)
    assert not allows(authorizer, READ)


def test_all_allows_and_denies_every_operation():
    assert all(allows(StandardAuthorizer(acls=[acl(operation=ALL)]), op) for op in (READ, WRITE, ALTER_CONFIGS))
    authorizer = StandardAuthorizer(acls=[acl(operation=READ), acl(operation=ALL, permission=DENY)])
    assert not allows(authorizer, READ)


def test_super_users_pass_denies():
    authorizer = StandardAuthorizer(super_users={"User:admin"}, acls=[acl(name="*", principal="User:*",
                                                                          operation=ALL, permission=DENY)])
    assert allows(authorizer, ALTER, principal="User:admin")
    assert not allows(authorizer, ALTER, principal=ALICE)


def test_resource_types_are_separate():
    authorizer = StandardAuthorizer(acls=[acl(resource_type=GROUP, name="orders")])
    assert allows(authorizer, resource_type=GROUP)
    assert not allows(authorizer, resource_type=TOPIC)


def test_authorize_by_resource_type():
    def by_type(*acls, operation=WRITE, **kwargs):
        return StandardAuthorizer(acls=acls, **kwargs).authorize_by_resource_type(ALICE, HOST, operation, TOPIC)

    assert not by_type()
    assert by_type(allow_everyone_if_no_acl_found=True)
    assert by_type(acl(operation=WRITE))
    assert by_type(acl(name="app-", pattern=PREFIXED, operation=WRITE))
    assert not by_type(acl(operation=READ))
    # A DENY of the same literal name, or of a prefix of the allowed name, dominates it.
    assert not by_type(acl(operation=WRITE), acl(operation=WRITE, permission=DENY))
    assert not by_type(acl(name="app-x", operation=WRITE), acl(name="app", pattern=PREFIXED, operation=WRITE,
                                                                permission=DENY))
    assert by_type(acl(name="app-x", operation=WRITE), acl(name="app-y", operation=WRITE, permission=DENY))
    assert not by_type(acl(name="*", operation=WRITE), acl(name="*", operation=ALL, permission=DENY))
    assert by_type(acl(name="*", operation=ALL, permission=DENY), super_users={ALICE})


def test_authorized_operations_bit_field():
    authorizer = StandardAuthorizer(acls=[acl(operation=READ), acl(operation=ALTER_CONFIGS)])
    assert authorizer.authorized_operations(ALICE, HOST, TOPIC, "orders") == operations_bit_field(
        [READ, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS])
    everything = StandardAuthorizer(super_users={ALICE})
    assert everything.authorized_operations(ALICE, HOST, CLUSTER, "kafka-cluster") == operations_bit_field(
        [CREATE, AclOperation.CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE])


def acl_filter(resource_type=ResourceType.ANY, name=None, pattern=ANY, principal=None, host=None,
               operation=AclOperation.ANY, permission=AclPermissionType.ANY) -> AclBindingFilter:
    return AclBindingFilter(resource_type, name, pattern, principal, host, operation, permission)


def test_filters():
    literal, wildcard, prefixed = acl(name="app-1"), acl(name="*"), acl(name="app-", pattern=PREFIXED)
    other = acl(resource_type=GROUP, name="g", principal=BOB, host="h", operation=DELETE, permission=DENY)
    acls = [literal, wildcard, prefixed, other]

    def matched(**kwargs):
        return [a for a in acls if acl_filter(**kwargs).matches(a)]

    assert matched() == acls
    assert matched(name="app-1") == [literal]  # ANY: names compared exactly
    assert matched(name="app-1", pattern=MATCH) == [literal, wildcard, prefixed]
    assert matched(name="app-", pattern=LITERAL) == []
    assert matched(pattern=PREFIXED) == [prefixed]
    assert matched(resource_type=GROUP) == [other]
    assert matched(principal=BOB) == matched(host="h") == matched(operation=DELETE) == matched(permission=DENY) == [other]
    assert matched(principal="User:*") == []  # filters compare principals as written


def test_unknown_filter_elements():
    assert acl_filter(resource_type=ResourceType.UNKNOWN).unknown_element() == "Unknown patternFilter."
    assert acl_filter(pattern=PatternType.UNKNOWN).unknown_element() == "Unknown patternFilter."
    assert acl_filter(operation=AclOperation.UNKNOWN).unknown_element() == "Unknown entryFilter."
    assert acl_filter(permission=AclPermissionType.UNKNOWN).unknown_element() == "Unknown entryFilter."
    assert acl_filter().unknown_element() is None
    assert enum_value(ResourceType, 99) == ResourceType.UNKNOWN


def test_create_acls_validates_and_keeps_one_of_each():
    good = acl()
    errors, after = create_acls([good], [
        good,
        acl(name="x", operation=WRITE),
        acl(name="x", operation=WRITE),
        acl(resource_type=CLUSTER, name="other"),
        acl(name=""),
        acl(resource_type=ResourceType.ANY),
        acl(pattern=MATCH),
        acl(operation=AclOperation.ANY),
        acl(permission=AclPermissionType.ANY),
        acl(principal="alice"),
    ])
    assert after == [good, acl(name="x", operation=WRITE)]
    assert errors[:3] == [None, None, None]
    assert errors[3:] == [
        "The only valid name for the CLUSTER resource is kafka-cluster",
        "Invalid empty resource name",
        "Invalid resourceType ANY",
        "Invalid patternType MATCH",
        "Invalid operation ANY",
        "Invalid permissionType ANY",
        "Could not parse principal from `alice` (no colon is present separating the principal type from the "
        "principal name)",
    ]


def test_delete_acls_reports_per_filter_and_removes_all_at_once():
    a, b, c = acl(name="a"), acl(name="b"), acl(resource_type=GROUP, name="a")
    results, after = delete_acls([a, b, c], [acl_filter(name="a"), acl_filter(resource_type=TOPIC),
                                             acl_filter(operation=AclOperation.UNKNOWN)])
    assert results == [[a, c], [a, b], "Unknown entryFilter."]
    assert after == []


def test_set_acls_replaces_what_is_in_force():
    authorizer = StandardAuthorizer(acls=[acl()])
    authorizer.set_acls([acl(name="other")])
    assert not allows(authorizer)
    assert allows(authorizer, name="other")
    assert authorizer.acls() == [acl(name="other")]


def test_binding_json_round_trip():
    binding = acl(resource_type=TRANSACTIONAL_ID, pattern=PREFIXED, permission=DENY)
    assert AclBinding.from_json(binding.to_json()) == binding


def test_authorizer_configs():
    base = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    config = KafkaConfig(base)
    assert not config.authorizer_enabled and config.super_users == frozenset()
    assert config.get("allow.everyone.if.no.acl.found") is False
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"):
        assert KafkaConfig(base | {"authorizer.class.name": name}).authorizer_enabled
    config = KafkaConfig(base | {"super.users": " User:admin ;User:CN=broker,O=x;; ", "allow.everyone.if.no.acl.found": "true"})
    assert config.super_users == {"User:admin", "User:CN=broker,O=x"}
    assert config.get("allow.everyone.if.no.acl.found") is True
    with pytest.raises(ConfigError) as error:
        KafkaConfig(base | {"authorizer.class.name": "com.example.MyAuthorizer"})
    assert error.value.name == "authorizer.class.name"
    with pytest.raises(ConfigError) as error:
        KafkaConfig(base | {"super.users": "admin"})
    assert error.value.name == "super.users"
    with pytest.raises(ConfigError) as error:
        KafkaConfig(base | {"allow.everyone.if.no.acl.found": "yes"})
    assert error.value.name == "allow.everyone.if.no.acl.found"
