"""`samsa produce TOPIC`: records from stdin, one a line, to the partitions' leaders (kcat -P's
job). Lines are sent as they arrive: whatever stdin holds at a time goes in one Produce request
per leader, so a pipe is sent in large batches and a terminal line by line."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import BinaryIO

import trio

from ..wire.compression import CompressionType
from . import BAD_USAGE, CommandError
from .client import add_connection_arguments, open_client
from .options import key_value
from .producing import ACKS, COMPRESSIONS, Producer
from .record_io import Headers, InputRecord, parse_json_line, parse_text_line

HELP = "produce records from stdin, one a line (text or JSON)"

READ_SIZE = 1 << 16
MAX_RECORDS_PER_REQUEST = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Produce stdin's lines as records. Text: each line is a value, or KEY<SEP>VALUE with -K SEP. "
        'JSON (-f json): each line an object {"key": ..., "value": ..., "headers": {...}, "partition": N, '
        '"timestamp": MS}, every field optional; a string key or value is sent as its UTF-8 bytes, another '
        "JSON value as its JSON text. A record goes to its partition (-p, or the JSON's), else its key's "
        "(Kafka's murmur2 partitioner), else the partitions in turn.")
    parser.add_argument("topic")
    parser.add_argument("-p", "--partition", type=int,
                        help="the partition of every record (a JSON line's own \"partition\" wins)")
    parser.add_argument("-K", "--key-separator", metavar="SEP", help="text lines are KEY SEP VALUE")
    parser.add_argument("-f", "--format", choices=["text", "json"], default="text", help="input lines (default text)")
    parser.add_argument("-H", "--header", dest="headers", type=key_value, action="append", default=[],
                        metavar="KEY=VALUE", help="a header on every record (repeatable)")
    parser.add_argument("--acks", choices=list(ACKS), default="all",
                        help="all (-1): the in-sync replicas have it, 1: the leader has it, 0: no answer awaited "
                             "(default all)")
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none", help="batch compression (default none)")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.key_separator == "":
        raise CommandError("-K: the key separator cannot be empty", BAD_USAGE)
    return trio.run(produce, args, sys.stdin.buffer)


async def produce(args: argparse.Namespace, stdin: BinaryIO) -> int:
    headers: Headers = [(key, value.encode()) for key, value in args.headers]
    separator = args.key_separator.encode() if args.key_separator else None
    line_number = 0

    def parse(line: bytes) -> InputRecord | None:
        nonlocal line_number
        line_number += 1
        if args.format == "json":
            if not line.strip():
                return None
            record = parse_json_line(line, line_number, headers)
        else:
            record = parse_text_line(line, separator, headers)
        if record.partition is None and args.partition is not None:
            record = record._replace(partition=args.partition)
        return record

    async with open_client(args) as client:
        producer = await Producer.open(client, args.topic, ACKS[args.acks],
                                       CompressionType.for_name(args.compression))
        async for lines in read_lines(stdin):
            records = [record for record in map(parse, lines) if record is not None]
            for start in range(0, len(records), MAX_RECORDS_PER_REQUEST):
                by_partition: dict[int, list[InputRecord]] = defaultdict(list)
                for record in records[start:start + MAX_RECORDS_PER_REQUEST]:
                    by_partition[producer.partition_of(record)].append(record)
                await producer.send(by_partition)
    return 0


async def read_lines(stdin: BinaryIO):
    """Lists of complete lines (without their newline) as stdin delivers them; a last line without
    a newline comes at the end."""
    pending = b""
    while True:
        chunk = await trio.to_thread.run_sync(stdin.read1, READ_SIZE)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        if lines:
            yield lines
    if pending:
        yield [pending]
