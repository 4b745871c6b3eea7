"""What `samsa consume` and `samsa produce` take of Kafka's console tools' command lines beside their
own short forms: the topic as --topic, KEY=VALUE properties for the formatter or reader and for the
client, properties files, and the client those properties configure (security, client.id,
request.timeout.ms), so that a kafka-console-consumer or kafka-console-producer command line works
with `samsa consume` or `samsa produce` in its place."""

from __future__ import annotations

import argparse

from ..server.config.kafka_config import ConfigError, parse_properties
from . import BAD_USAGE, CommandError
from .client import KafkaClient
from .client_config import ClientConfig


def add_topic_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("topic", nargs="?", help=f"the topic to {verb} (or --topic TOPIC)")
    parser.add_argument("--topic", dest="topic_option", metavar="TOPIC", help="the topic, as Kafka's tools take it")


def topic_of(args: argparse.Namespace) -> str:
    """TOPIC or --topic TOPIC (CommandError, exit 2, for neither or two different ones)."""
    if args.topic and args.topic_option and args.topic != args.topic_option:
        raise CommandError(f"two topics given: {args.topic} and --topic {args.topic_option}", BAD_USAGE)
    topic = args.topic or args.topic_option
    if not topic:
        raise CommandError("no topic: give TOPIC or --topic TOPIC", BAD_USAGE)
    return topic


def kafka_property(text: str) -> tuple[str, str]:
    """argparse type of KEY=VALUE as Kafka's tools read it (CommandLineUtils.parseKeyValueArgs):
    split at the first '=', the value may be empty or missing."""
    key, _, value = text.partition("=")
    return key, value


def load_properties(path: str | None) -> dict[str, str]:
    """A properties file, as java.util.Properties reads it (none: {}); CommandError (exit 2) when
    it cannot be read."""
    if path is None:
        return {}
    try:
        with open(path, encoding="latin-1") as file:  # java.util.Properties.load(InputStream)
            return parse_properties(file.read())
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}", BAD_USAGE) from None


def client_properties(config_file: str | None, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The client's properties: the file's, then each KEY=VALUE over them (Kafka's precedence)."""
    return load_properties(config_file) | dict(pairs)


def open_console_client(bootstrap: str, props: dict[str, str], client_id: str) -> KafkaClient:
    """A KafkaClient configured by `props` (client.id and request.timeout.ms, when set, override
    `client_id` and 30 s); CommandError (exit 2) for a config that cannot be used. cli/client.py's
    open_client reads --command-config alone; Kafka's tools merge it with --command-property."""
    try:
        config = ClientConfig(props)
        timeout_ms = int(props.get("request.timeout.ms", 30_000))
    except ConfigError as e:
        raise CommandError(f"invalid client config: {e}", BAD_USAGE) from None
    except ValueError:
        raise CommandError(f"invalid client config: request.timeout.ms {props['request.timeout.ms']!r} "
                           "is not a number", BAD_USAGE) from None
    return KafkaClient(bootstrap, config, props.get("client.id", client_id), timeout_ms)
