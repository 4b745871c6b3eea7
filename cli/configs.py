"""`samsa configs describe|alter (--broker ID | --broker-defaults | --topic NAME | --client-metrics NAME)
[-c KEY=VALUE ...] [--delete-config KEY ...] [--all]`: kafka-configs' --describe and --alter, through
DescribeConfigs and IncrementalAlterConfigs. `topics` describes and alters topic configs with the
functions here."""

from __future__ import annotations

import argparse
from typing import Any

import trio

from ..wire.config_resources import ConfigSource, OpType, ResourceType
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError
from .client import KafkaClient, add_connection_arguments, check_error, open_client
from .options import key_value

HELP = "describe or alter the configs of brokers, topics and client-metrics subscriptions"

DescribeConfigsRequest = message_class("DescribeConfigsRequest")
IncrementalAlterConfigsRequest = message_class("IncrementalAlterConfigsRequest")

# Kafka's ConfigEntry.ConfigSource names, as kafka-configs prints a synonym's source.
SOURCE_NAMES = {ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
                ConfigSource.CLIENT_METRICS_CONFIG: "DYNAMIC_CLIENT_METRICS_CONFIG",
                ConfigSource.GROUP_CONFIG: "DYNAMIC_GROUP_CONFIG"}
# The source of the entries kafka-configs --describe shows without --all: the dynamic ones.
DYNAMIC_SOURCE = {ResourceType.TOPIC: ConfigSource.TOPIC_CONFIG, ResourceType.BROKER: ConfigSource.DYNAMIC_BROKER_CONFIG,
                  ResourceType.CLIENT_METRICS: ConfigSource.CLIENT_METRICS_CONFIG}


def add_config_change_arguments(parser: argparse.ArgumentParser) -> None:
    """-c/--config KEY=VALUE ... to set and --delete-config KEY ... to remove (repeatable)."""
    parser.add_argument("-c", "--config", dest="configs", type=key_value, action="extend", nargs="+", default=[],
                        metavar="KEY=VALUE", help="a config to set (repeatable)")
    parser.add_argument("--delete-config", dest="delete_configs", action="extend", nargs="+", default=[],
                        metavar="KEY", help="a config to remove, back to its default (repeatable)")


def config_changes(args: argparse.Namespace) -> list[Any]:
    """The -c and --delete-config arguments as IncrementalAlterConfigs operations."""
    Alterable = IncrementalAlterConfigsRequest.AlterableConfig
    return ([Alterable(name=key, config_operation=OpType.SET, value=value) for key, value in args.configs]
            + [Alterable(name=key, config_operation=OpType.DELETE, value=None) for key in args.delete_configs])


async def describe_configs(client: KafkaClient, resource_type: ResourceType, names: list[str],
                           node_id: int | None = None) -> dict[str, list[Any]]:
    """Each resource's config entries (with synonyms) by name; CommandError for a resource the
    broker refuses. `node_id`: the broker to ask (a broker's own configs), else the controller."""
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[Resource(resource_type=resource_type, resource_name=name,
                                                         configuration_keys=None) for name in names],
                                     include_synonyms=True)
    response = await (client.send(request, node_id) if node_id is not None else client.send_to_controller(request))
    configs = {}
    for result in response.results:
        check_error(result.error_code, result.error_message, result.resource_name or None)
        configs[result.resource_name] = result.configs
    return configs


async def alter_configs(client: KafkaClient, resource_type: ResourceType, name: str, changes: list[Any],
                        node_id: int | None = None) -> None:
    """IncrementalAlterConfigs of one resource; CommandError with the broker's error."""
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(resources=[Resource(resource_type=resource_type, resource_name=name,
                                                                 configs=changes)])
    response = await (client.send(request, node_id) if node_id is not None else client.send_to_controller(request))
    for result in response.responses:
        check_error(result.error_code, result.error_message, result.resource_name or None)


def java_string(value: str | None) -> str:
    """A value as Java's string concatenation prints it: null for none."""
    return "null" if value is None else value


def source_name(source: int) -> str:
    """A config source as Kafka's ConfigEntry.ConfigSource names it."""
    try:
        known = ConfigSource(source)
    except ValueError:
        return "UNKNOWN"
    return SOURCE_NAMES.get(known, known.name)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("action", choices=["describe", "alter"])
    entity = parser.add_mutually_exclusive_group(required=True)
    entity.add_argument("--broker", type=int, metavar="ID", help="one broker's configs")
    entity.add_argument("--broker-defaults", action="store_true", help="the cluster-wide broker defaults")
    entity.add_argument("--topic", metavar="NAME")
    entity.add_argument("--client-metrics", metavar="NAME", help="a client-metrics subscription")
    add_config_change_arguments(parser)
    parser.add_argument("--all", action="store_true", help="describe: every config, not only the dynamic ones")


def run(args: argparse.Namespace) -> int:
    return trio.run(configs, args)


def resource_of(args: argparse.Namespace) -> tuple[ResourceType, str, int | None, str]:
    """The resource type, its name, the broker to send to (None: the controller) and its words
    in kafka-configs' messages."""
    if args.broker is not None:
        return ResourceType.BROKER, str(args.broker), args.broker, f"broker {args.broker}"
    if args.broker_defaults:
        return ResourceType.BROKER, "", None, "brokers in the cluster"
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic, None, f"topic {args.topic}"
    return ResourceType.CLIENT_METRICS, args.client_metrics, None, f"client-metric {args.client_metrics}"


async def configs(args: argparse.Namespace) -> int:
    resource_type, name, node_id, words = resource_of(args)
    async with open_client(args) as client:
        if args.action == "alter":
            if not args.configs and not args.delete_configs:
                raise CommandError("alter needs -c KEY=VALUE or --delete-config KEY", BAD_USAGE)
            await alter_configs(client, resource_type, name, config_changes(args), node_id)
            default = "default " if args.broker_defaults else ""
            print(f"Completed updating {default}config for {words}.")
            return 0
        entries = (await describe_configs(client, resource_type, [name], node_id))[name]
    print_configs(entries, resource_type, name, words, args.all)
    return 0


def print_configs(entries: list[Any], resource_type: ResourceType, name: str, words: str, describe_all: bool) -> None:
    """kafka-configs --describe's lines: a heading, then `  name=value sensitive=... synonyms={...}`
    by name."""
    if describe_all:
        print(f"All configs for {words} are:")
    elif resource_type == ResourceType.BROKER and not name:
        print(f"Default configs for {words} are:")
    else:
        print(f"Dynamic configs for {words} are:")
    wanted = (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if resource_type == ResourceType.BROKER and not name
              else DYNAMIC_SOURCE.get(resource_type))
    for entry in sorted(entries, key=lambda e: e.name):
        if not describe_all and entry.config_source != wanted:
            continue
        synonyms = ", ".join(f"{source_name(s.source)}:{s.name}={java_string(s.value)}" for s in entry.synonyms)
        print(f"  {entry.name}={java_string(entry.value)} sensitive={'true' if entry.is_sensitive else 'false'} synonyms={{{synonyms}}}")
