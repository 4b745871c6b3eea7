"""Broker configuration: the generated definitions, .properties syntax, Kafka's parsing and
validation, retention precedence, listeners, and DescribeConfigs entries."""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from samsa.server.config.broker_config_defs import BROKER_CONFIGS
from samsa.server.config.kafka_config import (
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Endpoint,
    KafkaConfig,
    broker_synonyms,
    java_double,
    parse_properties,
    parse_value,
    value_to_string,
)
from samsa.storage.topic_config_defs import TOPIC_CONFIGS

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO.parent / "shared" / "kafka-docs" / "configuration.html"
needs_docs = pytest.mark.needs_input(DOCS.is_file(), f"Kafka's configuration docs at {DOCS}")


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_configs", REPO / "tools" / "gen_configs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def config(**props: str) -> KafkaConfig:
    return KafkaConfig({name.replace("_", "."): value for name, value in props.items()})


def entry(entries, name):
    (found,) = [e for e in entries if e.name == name]
    return found


# --- the generated definitions ------------------------------------------------------------------


def test_generated_sample_matches_kafka():
    segment = BROKER_CONFIGS["log.segment.bytes"]
    assert (segment.type, segment.default, segment.valid_values, segment.update_mode) == (
        "int", 1073741824, "[1048576,...]", "cluster-wide")
    assert BROKER_CONFIGS["log.retention.hours"].default == 168
    assert BROKER_CONFIGS["log.retention.ms"].default is None
    assert BROKER_CONFIGS["log.dir"].default == ("/tmp/kafka-logs",)  # a list since Kafka 4.0
    assert BROKER_CONFIGS["auto.create.topics.enable"].default is True
    assert BROKER_CONFIGS["log.cleaner.min.cleanable.ratio"].default == 0.5
    assert BROKER_CONFIGS["process.roles"].default is None  # Kafka 4: no default, required
    assert BROKER_CONFIGS["ssl.key.password"].type == "password"
    assert BROKER_CONFIGS["listeners"].update_mode == "per-broker"
    assert BROKER_CONFIGS["broker.id"].doc == "The broker id for this server."
    assert TOPIC_CONFIGS["segment.bytes"].server_default_property == "log.segment.bytes"
    assert TOPIC_CONFIGS["max.message.bytes"].server_default_property == "message.max.bytes"
    assert TOPIC_CONFIGS["retention.ms"].server_default_property == "log.retention.ms"
    assert TOPIC_CONFIGS["remote.storage.enable"].server_default_property is None
    assert TOPIC_CONFIGS["cleanup.policy"].default == ("delete",)
    assert TOPIC_CONFIGS["follower.replication.throttled.replicas"].default == ()


def test_topics_refuse_records_over_an_hour_ahead_by_default():
    """Kafka 4.0's default (KIP-937), from the broker's log.message.timestamp.after.max.ms."""
    assert config().log_config().message_timestamp_after_max_ms == 3_600_000


def test_every_server_default_property_is_a_broker_config():
    for topic in TOPIC_CONFIGS.values():
        assert topic.server_default_property in BROKER_CONFIGS or topic.server_default_property is None


def test_a_default_of_each_type_parses_back_to_itself():
    for definition in list(BROKER_CONFIGS.values()) + list(TOPIC_CONFIGS.values()):
        text = value_to_string(definition.default)
        if text is not None and definition.type not in ("password", "class"):
            assert parse_value(definition.name, definition.type, text) == definition.default, definition.name


TABLE = """<ul class="config-list">
<li>
<h4><a id="a.b"></a><a id="topicconfigs_a.b" href="#topicconfigs_a.b">a.b</a></h4>
<p>First sentence about <code>a.b</code> (e.g. this one). Second sentence.<br>More.</p>
<table><tbody>
<tr><th>Type:</th><td>long</td></tr>
<tr><th>Default:</th><td>604800000 (7 days)</td></tr>
<tr><th>Valid Values:</th><td>[1,...]</td></tr>
<tr><th>Server Default Property:</th><td>log.a.b</td></tr>
<tr><th>Importance:</th><td>medium</td></tr>
</tbody></table>
</li>
<li>
<h4><a id="c"></a><a id="brokerconfigs_c" href="#brokerconfigs_c">c</a></h4>
<p>No full stop here<p>Note: a nested note.</p></p>
<table><tbody>
<tr><th>Type:</th><td>list</td></tr>
<tr><th>Default:</th><td>""</td></tr>
<tr><th>Valid Values:</th><td></td></tr>
<tr><th>Server Default Property:</th><td>null</td></tr>
<tr><th>Importance:</th><td>low</td></tr>
</tbody></table>
</li>
</ul>
"""


def test_generator_reads_kafkas_table_layout():
    first, second = load_generator().parse_table(TABLE)
    assert first.name == "a.b"
    assert first.default == 604800000
    assert first.doc == "First sentence about a.b (e.g. this one)."
    assert (first.valid_values, first.server_default_property, first.update_mode) == ("[1,...]", "log.a.b", None)
    assert second.default == ()
    assert second.doc == "No full stop here"
    assert second.server_default_property is None


GENERATOR = load_generator()
needs_kafka_jars = pytest.mark.needs_input(
    GENERATOR.kafka_version(GENERATOR.KAFKA_JARS) is not None
    and GENERATOR.kafka_version(GENERATOR.ZOOKEEPER_ERA_JARS) is not None and shutil.which("java") is not None,
    f"Kafka 4.4's and 3.9's jars at {GENERATOR.KAFKA_JARS} and {GENERATOR.ZOOKEEPER_ERA_JARS} "
    "(bash scripts/fetch-jars.sh kafka4 kafka39) and java",
)



def definitions(text: str) -> dict:
    """The one table (BROKER_CONFIGS or TOPIC_CONFIGS) that a generated module defines."""
    namespace: dict = {}
    exec(compile(text, "<generated>", "exec"), namespace)
    (table,) = [value for name, value in namespace.items() if name.endswith("_CONFIGS")]
    return {name: tuple(definition) for name, definition in table.items()}


@needs_kafka_jars
def test_committed_modules_are_what_kafkas_jars_print():
    """Every config's definition, in Kafka's order, as Kafka 4.4's own ConfigDef prints it, then the
    broker configs only Kafka 3.9's prints (only the first line of the module, which names the
    source, is not compared). The TLS defaults are Kafka's on Java 11 and newer (its SslConfigs
    picks them by the running Java), as every current Kafka deployment runs."""
    fresh = GENERATOR.generate_from_jars()
    for path, text in fresh.items():
        committed, generated = definitions((REPO / path).read_text()), definitions(text)
        differing = sorted(name for name in committed | generated if committed.get(name) != generated.get(name))
        assert not differing, f"{path} is stale (run python tools/gen_configs.py): {differing}"
        assert list(committed) == list(generated), f"{path}: Kafka's order"


@needs_docs
def test_update_modes_match_the_docs_lists_of_dynamic_configs():
    page = DOCS.read_text()
    expected_modes = {
        "Updating SSL Keystore of an Existing Listener": "per-broker",
        "Updating SSL Truststore of an Existing Listener": "per-broker",
        "Updating Default Topic Configuration": "cluster-wide",
        "Updating Log Cleaner Configs": "cluster-wide",
        "Updating Thread Configs": "cluster-wide",
        "Updating ConnectionQuota Configs": "cluster-wide",
        "Adding and Removing Listeners": "per-broker",
    }
    checked = 0
    for title, body in re.findall(r"<h5>(.*?)</h5>(.*?)(?=<h5>|<h3)", page, re.S):
        for name in re.findall(r"<li><code>([a-z.]+)</code></li>", body) if title in expected_modes else []:
            # The docs list some topic names (max.message.bytes) and the hours/minutes synonyms
            # of the dynamic millisecond configs.
            broker_name = TOPIC_CONFIGS[name].server_default_property if name in TOPIC_CONFIGS else name
            # These docs are Kafka 3.x's; Kafka 4 made advertised.listeners read-only.
            expected = "read-only" if name == "advertised.listeners" else expected_modes[title]
            assert BROKER_CONFIGS[broker_synonyms(broker_name)[0]].update_mode == expected, name
            checked += 1
    assert checked > 40


# --- .properties syntax -------------------------------------------------------------------------


def test_properties_separators_and_comments():
    text = "# comment\n  ! another\n\n a=1\nb : 2\nc 3\nd\ne==5\nf\t=\t six  \n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "", "e": "=5", "f": "six  "}


def test_properties_line_continuations():
    text = "a = one, \\\n    two\nb = x\\\\\nc = y\\\\\\\n  z\n# comment \\\nd = 4\ne = last\\"
    assert parse_properties(text) == {"a": "one, two", "b": "x\\", "c": "y\\z", "d": "4", "e": "last"}


def test_properties_escapes():
    text = "a\\=b\\:c\\ d = \\t\\n\\u0041\\q\nemoji=\\uD83D\\uDE00"
    assert parse_properties(text) == {"a=b:c d": "\t\nAq", "emoji": "\U0001F600"}


def test_properties_line_endings_and_repeated_keys():
    assert parse_properties("a=1\r\nb=2\rc=3\na=4") == {"a": "4", "b": "2", "c": "3"}


def test_properties_malformed_unicode_escape():
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("a=\\u12G4")


# --- loading ------------------------------------------------------------------------------------


def test_samsa_defaults():
    loaded = KafkaConfig.load(None, [])
    assert loaded.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
    assert loaded.advertised_listeners == loaded.listeners
    assert loaded.log_dirs == ("./data",)
    assert (loaded.node_id, loaded.broker_id) == (0, 0)
    assert loaded.get("num.partitions") == 1
    assert loaded.get("log.dirs") is None


def test_load_file_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_bytes(b"num.partitions=3\nlog.dirs=/a, /b\nbroker.rack=caf\xe9\n")
    loaded = KafkaConfig.load(str(path), ["num.partitions=5", "auto.create.topics.enable=false", "broker.rack"])
    assert loaded.get("num.partitions") == 5
    assert loaded.get("auto.create.topics.enable") is False
    assert loaded.log_dirs == ("/a", "/b")
    # An override without '=' sets the empty string, as Kafka's --override does.
    assert loaded.get("broker.rack") == ""
    assert KafkaConfig.load(str(path), []).get("broker.rack") == "café"  # ISO-8859-1, as Kafka reads it


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read"):
        KafkaConfig.load(str(tmp_path / "absent.properties"), [])


def test_a_kraft_server_properties_is_accepted(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.voters=1@localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "num.network.threads=3\nnum.io.threads=8\n"
        "socket.send.buffer.bytes=102400\nsocket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\n"
        f"log.dirs={tmp_path}/kraft-combined-logs\nnum.partitions=1\nnum.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\nlog.retention.hours=168\nlog.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
    )
    loaded = KafkaConfig.load(str(path), [])
    assert (loaded.node_id, loaded.broker_id) == (1, 1)
    assert [e.name for e in loaded.listeners] == ["PLAINTEXT", "CONTROLLER"]
    assert loaded.advertised_listeners == (Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)
    assert loaded.get("process.roles") == ("broker", "controller")


# --- unknown and invalid configs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        ({"no.such.config": "1"}, "no.such.config", "Unknown broker config name: no.such.config"),
        ({"num.partitions": "abc"}, "num.partitions", "Invalid value abc for configuration num.partitions: "
         "Not a number of type INT"),
        ({"num.partitions": "2147483648"}, "num.partitions", "Not a number of type INT"),
        ({"num.partitions": "0"}, "num.partitions", "Value must be at least 1"),
        ({"num.partitions": "1_0"}, "num.partitions", "Not a number of type INT"),
        ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor",
         "Not a number of type SHORT"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable",
         "Expected value to be either true or false"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio",
         "Value must be no more than 1"),
        ({"log.cleaner.min.cleanable.ratio": "half"}, "log.cleaner.min.cleanable.ratio",
         "Not a number of type DOUBLE"),
        ({"compression.type": "brotli"}, "compression.type", "Invalid value brotli for configuration "
         "compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ({"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy", "Invalid value shred"),
        ({"compression.gzip.level": "0"}, "compression.gzip.level", "between 1 and 9 or -1"),
        ({"inter.broker.protocol.version": "9.9"}, "inter.broker.protocol.version", "not a valid version"),
        ({"remote.log.metadata.manager.impl.prefix": " "}, "remote.log.metadata.manager.impl.prefix",
         "String must be non-empty"),
        ({"listener.name.plaintext.no.such.config": "x"}, "listener.name.plaintext.no.such.config", "Unknown"),
        ({"listener.name.plaintext.max.connections": "-1"}, "listener.name.plaintext.max.connections",
         "Value must be at least 0"),
        ({"node.id": "1", "broker.id": "2"}, "node.id", "same value"),
        ({"log.dirs": " "}, "log.dirs", "At least one log directory"),
    ],
)
def test_invalid_broker_configs_name_the_key(props, key, message):
    with pytest.raises(ConfigError) as raised:
        KafkaConfig(props)
    assert raised.value.name == key
    assert message in str(raised.value)


def test_accepted_forms():
    accepted = config(
        num_partitions=" +7 ",
        auto_create_topics_enable="TRUE",
        log_cleaner_min_cleanable_ratio="5e-1",
        log_cleanup_policy="compact , delete",
        inter_broker_protocol_version="0.10.1.1",
        log_message_format_version="3.9",
        compression_gzip_level="-1",
    )
    assert accepted.get("num.partitions") == 7
    assert accepted.get("auto.create.topics.enable") is True
    assert accepted.get("log.cleaner.min.cleanable.ratio") == 0.5
    assert accepted.get("log.cleanup.policy") == ("compact", "delete")
    assert KafkaConfig({"listener.name.internal.ssl.keystore.location": "/k"}).get(
        "listener.name.internal.ssl.keystore.location") == "/k"
    assert KafkaConfig({"listener.name.sasl_ssl.plain.sasl.jaas.config": "x required;"}) is not None


def test_one_id_stands_for_both():
    assert (config(broker_id="4").node_id, config(node_id="5").broker_id) == (4, 5)


# --- retention and roll precedence ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000),
        ({"log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_precedence(props, retention_ms):
    loaded = KafkaConfig(props)
    assert loaded.log_retention_ms == retention_ms
    assert loaded.log_config_props()["retention.ms"] == str(retention_ms)
    assert loaded.log_config().retention_ms == retention_ms


def test_roll_and_flush_fallbacks():
    hours = config(log_roll_hours="2", log_roll_jitter_hours="1", log_flush_scheduler_interval_ms="500")
    assert (hours.log_roll_ms, hours.log_roll_jitter_ms, hours.log_flush_interval_ms) == (7_200_000, 3_600_000, 500)
    millis = config(log_roll_hours="2", log_roll_ms="10", log_roll_jitter_ms="3", log_flush_interval_ms="20")
    assert (millis.log_roll_ms, millis.log_roll_jitter_ms, millis.log_flush_interval_ms) == (10, 3, 20)
    props = millis.log_config_props()
    assert (props["segment.ms"], props["segment.jitter.ms"], props["flush.ms"]) == ("10", "3", "20")


def test_log_config_props_cover_every_topic_config_with_a_broker_default():
    props = config(log_segment_bytes="1024", log_cleanup_policy="compact,delete", message_max_bytes="77").log_config_props()
    assert props.keys() == {n for n, d in TOPIC_CONFIGS.items() if d.server_default_property is not None}
    assert (props["segment.bytes"], props["cleanup.policy"], props["max.message.bytes"]) == ("1024", "compact,delete", "77")
    assert props["min.cleanable.dirty.ratio"] == "0.5"


def test_bad_topic_defaults_fail_at_load_naming_the_broker_config():
    with pytest.raises(ConfigError) as raised:
        config(log_cleaner_min_compaction_lag_ms="10", log_cleaner_max_compaction_lag_ms="5")
    assert raised.value.name == "log.cleaner.min.compaction.lag.ms"


# --- listeners ----------------------------------------------------------------------------------


def test_listeners_with_names_and_protocol_map():
    loaded = config(
        listeners="INTERNAL://:9092, external://[::1]:9093,SSL://host.example:0",
        listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:sasl_ssl,SSL:SSL",
        inter_broker_listener_name="internal",
        advertised_listeners="INTERNAL://10.0.0.1:9092,EXTERNAL://public.example:19093",
    )
    assert loaded.listeners == (
        Endpoint("INTERNAL", None, 9092, "PLAINTEXT"),
        Endpoint("EXTERNAL", "::1", 9093, "SASL_SSL"),
        Endpoint("SSL", "host.example", 0, "SSL"),
    )
    assert loaded.advertised_listeners == (
        Endpoint("INTERNAL", "10.0.0.1", 9092, "PLAINTEXT"),
        Endpoint("EXTERNAL", "public.example", 19093, "SASL_SSL"),
    )
    assert loaded.inter_broker_listener_name == "INTERNAL"


def test_advertised_listeners_default_to_listeners_with_the_host_filled_in(monkeypatch):
    monkeypatch.setattr("socket.getfqdn", lambda: "broker.example")
    loaded = config(listeners="PLAINTEXT://:9092")
    assert loaded.listeners == (Endpoint("PLAINTEXT", None, 9092, "PLAINTEXT"),)
    assert loaded.advertised_listeners == (Endpoint("PLAINTEXT", "broker.example", 9092, "PLAINTEXT"),)


def test_kraft_controller_listeners_default_to_plaintext_and_are_not_advertised():
    loaded = config(
        process_roles="broker,controller",
        listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        controller_listener_names="CONTROLLER",
    )
    assert loaded.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    assert [e.name for e in loaded.advertised_listeners] == ["PLAINTEXT"]


def test_an_ipv4_and_an_ipv6_listener_may_share_a_port():
    loaded = config(
        listeners="PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092",
    )
    assert [e.port for e in loaded.listeners] == [9092, 9092]


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        ({"listeners": "PLAINTEXT:/127.0.0.1:9092"}, "listeners", "Unable to parse PLAINTEXT:/127.0.0.1:9092"),
        ({"listeners": "PLAINTEXT://host:port"}, "listeners", "Unable to parse"),
        ({"listeners": "INTERNAL://:9092"}, "listeners", "No security protocol defined for listener INTERNAL"),
        ({"listeners": "PLAINTEXT://:70000"}, "listeners", "out of range"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners", "different name"),
        ({"listeners": "PLAINTEXT://a:9092,SSL://b:9092"}, "listeners", "different port"),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map", "<key>:<value>"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map",
         "Invalid security protocol `TLS`"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "0.0.0.0"),
        ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
         "inter.broker.listener.name", "Only one of"),
        ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name", "not found"),
        ({"security.inter.broker.protocol": "SSL"}, "inter.broker.listener.name",
         "must be a listener name defined in advertised.listeners"),
    ],
)
def test_invalid_listeners(props, key, message):
    with pytest.raises(ConfigError) as raised:
        KafkaConfig(props)
    assert raised.value.name == key
    assert message in str(raised.value)


# --- values printed as Kafka prints them --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.5, "0.5"), (100.0, "100.0"), (1e-5, "1.0E-5"), (1e7, "1.0E7"), (1.7976931348623157e308, "1.7976931348623157E308"),
     (-2.5e-4, "-2.5E-4"), (True, "true"), (("a", "b"), "a,b"), ((), ""), (None, None), (42, "42")],
)
def test_value_to_string(value, text):
    assert value_to_string(value) == text


# What Double.toString prints for each (JDK 25). JDK 17 prints a few values whose shortest form reads
# back with more digits (2e23 as 1.9999999999999998E23): Java's specification since JDK 19 is the one
# followed here, as the shortest digits are.
@pytest.mark.parametrize(("value", "text"), [
    (100.0, "100.0"), (50.0, "50.0"), (12.5, "12.5"), (3, "3.0"), (0.1, "0.1"), (1.0 / 3, "0.3333333333333333"),
    (0.001, "0.001"), (1e-4, "1.0E-4"), (-2.5e-7, "-2.5E-7"), (9999999.0, "9999999.0"), (1e7, "1.0E7"),
    (2.0e7, "2.0E7"), (12345678.9, "1.23456789E7"), (2e23, "2.0E23"), (8.41e21, "8.41E21"),
    (1.7976931348623157e308, "1.7976931348623157E308"),
    (5e-324, "4.9E-324"), (1e-323, "9.9E-324"), (2.5e-323, "2.5E-323"),  # subnormals: two digits where one would do
    (0.0, "0.0"), (-0.0, "-0.0"), (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
])
def test_doubles_printed_as_javas_double_to_string(value, text):
    assert java_double(value) == text


# --- DescribeConfigs: broker --------------------------------------------------------------------


def test_describe_default_and_static_sources():
    described = config(num_partitions="3", log_cleanup_policy="compact, delete").describe()
    # Kafka 4.4's configs; the ZooKeeper-era ones from Kafka 3.9, and the broker quota configs
    # (which Kafka's KafkaConfig does not define), only when set.
    quotas = {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
              "replica.alter.log.dirs.io.max.bytes.per.second"}
    assert len(described) == len([d for d in BROKER_CONFIGS.values() if d.kafka_version == "4.4.0"]) - len(quotas)
    assert not quotas & {e.name for e in described}
    throttled = config(replica_alter_log_dirs_io_max_bytes_per_second="1000").describe(quotas)
    assert [(e.name, e.value, [(s.value, s.source) for s in e.synonyms]) for e in throttled] == [
        ("replica.alter.log.dirs.io.max.bytes.per.second", "1000", [("1000", ConfigSource.STATIC_BROKER_CONFIG)])]
    partitions = entry(described, "num.partitions")
    assert (partitions.value, partitions.source, partitions.config_type) == ("3", ConfigSource.STATIC_BROKER_CONFIG, ConfigType.INT)
    assert partitions.synonyms == (
        ConfigSynonym("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    )
    # The value is printed parsed; the static synonym keeps what the file said.
    policy = entry(described, "log.cleanup.policy")
    assert (policy.value, policy.synonyms[0].value) == ("compact,delete", "compact, delete")
    threads = entry(described, "num.io.threads")
    assert (threads.value, threads.source) == ("8", ConfigSource.DEFAULT_CONFIG)
    assert threads.synonyms == (ConfigSynonym("num.io.threads", "8", ConfigSource.DEFAULT_CONFIG),)
    assert "zookeeper.connect" not in {e.name for e in described}
    zookeeper = entry(config(zookeeper_connect="localhost:2181").describe(), "zookeeper.connect")
    assert (zookeeper.value, zookeeper.source) == ("localhost:2181", ConfigSource.STATIC_BROKER_CONFIG)


def test_describe_read_only_follows_the_update_mode():
    described = config().describe(["num.partitions", "log.segment.bytes", "listeners", "no.such.config"])
    assert [(e.name, e.read_only) for e in described] == [
        ("listeners", False), ("log.segment.bytes", False), ("num.partitions", True)]


def test_describe_retention_synonyms_in_kafkas_order():
    loaded = config(log_retention_ms="1000", log_retention_hours="24")
    ms, hours = loaded.describe(["log.retention.ms", "log.retention.hours"])[::-1]
    assert ms.name == "log.retention.ms" and ms.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in ms.synonyms] == [
        ("log.retention.ms", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    # Synonyms ahead of the config itself are dropped, as Kafka's ConfigHelper does.
    assert [s.name for s in hours.synonyms] == ["log.retention.hours", "log.retention.hours"]
    unset = config().describe(["log.retention.ms"])[0]
    assert (unset.value, unset.source, unset.synonyms) == (None, ConfigSource.DEFAULT_CONFIG, ())


def test_describe_hides_passwords():
    loaded = config(ssl_key_password="secret", **{"listener.name.plaintext.ssl.key.password": "other"})
    password = entry(loaded.describe(), "ssl.key.password")
    assert (password.value, password.is_sensitive, password.config_type) == (None, True, ConfigType.PASSWORD)
    assert password.synonyms == (ConfigSynonym("ssl.key.password", None, ConfigSource.STATIC_BROKER_CONFIG),)
    override = entry(loaded.describe(), "listener.name.plaintext.ssl.key.password")
    assert (override.value, override.is_sensitive, override.read_only) == (None, True, True)
    assert [s.name for s in override.synonyms] == ["listener.name.plaintext.ssl.key.password", "ssl.key.password"]


def test_describe_samsa_defaults_and_doubles():
    described = config().describe(["listeners", "log.dir", "log.cleaner.io.max.bytes.per.second"])
    assert [(e.name, e.value, e.source) for e in described] == [
        ("listeners", "PLAINTEXT://127.0.0.1:9092", ConfigSource.DEFAULT_CONFIG),
        ("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", ConfigSource.DEFAULT_CONFIG),
        ("log.dir", "./data", ConfigSource.DEFAULT_CONFIG),
    ]
    assert described[0].documentation == BROKER_CONFIGS["listeners"].doc


# --- DescribeConfigs: topics --------------------------------------------------------------------


def test_describe_topic_sources_and_synonyms():
    loaded = config(log_segment_bytes="2048", log_retention_hours="1")
    described = loaded.describe_topic_configs({"retention.ms": "5000", "cleanup.policy": "compact"})
    assert len(described) == len(TOPIC_CONFIGS)
    retention = entry(described, "retention.ms")
    assert (retention.value, retention.source) == ("5000", ConfigSource.TOPIC_CONFIG)
    # log.retention.hours stands behind log.retention.ms, so Kafka lists no broker synonym.
    assert retention.synonyms == (ConfigSynonym("retention.ms", "5000", ConfigSource.TOPIC_CONFIG),)
    segment = entry(described, "segment.bytes")
    assert (segment.value, segment.source) == ("2048", ConfigSource.STATIC_BROKER_CONFIG)
    assert segment.synonyms == (
        ConfigSynonym("log.segment.bytes", "2048", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    )
    policy = entry(described, "cleanup.policy")
    assert [s.source for s in policy.synonyms] == [ConfigSource.TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG]
    remote = entry(described, "remote.storage.enable")
    assert (remote.value, remote.source, remote.synonyms, remote.read_only) == (
        "false", ConfigSource.DEFAULT_CONFIG, (), False)


def test_describe_topic_values_come_from_the_broker():
    described = config(log_retention_hours="1").describe_topic_configs({}, ["retention.ms", "no.such.config"])
    assert [(e.name, e.value, e.source) for e in described] == [("retention.ms", "3600000", ConfigSource.DEFAULT_CONFIG)]


# --- topic config validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configs", "key", "message"),
    [
        ({"retention.mss": "1"}, "retention.mss", "Unknown topic config name: retention.mss"),
        ({"retention.ms": None}, "retention.ms", "Null value not supported for topic configs: retention.ms"),
        ({"retention.ms": "abc"}, "retention.ms", "Invalid value abc for configuration retention.ms: "
         "Not a number of type LONG"),
        ({"retention.ms": "-2"}, "retention.ms", "Value must be at least -1"),
        ({"segment.bytes": "13"}, "segment.bytes", "Value must be at least 14"),
        ({"cleanup.policy": "compact,shred"}, "cleanup.policy", "String must be one of: compact, delete"),
        ({"message.timestamp.type": "createtime"}, "message.timestamp.type", "String must be one of"),
        ({"leader.replication.throttled.replicas": "0:1,x"}, "leader.replication.throttled.replicas",
         "must be the literal '*'"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms",
         "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
        ({"remote.storage.enable": "true"}, "remote.storage.enable", "Tiered Storage functionality is disabled"),
    ],
)
def test_invalid_topic_configs(configs, key, message):
    with pytest.raises(ConfigError) as raised:
        config().validate_topic_configs(configs)
    assert raised.value.name == key
    assert message in raised.value.message


def test_valid_topic_configs():
    config().validate_topic_configs({
        "retention.ms": "-1",
        "cleanup.policy": "compact,delete",
        "follower.replication.throttled.replicas": "*",
        "leader.replication.throttled.replicas": "0:1, 1:1",
        "min.cleanable.dirty.ratio": "0.1",
        "max.decompressed.message.bytes": "1000000",
        "compression.type": "zstd",
    })
