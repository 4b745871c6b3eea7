"""`samsa bench produce|consume TOPIC`: a load against a cluster and what it measured, as Kafka's
producer-perf-test and consumer-perf-test do: a progress bar on stderr while it runs (a plain line
every few seconds when stderr is not a terminal), then a summary table (MB/s, records/s, latency
p50/p95/p99/max per record) and, with --plot, throughput and latency over time as a PNG
(matplotlib, the `plot` extra).

produce sends one batch per partition in each Produce request (one request per leader at a time,
the leaders in parallel); a request's latency is its round trip, counted for each of its records.
The batch is built once (random upper-case letters) and sent again and again, so the client's
Python code does not limit what the broker shows. consume reads the partitions from their
beginning; a Fetch's latency is its round trip, and its bytes are the batches as they came (their
headers counted, compressed if they are), which are not decoded: a batch header gives the count.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time

import trio

from ..wire.compression import CompressionType
from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError
from .bench_stats import Stats, progress_line, summary_table
from .client import KafkaClient, add_connection_arguments, check_error, open_client
from .fetching import EARLIEST, LATEST, Fetcher, count_batches, list_offsets
from .bench_plot import BLUE, ORANGE, RED, Panel, Series, plot, require_matplotlib
from .producing import ACKS, COMPRESSIONS, Producer, build_partition_batch
from .record_io import InputRecord
from .topic_metadata import TopicInfo, describe_topic

HELP = "measure produce or consume throughput and latency"

CreateTopicsRequest = message_class("CreateTopicsRequest")
TTY_REFRESH_S = 0.2
PLAIN_REFRESH_S = 5.0
LEADER_WAIT_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP + ": a progress bar, then a summary table, and with --plot a PNG of both over time"
    add_connection_arguments(parser)
    loads = parser.add_subparsers(dest="load", required=True, metavar="LOAD")
    produce = loads.add_parser("produce", help="send records as fast as the cluster takes them",
                               description="Send --records records of --record-size bytes to the topic (created "
                                           "with --partitions partitions when it does not exist).")
    consume = loads.add_parser("consume", help="read records from the beginning of the topic",
                               description="Read up to --records records from the beginning of the topic's partitions "
                                           "(fewer when the topic holds fewer).")
    for load in (produce, consume):
        load.add_argument("topic")
        load.add_argument("--records", type=int, default=100_000, help="how many (default 100000)")
        load.add_argument("--partitions", type=int, help="use this many partitions (default: all the topic's; "
                                                         "produce creates a missing topic with this many, default 1)")
        load.add_argument("--plot", metavar="FILE.png", help="write throughput and latency over time as a PNG (needs matplotlib: the plot extra)")
        add_connection_arguments(load, subcommand=True)
    produce.add_argument("--record-size", type=int, default=100, metavar="BYTES", help="value size (default 100)")
    produce.add_argument("--batch-size", type=int, default=16384, metavar="BYTES",
                         help="record bytes per partition in a request (default 16384, Kafka's batch.size)")
    produce.add_argument("--acks", choices=list(ACKS), default="all",
                         help="default all; with 0 a request's latency is only the time to write it")
    produce.add_argument("--compression", choices=COMPRESSIONS, default="none", help="default none")


def run(args: argparse.Namespace) -> int:
    for name in ("records", "partitions", "record_size", "batch_size"):
        value = getattr(args, name, None)
        if value is not None and value < (0 if name == "records" else 1):
            raise CommandError(f"--{name.replace('_', '-')} must be positive", BAD_USAGE)
    if args.plot:
        require_matplotlib()  # before the load, not after it
    return trio.run(bench, args)


async def bench(args: argparse.Namespace) -> int:
    stats = Stats()
    async with open_client(args, client_id="samsa-bench") as client:
        if args.load == "produce":
            info = await topic_for_producing(client, args.topic, args.partitions)
            partitions = info.partitions[:args.partitions or None]
            load, total = produce_load(client, info, partitions, args, stats), args.records
        else:
            info = await describe_topic(client, args.topic)
            partitions = info.partitions[:args.partitions or None]
            starts = await list_offsets(client, info, dict.fromkeys(partitions, EARLIEST))
            ends = await list_offsets(client, info, dict.fromkeys(partitions, LATEST))
            total = min(args.records, sum(ends[p] - starts[p] for p in partitions))
            load = consume_load(client, info, starts, total, stats)
        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(show_progress, stats, total, started)
            await load
            nursery.cancel_scope.cancel()
        elapsed = time.monotonic() - started
    end_progress(stats, total, elapsed)
    print(summary_table(stats.summary(elapsed)))
    if args.plot:
        write_plot(args.plot, stats, elapsed, f"bench {args.load} {args.topic}")
    return 0


async def topic_for_producing(client: KafkaClient, topic: str, partitions: int | None) -> TopicInfo:
    """The topic, created first when missing; once every partition has a leader."""
    metadata = await client.metadata([topic])
    if any(t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t in metadata.topics):
        response = await client.send_to_controller(CreateTopicsRequest(timeout_ms=30_000, topics=[
            CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=partitions or 1, replication_factor=-1)]))
        for result in response.topics:
            if result.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                check_error(result.error_code, result.error_message, topic)
    with trio.move_on_after(LEADER_WAIT_S):
        while True:
            try:
                info = await describe_topic(client, topic)
            except CommandError:
                info = None  # not in the metadata yet
            if info is not None and info.leaders and min(info.leaders.values()) >= 0:
                return info
            await trio.sleep(0.05)
    raise CommandError(f"{topic}: LEADER_NOT_AVAILABLE: no leader for every partition within {LEADER_WAIT_S:.0f} s")


async def produce_load(client: KafkaClient, info: TopicInfo, partitions: list[int], args: argparse.Namespace,
                       stats: Stats) -> None:
    value = "".join(random.choices(string.ascii_uppercase, k=args.record_size)).encode()
    per_batch = max(1, args.batch_size // args.record_size)
    producer = Producer(client, info, ACKS[args.acks], CompressionType.for_name(args.compression))
    batches: dict[int, bytes] = {}  # by record count

    def batch(count: int) -> bytes:
        if count not in batches:
            batches[count] = build_partition_batch([InputRecord(None, value, [])] * count, producer.compression)
        return batches[count]

    started, left = time.monotonic(), args.records
    while left > 0:
        counts = {}
        for partition in partitions:
            counts[partition] = min(per_batch, left)
            left -= counts[partition]
            if not left:
                break
        sent_at = time.monotonic()
        await producer.send_batches({p: batch(n) for p, n in counts.items()})
        done = time.monotonic()
        records = sum(counts.values())
        stats.add(done - started, records, records * args.record_size, done - sent_at)


async def consume_load(client: KafkaClient, info: TopicInfo, starts: dict[int, int], total: int,
                       stats: Stats) -> None:
    fetcher = Fetcher(client, info, starts, max_wait_ms=100, decode=count_batches)
    started = time.monotonic()
    while stats.records < total and not fetcher.at_end():
        sent_at = time.monotonic()
        batches = await fetcher.poll()
        done = time.monotonic()
        if batches:
            records = min(sum(b.records for b in batches), total - stats.records)
            stats.add(done - started, records, sum(b.bytes for b in batches), done - sent_at)


async def show_progress(stats: Stats, total: int, started: float) -> None:
    tty = sys.stderr.isatty()
    while True:
        await trio.sleep(TTY_REFRESH_S if tty else PLAIN_REFRESH_S)
        line = progress_line(stats.records, total, time.monotonic() - started, stats.bytes)
        print(f"\r{line}" if tty else line.partition("] ")[2].strip(), end="" if tty else "\n",
              file=sys.stderr, flush=True)


def end_progress(stats: Stats, total: int, elapsed: float) -> None:
    if sys.stderr.isatty():
        print(f"\r{progress_line(stats.records, total, elapsed, stats.bytes)}", file=sys.stderr, flush=True)


def write_plot(path: str, stats: Stats, elapsed: float, title: str) -> None:
    buckets = stats.buckets(elapsed)
    png = plot([
        Panel(f"{title}: throughput (MB/s)", [Series("MB/s", BLUE, [(b.end, b.mb_per_second) for b in buckets])]),
        Panel("latency (ms)", [Series("p50", ORANGE, [(b.end, b.p50_ms) for b in buckets if b.p50_ms is not None]),
                               Series("p99", RED, [(b.end, b.p99_ms) for b in buckets if b.p99_ms is not None])]),
    ], "seconds")
    try:
        with open(path, "wb") as out:
            out.write(png)
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror}", BAD_USAGE) from None
    print(f"plot written to {path}", file=sys.stderr)
