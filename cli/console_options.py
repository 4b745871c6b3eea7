"""What `samsa consume` and `samsa produce` take of Kafka's console tools' command lines beside their
own short forms: the topic as --topic and KEY=VALUE properties for the formatter or reader and for the
client (which cli/client.py's open_client puts over --command-config's file), so that a
kafka-console-consumer or kafka-console-producer command line works with `samsa consume` or `samsa
produce` in its place."""

from __future__ import annotations

import argparse

from . import BAD_USAGE, CommandError


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
