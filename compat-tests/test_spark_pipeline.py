"""Spark's own Kafka connector (spark-sql-kafka-0-10, on the Java client) against a real broker:
the click-count pipeline (pipelines/clicks.py) gives exactly the expected windows, across a restart
from its checkpoint, and the connector's options that users set read and write exactly the chosen
records. Every test runs on Samsa and on Apache Kafka 4 with the same expectations; one more runs
the pipeline on three Samsa brokers through a leader's kill -9.

One local[2] SparkSession serves the module (a session costs seconds and half a GB); the streaming
queries run with trigger(availableNow=True), so each ends once it has read what the topic held,
except through the kill, where the job runs on as it would in production (a micro-batch every 0.5 s).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime, timezone

import pytest
from compat_util import confluent_admin, create_topic, wait_for

from samsa.pipelines import clicks as pipeline
from samsa.pipelines.click_events import Click, click_events, produce
from samsa.pipelines.spark_session import local_session
from samsa.wire import records

pytestmark = pytest.mark.slow

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the generated clicks' event times begin here
# Topics written with event times from START_MS keep them: those times are older than retention.ms's
# 7 days, so the broker's retention check (every log.retention.check.interval.ms, 5 minutes) deletes
# whatever it finds of them, its active segment rolled first: a read after it finds nothing.
KEEP_OLD_RECORDS = {"retention.ms": "-1"}
WINDOW_MS = 10_000
WATERMARK_MS = 10_000  # pipeline.WATERMARK
QUERY_TIMEOUT = 120


@pytest.fixture(scope="module")
def spark():
    session = local_session("samsa-compat-tests")
    yield session
    session.stop()


def test_the_pipeline_command_prints_no_client_chatter(tmp_path):
    """`samsa pipeline clicks` (its own broker, its own Spark session) prints its table on stdout
    and on stderr its own two lines only: no librdkafka line (`%6|...|GETSUBSCRIPTIONS|...`), no
    Spark WARN line nor the JVM's start-up notice, which come back with -v (not run here: a second
    Spark session would cost another 30 s; tests/pipelines checks -v for librdkafka)."""
    proc = subprocess.run([sys.executable, "-m", "samsa", "pipeline", "clicks", "--events", "60",
                           "--rate", "200", "--work-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=QUERY_TIMEOUT + 60)
    assert proc.returncode == 0, proc.stderr
    assert [line.split(" ", 1)[0] for line in proc.stderr.splitlines()] == ["producing", "watermark"], proc.stderr
    assert proc.stdout.startswith("window (UTC)"), proc.stdout  # the 50th click, a minute late, closed a window


def iso(ms: int) -> str:
    """An instant as the job's JSON writes it."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def expected_windows(clicks: list[Click], watermark_ms: int) -> list[pipeline.WindowCount]:
    """The windows append mode writes once the watermark is at watermark_ms: every window that
    ends by then, with all of its clicks."""
    counts = Counter((c.ts - c.ts % WINDOW_MS, c.page) for c in clicks)
    return sorted((pipeline.WindowCount(iso(begin), iso(begin + WINDOW_MS), page, n)
                   for (begin, page), n in counts.items() if begin + WINDOW_MS <= watermark_ms),
                  key=lambda w: (w.window_start, w.page))


def run_until_caught_up(spark, broker, input_topic, output_topic, work_dir, **options):
    """Both pipeline queries, each ending once it has read what the topic holds; returns the
    Kafka query's progress reports."""
    queries = pipeline.start(spark, broker.bootstrap, input_topic, output_topic, work_dir,
                             trigger={"availableNow": True}, **options)
    for query in queries:
        assert query.awaitTermination(QUERY_TIMEOUT), f"{query.name} still running after {QUERY_TIMEOUT}s"
        assert query.exception() is None, query.exception()
    return queries[0].recentProgress


def test_click_counts_are_exact_across_a_restart_from_the_checkpoint(spark, broker, tmp_path, topic_name):
    input_topic, output_topic = f"{topic_name}-clicks", f"{topic_name}-counts"
    create_topic(broker.bootstrap, input_topic, partitions=2, config=KEEP_OLD_RECORDS)
    create_topic(broker.bootstrap, output_topic)
    # Clicks 100 ms apart, every 7th up to 3 s late (within the 10 s watermark: all counted however
    # the micro-batches fall).
    first = click_events(250, START_MS, interval_ms=100, seed=1, max_lateness_ms=3000)
    produce(broker.bootstrap, input_topic, first)

    progress = run_until_caught_up(spark, broker, input_topic, output_topic, tmp_path, maxOffsetsPerTrigger="150")
    rows_read = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(rows_read) == len(first) and max(rows_read) <= 150 and len(rows_read) >= math.ceil(len(first) / 150)
    watermark = max(c.ts for c in first) - WATERMARK_MS
    assert pipeline.read_counts(spark, broker.bootstrap, output_topic) == expected_windows(first, watermark)

    # The query is stopped; more clicks arrive, among them three behind the watermark it kept in its
    # checkpoint (in a window already written: counting them would write that window twice).
    too_late = [Click("user-late", "/cart", START_MS + 5_000 + i) for i in range(3)]
    assert all(c.ts < watermark for c in too_late)
    second = click_events(250, START_MS + 25_000, interval_ms=100, seed=2, max_lateness_ms=3000)
    produce(broker.bootstrap, input_topic, too_late + second)

    run_until_caught_up(spark, broker, input_topic, output_topic, tmp_path)  # one micro-batch: fewer to wait for
    watermark = max(c.ts for c in second) - WATERMARK_MS
    expected = expected_windows(first + second, watermark)
    assert len({(w.window_start, w.page) for w in expected}) >= 15
    assert pipeline.read_counts(spark, broker.bootstrap, output_topic) == expected
    assert pipeline.read_parquet_counts(spark, tmp_path / "counts") == expected
    print(pipeline.format_table(expected))


def batch_read(spark, bootstrap: str, **options: str):
    """A batch query's (topic, partition, offset, value) rows, sorted."""
    rows = (spark.read.format("kafka").options(**pipeline.kafka_options(bootstrap, **options)).load()
            .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").collect())
    return sorted(tuple(r) for r in rows)


def produce_numbered(bootstrap: str, topic: str, partitions: int, per_partition: int, base_ts: int = START_MS,
                     headers=None) -> None:
    """Values "p<partition>-<i>" with CreateTime base_ts + i seconds, to each partition in turn."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"p{p}-{i}".encode(), partition=p, timestamp=base_ts + i * 1000,
                             headers=headers)
    assert producer.flush(30) == 0


def numbered(topic: str, partition: int, offsets) -> list[tuple]:
    return [(topic, partition, o, f"p{partition}-{o}") for o in offsets]


def test_batch_reads_between_offsets_and_between_timestamps(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2, config=KEEP_OLD_RECORDS)
    produce_numbered(broker.bootstrap, topic_name, partitions=2, per_partition=10)

    by_offset = batch_read(spark, broker.bootstrap, subscribe=topic_name,
                           startingOffsets=json.dumps({topic_name: {"0": 2, "1": 5}}),
                           endingOffsets=json.dumps({topic_name: {"0": 6, "1": -1}}))
    assert by_offset == numbered(topic_name, 0, range(2, 6)) + numbered(topic_name, 1, range(5, 10))

    # From the first record at or after each time; up to the first at or after the end (none in
    # partition 1: to its end).
    by_time = batch_read(spark, broker.bootstrap, subscribe=topic_name,
                         startingOffsetsByTimestamp=json.dumps({topic_name: {"0": START_MS + 2_500, "1": START_MS + 7_000}}),
                         endingOffsetsByTimestamp=json.dumps({topic_name: {"0": START_MS + 5_000, "1": START_MS + 60_000}}))
    assert by_time == numbered(topic_name, 0, range(3, 5)) + numbered(topic_name, 1, range(7, 10))


def test_read_committed_skips_an_aborted_transaction(spark, broker, topic_name):
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"spark-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    for outcome, values in (("commit", ["a", "b"]), ("abort", ["x", "y", "z"]), ("commit", ["c"])):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic_name, value=v.encode())
        producer.flush(30)  # abort_transaction drops what the client has not sent yet
        producer.commit_transaction(30) if outcome == "commit" else producer.abort_transaction(30)

    def values(isolation: str) -> list[str]:
        return [r[3] for r in batch_read(spark, broker.bootstrap, subscribe=topic_name,
                                         **{"kafka.isolation.level": isolation})]

    assert values("read_committed") == ["a", "b", "c"]
    assert values("read_uncommitted") == ["a", "b", "x", "y", "z", "c"]


def test_connector_options(spark, broker, topic_name):
    """subscribePattern, assign, minPartitions, includeHeaders, failOnDataLoss; the sink's topic
    column and headers; a stream's consumer group id prefix."""
    one, two, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}"
    create_topic(broker.bootstrap, one, config=KEEP_OLD_RECORDS)
    create_topic(broker.bootstrap, two, partitions=2, config=KEEP_OLD_RECORDS)
    create_topic(broker.bootstrap, other, config=KEEP_OLD_RECORDS)
    produce_numbered(broker.bootstrap, one, partitions=1, per_partition=8, headers=[("h", b"1"), ("h", None)])
    produce_numbered(broker.bootstrap, two, partitions=2, per_partition=3)
    produce_numbered(broker.bootstrap, other, partitions=1, per_partition=2)

    assert batch_read(spark, broker.bootstrap, subscribePattern=f"{topic_name}-.*") == (
        numbered(one, 0, range(8)) + numbered(two, 0, range(3)) + numbered(two, 1, range(3)))
    assert batch_read(spark, broker.bootstrap, assign=json.dumps({two: [1]})) == numbered(two, 1, range(3))

    split = (spark.read.format("kafka")
             .options(**pipeline.kafka_options(broker.bootstrap, subscribe=one, minPartitions="4")).load())
    assert split.rdd.getNumPartitions() == 4
    assert sorted(r.value.decode() for r in split.select("value").collect()) == [f"p0-{i}" for i in range(8)]

    headers = (spark.read.format("kafka")
               .options(**pipeline.kafka_options(broker.bootstrap, subscribe=one, includeHeaders="true")).load()
               .select("headers").collect())
    assert [[(h.key, h.value) for h in r.headers] for r in headers] == [[("h", b"1"), ("h", None)]] * 8

    # failOnDataLoss: offsets 0-4 deleted, a read from offset 0 fails, or goes on from 5.
    from confluent_kafka import TopicPartition

    admin = confluent_admin(broker.bootstrap)  # kept: its futures never complete once it is gone
    deleted = admin.delete_records([TopicPartition(one, 0, 5)], request_timeout=15)
    assert next(iter(deleted.values())).result(15).low_watermark == 5
    from_zero = dict(subscribe=one, startingOffsets=json.dumps({one: {"0": 0}}))
    assert batch_read(spark, broker.bootstrap, failOnDataLoss="false", **from_zero) == numbered(one, 0, range(5, 8))
    with pytest.raises(Exception, match="(?i)data.?loss|out of range|OffsetOutOfRange"):
        batch_read(spark, broker.bootstrap, failOnDataLoss="true", **from_zero)

    # The sink: each row to the topic its `topic` column names, with its headers.
    from pyspark.sql import functions as F

    rows = spark.createDataFrame([(one, "k1", "to-one"), (other, "k2", "to-other")], "topic STRING, key STRING, value STRING")
    (rows.withColumn("headers", F.array(F.struct(F.lit("origin").alias("key"), F.lit(b"spark").alias("value"))))
     .write.format("kafka").options(**pipeline.kafka_options(broker.bootstrap)).save())
    written = (spark.read.format("kafka")
               .options(**pipeline.kafka_options(broker.bootstrap, subscribe=f"{one},{other}", includeHeaders="true"))
               .load().where("headers IS NOT NULL AND size(headers) = 1 AND headers[0].key = 'origin'")
               .selectExpr("topic", "offset", "CAST(key AS STRING)", "CAST(value AS STRING)", "headers[0].value")
               .collect())
    assert sorted(tuple(r) for r in written) == [(one, 8, "k1", "to-one", b"spark"), (other, 2, "k2", "to-other", b"spark")]


def test_a_stream_joins_the_group_its_prefix_names(spark, broker, topic_name, tmp_path):
    """groupIdPrefix: with the consumer-based offset reader (the admin-based one, Spark's default,
    needs no group), the driver's consumer joins `<prefix>-<uuid>-driver-0` while the query runs."""
    create_topic(broker.bootstrap, topic_name, config=KEEP_OLD_RECORDS)
    produce_numbered(broker.bootstrap, topic_name, partitions=1, per_partition=3)
    prefix = f"samsa-spark-{uuid.uuid4().hex[:6]}"
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    try:
        stream = (spark.readStream.format("kafka")
                  .options(**pipeline.kafka_options(broker.bootstrap, subscribe=topic_name, startingOffsets="earliest",
                                                    groupIdPrefix=prefix)).load())
        query = (stream.writeStream.format("memory").queryName(f"q_{uuid.uuid4().hex[:8]}")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="1 second").start())
        try:
            admin = confluent_admin(broker.bootstrap)
            groups = wait_for(lambda: [g.group_id for g in admin.list_consumer_groups().result(10).valid
                                       if g.group_id.startswith(prefix)], timeout=60, what=f"a group {prefix}-*")
            assert groups[0].endswith("-driver-0")
            wait_for(lambda: spark.sql(f"SELECT count(*) FROM {query.name}").first()[0] == 3, timeout=60,
                     what="the stream's three records")
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.streaming.kafka.useDeprecatedOffsetFetching")


@pytest.fixture
def samsa_cluster(kafka39_factory):
    """ZooKeeper and three Samsa brokers (one of them the controller), sessions of 3 s: a killed
    broker's partitions get new leaders seconds after its kill."""
    from test_cluster_failover import Cluster

    cluster = Cluster(kafka39_factory, "samsa")
    try:
        yield cluster
    finally:
        cluster.close()


def test_click_counts_stay_exact_through_a_leader_kill(spark, samsa_cluster, tmp_path, topic_name):
    """The job runs (a micro-batch every 0.5 s, 100 clicks each) while the broker leading the
    output partition and an input partition is killed with kill -9 after its first: its consumers
    and its sink's producer go on with the new leaders, and the output topic holds every
    window exactly once with its exact count (the sink's idempotent producer, Kafka's default since
    3.0, makes its retries to the new leader no duplicates)."""
    from confluent_kafka.admin import NewTopic
    from test_cluster_failover import Restart

    cluster = samsa_cluster
    began = time.monotonic()
    phases = {}
    input_topic, output_topic = f"{topic_name}-clicks", f"{topic_name}-counts"
    replicated = {"min.insync.replicas": "2"}
    # Broker 1 leads the output partition and input partition 0 (the first replica leads).
    wanted = [NewTopic(input_topic, 2, replica_assignment=[[1, 2, 3], [2, 3, 1]], config=replicated | KEEP_OLD_RECORDS),
              NewTopic(output_topic, 1, replica_assignment=[[1, 2, 3]], config=replicated)]
    admin = confluent_admin(cluster.bootstrap)  # kept: its futures never complete once it is gone
    for future in admin.create_topics(wanted, operation_timeout=30).values():
        future.result(30)
    partitions = [(input_topic, 0), (input_topic, 1), (output_topic, 0)]

    def isrs_whole() -> bool:
        return all(set(cluster.state(t, p).isr) == {1, 2, 3} for t, p in partitions)

    wait_for(isrs_whole, 30, interval=0.1, what="every replica in every ISR")
    assert cluster.state(output_topic, 0).leader == cluster.state(input_topic, 0).leader == 1

    # Everything the job reads before and during the kill is in the topic first: the partitions
    # advance together batch by batch, so no click falls behind the watermark however long the
    # failover stalls a partition.
    phases["topics"] = time.monotonic() - began
    clicks = click_events(300, START_MS, interval_ms=100, seed=3, max_lateness_ms=3000)
    produce(cluster.bootstrap, input_topic, clicks)
    queries = pipeline.start(spark, cluster.bootstrap, input_topic, output_topic, tmp_path,
                             trigger={"processingTime": "500 milliseconds"}, maxOffsetsPerTrigger="100")
    try:
        kafka_query = queries[0]
        wait_for(lambda: any(p["numInputRows"] for p in kafka_query.recentProgress), QUERY_TIMEOUT, interval=0.2,
                 what="the first micro-batch")
        phases["first batch"] = time.monotonic() - began
        cluster.samsa[1].kill()  # the rest of the clicks are read, and the windows written, after it
        restart = Restart(cluster.samsa[1])
        wait_for(lambda: all(cluster.state(t, p).leader in (2, 3) for t, p in partitions), 30, interval=0.1,
                 what="new leaders after the kill")
        phases["new leaders"] = time.monotonic() - began
        # Once the job has read the first clicks, the generator goes on with the new leaders. None of
        # these is late: however the micro-batches split them, none is behind the watermark.
        wait_for(lambda: sum(p["numInputRows"] for p in kafka_query.recentProgress) == len(clicks), QUERY_TIMEOUT,
                 interval=0.2, what="the job through the first clicks")
        phases["first clicks read"] = time.monotonic() - began
        more = click_events(100, clicks[-1].ts + 100, interval_ms=100, seed=4, late_every=0)
        produce(cluster.bootstrap, input_topic, more)
        for query in queries:
            query.processAllAvailable()
            assert query.isActive and query.exception() is None, query.exception()
        batches = [p for p in kafka_query.recentProgress if p["numInputRows"]]
        phases["caught up"] = time.monotonic() - began
    finally:
        for query in queries:
            query.stop()
    restart.done()
    wait_for(isrs_whole, 60, interval=0.2, what="the restarted broker back in every ISR")
    assert sum(p["numInputRows"] for p in batches) == len(clicks) + len(more) and len(batches) >= 4
    watermark = max(c.ts for c in clicks + more) - WATERMARK_MS
    expected = expected_windows(clicks + more, watermark)
    assert len(expected) >= 12
    assert pipeline.read_counts(spark, cluster.bootstrap, output_topic) == expected
    assert pipeline.read_parquet_counts(spark, tmp_path / "counts") == expected
    # The sink's producer was idempotent: its every batch carries a producer id and sequence numbers.
    replica = cluster.samsa[2].data_dir / f"{output_topic}-0"
    headers = [h for segment in sorted(replica.glob("*.log"))
               for _, h in records.iter_batch_headers(segment.read_bytes())]
    assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers), headers[:3]
    print("seconds after the cluster's start:", {k: round(v, 1) for k, v in phases.items()})
