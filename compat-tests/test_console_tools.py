"""`samsa consume` and `samsa produce` with kafka-console-consumer's and kafka-console-producer's own
command lines: the same arguments given to Kafka 4.4's tool and to samsa's, against Samsa and against
Kafka, must print the same lines (consumer) and write the same records (producer).

Both brokers run each scenario at once, each in its own thread (test_kafka_tools.py's fixtures and
runner: one Kafka start for the module, one JVM per tool run). What differs and is not compared:
Kafka's tools print a deprecation notice on stdout for `--property`, `--consumer-property` and
`--consumer.config` (samsa takes the old and the new names alike), and the order of records of
several partitions (the lines are sorted then); samsa consume starts at the beginning by default
where Kafka's starts at the end, so every command says where to start.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_kafka_tools import TOOLS_LOG4J2, Tools, start_pair

from compat_util import create_topic
from conftest import broker_kinds
from kafka_oracle import OracleUnavailable, class_path, java

DEPRECATED = "is deprecated and will be removed in a future version"
TIMEOUT_S = 60
LONG = "org.apache.kafka.common.serialization.LongDeserializer"

# Headers, key and value, as kafka-console-producer's default reader splits them with
# parse.headers and parse.key; a value equal to the null marker; a line ending in \r\n.
KEYED_LINES = ("h1:v1,h2:v2\tk1\tone\n"
               "h1:v3\tk2\ttwo\n"
               "h3:\tk3\tthree\r\n"
               "h4:NUL\tk4\tNUL\n"
               "\tk5\tno headers but the delimiter\n")
READER = ["--property", "parse.key=true", "--property", "parse.headers=true", "--property", "null.marker=NUL",
          "--property", "ignore.error=true"]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """A Samsa broker and a Kafka broker, default settings, shared by the module's scenarios."""
    if not {"samsa", "kafka"} <= set(broker_kinds()):
        pytest.skip("compares samsa's tools with Kafka's on both brokers: needs both in SAMSA_COMPAT_BROKERS")
    try:
        class_path("kafka4")
        java()
    except OracleUnavailable as e:
        pytest.skip(str(e))
    started, pools = start_pair(tmp_path_factory, ["samsa", "kafka"])
    try:
        yield started
    finally:
        for pool in pools:
            pool.close()


@pytest.fixture(scope="module")
def log4j2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tools") / "tools-log4j2.properties"
    path.write_text(TOOLS_LOG4J2)
    return path


def samsa(bootstrap: str, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "samsa", *argv, "--bootstrap-server", bootstrap],
                          input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)


def stdout_of(proc: subprocess.CompletedProcess) -> str:
    """stdout without the deprecation notices of Kafka's tools."""
    return "".join(line for line in proc.stdout.splitlines(keepends=True) if DEPRECATED not in line)


def records_of(bootstrap: str, topic: str) -> list[dict]:
    """Every record of the topic, by partition and offset, as samsa consume -f json reads them."""
    proc = samsa(bootstrap, "consume", topic, "-f", "json", "-e")
    assert proc.returncode == 0, proc.stderr
    found = [json.loads(line) for line in proc.stdout.splitlines()]
    return sorted(({k: r[k] for k in ("partition", "offset", "key", "value", "headers")} for r in found),
                  key=lambda r: (r["partition"], r["offset"]))


def on_both(brokers: dict, tmp_path: Path, log4j2: Path, scenario) -> dict:
    """scenario(kind, bootstrap, tools) on each broker at once; its result by broker kind."""

    def one(kind):
        work = tmp_path / kind
        work.mkdir()
        bootstrap = brokers[kind].bootstrap
        return scenario(kind, bootstrap, Tools(bootstrap, work, log4j2))

    with ThreadPoolExecutor(len(brokers)) as ex:
        return dict(zip(brokers, ex.map(one, brokers)))


def compare_consumers(tools: Tools, bootstrap: str, args: list[str], sort: bool = False) -> None:
    """kafka-console-consumer and samsa consume, the same arguments: the same stdout."""
    kafka = tools.run("kafka-console-consumer", *args)
    assert kafka.returncode == 0, kafka.stderr
    ours = samsa(bootstrap, "consume", *args)
    assert ours.returncode == 0, ours.stderr
    theirs, mine = stdout_of(kafka), ours.stdout
    if sort:
        theirs, mine = sorted(theirs.splitlines()), sorted(mine.splitlines())
    assert mine == theirs, f"samsa consume {' '.join(args)}\nkafka:\n{theirs}\nsamsa:\n{mine}"


def test_console_producer_lines(brokers, tmp_path, log4j2):
    """The same lines and reader properties through both producers: the same records (keys to the
    same partitions, headers, null values), on both brokers."""

    def scenario(kind, bootstrap, tools):
        for topic in ("cp-kafka", "cp-samsa"):
            create_topic(bootstrap, topic, 3)
        proc = tools.run("kafka-console-producer", "--topic", "cp-kafka", *READER, "--request-required-acks", "all",
                         stdin=KEYED_LINES)
        assert proc.returncode == 0, proc.stderr
        proc = samsa(bootstrap, "produce", "--topic", "cp-samsa", *READER, "--request-required-acks", "all",
                     stdin=KEYED_LINES)
        assert proc.returncode == 0, proc.stderr
        return records_of(bootstrap, "cp-kafka"), records_of(bootstrap, "cp-samsa")

    for kind, (kafkas, ours) in on_both(brokers, tmp_path, log4j2, scenario).items():
        assert ours == kafkas, kind
        assert len(ours) == 5 and {r["value"] for r in ours} >= {"one", None, "no headers but the delimiter"}


def test_console_producer_refuses_a_line_without_its_key_separator(brokers, tmp_path, log4j2):
    """Without ignore.error a line without the separator ends the run; the lines before it are sent."""

    def scenario(kind, bootstrap, tools):
        create_topic(bootstrap, "cp-refused-kafka", 1)
        create_topic(bootstrap, "cp-refused-samsa", 1)
        lines = "a\t1\nno separator\nb\t2\n"
        kafka = tools.run("kafka-console-producer", "--topic", "cp-refused-kafka", "--property", "parse.key=true",
                          stdin=lines)
        ours = samsa(bootstrap, "produce", "--topic", "cp-refused-samsa", "--property", "parse.key=true", stdin=lines)
        return kafka, ours, records_of(bootstrap, "cp-refused-kafka"), records_of(bootstrap, "cp-refused-samsa")

    for kind, (kafka, ours, kafka_records, our_records) in on_both(brokers, tmp_path, log4j2, scenario).items():
        message = "No key separator found on line number 2: 'no separator'"
        assert kafka.returncode != 0 and message in kafka.stderr, kind
        assert ours.returncode != 0 and ours.stderr == f"samsa produce: {message}\n", kind
        assert [(r["key"], r["value"]) for r in our_records] == [(r["key"], r["value"]) for r in kafka_records] \
            == [("a", "1")], kind


def test_console_consumer_lines(brokers, tmp_path, log4j2):
    """kafka-console-consumer's formatter properties, starting points and limits, old and new
    option names, on the records Kafka's console producer wrote."""

    def scenario(kind, bootstrap, tools):
        create_topic(bootstrap, "cc", 3)
        proc = tools.run("kafka-console-producer", "--topic", "cc", *READER, stdin=KEYED_LINES, record=False)
        assert proc.returncode == 0, proc.stderr
        every_field = ["--property", "print.key=true", "--property", "print.headers=true", "--property",
                       "print.partition=true", "--property", "print.offset=true", "--property", "print.timestamp=true"]
        compare_consumers(tools, bootstrap, ["--topic", "cc", "--from-beginning", "--max-messages", "5", *every_field],
                          sort=True)
        for partition in ("0", "1", "2"):
            compare_consumers(tools, bootstrap, [
                "--topic", "cc", "--partition", partition, "--offset", "earliest", "--timeout-ms", "3000",
                "--formatter-property", "print.key=true", "--formatter-property", "key.separator= | ",
                "--formatter-property", "print.value=false", "--formatter-property", "print.headers=true",
                "--formatter-property", "headers.separator=;", "--formatter-property", "null.literal=<null>",
                "--formatter-property", "line.separator=|\n", "--formatter-property", "print.epoch=true",
                "--formatter-property", "print.delivery=true", "--consumer-property", "client.id=console-test",
                "--isolation-level", "read_committed"])
        compare_consumers(tools, bootstrap, ["--topic", "cc", "--partition", "1", "--offset", "1", "--max-messages",
                                             "1", "--formatter-property", "print.timestamp=true",
                                             "--formatter-property", "print.value=true"])

    on_both(brokers, tmp_path, log4j2, scenario)


def test_console_consumer_deserializers_and_skipping_errors(brokers, tmp_path, log4j2):
    """value.deserializer=LongDeserializer (Kafka's quickstart habit) on 8-byte values, and a
    record it refuses (3 bytes) skipped with --skip-message-on-error: the partial line Kafka's
    formatter had written stays, as it does."""
    from confluent_kafka import Producer

    def scenario(kind, bootstrap, tools):
        create_topic(bootstrap, "cc-longs", 1)
        producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
        for key, value in ((b"a", struct.pack(">q", 1)), (b"b", struct.pack(">q", -5)), (b"c", b"odd"),
                           (b"d", struct.pack(">q", 2**40))):
            producer.produce("cc-longs", key=key, value=value)
        assert producer.flush(30) == 0
        compare_consumers(tools, bootstrap, ["--topic", "cc-longs", "--from-beginning", "--max-messages", "4",
                                             "--skip-message-on-error", "--property", "print.key=true",
                                             "--property", f"value.deserializer={LONG}"])
        compare_consumers(tools, bootstrap, ["--topic", "cc-longs", "--partition", "0", "--offset", "3",
                                             "--max-messages", "1", "--key-deserializer",
                                             "org.apache.kafka.common.serialization.StringDeserializer",
                                             "--value-deserializer", LONG, "--formatter-property", "print.key=true"])

    on_both(brokers, tmp_path, log4j2, scenario)


def test_console_consumer_group_resumes(brokers, tmp_path, log4j2):
    """--group: a second run (its group named by --consumer.config's file) goes on from the offsets
    the first committed."""

    def scenario(kind, bootstrap, tools):
        create_topic(bootstrap, "cc-group", 1)
        proc = samsa(bootstrap, "produce", "--topic", "cc-group", stdin="".join(f"v{i}\n" for i in range(5)))
        assert proc.returncode == 0, proc.stderr
        outputs = {}
        for tool in ("kafka", "samsa"):
            group = f"cc-group-{tool}"
            config = tools.work_dir / f"{tool}-consumer.properties"
            config.write_text(f"group.id={group}\n")
            runs = [["--topic", "cc-group", "--group", group, "--from-beginning", "--max-messages", "2"],
                    ["--topic", "cc-group", "--consumer.config", str(config), "--max-messages", "2",
                     "--timeout-ms", "10000"]]
            outputs[tool] = []
            for args in runs:
                proc = (tools.run("kafka-console-consumer", *args) if tool == "kafka"
                        else samsa(bootstrap, "consume", *args))
                assert proc.returncode == 0, proc.stderr
                outputs[tool].append(stdout_of(proc))
        return outputs

    for kind, outputs in on_both(brokers, tmp_path, log4j2, scenario).items():
        assert outputs["samsa"] == outputs["kafka"] == ["v0\nv1\n", "v2\nv3\n"], kind
