"""Kafka's own command-line tools (from the Kafka 4.4 jars) against Samsa and against Kafka 4.4.

Each tool runs as Kafka's bin/*.sh scripts run it, `java -cp "KAFKA4/*" <main class> ...`, with a
JVM that starts fast (C1 only, serial GC, class data sharing) and a log4j2 config that sends
warnings to stderr, so stdout holds what the tool prints. A scenario is a list of tool runs against
one broker; its transcript (each command, its stdout, its exit code) is normalized (ids, hosts,
ports, times and column widths removed) and Samsa's transcript must equal Kafka's. Both brokers run
the same scenario at the same time, each in its own thread.

Broker-specific differences that are not Samsa's mistakes are normalized, each where it is done.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import BrokerPool, broker_kinds
import class_sharing
from wire_client import WireClient
from kafka_oracle import JVM_OPTS, OracleUnavailable, class_path, java

from samsa.wire.protocol import ApiKey, request_class

DescribeLogDirs = request_class(ApiKey.DESCRIBE_LOG_DIRS)

TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",  # test_delegation_tokens.py
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",  # test_kraft_tools.py
}
# A tool lives for a second or two: C1 only and the serial collector start it fastest, and the
# shared class archive (class_sharing.py) saves loading the JDK's and Kafka's classes again.
TOOL_JVM_OPTS = [o for o in JVM_OPTS if not o.startswith("-Xmx")] + ["-Xmx256m", "-Xshare:auto"]
# Warnings and errors of the tools' loggers go to stderr (kept for a failure's message), never stdout.
TOOLS_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""
# A line of the tools' loggers on stderr (TOOLS_LOG4J2's pattern).
LOGGER_LINE = re.compile(r"(TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
TOOL_TIMEOUT = 60
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


class Tools:
    """Runs Kafka's tools against one broker and keeps a transcript of what they printed."""

    def __init__(self, bootstrap: str, work_dir: Path, log4j2: Path):
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.log4j2 = log4j2
        self.transcript: list[str] = []
        self.stderr: list[str] = []

    def run(self, tool: str, *args: str, stdin: str | None = None, bootstrap: bool = True,
            record: bool = True, errors: bool = False) -> subprocess.CompletedProcess:
        """`tool --bootstrap-server B args...`; stdout and the exit code go into the transcript,
        with `errors` also what the tool itself printed to stderr (its loggers' lines left out)."""
        argv = [*(["--bootstrap-server", self.bootstrap] if bootstrap else []), *args]
        cmd = [java(), *TOOL_JVM_OPTS, *class_sharing.options("kafka4"), f"-Dlog4j2.configurationFile={self.log4j2}",
               "-cp", class_path("kafka4"), TOOLS[tool], *argv]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                              cwd=self.work_dir)
        line = f"$ {tool} {' '.join(args)}"
        self.stderr.append(f"{line}\n{proc.stderr}")
        if record:
            printed = proc.stdout
            if errors:
                printed += "".join(f"stderr: {e}\n" for e in proc.stderr.splitlines() if not LOGGER_LINE.match(e))
            self.transcript.append(f"{line}\n{printed}[exit {proc.returncode}]")
        return proc

    def run_sorted(self, tool: str, *args: str) -> None:
        """For output in an order no protocol defines (groups listed, records of several
        partitions): its lines sorted go into the transcript."""
        proc = self.run(tool, *args, record=False)
        self.transcript.append(f"$ {tool} {' '.join(args)} (sorted)\n{sort_lines(proc.stdout)}\n[exit {proc.returncode}]")


# -- normalizing ----------------------------------------------------------------------------------

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
SUBSTITUTIONS = [
    # Topic ids: Kafka's Uuid in url-safe base64.
    (re.compile(r"(TopicId:\s*)[A-Za-z0-9_-]{22}"), r"\1<topic-id>"),
    # Member and client ids the consumers made up.
    (re.compile(rf"\S*{UUID_RE}\S*"), "<member-id>"),
    # The group a console consumer without --group makes up.
    (re.compile(r"\bconsole-consumer-\d+\b"), "console-consumer-<n>"),
    # Dates and times: ISO-8601, and epoch milliseconds (13 digits).
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b1\d{12}\b"), "<time-ms>"),
]


def normalize(text: str, bootstrap: str, data_dir: Path) -> str:
    """A transcript without what differs between any two brokers: their address, their data dir,
    ids and times; runs of spaces and tabs (column widths follow the values) become one space."""
    text = text.replace(bootstrap, "<broker>").replace(str(data_dir), "<log-dir>")
    text = re.sub(r"/\d+\.\d+\.\d+\.\d+(?=\s|$)", "/<host>", text)  # a member's client host
    for pattern, repl in SUBSTITUTIONS:
        text = pattern.sub(repl, text)
    text = re.sub(r"[ \t]+", " ", text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def sort_lines(text: str) -> str:
    return "\n".join(sorted(line for line in text.splitlines() if line))


# -- running a scenario on both brokers -----------------------------------------------------------

@pytest.fixture(scope="module")
def log4j2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tools") / "tools-log4j2.properties"
    path.write_text(TOOLS_LOG4J2)
    return path


@pytest.fixture(scope="module")
def kinds():
    wanted = broker_kinds()
    if not {"samsa", "kafka"} <= set(wanted):
        pytest.skip("compares Samsa's output with Kafka's: needs both in SAMSA_COMPAT_BROKERS")
    try:
        class_path("kafka4")
        java()
    except OracleUnavailable as e:
        pytest.skip(str(e))
    return ["samsa", "kafka"]


def start_pair(tmp_path_factory, kinds, overrides=None) -> tuple[dict, list[BrokerPool]]:
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in kinds]
    try:
        return {kind: pool(overrides) for kind, pool in zip(kinds, pools)}, pools
    except BaseException:
        for pool in pools:
            pool.close()
        raise


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, kinds):
    """A Samsa broker and a Kafka broker, default settings, shared by the module's scenarios."""
    started, pools = start_pair(tmp_path_factory, kinds)
    try:
        yield started
    finally:
        for pool in pools:
            pool.close()


def run_on_both(brokers: dict, scenario, tmp_path: Path, log4j2: Path, *args) -> dict[str, str]:
    """scenario(tools, *args) on each broker at once; the normalized transcripts by broker kind."""

    def one(kind):
        b = brokers[kind]
        work = tmp_path / kind
        work.mkdir()
        tools = Tools(b.bootstrap, work, log4j2)
        scenario(tools, *args)
        return tools

    with ThreadPoolExecutor(len(brokers)) as ex:
        done = dict(zip(brokers, ex.map(one, brokers)))
    out = {}
    for kind, tools in done.items():
        b = brokers[kind]
        out[kind] = "\n".join(normalize(t, b.bootstrap, b.data_dir) for t in tools.transcript)
        (tmp_path / kind / "stderr.txt").write_text("\n".join(tools.stderr))
        (tmp_path / kind / "transcript.txt").write_text(out[kind])
    return out


def assert_same(out: dict[str, str], tmp_path: Path) -> None:
    """Samsa's transcript equals Kafka's; else the diff, and where the tools' stderr is."""
    diff = "\n".join(difflib.unified_diff(out["kafka"].splitlines(), out["samsa"].splitlines(),
                                          "kafka", "samsa", lineterm=""))
    assert out["samsa"] == out["kafka"], f"{diff}\n(the tools' stderr: {tmp_path}/*/stderr.txt)"


# -- scenarios ------------------------------------------------------------------------------------

def topics_scenario(t: Tools) -> None:
    t.run("kafka-topics", "--create", "--topic", "tools-topics", "--partitions", "3", "--replication-factor", "1",
          "--config", "retention.ms=123456", "--config", "cleanup.policy=compact")
    t.run("kafka-topics", "--create", "--topic", "tools-topics", "--partitions", "1")  # already there
    t.run("kafka-topics", "--create", "--topic", "tools-topics", "--partitions", "1", "--if-not-exists")
    t.run("kafka-topics", "--list", "--exclude-internal")
    t.run("kafka-topics", "--describe", "--topic", "tools-topics")
    t.run("kafka-topics", "--alter", "--topic", "tools-topics", "--partitions", "5")
    t.run("kafka-topics", "--describe", "--topic", "tools-topics", "--unavailable-partitions")
    t.run("kafka-topics", "--describe", "--topic", "tools-topics")
    t.run("kafka-topics", "--delete", "--topic", "tools-topics")
    t.run("kafka-topics", "--describe", "--topic", "tools-topics")  # gone


def test_kafka_topics(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, topics_scenario, tmp_path, log4j2), tmp_path)


def fewer_partitions_scenario(t: Tools) -> None:
    create_topic(t, "tools-fewer-partitions", 3)
    t.run("kafka-topics", "--alter", "--topic", "tools-fewer-partitions", "--partitions", "2")


def test_kafka_topics_refuses_fewer_partitions(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, fewer_partitions_scenario, tmp_path, log4j2), tmp_path)


KEYED_LINES = "h1:v1,h2:v2\tk1\tone\nh1:v3\tk2\ttwo\nh3:\tk3\tthree\n"
PRODUCE_KEYED = ["--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
                 "--reader-property", "key.separator=\t", "--reader-property", "headers.delimiter=\t",
                 "--reader-property", "headers.separator=,", "--reader-property", "headers.key.separator=:",
                 # one record per partition, whatever the keys hash to
                 "--command-property", "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner"]
CONSUME_PRINTING_ALL = ["--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
                        "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
                        "--formatter-property", "print.timestamp=true", "--timeout-ms", "15000"]


def create_topic(t: Tools, topic: str, partitions: int) -> None:
    t.run("kafka-topics", "--create", "--topic", topic, "--partitions", str(partitions), record=False)


def console_scenario(t: Tools) -> None:
    create_topic(t, "tools-console", 3)
    t.run("kafka-console-producer", "--topic", "tools-console", *PRODUCE_KEYED, stdin=KEYED_LINES)
    t.run_sorted("kafka-console-consumer", "--topic", "tools-console", "--from-beginning", "--max-messages", "3",
                 *CONSUME_PRINTING_ALL, "--formatter-property", "print.timestamp=false")
    t.run("kafka-console-consumer", "--topic", "tools-console", "--partition", "1", "--offset", "0",
          "--max-messages", "1", *CONSUME_PRINTING_ALL, "--formatter-property", "print.value=false")


def test_kafka_console_producer_and_consumer(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, console_scenario, tmp_path, log4j2), tmp_path)


def consumer_groups_scenario(t: Tools) -> None:
    create_topic(t, "tools-groups", 3)
    t.run("kafka-console-producer", "--topic", "tools-groups", *PRODUCE_KEYED, stdin=KEYED_LINES, record=False)
    t.run("kafka-console-consumer", "--topic", "tools-groups", "--from-beginning", "--max-messages", "3",
          "--group", "tools-group", "--timeout-ms", "15000", record=False)
    # 2 more records on each partition: a lag of 2 everywhere
    t.run("kafka-console-producer", "--topic", "tools-groups", *PRODUCE_KEYED, stdin=KEYED_LINES * 2, record=False)
    g = ["--group", "tools-group"]
    t.run_sorted("kafka-consumer-groups", "--list")
    t.run("kafka-consumer-groups", "--describe", *g)
    t.run("kafka-consumer-groups", "--describe", *g, "--state", "--verbose")
    t.run("kafka-consumer-groups", "--describe", *g, "--members", "--verbose")
    # a dry run (the default, or --dry-run) prints the plan and changes nothing
    t.run("kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups", "--to-earliest")
    t.run("kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups", "--to-earliest", "--dry-run")
    t.run("kafka-consumer-groups", "--describe", *g, "--offsets")
    t.run("kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups", "--to-earliest", "--execute")
    t.run("kafka-consumer-groups", "--describe", *g, "--offsets")
    # every record is older than the year 2100: the log end offsets
    t.run("kafka-consumer-groups", "--reset-offsets", *g, "--all-topics", "--to-datetime",
          "2100-01-01T00:00:00.000", "--dry-run")
    t.run("kafka-consumer-groups", "--reset-offsets", *g, "--all-topics", "--to-datetime",
          "2100-01-01T00:00:00.000", "--execute")
    # every record is newer than the year 2000: the first offsets
    t.run("kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups:1", "--to-datetime",
          "2000-01-01T00:00:00.000", "--execute")
    t.run("kafka-consumer-groups", "--describe", *g)
    t.run("kafka-consumer-groups", "--delete-offsets", *g, "--topic", "tools-groups:2")
    t.run("kafka-consumer-groups", "--delete", *g)
    t.run_sorted("kafka-consumer-groups", "--list")


def test_kafka_consumer_groups(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, consumer_groups_scenario, tmp_path, log4j2), tmp_path)


def unknown_group_scenario(t: Tools) -> None:
    t.run("kafka-consumer-groups", "--describe", "--group", "no-such-group")


def test_kafka_consumer_groups_describe_unknown_group(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, unknown_group_scenario, tmp_path, log4j2), tmp_path)


def configs_scenario(t: Tools) -> None:
    create_topic(t, "tools-configs", 1)
    c = "kafka-configs"
    topic = ["--entity-type", "topics", "--entity-name", "tools-configs"]
    t.run(c, "--describe", *topic)
    t.run(c, "--alter", *topic, "--add-config", "cleanup.policy=compact,max.message.bytes=20000,retention.ms=1000")
    t.run(c, "--describe", *topic)
    t.run(c, "--alter", *topic, "--delete-config", "max.message.bytes")
    t.run(c, "--describe", *topic)
    broker = ["--entity-type", "brokers", "--entity-name", "0"]
    t.run(c, "--describe", *broker)
    t.run(c, "--alter", *broker, "--add-config", "log.cleaner.threads=2")
    t.run(c, "--describe", *broker)
    t.run(c, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=3600000")
    t.run(c, "--describe", "--entity-type", "brokers", "--entity-default")
    bob = ["--entity-type", "users", "--entity-name", "bob"]
    t.run(c, "--alter", *bob, "--add-config", "SCRAM-SHA-256=[iterations=8192,password=bob-secret]")
    t.run(c, "--alter", *bob, "--add-config", "SCRAM-SHA-512=[password=bob-secret]")
    t.run(c, "--describe", *bob)
    t.run(c, "--alter", *bob, "--delete-config", "SCRAM-SHA-512")
    t.run(c, "--describe", *bob)
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    t.run(c, "--alter", *alice, "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    t.run(c, "--alter", "--entity-type", "clients", "--entity-default", "--add-config", "request_percentage=50")
    t.run(c, "--alter", *alice, "--entity-type", "clients", "--entity-name", "c1", "--add-config",
          "producer_byte_rate=4096")
    t.run(c, "--describe", *alice)
    t.run(c, "--describe", "--entity-type", "users")
    t.run(c, "--describe", *alice, "--entity-type", "clients", "--entity-name", "c1")
    t.run(c, "--alter", *alice, "--delete-config", "consumer_byte_rate")
    t.run(c, "--describe", *alice)


def sort_scram_mechanisms(text: str) -> str:
    """DescribeUserScramCredentials gives a user's mechanisms in no defined order (Kafka 4.4 lists
    SCRAM-SHA-512 first, Samsa SCRAM-SHA-256)."""
    return re.sub(r"(SCRAM credential configs for user-principal '[^']*' are )(.*)",
                  lambda m: m.group(1) + ", ".join(sorted(m.group(2).split(", "))), text)


def test_kafka_configs(brokers, tmp_path, log4j2):
    out = run_on_both(brokers, configs_scenario, tmp_path, log4j2)
    assert_same({k: sort_scram_mechanisms(v) for k, v in out.items()}, tmp_path)


def client_metrics_scenario(t: Tools) -> None:
    """KIP-714 subscriptions: kafka-client-metrics (ListConfigResources, DescribeConfigs,
    IncrementalAlterConfigs on CLIENT_METRICS resources) and kafka-configs on the same resources."""
    m = "kafka-client-metrics"
    t.run(m, "--list")
    t.run(m, "--alter", "--name", "tools-metrics", "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
          "--interval", "1000", "--match", "client_id=app.*,client_software_name=librdkafka")
    t.run(m, "--alter", "--name", "tools-all", "--metrics", "*", "--interval", "50", errors=True)  # under 100 ms
    t.run(m, "--alter", "--name", "tools-all", "--metrics", "*", "--match", "color=red", errors=True)
    t.run(m, "--alter", "--name", "tools-all", "--metrics", "*")
    t.run_sorted(m, "--list")
    t.run(m, "--describe", "--name", "tools-metrics")
    t.run(m, "--alter", "--name", "tools-metrics", "--interval", "2000")
    t.run("kafka-configs", "--describe", "--entity-type", "client-metrics", "--entity-name", "tools-metrics")
    t.run("kafka-configs", "--alter", "--entity-type", "client-metrics", "--entity-name", "tools-metrics",
          "--delete-config", "match")
    t.run(m, "--describe", "--name", "tools-metrics")
    t.run(m, "--delete", "--name", "tools-all")
    t.run(m, "--list")


def test_kafka_client_metrics(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, client_metrics_scenario, tmp_path, log4j2), tmp_path)


def all_topic_configs_scenario(t: Tools) -> None:
    create_topic(t, "tools-all-configs", 1)
    t.run("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", "tools-all-configs", "--all")


def test_kafka_configs_describe_all_topic_configs(brokers, tmp_path, log4j2):
    assert_same(run_on_both(brokers, all_topic_configs_scenario, tmp_path, log4j2), tmp_path)


def offsets_scenario(t: Tools) -> None:
    create_topic(t, "tools-offsets", 3)
    t.run("kafka-console-producer", "--topic", "tools-offsets", *PRODUCE_KEYED, stdin=KEYED_LINES * 3, record=False)
    t.run("kafka-get-offsets", "--topic", "tools-offsets")
    t.run("kafka-get-offsets", "--topic-partitions", "tools-offsets:0,tools-offsets:2", "--time", "-1")
    plan = t.work_dir / "delete-records.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "tools-offsets", "partition": 1, "offset": 2}]}')
    t.run("kafka-delete-records", "--offset-json-file", plan.name)  # the tool runs in work_dir
    t.run("kafka-get-offsets", "--topic", "tools-offsets", "--time", "-2")
    t.run("kafka-log-dirs", "--describe", "--topic-list", "tools-offsets")


def without_sizes(text: str) -> str:
    """A partition's size in bytes follows how the producer happened to batch (timestamp deltas
    are varints), not the broker."""
    return re.sub(r'"size":\d+', '"size":<bytes>', text)


def test_kafka_get_offsets_delete_records_and_log_dirs(brokers, tmp_path, log4j2):
    out = run_on_both(brokers, offsets_scenario, tmp_path, log4j2)
    assert_same({k: without_sizes(v) for k, v in out.items()}, tmp_path)


def acls_scenario(t: Tools) -> None:
    t.run("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
          "--topic", "tools-acls")
    t.run("kafka-acls", "--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", "g-",
          "--resource-pattern-type", "prefixed")
    t.run("kafka-acls", "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.1", "--operation", "All",
          "--topic", "*")
    t.run("kafka-acls", "--list")
    t.run("kafka-acls", "--list", "--topic", "tools-acls")
    t.run("kafka-acls", "--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic",
          "tools-acls", "--force")
    t.run("kafka-acls", "--list", "--principal", "User:alice")


def sort_acls(text: str) -> str:
    """kafka-acls groups ACLs by resource in hash maps: the order of resources and of the entries
    within one follows the JVM's hash codes, not the broker's answer."""
    def one_resource(block: str) -> str:
        header, *entries = block.split("\n")
        return "\n".join([header, *sorted(e.strip() for e in entries)])

    commands = re.split(r"\n(?=\$ )", text)
    out = []
    for command in commands:
        first, _, rest = command.partition("\n")
        body, _, exit_line = rest.rpartition("\n")
        blocks = sorted(one_resource(b.strip("\n")) for b in body.split("\n\n") if b.strip())
        out.append("\n".join([first, *blocks, exit_line]))
    return "\n".join(out)


def test_kafka_acls(tmp_path_factory, kinds, tmp_path, log4j2):
    started, pools = start_pair(tmp_path_factory, kinds, AUTHORIZER)
    try:
        out = run_on_both(started, acls_scenario, tmp_path, log4j2)
    finally:
        for pool in pools:
            pool.close()
    assert_same({k: sort_acls(v) for k, v in out.items()}, tmp_path)


TXN_TOPIC = "tools-txn"


def transactional_producer(bootstrap: str, transactional_id: str, timeout_ms: int = 60_000):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 0,
                         "transaction.timeout.ms": timeout_ms, "log_level": 0})
    producer.init_transactions(30)
    return producer


def produce_in_transaction(producer, partitions: dict[int, int]) -> None:
    """A transaction begun with `count` records on each of `partitions`, all acknowledged."""
    producer.begin_transaction()
    for partition, count in partitions.items():
        for i in range(count):
            producer.produce(TXN_TOPIC, f"record {i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def end_transaction(producer) -> str:
    """abort_transaction(), then the error it raised or "ok"."""
    from confluent_kafka import KafkaException
    try:
        producer.abort_transaction(30)
        return "ok"
    except KafkaException as e:
        return e.args[0].name()


def transactions_scenario(t: Tools) -> None:
    create_topic(t, TXN_TOPIC, 3)
    committed = transactional_producer(t.bootstrap, "tools-txn-committed")
    produce_in_transaction(committed, {0: 3})
    committed.commit_transaction(30)
    # A transaction left open on partitions 1 and 2 while the tools look at it; its timeout
    # outlasts the scenario on a busy machine (the coordinator would abort it).
    open_ = transactional_producer(t.bootstrap, "tools-txn-open", timeout_ms=600_000)
    x = "kafka-transactions"
    try:
        produce_in_transaction(open_, {1: 2, 2: 4})
        t.run_sorted(x, "list")
        t.run(x, "list", "--duration-filter", "3600000")  # none has run for an hour
        t.run(x, "describe", "--transactional-id", "tools-txn-committed")
        t.run(x, "describe", "--transactional-id", "tools-txn-open")
        t.run(x, "describe", "--transactional-id", "no-such-transactional-id", errors=True)
        t.run(x, "describe-producers", "--topic", TXN_TOPIC, "--partition", "0")
        t.run(x, "describe-producers", "--topic", TXN_TOPIC, "--partition", "2")
        # open, but its coordinator knows it: not hanging
        t.run(x, "find-hanging", "--topic", TXN_TOPIC)
        t.run(x, "abort", "--topic", TXN_TOPIC, "--partition", "2", "--start-offset", "1", errors=True)
        t.run(x, "abort", "--topic", TXN_TOPIC, "--partition", "2", "--start-offset", "0", errors=True)
        t.run(x, "describe-producers", "--topic", TXN_TOPIC, "--partition", "2")
    finally:
        ended = end_transaction(open_)
    t.transcript.append(f"(the open transaction's producer aborts: {ended})")
    t.run_sorted(x, "list")


# Columns of kafka-transactions' tables that hold what any two runs give differently: ids the
# coordinator hands out, clocks, and how long a transaction has run.
TXN_VOLATILE_COLUMNS = {"ProducerId", "TransactionDurationMs", "Duration(min)"}


def mask_columns(text: str, columns: set[str]) -> str:
    """In each table (a header line naming any of `columns`, then rows up to a blank line or the
    exit line), those columns' values become <...>; a TopicPartitions value is sorted (the tool
    prints a hash set)."""
    out, header = [], None
    for line in text.split("\n"):
        fields = line.split(" ")
        if line.startswith(("$ ", "[exit")) or not line:
            header = None
        elif header is not None:
            fields = [f"<{header[i]}>" if i < len(header) and header[i] in columns
                      else ",".join(sorted(f.split(","))) if i < len(header) and header[i] == "TopicPartitions"
                      else f for i, f in enumerate(fields)]
            line = " ".join(fields)
        elif columns & set(fields):
            header = fields
        out.append(line)
    return "\n".join(out)


def test_kafka_transactions(brokers, tmp_path, log4j2):
    out = run_on_both(brokers, transactions_scenario, tmp_path, log4j2)
    assert_same({k: mask_columns(v, TXN_VOLATILE_COLUMNS) for k, v in out.items()}, tmp_path)


PERF_TOPIC = "tools-perf"
PERF_RECORDS = 20_000
PERF_RECORD_BYTES = 100


def perf_scenario(t: Tools) -> None:
    """kafka-producer-perf-test then kafka-consumer-perf-test, small and fixed: what they report
    that does not depend on timing (records sent, read, megabytes), and the topic's end offset."""
    create_topic(t, PERF_TOPIC, 1)
    produced = t.run("kafka-producer-perf-test", "--topic", PERF_TOPIC, "--num-records", str(PERF_RECORDS),
                     "--record-size", str(PERF_RECORD_BYTES), "--throughput", "-1",
                     "--command-property", "acks=all", "--command-property", "compression.type=lz4",
                     record=False)
    # its last line is the summary; the earlier ones, one per 5 s, come and go with the machine's speed
    summary = (produced.stdout.strip().splitlines() or [""])[-1]
    t.transcript.append(f"$ kafka-producer-perf-test (summary)\n{without_rates(summary)}\n[exit {produced.returncode}]")
    t.run("kafka-get-offsets", "--topic", PERF_TOPIC)
    consumed = t.run("kafka-consumer-perf-test", "--topic", PERF_TOPIC, "--num-records", str(PERF_RECORDS),
                     "--timeout", "30000", record=False)
    t.transcript.append(f"$ kafka-consumer-perf-test (MB and records read)\n{consumed_counts(consumed.stdout)}\n"
                        f"[exit {consumed.returncode}]")


def without_rates(summary: str) -> str:
    """`20000 records sent, 5000.0 records/sec (0.48 MB/sec), 9.1 ms avg latency, ...`: the count."""
    return re.sub(r"\b\d+(\.\d+)?(?! records sent)(?=\s|\)|$)", "<n>", summary)


def consumed_counts(stdout: str) -> str:
    """ConsumerPerformance's table (a header line of comma-separated names, one line of values):
    the MB and records read, by name."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) < 2:
        return stdout
    row = dict(zip((h.strip() for h in lines[0].split(",")), (v.strip() for v in lines[-1].split(","))))
    return f"data.consumed.in.MB={row.get('data.consumed.in.MB')} data.consumed.in.nMsg={row.get('data.consumed.in.nMsg')}"


def test_kafka_perf_tools(brokers, tmp_path, log4j2):
    out = run_on_both(brokers, perf_scenario, tmp_path, log4j2)
    assert_same(out, tmp_path)
    # the same on both, and what was asked for
    assert f"{PERF_RECORDS} records sent, <n> records/sec" in out["samsa"]
    assert f"{PERF_TOPIC}:0:{PERF_RECORDS}" in out["samsa"]
    assert f"data.consumed.in.nMsg={PERF_RECORDS}" in out["samsa"]


# -- moving a replica between log dirs (AlterReplicaLogDirs) ------------------------------------------

def leader_election_scenario(t: Tools) -> None:
    """kafka-leader-election (ElectLeaders) on one broker, its own controller: every partition is led
    by its preferred replica already; unknown partitions and topics fail the tool."""
    create_topic(t, "tools-election", 2)
    e = "kafka-leader-election"
    t.run(e, "--election-type", "preferred", "--all-topic-partitions", errors=True)
    t.run(e, "--election-type", "unclean", "--all-topic-partitions", errors=True)
    t.run(e, "--election-type", "preferred", "--topic", "tools-election", "--partition", "1", errors=True)
    t.run(e, "--election-type", "unclean", "--topic", "tools-election", "--partition", "0", errors=True)
    t.run(e, "--election-type", "preferred", "--topic", "tools-election", "--partition", "7", errors=True)
    t.run(e, "--election-type", "preferred", "--topic", "tools-no-such-topic", "--partition", "0", errors=True)
    plan = t.work_dir / "election.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "tools-election", "partition": p} for p in (0, 1, 2)]}))
    t.run(e, "--election-type", "preferred", "--path-to-json-file", plan.name, errors=True)


def test_kafka_leader_election(brokers, tmp_path, log4j2):
    out = run_on_both(brokers, leader_election_scenario, tmp_path, log4j2)
    assert_same(out, tmp_path)
    assert "Valid replica already elected for partitions tools-election-1" in out["samsa"]


MOVE_TOPIC = "tools-move"
MOVE_RECORDS = 3000  # before the move, and as many while it goes on
# Both brokers with two log dirs, relative to their working directory (each its own base dir).
TWO_LOG_DIRS = {"log.dirs": "data/a,data/b"}


def move_lines(phase: str) -> list[str]:
    """Records of about 1 KB each, numbered: 3 MB to copy."""
    return [f"{phase}-{i:05d}-" + "x" * 1000 for i in range(MOVE_RECORDS)]


def log_dirs_of(t: Tools, topic: str) -> dict:
    """kafka-log-dirs --describe's JSON (its last line), unrecorded."""
    proc = t.run("kafka-log-dirs", "--describe", "--topic-list", topic, record=False)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def replica_dirs(described: dict) -> dict[str, list[tuple[str, bool]]]:
    """{log dir: [(partition, is future)]}."""
    return {d["logDir"]: sorted((p["partition"], p["isFuture"]) for p in d["partitions"])
            for b in described["brokers"] for d in b["logDirs"]}


def move_scenario(t: Tools, data_dirs: dict[str, Path]) -> None:
    """kafka-reassign-partitions moves the partition's replica to the other log dir while
    records are produced; --verify until done; kafka-log-dirs shows it there; every record reads back."""
    data_dir = data_dirs[t.bootstrap]
    create_topic(t, MOVE_TOPIC, 1)
    t.run("kafka-console-producer", "--topic", MOVE_TOPIC, stdin="\n".join(move_lines("before")) + "\n")
    where = replica_dirs(log_dirs_of(t, MOVE_TOPIC))
    (source,) = [d for d, partitions in where.items() if partitions]
    target = next(str(data_dir / name) for name in ("a", "b") if str(data_dir / name) != source)
    plan = t.work_dir / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": MOVE_TOPIC, "partition": 0, "replicas": [0], "log_dirs": [target]}]}))
    t.run("kafka-reassign-partitions", "--execute", "--reassignment-json-file", plan.name)
    t.run("kafka-console-producer", "--topic", MOVE_TOPIC, stdin="\n".join(move_lines("during")) + "\n")
    for _ in range(60):
        verified = t.run("kafka-reassign-partitions", "--verify", "--reassignment-json-file", plan.name, record=False)
        if "completed successfully" in verified.stdout or verified.returncode != 0:
            break
    t.run("kafka-reassign-partitions", "--verify", "--reassignment-json-file", plan.name)
    t.transcript.append(f"$ kafka-log-dirs --describe --topic-list {MOVE_TOPIC} (replicas by log dir)\n"
                        f"{sorted(replica_dirs(log_dirs_of(t, MOVE_TOPIC)).items())}")
    consumed = t.run("kafka-console-consumer", "--topic", MOVE_TOPIC, "--from-beginning", "--max-messages",
                     str(2 * MOVE_RECORDS), "--timeout-ms", "30000", record=False)
    read = consumed.stdout.splitlines()
    t.transcript.append(f"$ kafka-console-consumer --from-beginning (what it read)\n{len(read)} records, "
                        f"{'all' if read == move_lines('before') + move_lines('during') else 'NOT all'} of those "
                        f"produced, in order\n[exit {consumed.returncode}]")
    # The log dirs by their part in the move (Kafka places a new partition in either).
    t.transcript[:] = [entry.replace(target, "<target-dir>").replace(source, "<source-dir>")
                       for entry in t.transcript]


def test_kafka_reassign_partitions_moves_a_replica_between_log_dirs(tmp_path_factory, kinds, tmp_path, log4j2):
    started, pools = start_pair(tmp_path_factory, kinds, TWO_LOG_DIRS)
    try:
        out = run_on_both(started, move_scenario, tmp_path, log4j2,
                          {b.bootstrap: b.data_dir.resolve() for b in started.values()})
    finally:
        for pool in pools:
            pool.close()
    assert_same(out, tmp_path)
    assert f"{2 * MOVE_RECORDS} records, all of those produced, in order" in out["samsa"]
    assert "[('<source-dir>', []), ('<target-dir>', [('tools-move-0', False)])]" in out["samsa"]


THROTTLE_TOPIC = "tools-throttled"
THROTTLE_RECORDS = 1500  # about 1.5 MB
THROTTLE_BYTES_PER_SECOND = 100_000
THROTTLE_CHUNK = 65_536  # replica.fetch.max.bytes: what the copy reads at once


def future_replica_size(bootstrap: str) -> int | None:
    """The size of the broker's one future replica, None without one: DescribeLogDirs over a socket,
    quicker than kafka-log-dirs' JVM."""
    host, port = bootstrap.rsplit(":", 1)
    client = WireClient(host, int(port))
    try:
        answer = client.call(DescribeLogDirs(topics=None), 4)
    finally:
        client.close()
    sizes = [p.partition_size for r in answer.results for t in r.topics for p in t.partitions if p.is_future_key]
    return sizes[0] if sizes else None


def throttled_move_scenario(t: Tools, data_dirs: dict[str, Path], progress: dict[str, tuple]) -> None:
    """kafka-reassign-partitions --replica-alter-log-dirs-throttle: the tool sets the broker's
    replica.alter.log.dirs.io.max.bytes.per.second, the move copies no faster than that, --verify
    clears it once done. `progress[bootstrap]`: (the log's size, the future replica's size right
    after --execute, the seconds from --execute's start to that describe's end, the seconds to the
    move's end as --verify saw it)."""
    data_dir = data_dirs[t.bootstrap]
    create_topic(t, THROTTLE_TOPIC, 1)
    t.run("kafka-console-producer", "--topic", THROTTLE_TOPIC,
          stdin="".join(f"{i:05d}-" + "x" * 1000 + "\n" for i in range(THROTTLE_RECORDS)))
    where = replica_dirs(log_dirs_of(t, THROTTLE_TOPIC))
    (source,) = [d for d, partitions in where.items() if partitions]
    size = [p["size"] for b in log_dirs_of(t, THROTTLE_TOPIC)["brokers"] for d in b["logDirs"]
            for p in d["partitions"]][0]
    target = next(str(data_dir / name) for name in ("a", "b") if str(data_dir / name) != source)
    plan = t.work_dir / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": THROTTLE_TOPIC, "partition": 0, "replicas": [0], "log_dirs": [target]}]}))
    began = time.monotonic()
    t.run("kafka-reassign-partitions", "--execute", "--reassignment-json-file", plan.name,
          "--replica-alter-log-dirs-throttle", str(THROTTLE_BYTES_PER_SECOND))
    copied = future_replica_size(t.bootstrap)
    described = time.monotonic() - began
    t.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "0")
    for _ in range(120):
        verified = t.run("kafka-reassign-partitions", "--verify", "--reassignment-json-file", plan.name, record=False)
        if "completed successfully" in verified.stdout or verified.returncode != 0:
            break
    moved = time.monotonic() - began
    progress[t.bootstrap] = (size, copied, described, moved)
    t.run("kafka-reassign-partitions", "--verify", "--reassignment-json-file", plan.name)
    t.run("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "0")
    t.transcript.append(f"$ kafka-log-dirs --describe --topic-list {THROTTLE_TOPIC} (replicas by log dir)\n"
                        f"{sorted(replica_dirs(log_dirs_of(t, THROTTLE_TOPIC)).items())}")
    t.transcript[:] = [entry.replace(target, "<target-dir>").replace(source, "<source-dir>")
                       for entry in t.transcript]


def test_kafka_reassign_partitions_throttles_a_move_between_log_dirs(tmp_path_factory, kinds, tmp_path, log4j2):
    """The copy's progress against the bytes the throttle allows, on both brokers: right after
    --execute the future replica holds no more than the bound times the seconds since (the
    first second's worth at once) plus one chunk, and the move ends no sooner than the log's size
    less a chunk allows. Both measured across the tools' runs, so a slow machine only loosens them
    (progress.json keeps the figures: unthrottled, the move is over before --execute returns)."""
    started, pools = start_pair(tmp_path_factory, kinds, {**TWO_LOG_DIRS, "replica.fetch.max.bytes": str(THROTTLE_CHUNK)})
    progress: dict[str, tuple] = {}
    try:
        out = run_on_both(started, throttled_move_scenario, tmp_path, log4j2,
                          {b.bootstrap: b.data_dir.resolve() for b in started.values()}, progress)
    finally:
        for pool in pools:
            pool.close()
    (tmp_path / "progress.json").write_text(json.dumps({kind: progress[b.bootstrap] for kind, b in started.items()}))
    assert_same(out, tmp_path)
    assert "The replica-alter-dir throttle limit was set to 100000 B/s" in out["samsa"]
    assert "[('<source-dir>', []), ('<target-dir>', [('tools-throttled-0', False)])]" in out["samsa"]
    for kind, b in started.items():
        size, copied, described, moved = progress[b.bootstrap]
        allowed = THROTTLE_BYTES_PER_SECOND * max(described, 1.0) + THROTTLE_CHUNK
        # Done already only if --execute took longer than the whole throttled copy (a loaded machine).
        assert (copied is None and allowed >= size) or (copied is not None and copied <= allowed), (
            kind, progress[b.bootstrap])
        assert moved >= (size - THROTTLE_CHUNK) / THROTTLE_BYTES_PER_SECOND, (kind, progress[b.bootstrap])
def features_scenario(t: Tools) -> None:
    """kafka-features (UpdateFeatures, and ApiVersions for describe): dry runs, downgrades and
    upgrades that change what the broker finalizes, refusals; version-mapping and
    feature-dependencies answer from the tool's own tables."""
    f = "kafka-features"
    t.run(f, "describe")
    t.run(f, "upgrade", "--feature", "group.version=1", "--dry-run")
    t.run(f, "downgrade", "--feature", "group.version=0", "--dry-run")
    t.run(f, "describe")  # nothing changed
    t.run(f, "downgrade", "--feature", "group.version=0", "--feature", "share.version=0")
    t.run(f, "describe")
    t.run(f, "upgrade", "--feature", "group.version=0")  # at 0 already
    t.run(f, "downgrade", "--feature", "group.version=1", errors=True)  # a downgrade to a newer level
    t.run(f, "upgrade", "--feature", "group.version=1", "--feature", "share.version=1")
    t.run(f, "upgrade", "--feature", "group.version=2", errors=True)  # above the supported range
    t.run(f, "upgrade", "--feature", "no.such.feature=1", errors=True)
    t.run(f, "disable", "--feature", "share.version", "--dry-run")
    t.run(f, "disable", "--feature", "share.version")
    t.run(f, "downgrade", "--feature", "metadata.version=32", errors=True)
    t.run(f, "downgrade", "--feature", "metadata.version=24", "--unsafe", "--dry-run", errors=True)
    t.run(f, "downgrade", "--metadata", "4.0-IV2", errors=True)
    t.run(f, "upgrade", "--release-version", "9.9-IV0", errors=True)
    t.run(f, "upgrade", "--feature", "share.version=1")
    t.run(f, "describe")
    t.run(f, "version-mapping")
    t.run(f, "version-mapping", "--release-version", "3.9-IV0")
    t.run(f, "feature-dependencies", "--feature", "eligible.leader.replicas.version=1", "--feature",
          "share.version=2", "--feature", "metadata.version=33")
    t.run(f, "feature-dependencies", "--feature", "no.such.feature=1", errors=True)


# Features where Samsa supports (and finalizes) lower levels than Kafka 4.4 (test_differential.py's
# FEATURES_SAMSA_LOWER says why): in `describe`, their supported maximum and finalized level are masked.
FEATURES_SAMSA_LOWER = {"kraft.version", "share.version", "streams.version", "transaction.version",
                        "eligible.leader.replicas.version"}


def mask_feature_levels(text: str) -> str:
    """The epoch of the finalized features (Kafka's: its metadata log's offset) as <epoch>; the
    levels of FEATURES_SAMSA_LOWER as <max> and <level>."""
    text = re.sub(r"(Epoch: )\d+", r"\1<epoch>", text)
    lower = "|".join(re.escape(name) for name in FEATURES_SAMSA_LOWER)
    return re.sub(rf"(Feature: (?:{lower}) SupportedMinVersion: \S+ SupportedMaxVersion: )\S+"
                  r"( FinalizedVersionLevel: )\S+", r"\1<max>\2<level>", text)


def test_kafka_features(tmp_path_factory, kinds, tmp_path, log4j2):
    """Brokers of their own: the scenario changes their finalized levels."""
    started, pools = start_pair(tmp_path_factory, kinds)
    try:
        out = run_on_both(started, features_scenario, tmp_path, log4j2)
    finally:
        for pool in pools:
            pool.close()
    assert_same({k: mask_feature_levels(v) for k, v in out.items()}, tmp_path)
    assert "group.version was downgraded to 0." in out["samsa"]
    assert re.search(r"Feature: group.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
                     r"FinalizedVersionLevel: 0 Epoch:", out["samsa"])
