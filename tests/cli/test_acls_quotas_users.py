"""samsa acls, quotas and users against a real broker (with an authorizer for the ACLs): kafka-acls'
lines, quotas set and removed, SCRAM users created, listed and deleted."""

from __future__ import annotations

import pytest

from broker_thread import BrokerThread
from loopback import broker_config

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker with ACLs in force; the tests' PLAINTEXT principal, User:ANONYMOUS, is a super user."""
    config = broker_config(tmp_path_factory.mktemp("broker"), authorizer_class_name=AUTHORIZER,
                           super_users="User:ANONYMOUS")
    thread = BrokerThread().start(config)
    yield f"127.0.0.1:{thread.ports['PLAINTEXT']}"
    thread.stop()


def test_acls_create_list_delete(secured, samsa):
    code, out, _ = samsa("acls", "create", "--principal", "User:alice", "--operation", "Read", "--topic", "t",
                         "-b", secured)
    assert (code, out) == (0, "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
                              " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    samsa("acls", "create", "--principal", "User:bob", "--operation", "idempotent-write", "--cluster", "--deny",
          "-b", secured)
    code, out, _ = samsa("acls", "list", "--principal", "User:bob", "-b", secured)
    assert (code, out) == (0, "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, "
                              "patternType=LITERAL)`:\n"
                              "\t(principal=User:bob, host=*, operation=IDEMPOTENT_WRITE, permissionType=DENY)\n\n")
    code, out, _ = samsa("acls", "delete", "--topic", "t", "-b", secured)
    assert code == 0 and out.startswith("Removed ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, ")
    assert "name=t," not in samsa("acls", "list", "-b", secured)[1]


def test_acls_bad_usage_and_a_broker_without_an_authorizer(broker, samsa):
    assert samsa("acls", "create", "--operation", "Read", "-b", broker)[0] == 2
    assert samsa("acls", "create", "--principal", "User:x", "--operation", "Bogus", "--topic", "t", "-b", broker)[0] == 2
    assert samsa("acls", "delete", "-b", broker)[0] == 2
    assert samsa("acls", "list", "-b", broker)[::2] == (1, "samsa acls: SECURITY_DISABLED: No Authorizer is configured on the broker\n")


def test_quotas_alter_describe_remove(broker, samsa):
    code, out, _ = samsa("quotas", "alter", "--user", "alice", "-c", "producer_byte_rate=1024",
                         "consumer_byte_rate=2048", "-b", broker)
    assert (code, out) == (0, "Completed updating config for user alice.\n")
    assert samsa("quotas", "alter", "--client-id", "<default>", "-c", "request_percentage=50", "-b", broker)[1] == (
        "Completed updating default config for clients in the cluster.\n")
    code, out, _ = samsa("quotas", "describe", "-b", broker)
    assert (code, out) == (0, "Quota configs for the default client-id are request_percentage=50.0\n"
                              "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, "
                              "producer_byte_rate=1024.0\n")
    samsa("quotas", "alter", "--user", "alice", "--delete-config", "producer_byte_rate", "-b", broker)
    assert samsa("quotas", "describe", "--user", "alice", "-b", broker)[1] == (
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0\n")
    assert samsa("quotas", "alter", "--user", "alice", "-c", "producer_byte_rate=fast", "-b", broker)[0] == 2
    code, _, err = samsa("quotas", "alter", "--user", "alice", "-c", "no_such_quota=1", "-b", broker)
    assert code == 1 and err.startswith("samsa quotas: user-principal 'alice': INVALID_REQUEST: "), err


def test_users_create_list_delete(broker, samsa):
    assert samsa("users", "create", "carol", "--password", "pw", "-b", broker) == (
        0, "Completed updating config for user carol.\n", "")
    samsa("users", "create", "carol", "--password", "pw", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
          "-b", broker)
    assert samsa("users", "list", "-b", broker)[1] == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=8192\n")
    assert samsa("users", "delete", "carol", "-b", broker)[0] == 0
    code, _, err = samsa("users", "list", "carol", "-b", broker)
    assert (code, err) == (1, "samsa users: carol: RESOURCE_NOT_FOUND: "
                              "Attempt to describe a user credential that does not exist: carol\n")
    assert samsa("users", "create", "-b", broker)[0] == 2
    assert samsa("users", "create", "dave", "--password", "pw", "--iterations", "10", "-b", broker)[0] == 2
