"""samsa's admin commands print what Kafka 4.4's own tools print, against Samsa and against Kafka:
`samsa topics describe` as kafka-topics --describe, `samsa configs describe` as kafka-configs
--describe, `samsa acls list` as kafka-acls --list, `samsa quotas describe` and `samsa users list`
as kafka-configs --describe --entity-type users. Both read the same broker, in the same state."""

from __future__ import annotations

import subprocess
import sys

import pytest

import class_sharing
from kafka_oracle import JVM_OPTS, OracleUnavailable, class_path, java

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
TOOL_JVM_OPTS = [o for o in JVM_OPTS if not o.startswith("-Xmx")] + ["-Xmx256m"]
SETTINGS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS"}  # the PLAINTEXT principal: the tools may do anything


@pytest.fixture(scope="module")
def admin_broker(module_broker_factory):
    """A broker with ACLs in force, a topic, ACLs, a quota and a SCRAM user, all made by samsa."""
    broker = module_broker_factory(overrides=SETTINGS)
    for argv in (["topics", "create", "cli-t", "-p", "2", "-c", "retention.ms=1234", "cleanup.policy=compact",
                  "segment.bytes=2000000", "max.message.bytes=1000", "flush.ms=1000"],
                 ["acls", "create", "--principal", "User:alice", "--operation", "Read", "--topic", "cli-t"],
                 ["acls", "create", "--principal", "User:bob", "--operation", "Write", "--topic", "cli-",
                  "--pattern", "prefixed", "--deny"],
                 ["acls", "create", "--principal", "User:bob", "--operation", "IdempotentWrite", "--cluster"],
                 ["quotas", "alter", "--user", "alice", "-c", "producer_byte_rate=1024"],
                 ["users", "create", "alice", "--password", "alice-secret", "--iterations", "8192"],
                 ["configs", "alter", "--broker-defaults", "-c", "log.cleaner.threads=2"]):
        samsa(broker.bootstrap, *argv)
    return broker


def samsa(bootstrap: str, *argv: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "samsa", *argv, "-b", bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"samsa {' '.join(argv)}: {proc.stderr}"
    return proc.stdout


def kafka_tool(bootstrap: str, main_class: str, *args: str) -> str:
    try:
        cmd = [java(), *TOOL_JVM_OPTS, *class_sharing.options("kafka4"), "-cp", class_path("kafka4"), main_class,
               "--bootstrap-server", bootstrap, *args]
    except OracleUnavailable as e:
        pytest.skip(str(e))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{main_class} {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def blocks(text: str) -> list[str]:
    """Paragraphs sorted: kafka-acls prints its resources in a hash map's order."""
    return sorted(block for block in text.split("\n\n") if block.strip())


def test_topics_describe(admin_broker):
    b = admin_broker.bootstrap
    assert samsa(b, "topics", "describe", "cli-t") == kafka_tool(b, TOPIC_COMMAND, "--describe", "--topic", "cli-t")


@pytest.mark.parametrize("ours, theirs", [
    (["--topic", "cli-t"], ["--entity-type", "topics", "--entity-name", "cli-t"]),
    (["--topic", "cli-t", "--all"], ["--entity-type", "topics", "--entity-name", "cli-t", "--all"]),
    (["--broker-defaults"], ["--entity-type", "brokers", "--entity-default"]),
], ids=["topic", "topic-all", "broker-defaults"])
def test_configs_describe(admin_broker, ours, theirs):
    b = admin_broker.bootstrap
    assert samsa(b, "configs", "describe", *ours) == kafka_tool(b, CONFIG_COMMAND, "--describe", *theirs)


def test_acls_list(admin_broker):
    b = admin_broker.bootstrap
    assert blocks(samsa(b, "acls", "list")) == blocks(kafka_tool(b, ACL_COMMAND, "--list"))


def test_quotas_and_users_as_kafka_configs_describes_a_user(admin_broker):
    b = admin_broker.bootstrap
    ours = samsa(b, "quotas", "describe", "--user", "alice") + samsa(b, "users", "list", "alice")
    theirs = kafka_tool(b, CONFIG_COMMAND, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert sorted(ours.splitlines()) == sorted(theirs.splitlines())
