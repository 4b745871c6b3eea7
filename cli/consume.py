"""`samsa consume TOPIC`: records to stdout, one a line (kcat -C's job), from each partition's
leader by Fetch.

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
from typing import BinaryIO

import trio

from . import BAD_USAGE, CommandError
from .client import KafkaClient, add_connection_arguments, open_client
from .fetching import EARLIEST, ISOLATION_LEVELS, LATEST, Fetcher, list_offsets
from .group_offsets import commit_offsets, committed_offsets
from .record_io import OutputRecord, format_json, format_text
from .topic_metadata import TopicInfo, describe_topic

HELP = "consume records to stdout, one a line (text or JSON)"


class StartAt:
    """--from: EARLIEST or LATEST, an offset (`relative`: that many before the end), or a timestamp."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset: int | None = None
        self.timestamp: int | None = None
        self.relative = False
        if text == "beginning":
            self.timestamp = EARLIEST
        elif text == "end":
            self.timestamp = LATEST
        elif text.startswith("@"):
            self.timestamp = parse_timestamp(text[1:])
        else:
            try:
                self.offset = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected beginning, end, an offset, -N (N before the end) or @TIMESTAMP, got {text!r}") from None
            self.relative = self.offset < 0


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date and time (local time without a zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds since the epoch or an ISO date-time, "
                                         f"got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print a topic's records, one a line: the value, or KEY<SEP>VALUE with -K SEP; with -f json an object "
        "with topic, partition, offset, timestamp, key, value and headers (what produce -f json reads). "
        "Without -c, --timeout or -e it runs until interrupted. "
        "With -g GROUP it starts at the group's committed offsets (--from where it has none) and commits "
        "its position after each batch it prints, as a single consumer outside the group's membership: "
        "the coordinator refuses the commits while consumers are members of the group.")
    parser.add_argument("topic")
    parser.add_argument("-g", "--group", help="start from and commit to this consumer group's offsets")
    parser.add_argument("--from", dest="start", type=StartAt, default=StartAt("beginning"), metavar="WHERE",
                        help="beginning, end, an OFFSET, -N (N records before the end; write --from=-N) or "
                             "@TIMESTAMP (ms since the epoch or ISO 8601) (default beginning)")
    parser.add_argument("-p", "--partition", type=int, help="only this partition")
    parser.add_argument("-c", "--count", type=int, help="stop after this many records")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="stop after this long without a record")
    parser.add_argument("-e", "--exit-at-end", action="store_true", help="stop at the end of every partition")
    parser.add_argument("-f", "--format", choices=["text", "json"], default="text", help="output lines (default text)")
    parser.add_argument("-K", "--key-separator", metavar="SEP", help="text lines are KEY SEP VALUE")
    parser.add_argument("--isolation", choices=list(ISOLATION_LEVELS), default="read_uncommitted",
                        help="read_committed: only committed transactions' records (default read_uncommitted)")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.count is not None and args.count < 0:
        raise CommandError("-c: the count cannot be negative", BAD_USAGE)
    try:
        return trio.run(consume, args, sys.stdout.buffer)
    except BrokenPipeError:  # the reader went away (`samsa consume ... | head`): done, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit fails too
        return 0


async def start_positions(client: KafkaClient, info: TopicInfo, partitions: list[int], start: StartAt,
                          isolation: int) -> dict[int, int]:
    if start.offset is not None and not start.relative:
        return dict.fromkeys(partitions, start.offset)
    if start.relative:
        ends = await list_offsets(client, info, dict.fromkeys(partitions, LATEST), isolation)
        starts = await list_offsets(client, info, dict.fromkeys(partitions, EARLIEST), isolation)
        return {p: max(starts[p], ends[p] + start.offset) for p in partitions}
    return await list_offsets(client, info, dict.fromkeys(partitions, start.timestamp), isolation)


async def consume(args: argparse.Namespace, out: BinaryIO) -> int:
    isolation = ISOLATION_LEVELS[args.isolation]
    separator = args.key_separator.encode() if args.key_separator else None
    write = format_json if args.format == "json" else (lambda record: format_text(record, separator))
    async with open_client(args) as client:
        info = await describe_topic(client, args.topic)
        partitions = info.partitions
        if args.partition is not None:
            if args.partition not in info.leaders:
                raise CommandError(f"{args.topic} has no partition {args.partition}", BAD_USAGE)
            partitions = [args.partition]
        committed: dict[int, int] = {}
        if args.group:
            found = await committed_offsets(client, args.group, info)
            committed = {p: found[args.topic, p] for p in partitions if (args.topic, p) in found}
        positions = committed | await start_positions(
            client, info, [p for p in partitions if p not in committed], args.start, isolation)
        fetcher = Fetcher(client, info, positions, isolation)
        if args.exit_at_end:  # known before the first Fetch, which would wait for records at the end
            fetcher.end_offsets = await list_offsets(client, info, dict.fromkeys(partitions, LATEST), isolation)
        printed, last_record_at = 0, time.monotonic()
        while args.count is None or printed < args.count:
            if args.exit_at_end and fetcher.at_end():
                break
            records = await fetcher.poll()
            if records:
                last_record_at = time.monotonic()
            elif args.timeout is not None and time.monotonic() - last_record_at >= args.timeout:
                break
            shown = records if args.count is None else records[:args.count - printed]
            out.writelines(map(write, shown))
            out.flush()
            printed += len(shown)
            if args.group:
                consumed = fetcher.positions if len(shown) == len(records) else next_offsets(shown)
                changed = {p: o for p, o in consumed.items() if committed.get(p) != o}
                if changed:
                    await commit_offsets(client, args.group, fetcher.info, changed)
                    committed.update(changed)
    return 0


def next_offsets(records: list[OutputRecord]) -> dict[int, int]:
    """Each partition's offset after the last of `records`."""
    return {record.partition: record.offset + 1 for record in records}
