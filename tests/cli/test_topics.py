"""samsa topics against a real broker: kafka-topics --describe's exact lines, the broker's errors
as exit 1 with the error's name, bad usage as exit 2."""

from __future__ import annotations

import re

from samsa.cli.client import KafkaClient


def describe(samsa, broker, *names: str) -> tuple[str, str]:
    """The topics' describe output and the first topic's id."""
    code, out, err = samsa("topics", "describe", *names, "-b", broker)
    assert code == 0, err
    return out, re.search(r"TopicId: (\S+)", out)[1]


def test_create_then_describe_prints_kafka_topics_lines(broker, samsa):
    code, out, err = samsa("topics", "create", "orders", "-p", "2", "-c", "cleanup.policy=compact", "-b", broker)
    assert (code, out, err) == (0, "Created topic orders.\n", "")
    out, topic_id = describe(samsa, broker, "orders")
    assert out == (
        f"Topic: orders\tTopicId: {topic_id}\tPartitionCount: 2\tReplicationFactor: 1\t"
        "Configs: min.insync.replicas=1,cleanup.policy=compact\n"
        "\tTopic: orders\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: \n"
        "\tTopic: orders\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: \n")


def test_creating_an_existing_topic_is_exit_1_with_the_error_name(broker, samsa):
    assert samsa("topics", "create", "twice", "-b", broker)[0] == 0
    code, out, err = samsa("topics", "-b", broker, "create", "twice")  # -b before the action too
    assert (code, out, err) == (1, "", "samsa topics: twice: TOPIC_ALREADY_EXISTS: Topic 'twice' already exists.\n")


def test_list_is_sorted_names(broker, samsa):
    for name in ("zebra", "alpha"):
        samsa("topics", "create", name, "-b", broker)
    code, out, _ = samsa("topics", "list", "-b", broker)
    names = out.split()
    assert code == 0 and names == sorted(names) and {"alpha", "zebra"} <= set(names)


def test_alter_sets_and_removes_configs(broker, samsa):
    samsa("topics", "create", "altered", "-c", "cleanup.policy=compact", "-b", broker)
    code, out, _ = samsa("topics", "alter", "altered", "-c", "retention.ms=1000", "--delete-config", "cleanup.policy",
                         "-b", broker)
    assert (code, out) == (0, "Completed updating config for topic altered.\n")
    out, _ = describe(samsa, broker, "altered")
    assert "\tConfigs: min.insync.replicas=1,retention.ms=1000\n" in out


def test_an_invalid_config_is_invalid_config(broker, samsa):
    code, _, err = samsa("topics", "create", "bad-config", "-c", "retention.ms=soon", "-b", broker)
    assert code == 1 and err.startswith("samsa topics: bad-config: INVALID_CONFIG: ")


def test_add_partitions_raises_the_count_and_refuses_fewer(broker, samsa):
    samsa("topics", "create", "growing", "-b", broker)
    code, out, _ = samsa("topics", "add-partitions", "growing", "-p", "3", "-b", broker)
    assert (code, out) == (0, "Topic growing now has 3 partitions.\n")
    assert "PartitionCount: 3\t" in describe(samsa, broker, "growing")[0]
    code, _, err = samsa("topics", "add-partitions", "growing", "-p", "2", "-b", broker)
    assert code == 1 and err.startswith("samsa topics: growing: INVALID_PARTITIONS: ")


def test_delete_removes_the_topic(broker, samsa):
    samsa("topics", "create", "doomed", "-b", broker)
    assert samsa("topics", "delete", "doomed", "-b", broker)[:2] == (0, "Deleted topic doomed.\n")
    assert "doomed" not in samsa("topics", "list", "-b", broker)[1].split()


def test_an_unknown_topic_is_unknown_topic_or_partition(broker, samsa):
    for action in ("describe", "delete"):
        code, _, err = samsa("topics", action, "nowhere", "-b", broker)
        assert (code, err) == (1, "samsa topics: nowhere: UNKNOWN_TOPIC_OR_PARTITION: "
                                  "This server does not host this topic-partition.\n")


def test_bad_usage_is_exit_2(broker, samsa):
    assert samsa("topics", "create", "-b", broker)[0] == 2  # no name
    assert samsa("topics", "frobnicate", "-b", broker)[0] == 2  # no such action
    assert samsa("topics", "create", "x", "-p", "many", "-b", broker)[0] == 2
    assert samsa("topics", "alter", "x", "-b", broker)[:3:2] == (
        2, "samsa topics: alter needs -c KEY=VALUE or --delete-config KEY\n")


def test_describe_through_metadata_where_the_broker_lacks_describe_topic_partitions(broker, samsa, monkeypatch):
    async def supports(self, request_type, node_id=None):
        return request_type.__name__ != "DescribeTopicPartitionsRequest"

    samsa("topics", "create", "older", "-b", broker)
    monkeypatch.setattr(KafkaClient, "supports", supports)
    out, topic_id = describe(samsa, broker, "older")
    assert out == (f"Topic: older\tTopicId: {topic_id}\tPartitionCount: 1\tReplicationFactor: 1\t"
                   "Configs: min.insync.replicas=1\n"
                   "\tTopic: older\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A\n")


def test_describe_lists_configs_in_kafka_topics_order(broker, samsa):
    # kafka-topics prints them in its java.util.HashMap's order: this line is Kafka 4.4's own.
    samsa("topics", "create", "many-configs", "-c", "retention.ms=1234", "cleanup.policy=compact",
          "segment.bytes=2000000", "max.message.bytes=1000", "flush.ms=1000", "-b", broker)
    out, _ = describe(samsa, broker, "many-configs")
    assert "\tConfigs: min.insync.replicas=1,cleanup.policy=compact,flush.ms=1000,retention.ms=1234," \
           "segment.bytes=2000000,max.message.bytes=1000\n" in out
