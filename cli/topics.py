"""`samsa topics create|list|describe|alter|add-partitions|delete`: kafka-topics' jobs. `describe`
prints kafka-topics --describe's lines: a topic line (id, partition count, replication factor, the
configs not at their defaults), then one line per partition (leader, replicas, ISR, ELR)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import trio

from ..wire.config_resources import ConfigSource, ResourceType
from ..storage.checkpoints import kafka_uuid_string
from ..wire.codec import ZERO_UUID
from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError
from .client import KafkaClient, action_parsers, check_error, open_client
from .configs import add_config_change_arguments, alter_configs, config_changes, describe_configs, java_string
from .options import key_value

HELP = "create, list, describe, alter and delete topics"

CreateTopicsRequest = message_class("CreateTopicsRequest")
DeleteTopicsRequest = message_class("DeleteTopicsRequest")
CreatePartitionsRequest = message_class("CreatePartitionsRequest")
DescribeTopicPartitionsRequest = message_class("DescribeTopicPartitionsRequest")

TIMEOUT_MS = 30_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with action_parsers(parser) as actions:
        create = actions.add_parser("create", help="create a topic")
        create.add_argument("name")
        create.add_argument("-p", "--partitions", type=int, help="the number of partitions (default: the broker's "
                                                                 "num.partitions)")
        create.add_argument("-r", "--replication-factor", type=int, help="replicas per partition (default: the "
                                                                         "broker's default.replication.factor)")
        create.add_argument("-c", "--config", dest="configs", type=key_value, action="extend", nargs="+", default=[],
                            metavar="KEY=VALUE", help="a topic config (repeatable)")
        actions.add_parser("list", help="the topics' names")
        describe = actions.add_parser("describe", help="topics with their partitions and non-default configs")
        describe.add_argument("names", nargs="*", metavar="NAME", help="the topics (default: all)")
        alter = actions.add_parser("alter", help="set or remove topic configs")
        alter.add_argument("name")
        add_config_change_arguments(alter)
        add_partitions = actions.add_parser("add-partitions", help="raise a topic's partition count")
        add_partitions.add_argument("name")
        add_partitions.add_argument("-p", "--partitions", type=int, required=True, metavar="TOTAL",
                                    help="the partition count wanted")
        delete = actions.add_parser("delete", help="delete topics")
        delete.add_argument("names", nargs="+", metavar="NAME")


def run(args: argparse.Namespace) -> int:
    return trio.run(ACTIONS[args.action], args)


async def create(args: argparse.Namespace) -> int:
    Topic = CreateTopicsRequest.CreatableTopic
    Config = CreateTopicsRequest.CreatableTopicConfig
    topic = Topic(name=args.name, num_partitions=-1 if args.partitions is None else args.partitions,
                  replication_factor=-1 if args.replication_factor is None else args.replication_factor,
                  configs=[Config(name=key, value=value) for key, value in args.configs])
    async with open_client(args) as client:
        if await client.api_version(CreateTopicsRequest) < 4:  # the broker's defaults need v4
            topic.num_partitions = max(topic.num_partitions, 1)
            topic.replication_factor = max(topic.replication_factor, 1)
        response = await client.send_to_controller(CreateTopicsRequest(topics=[topic], timeout_ms=TIMEOUT_MS))
    for result in response.topics:
        check_error(result.error_code, result.error_message, result.name)
    print(f"Created topic {args.name}.")
    return 0


async def topic_names(client: KafkaClient) -> list[str]:
    """Every topic's name, sorted (Metadata for all topics)."""
    metadata = await client.metadata(None)
    return sorted(topic.name for topic in metadata.topics if topic.error_code == ErrorCode.NONE)


async def list_topics(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        names = await topic_names(client)
    for name in names:
        print(name)
    return 0


@dataclass
class PartitionRow:
    index: int
    leader: int
    replicas: list[int]
    isr: list[int]
    elr: list[int] | None  # None: the broker does not say (Metadata): printed N/A
    last_known_elr: list[int] | None


@dataclass
class TopicRow:
    name: str
    topic_id: Any
    partitions: list[PartitionRow]


async def describe(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        topics = await describe_topics(client, args.names or None)
        configs = await describe_configs(client, ResourceType.TOPIC, [t.name for t in topics]) if topics else {}
    for topic in topics:
        print(topic_line(topic, configs[topic.name]))
        for partition in topic.partitions:
            print(partition_line(topic.name, partition))
    return 0


async def describe_topics(client: KafkaClient, names: list[str] | None) -> list[TopicRow]:
    """The topics by name (None: all), through DescribeTopicPartitions where the broker has it (as
    Kafka's admin client does), else Metadata; CommandError for a topic that does not exist."""
    if await client.supports(DescribeTopicPartitionsRequest):
        found = await _describe_topic_partitions(client, names)
    else:
        found = [_from_metadata(topic) for topic in (await client.metadata(names)).topics]
    return sorted(found, key=lambda t: t.name)


def _from_metadata(topic: Any) -> TopicRow:
    check_error(topic.error_code, None, topic.name)
    return TopicRow(topic.name, topic.topic_id, [
        PartitionRow(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes), None, None)
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)])


async def _describe_topic_partitions(client: KafkaClient, names: list[str] | None) -> list[TopicRow]:
    TopicRequest, Cursor = DescribeTopicPartitionsRequest.TopicRequest, DescribeTopicPartitionsRequest.Cursor
    if names is None:
        names = await topic_names(client)
    if not names:
        return []
    rows: dict[str, TopicRow] = {}
    cursor = None
    while True:
        response = await client.send(DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name=n) for n in names], response_partition_limit=2000, cursor=cursor))
        for topic in response.topics:
            check_error(topic.error_code, None, topic.name)
            row = rows.setdefault(topic.name, TopicRow(topic.name, topic.topic_id, []))
            row.partitions += [PartitionRow(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes),
                                            p.eligible_leader_replicas, p.last_known_elr) for p in topic.partitions]
        if response.next_cursor is None:
            break
        cursor = Cursor(topic_name=response.next_cursor.topic_name,
                        partition_index=response.next_cursor.partition_index)
    for row in rows.values():
        row.partitions.sort(key=lambda p: p.index)
    return list(rows.values())


def _ids(nodes: list[int] | None) -> str:
    return "N/A" if nodes is None else ",".join(map(str, nodes))


def java_hash_map_order(entries: list[Any]) -> list[Any]:
    """Config entries in the order kafka-topics --describe prints them: the iteration order of
    the java.util.HashMap<String, ConfigEntry> (default capacity 16) that Kafka's admin Config
    keeps them in (kafka-configs sorts them by name instead). A HashMap iterates by bucket (the spread String.hashCode masked by the capacity),
    a bucket's entries in insertion order (resizes keep it)."""
    capacity = 16
    while len(entries) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = 0
        for unit in name.encode("utf-16-be").hex(" ", 2).split():  # Java hashes UTF-16 code units
            h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [entry for _, _, entry in sorted((bucket(e.name), i, e) for i, e in enumerate(entries))]


def topic_line(topic: TopicRow, configs: list[Any]) -> str:
    """kafka-topics --describe's topic line (TopicCommand.TopicDescription)."""
    overridden = ",".join(f"{c.name}={java_string(c.value)}" for c in java_hash_map_order(configs) if c.config_source != ConfigSource.DEFAULT_CONFIG)
    replication = len(topic.partitions[0].replicas) if topic.partitions else 0
    topic_id = "" if topic.topic_id in (None, ZERO_UUID) else f"\tTopicId: {kafka_uuid_string(topic.topic_id)}"
    return (f"Topic: {topic.name}{topic_id}\tPartitionCount: {len(topic.partitions)}"
            f"\tReplicationFactor: {replication}\tConfigs: {overridden}")


def partition_line(topic: str, partition: PartitionRow) -> str:
    """kafka-topics --describe's partition line (TopicCommand.PartitionDescription)."""
    leader = partition.leader if partition.leader >= 0 else "none"
    return (f"\tTopic: {topic}\tPartition: {partition.index}\tLeader: {leader}\tReplicas: {_ids(partition.replicas)}"
            f"\tIsr: {_ids(partition.isr)}\tElr: {_ids(partition.elr)}\tLastKnownElr: {_ids(partition.last_known_elr)}")


async def alter(args: argparse.Namespace) -> int:
    if not args.configs and not args.delete_configs:
        raise CommandError("alter needs -c KEY=VALUE or --delete-config KEY", BAD_USAGE)
    async with open_client(args) as client:
        await alter_configs(client, ResourceType.TOPIC, args.name, config_changes(args))
    print(f"Completed updating config for topic {args.name}.")
    return 0


async def add_partitions(args: argparse.Namespace) -> int:
    Topic = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(topics=[Topic(name=args.name, count=args.partitions, assignments=None)],
                                      timeout_ms=TIMEOUT_MS)
    async with open_client(args) as client:
        response = await client.send_to_controller(request)
    for result in response.results:
        check_error(result.error_code, result.error_message, result.name)
    print(f"Topic {args.name} now has {args.partitions} partitions.")
    return 0


async def delete(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        if await client.api_version(DeleteTopicsRequest) >= 6:
            State = DeleteTopicsRequest.DeleteTopicState
            request = DeleteTopicsRequest(topics=[State(name=n) for n in args.names], timeout_ms=TIMEOUT_MS)
        else:
            request = DeleteTopicsRequest(topic_names=list(args.names), timeout_ms=TIMEOUT_MS)
        response = await client.send_to_controller(request)
    for result in response.responses:
        check_error(result.error_code, result.error_message, result.name)
    for name in args.names:
        print(f"Deleted topic {name}.")
    return 0


ACTIONS = {"create": create, "list": list_topics, "describe": describe, "alter": alter,
           "add-partitions": add_partitions, "delete": delete}
