"""The click-count pipeline: a Structured Streaming job on Spark's Kafka connector.

    clicks topic (JSON clicks) --format("kafka")--> parse --> watermark --> count per page in 10 s
    event-time windows --> the counts topic (Kafka sink, JSON) and Parquet files (a second query)

Append mode: a window is written once, with its final count, when the watermark (the latest event
time seen, less the allowed lateness) passes its end; a click older than the watermark is dropped.
Both queries checkpoint to the work directory: a query restarted there goes on where it stopped.

    samsa pipeline clicks                       a local broker, 600 clicks at 20/s, then the table
    samsa pipeline clicks --bootstrap H:P,...   the same against a running Samsa (or Kafka) cluster
    samsa pipeline clicks --bootstrap H:P --report          only print the counts topic as a table
    samsa pipeline clicks --bootstrap H:P --generate-only   only produce the clicks
    samsa pipeline clicks -v ...                the same, with the clients' logs (librdkafka, Spark)
    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION pipelines/clicks.py \
        --cluster --bootstrap H:P --work-dir DIR            only the job, on spark-submit's cluster,
                                                            until it is stopped

The job's own code (above `create_topics`) needs nothing but pyspark, so spark-submit can run this
file as a script; the local run imports the generator and the session from this package.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

WINDOW = "10 seconds"
WATERMARK = "10 seconds"
CLICK_SCHEMA = "user STRING, page STRING, ts LONG"
# Read back as text: the ISO instants the job wrote (UTC), not timestamps in the reader's zone.
COUNT_SCHEMA = "page STRING, window_start STRING, window_end STRING, count LONG"


@dataclass(frozen=True)
class WindowCount:
    window_start: str  # ISO 8601, UTC, as the job writes it
    window_end: str
    page: str
    count: int


def kafka_options(bootstrap: str, **options: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, **options}


def read_clicks(spark, bootstrap: str, topic: str, **options: str):
    """The clicks topic as a stream (from its earliest offsets unless `startingOffsets` says)."""
    return (spark.readStream.format("kafka")
            .options(**kafka_options(bootstrap, subscribe=topic, startingOffsets="earliest", **options))
            .load())


def window_counts(raw, watermark: str = WATERMARK):
    """Kafka records of clicks -> (page, window_start, window_end, count). A value that is not a
    click (not JSON, no page or time) is skipped rather than failing the query."""
    from pyspark.sql import functions as F

    clicks = (raw.select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("click"))
              .select("click.*")
              .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    return (clicks.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", WINDOW), "page")
            .count()
            .select("page", F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "count"))


def as_kafka_records(counts, source_topic: str):
    """The Kafka sink's columns: key (the page), value (the window's JSON), headers (where the
    counts come from)."""
    from pyspark.sql import functions as F

    return counts.select(
        F.col("page").alias("key"),
        F.to_json(F.struct("page", "window_start", "window_end", "count")).alias("value"),
        F.array(F.struct(F.lit("source-topic").alias("key"), F.lit(source_topic).cast("binary").alias("value")))
        .alias("headers"))


def start(spark, bootstrap: str, input_topic: str, output_topic: str, work_dir: Path | str,
          trigger: dict | None = None, watermark: str = WATERMARK, **source_options: str):
    """Start the two queries (counts to the output topic, the same counts to work_dir/counts as
    Parquet), each checkpointing under work_dir/checkpoints (a local path or a URL such as
    hdfs://...). `trigger` is DataStreamWriter.trigger's keywords (default: a micro-batch every 2 s).
    Returns (kafka_query, parquet_query)."""
    trigger = trigger or {"processingTime": "2 seconds"}
    work_dir = str(work_dir).rstrip("/")
    counts = window_counts(read_clicks(spark, bootstrap, input_topic, **source_options), watermark)
    to_kafka = (as_kafka_records(counts, input_topic).writeStream.format("kafka")
                .options(**kafka_options(bootstrap, topic=output_topic))
                .option("checkpointLocation", f"{work_dir}/checkpoints/kafka")
                .outputMode("append").trigger(**trigger).queryName(f"{input_topic}-counts-to-kafka").start())
    to_parquet = (counts.writeStream.format("parquet")
                  .option("path", f"{work_dir}/counts")
                  .option("checkpointLocation", f"{work_dir}/checkpoints/parquet")
                  .outputMode("append").trigger(**trigger).queryName(f"{input_topic}-counts-to-parquet").start())
    return to_kafka, to_parquet


def read_counts(spark, bootstrap: str, topic: str) -> list[WindowCount]:
    """Every window in the counts topic (a batch read, earliest to latest), in window order."""
    from pyspark.sql import functions as F

    rows = (spark.read.format("kafka")
            .options(**kafka_options(bootstrap, subscribe=topic, startingOffsets="earliest", endingOffsets="latest"))
            .load()
            .select(F.from_json(F.col("value").cast("string"), COUNT_SCHEMA).alias("w")).select("w.*")
            .collect())
    return sorted((WindowCount(r.window_start, r.window_end, r.page, r["count"]) for r in rows),
                  key=lambda w: (w.window_start, w.page))


def read_parquet_counts(spark, path: Path) -> list[WindowCount]:
    """The Parquet query's windows, in the same form (instants as the JSON writes them)."""
    from pyspark.sql import functions as F

    iso = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"  # to_json's own format for timestamps
    rows = spark.read.parquet(str(path)).select(
        "page", F.date_format("window_start", iso).alias("window_start"),
        F.date_format("window_end", iso).alias("window_end"), "count").collect()
    return sorted((WindowCount(r.window_start, r.window_end, r.page, r["count"]) for r in rows),
                  key=lambda w: (w.window_start, w.page))


def format_table(counts: list[WindowCount]) -> str:
    """One row per window, one column per page, the count in each cell (blank: no clicks)."""
    if not counts:
        return "(no windows closed yet: a window is written once the watermark passes its end)"
    pages = sorted({c.page for c in counts})
    cells = {(c.window_start, c.page): c.count for c in counts}
    windows = sorted({(c.window_start, c.window_end) for c in counts})
    header = ["window (UTC)"] + pages + ["total"]
    rows = []
    for begin, end in windows:
        row = [cells.get((begin, p)) for p in pages]
        rows.append([f"{begin[11:19]}-{end[11:19]}"] + ["" if n is None else str(n) for n in row]
                    + [str(sum(n for n in row if n is not None))])
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths)))
             for line in [header] + rows]
    return "\n".join([lines[0], "-" * len(lines[0])] + lines[1:])


def create_topics(bootstrap: str, topics: dict[str, int], verbose: bool = False) -> None:
    """Create the topics {name: partitions} that do not exist yet, with the cluster's
    `default.replication.factor` and `min.insync.replicas` (a three-broker cluster set up for it,
    as docker-compose.yml's: three replicas and two in sync, so the job goes on through a broker's
    loss; a single broker: one replica)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from .click_events import librdkafka_logging

    admin = AdminClient({"bootstrap.servers": bootstrap, **librdkafka_logging(verbose)})
    existing = admin.list_topics(timeout=15).topics
    wanted = [NewTopic(name, partitions) for name, partitions in topics.items() if name not in existing]
    for future in admin.create_topics(wanted, operation_timeout=15).values() if wanted else ():
        future.result(15)


def generate(args: argparse.Namespace, bootstrap: str) -> None:
    """The clicks, from now on at args.rate per second; every 50th a minute late."""
    from .click_events import click_events, produce

    create_topics(bootstrap, {args.input_topic: 2, args.output_topic: 1}, args.verbose)
    interval_ms = max(1, round(1000 / args.rate))
    clicks = click_events(args.events, int(time.time() * 1000), interval_ms, seed=args.seed, too_late_every=50)
    print(f"producing {len(clicks)} clicks to {args.input_topic} at {args.rate}/s on {bootstrap}", file=sys.stderr)
    produce(bootstrap, args.input_topic, clicks, args.rate, args.verbose)


def run(args: argparse.Namespace, bootstrap: str, work_dir: Path) -> None:
    """Everything on this machine: the job in a local session while the clicks are produced, then
    the table."""
    from .spark_session import local_session

    create_topics(bootstrap, {args.input_topic: 2, args.output_topic: 1}, args.verbose)
    spark = local_session("samsa-clicks", verbose=args.verbose)
    queries = start(spark, bootstrap, args.input_topic, args.output_topic, work_dir)
    generate(args, bootstrap)  # the queries run meanwhile, in Spark's JVM
    for query in queries:
        query.processAllAvailable()
    watermark = (queries[0].lastProgress or {}).get("eventTime", {}).get("watermark")
    for query in queries:
        query.stop()
    print(format_table(read_counts(spark, bootstrap, args.output_topic)))
    print(f"watermark {watermark}: the windows ending after it are still open, not written", file=sys.stderr)
    spark.stop()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa pipeline clicks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="HOST:PORT[,HOST:PORT...] of the cluster's brokers (default: start a local samsa serve)")
    parser.add_argument("--events", type=int, default=600, help="clicks to produce (default 600)")
    parser.add_argument("--rate", type=float, default=20.0, help="clicks per second (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="let the clients log: librdkafka's lines and Spark's warnings (default: errors only)")
    parser.add_argument("--input-topic", default="clicks")
    parser.add_argument("--output-topic", default="click-counts")
    parser.add_argument("--work-dir",
                        help="checkpoints and Parquet output (default: a temporary directory, removed after)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--report", action="store_true",
                      help="only print the windows in the output topic as a table (needs --bootstrap)")
    mode.add_argument("--generate-only", action="store_true", help="only produce the clicks (needs --bootstrap)")
    mode.add_argument("--cluster", action="store_true",
                      help="only run the job, under spark-submit (its master, its --packages), until stopped "
                           "(needs --bootstrap and --work-dir)")
    args = parser.parse_args(argv)
    if (args.report or args.generate_only or args.cluster) and not args.bootstrap:
        parser.error("--report, --generate-only and --cluster use a running cluster: give --bootstrap")
    if args.cluster and not args.work_dir:
        parser.error("--cluster: give --work-dir, where every executor reaches the checkpoints")
    if args.rate <= 0:
        parser.error("--rate must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("samsa pipeline: needs pyspark: .venv/bin/pip install -e '.[pipeline]' "
              "(and bash scripts/fetch-jars.sh spark for its Kafka connector)", file=sys.stderr)
        return 2
    if not args.cluster:
        from .spark_session import ConnectorMissing, connector_jars

        try:
            connector_jars()
        except ConnectorMissing as e:
            print(f"samsa pipeline: {e}", file=sys.stderr)
            return 2
    if args.report:
        from .spark_session import local_session

        spark = local_session("samsa-clicks-report", verbose=args.verbose)
        print(format_table(read_counts(spark, args.bootstrap, args.output_topic)))
        spark.stop()
        return 0
    if args.generate_only:
        generate(args, args.bootstrap)
        return 0
    if args.cluster:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName("samsa-clicks").getOrCreate()
        start(spark, args.bootstrap, args.input_topic, args.output_topic, args.work_dir)
        spark.streams.awaitAnyTermination()
        return 0
    # SIGTERM unwinds like Ctrl-C: the local broker is stopped and the temporary directory removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work_dir = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="samsa-clicks-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.bootstrap:
            run(args, args.bootstrap, work_dir)
        else:
            from .local_broker import local_broker

            with local_broker(work_dir) as bootstrap:
                run(args, bootstrap, work_dir)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
