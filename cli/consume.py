"""`samsa consume TOPIC`: records to stdout, one a line (kcat -C's job, with kafka-console-consumer's
options and text lines too), from each partition's leader by Fetch.

With -g GROUP it consumes as a "simple" consumer of the group, not a member: it starts from the
group's committed offsets (OffsetFetch) and commits its position (OffsetCommit, generation -1)
after each batch it prints. That serves one consumer; the coordinator refuses the commits while
the group has active members (consumers that joined it), and the command stops with its error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from collections.abc import Callable
from typing import BinaryIO, NamedTuple

import trio

from . import BAD_USAGE, BROKER_REFUSED, CommandError
from .client import KafkaClient, add_connection_arguments, open_client
from .client_config import ClientConfig, load_properties
from .console_options import add_topic_arguments, kafka_property, topic_of
from .fetching import EARLIEST, ISOLATION_LEVELS, LATEST, Fetcher, list_offsets
from .group_offsets import commit_offsets, committed_offsets
from .message_formatter import FormatError, MessageFormatter
from .record_io import OutputRecord, format_json
from .topic_metadata import TopicInfo, describe_topic

HELP = "consume records to stdout, one a line (text or JSON)"


class StartAt:
    """--from: an offset (negative: that many before the end), else ListOffsets' timestamp (EARLIEST,
    LATEST or a time)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset: int | None = None
        self.timestamp = EARLIEST
        if text == "end":
            self.timestamp = LATEST
        elif text.startswith("@"):
            self.timestamp = parse_timestamp(text[1:])
        elif text != "beginning":
            try:
                self.offset = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected beginning, end, an offset, -N (N before the end) or @TIMESTAMP, got {text!r}") from None


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date and time (local time without a zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds since the epoch or an ISO date-time, "
                                         f"got {text!r}") from None


def kafka_offset(text: str) -> StartAt:
    """--offset as kafka-console-consumer takes it: earliest, latest or an offset (not negative)."""
    word = text.lower()
    if word in ("earliest", "latest"):
        return StartAt("beginning" if word == "earliest" else "end")
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"The provided offset value '{text}' is incorrect. Valid values are "
                                         "'earliest', 'latest', or a non-negative long.")
    return StartAt(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print a topic's records, one a line: the value, or KEY<SEP>VALUE with -K SEP, or what Kafka's "
        "console consumer prints for the same --property settings; with -f json an object with topic, "
        "partition, offset, timestamp, key, value and headers (what produce -f json reads). "
        "Without -c, --timeout or -e it runs until interrupted. "
        "With -g GROUP it starts at the group's committed offsets (--from where it has none) and commits "
        "its position after each batch it prints, as a single consumer outside the group's membership: "
        "the coordinator refuses the commits while consumers are members of the group. "
        "kafka-console-consumer's options work too (--topic, --from-beginning, --max-messages, --offset, "
        "--timeout-ms, --isolation-level, --property, --consumer-property, --consumer.config, ...), "
        "but it starts at the beginning unless told otherwise, where Kafka's starts at the end.")
    add_topic_arguments(parser, "read")
    parser.add_argument("-g", "--group", help="start from and commit to this consumer group's offsets")
    parser.add_argument("--from", dest="start", type=StartAt, metavar="WHERE",
                        help="beginning, end, an OFFSET, -N (N records before the end; write --from=-N) or "
                             "@TIMESTAMP (ms since the epoch or ISO 8601) (default beginning)")
    parser.add_argument("--from-beginning", action="store_true", help="start at the beginning (the default here)")
    parser.add_argument("--offset", type=kafka_offset, metavar="OFFSET", help="earliest, latest or an offset")
    parser.add_argument("-p", "--partition", type=int, help="only this partition")
    parser.add_argument("-c", "--count", "--max-messages", dest="count", type=int, help="stop after this many records")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="stop after this long without a record")
    parser.add_argument("--timeout-ms", type=int, metavar="MS", help="--timeout in milliseconds")
    parser.add_argument("-e", "--exit-at-end", action="store_true", help="stop at the end of every partition")
    parser.add_argument("-f", "--format", choices=["text", "json"], default="text", help="output lines (default text)")
    parser.add_argument("-K", "--key-separator", metavar="SEP", help="text lines are KEY SEP VALUE")
    parser.add_argument("--isolation", "--isolation-level", dest="isolation", choices=list(ISOLATION_LEVELS),
                        help="read_committed: only committed transactions' records (default read_uncommitted)")
    parser.add_argument("--property", "--formatter-property", dest="formatter_properties", type=kafka_property,
                        action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the text lines, as Kafka's DefaultMessageFormatter takes it: print.key, "
                             "print.timestamp, print.partition, print.offset, print.headers, print.value, "
                             "print.delivery, print.epoch, "
                             "key.separator, line.separator, headers.separator, null.literal, key.deserializer, "
                             "value.deserializer (repeatable)")
    parser.add_argument("--formatter-config", metavar="FILE", help="those settings from a properties file")
    parser.add_argument("--key-deserializer", metavar="CLASS", help="key.deserializer")
    parser.add_argument("--value-deserializer", metavar="CLASS", help="value.deserializer")
    parser.add_argument("--skip-message-on-error", action="store_true",
                        help="a record its deserializers refuse is skipped (said on stderr), not the end")
    parser.add_argument("--consumer-property", "--command-property", dest="consumer_properties", type=kafka_property,
                        action="append", default=[], metavar="KEY=VALUE",
                        help="a consumer config: group.id, auto.offset.reset, isolation.level, enable.auto.commit, "
                             "client.id, request.timeout.ms, security.protocol, ssl.*, sasl.* (repeatable)")
    add_connection_arguments(parser)
    parser.add_argument("--consumer.config", dest="command_config", metavar="FILE", help="--command-config")


def run(args: argparse.Namespace) -> int:
    if args.count is not None and args.count < 0:
        raise CommandError("-c: the count cannot be negative", BAD_USAGE)
    client = open_client(args, properties=dict(args.consumer_properties))
    settings = ConsumeSettings.of(args, client.config)
    try:
        return trio.run(consume, client, settings, sys.stdout.buffer)
    except BrokenPipeError:  # the reader went away (`samsa consume ... | head`): done, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit fails too
        return 0


class ConsumeSettings(NamedTuple):
    """What the command line says once Samsa's and Kafka's spellings are merged."""

    topic: str
    group: str | None
    commit: bool
    start: StartAt | None  # None: auto.offset.reset=none (a partition without a committed offset is an error)
    partition: int | None
    max_records: int | None  # not `count`: a tuple's method
    timeout: float | None
    exit_at_end: bool
    write: Callable[[OutputRecord], bytes]
    isolation: int
    skip_on_error: bool

    @classmethod
    def of(cls, args: argparse.Namespace, config: ClientConfig) -> ConsumeSettings:
        """`config`: the client's, from --consumer.config and --consumer-property."""
        props = config.props
        groups = list(dict.fromkeys(g for g in (args.group, props.get("group.id")) if g is not None))
        if len(groups) > 1:
            raise CommandError("The group ids provided in different places (directly using '--group', via "
                               "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
                               + ", ".join(f"'{g}'" for g in groups), BAD_USAGE)
        starts = [s for s in (args.start, args.offset) if s is not None]
        if args.from_beginning:
            if any(s.text != "beginning" for s in starts):
                raise CommandError("Options from-beginning and offset cannot be specified together.", BAD_USAGE)
            starts.append(StartAt("beginning"))
        reset = props.get("auto.offset.reset")
        if reset is not None and reset not in ("earliest", "latest", "none"):
            raise CommandError(f"Invalid value {reset} for configuration auto.offset.reset", BAD_USAGE)
        if args.from_beginning and reset not in (None, "earliest"):
            raise CommandError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                               "please remove one option", BAD_USAGE)
        if len(starts) > 1 and len({s.text for s in starts}) > 1:
            raise CommandError("--from and --offset cannot be specified together", BAD_USAGE)
        start = starts[0] if starts else {None: StartAt("beginning"), "earliest": StartAt("beginning"),
                                          "latest": StartAt("end"), "none": None}[reset]
        if args.timeout is not None and args.timeout_ms is not None:
            raise CommandError("--timeout and --timeout-ms cannot be specified together", BAD_USAGE)
        timeout = args.timeout_ms / 1000 if args.timeout_ms is not None else args.timeout
        isolation = args.isolation or props.get("isolation.level", "read_uncommitted")
        if isolation not in ISOLATION_LEVELS:
            raise CommandError(f"Invalid value {isolation} for configuration isolation.level", BAD_USAGE)
        return cls(topic_of(args), groups[0] if groups else None,
                   props.get("enable.auto.commit", "true").strip().lower() == "true", start, args.partition,
                   args.count, timeout, args.exit_at_end, record_writer(args), ISOLATION_LEVELS[isolation],
                   args.skip_message_on_error)


def record_writer(args: argparse.Namespace) -> Callable[[OutputRecord], bytes]:
    """-f json's lines, or the formatter's: its config file, then -K, the deserializer options and
    the --property settings, each over the ones before (Kafka's precedence)."""
    kafka_settings = (args.formatter_properties or args.formatter_config or args.key_deserializer
                      or args.value_deserializer)
    if args.format == "json":
        if kafka_settings or args.key_separator is not None:
            raise CommandError("-f json takes none of -K, --property, --formatter-config and the deserializers: "
                               "they shape text lines", BAD_USAGE)
        return format_json
    props = load_properties(args.formatter_config)
    if args.key_separator is not None:
        props |= {"print.key": "true", "key.separator": args.key_separator}
    for name in ("key_deserializer", "value_deserializer"):
        if getattr(args, name):
            props[name.replace("_", ".")] = getattr(args, name)
    return MessageFormatter(props | dict(args.formatter_properties)).format


async def start_positions(client: KafkaClient, info: TopicInfo, partitions: list[int], start: StartAt,
                          isolation: int) -> dict[int, int]:
    if start.offset is None:
        return await list_offsets(client, info, dict.fromkeys(partitions, start.timestamp), isolation)
    if start.offset >= 0:
        return dict.fromkeys(partitions, start.offset)
    ends = await list_offsets(client, info, dict.fromkeys(partitions, LATEST), isolation)
    starts = await list_offsets(client, info, dict.fromkeys(partitions, EARLIEST), isolation)
    return {p: max(starts[p], ends[p] + start.offset) for p in partitions}


async def consume(client: KafkaClient, settings: ConsumeSettings, out: BinaryIO) -> int:
    s = settings
    async with client:
        info = await describe_topic(client, s.topic)
        partitions = info.partitions
        if s.partition is not None:
            if s.partition not in info.leaders:
                raise CommandError(f"{s.topic} has no partition {s.partition}", BAD_USAGE)
            partitions = [s.partition]
        committed: dict[int, int] = {}
        if s.group:
            found = await committed_offsets(client, s.group, info)
            committed = {p: found[s.topic, p] for p in partitions if (s.topic, p) in found}
        uncommitted = [p for p in partitions if p not in committed]
        if s.start is None and uncommitted:  # auto.offset.reset=none, as Kafka's consumer refuses it
            raise CommandError("Undefined offset with no reset policy for partitions: "
                               f"[{', '.join(f'{s.topic}-{p}' for p in uncommitted)}]", BAD_USAGE)
        positions = committed | await start_positions(client, info, uncommitted, s.start or StartAt("beginning"),
                                                      s.isolation)
        fetcher = Fetcher(client, info, positions, s.isolation)
        if s.exit_at_end:  # known before the first Fetch, which would wait for records at the end
            fetcher.end_offsets = await list_offsets(client, info, dict.fromkeys(partitions, LATEST), s.isolation)
        printed, last_record_at = 0, time.monotonic()
        while s.max_records is None or printed < s.max_records:
            if s.exit_at_end and fetcher.at_end():
                break
            records = await fetcher.poll()
            if records:
                last_record_at = time.monotonic()
            elif s.timeout is not None and time.monotonic() - last_record_at >= s.timeout:
                break
            shown = records if s.max_records is None else records[:s.max_records - printed]
            failure = write_records(shown, s.write, out, s.skip_on_error)
            taken = shown if failure is None else shown[:shown.index(failure.record)]
            printed += len(taken)
            if s.group and s.commit:
                consumed = fetcher.positions if len(taken) == len(records) else next_offsets(taken)
                changed = {p: o for p, o in consumed.items() if committed.get(p) != o}
                if changed:
                    await commit_offsets(client, s.group, fetcher.info, changed)
                    committed.update(changed)
            if failure is not None:
                raise CommandError(str(failure), BROKER_REFUSED)
    return 0


class RecordFailure(Exception):
    def __init__(self, record: OutputRecord, error: FormatError) -> None:
        super().__init__(f"{record.topic}-{record.partition} offset {record.offset}: {error}")
        self.record = record


def write_records(records: list[OutputRecord], write: Callable[[OutputRecord], bytes], out: BinaryIO,
                  skip_on_error: bool) -> RecordFailure | None:
    """Each record's line to `out`; a record the formatter cannot print ends it (its failure
    returned) or, skipping, is said on stderr. What the formatter wrote of such a line is printed,
    as Kafka's is."""
    for record in records:
        try:
            out.write(write(record))
        except FormatError as e:
            out.write(e.written)
            failure = RecordFailure(record, e)
            if not skip_on_error:
                out.flush()
                return failure
            print(f"samsa consume: skipping {failure}", file=sys.stderr)
    out.flush()
    return None


def next_offsets(records: list[OutputRecord]) -> dict[int, int]:
    """Each partition's offset after the last of `records`."""
    return {record.partition: record.offset + 1 for record in records}
