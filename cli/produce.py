"""`samsa produce TOPIC`: records from stdin, one a line, to the partitions' leaders (kcat -P's
job, with kafka-console-producer's options and text lines too). Lines are sent as they arrive:
whatever stdin holds at a time goes in one Produce request per leader, so a pipe is sent in large
batches and a terminal line by line."""

from __future__ import annotations

import argparse
import io
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import NamedTuple

import trio

from ..wire.compression import CompressionType
from . import BAD_USAGE, CommandError
from .client import KafkaClient, add_connection_arguments, open_client
from .client_config import ClientConfig, load_properties
from .console_options import add_topic_arguments, kafka_property, topic_of
from .line_reader import LineMessageReader, LineParseError, split_lines
from .options import key_value
from .producing import ACKS, COMPRESSIONS, Producer
from .record_io import Headers, InputRecord, parse_json_line
from .topic_metadata import describe_topic

HELP = "produce records from stdin, one a line (text or JSON)"

READ_SIZE = 1 << 16
MAX_RECORDS_PER_REQUEST = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Produce stdin's lines as records. Text: each line is a value, or KEY<SEP>VALUE with -K SEP, or what "
        "Kafka's console producer reads for the same --property settings (parse.key, key.separator, "
        "parse.headers, ...). "
        'JSON (-f json): each line an object {"key": ..., "value": ..., "headers": {...}, "partition": N, '
        '"timestamp": MS}, every field optional; a string key or value is sent as its UTF-8 bytes, another '
        "JSON value as its JSON text. A record goes to its partition (-p, or the JSON's), else its key's "
        "(Kafka's murmur2 partitioner), else the partitions in turn. kafka-console-producer's options work "
        "too (--topic, --property, --producer-property, --producer.config, --request-required-acks, "
        "--compression-codec, --sync, --request-timeout-ms).")
    add_topic_arguments(parser, "write to")
    parser.add_argument("-p", "--partition", type=int,
                        help="the partition of every record (a JSON line's own \"partition\" wins)")
    parser.add_argument("-K", "--key-separator", metavar="SEP",
                        help="text lines are KEY SEP VALUE (a line without SEP: a value without a key)")
    parser.add_argument("-f", "--format", choices=["text", "json"], default="text", help="input lines (default text)")
    parser.add_argument("-H", "--header", dest="headers", type=key_value, action="append", default=[],
                        metavar="KEY=VALUE", help="a header on every record (repeatable)")
    parser.add_argument("--acks", "--request-required-acks", dest="acks", choices=list(ACKS),
                        help="all (-1): the in-sync replicas have it, 1: the leader has it, 0: no answer awaited "
                             "(default all)")
    parser.add_argument("--compression", choices=COMPRESSIONS, help="batch compression (default none)")
    parser.add_argument("--compression-codec", dest="compression", nargs="?", const="gzip", choices=COMPRESSIONS,
                        help="--compression; without a value gzip, as Kafka's console producer takes it")
    parser.add_argument("--sync", action="store_true", help="each record in a request of its own, answered before the next")
    parser.add_argument("--request-timeout-ms", type=int, metavar="MS",
                        help="how long the leaders may take to answer (default 30000)")
    parser.add_argument("--property", "--reader-property", dest="reader_properties", type=kafka_property,
                        action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the text lines, as Kafka's LineMessageReader takes it: parse.key, "
                             "key.separator, parse.headers, headers.delimiter, headers.separator, "
                             "headers.key.separator, ignore.error, null.marker (repeatable)")
    parser.add_argument("--reader-config", metavar="FILE", help="those settings from a properties file")
    parser.add_argument("--producer-property", "--command-property", dest="producer_properties", type=kafka_property,
                        action="append", default=[], metavar="KEY=VALUE",
                        help="a producer config: acks, compression.type, request.timeout.ms, client.id, "
                             "security.protocol, ssl.*, sasl.* (repeatable)")
    add_connection_arguments(parser)
    parser.add_argument("--producer.config", dest="command_config", metavar="FILE", help="--command-config")


class ProduceSettings(NamedTuple):
    """What the command line says once Samsa's and Kafka's spellings are merged."""

    topic: str
    acks: int
    compression: int
    timeout_ms: int
    sync: bool
    partition: int | None
    parse: Callable[[bytes, int], InputRecord | None]

    @classmethod
    def of(cls, args: argparse.Namespace, config: ClientConfig) -> ProduceSettings:
        """`config`: the client's, from --producer.config and --producer-property."""
        props = config.props
        acks = args.acks or props.get("acks", "all").strip()
        if acks not in ACKS:
            raise CommandError(f"Invalid value {acks} for configuration acks: String must be one of: all, -1, 0, 1",
                               BAD_USAGE)
        compression = args.compression or props.get("compression.type", "none").strip()
        if compression not in COMPRESSIONS:
            raise CommandError(f"Invalid value {compression} for configuration compression.type: String must be one "
                               f"of: {', '.join(COMPRESSIONS)}", BAD_USAGE)
        timeout_ms = args.request_timeout_ms if args.request_timeout_ms is not None else config.request_timeout_ms
        if timeout_ms <= 0:
            raise CommandError("--request-timeout-ms must be positive", BAD_USAGE)
        return cls(topic_of(args), ACKS[acks], CompressionType.for_name(compression), timeout_ms, args.sync,
                   args.partition, line_parser(args))


def line_parser(args: argparse.Namespace) -> Callable[[bytes, int], InputRecord | None]:
    """A line (and its number) to its record, None for a line to skip (a blank JSON line)."""
    headers: Headers = [(key, value.encode()) for key, value in args.headers]
    if args.format == "json":
        if args.reader_properties or args.reader_config or args.key_separator is not None:
            raise CommandError("-f json takes none of -K, --property and --reader-config: they shape text lines",
                               BAD_USAGE)

        def parse_json(line: bytes, line_number: int) -> InputRecord | None:
            return parse_json_line(line, line_number, headers) if line.strip() else None
        return parse_json
    if args.key_separator == "":
        raise CommandError("-K: the key separator cannot be empty", BAD_USAGE)
    props = load_properties(args.reader_config)
    if args.key_separator is not None:  # Samsa's -K: a line without the separator is a value, no key
        props |= {"parse.key": "true", "key.separator": args.key_separator, "ignore.error": "true"}
    reader = LineMessageReader(props | dict(args.reader_properties))

    def parse_text(line: bytes, line_number: int) -> InputRecord:
        record = reader.read(line, line_number)
        return record._replace(headers=headers + record.headers) if headers else record
    return parse_text


def run(args: argparse.Namespace) -> int:
    client = open_client(args, properties=dict(args.producer_properties))
    settings = ProduceSettings.of(args, client.config)
    stdin = sys.stdin.buffer
    # Typed BinaryIO, which has no read1: it is a BufferedReader (a BytesIO under test), which has.
    assert isinstance(stdin, io.BufferedIOBase)
    return trio.run(produce, client, settings, stdin)


async def produce(client: KafkaClient, settings: ProduceSettings, stdin: io.BufferedIOBase) -> int:
    s = settings
    line_number = 0
    async with client:
        producer = Producer(client, await describe_topic(client, s.topic), s.acks, s.compression, s.timeout_ms)
        async for lines in read_lines(stdin):
            records: list[InputRecord] = []
            failure = None
            for line in lines:
                line_number += 1
                try:
                    record = s.parse(line, line_number)
                except LineParseError as e:
                    failure = e  # the lines before it are sent first, as Kafka's console producer sends them
                    break
                if record is not None:
                    if record.partition is None and s.partition is not None:
                        record = record._replace(partition=s.partition)
                    records.append(record)
            await send(producer, records, s.sync)
            if failure is not None:
                raise CommandError(str(failure), BAD_USAGE)
    return 0


async def send(producer: Producer, records: list[InputRecord], sync: bool) -> None:
    """The records in requests of up to MAX_RECORDS_PER_REQUEST, one batch per partition; with
    `sync` one record a request, each answered before the next is sent."""
    per_request = 1 if sync else MAX_RECORDS_PER_REQUEST
    for start in range(0, len(records), per_request):
        by_partition: dict[int, list[InputRecord]] = defaultdict(list)
        for record in records[start:start + per_request]:
            by_partition[producer.partition_of(record)].append(record)
        await producer.send(by_partition)


async def read_lines(stdin: io.BufferedIOBase) -> AsyncIterator[list[bytes]]:
    """Lists of complete lines (without their terminators: \n, \r\n or \r) as stdin delivers them;
    a last line without a terminator comes at the end."""
    pending = b""
    while True:
        chunk = await trio.to_thread.run_sync(stdin.read1, READ_SIZE)
        lines, pending = split_lines(pending + chunk, final=not chunk)
        if lines:
            yield lines
        if not chunk:
            break
