"""Dynamic broker configs (KIP-226) and broker loggers (KIP-412) over loopback: DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs on BROKER resources (this broker's id and the empty
name) and BROKER_LOGGER, Kafka's checks and messages, the live effect on produce and on every
topic's LogConfig, and the configs kept across a restart."""

from __future__ import annotations

import json
import logging

import pytest
import trio

from samsa.server.config.kafka_config import ConfigSource, ConfigSynonym, ConfigType, KafkaConfig
from samsa.server.config.dynamic_broker_config import incremental_broker_configs
from samsa.server.metadata.image import METADATA_FILE
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from loopback import (
    Client, broker_config, create_topic_request, one_batch, produce_request, run_with_broker,
)

Describe = request_class(ApiKey.DESCRIBE_CONFIGS)
Incremental = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
Alter = request_class(ApiKey.ALTER_CONFIGS)
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DBC, DDBC = ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG


# The cluster-wide dynamic default a fresh log directory starts with (Kafka 4's kafka-storage format).
FORMATTED = {"min.insync.replicas": "1"}


def run(config: KafkaConfig, scenario) -> None:
    """Start a broker, run `scenario(broker, client)` against it, then stop the broker (always)."""

    async def with_client(broker):
        await scenario(broker, await Client.connect(broker.endpoints[0].port))

    run_with_broker(config, with_client)


async def describe(client, resource_type, name, keys=None, version=4, documentation=False):
    request = Describe(resources=[Describe.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)])
    if version >= 1:
        request.include_synonyms = True
    if version >= 3:
        request.include_documentation = documentation
    (result,) = (await client.call(request, version)).results
    return result


async def configs(client, resource_type, name, keys=None):
    result = await describe(client, resource_type, name, keys)
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def synonyms(entry):
    return [(s.name, s.value, s.source) for s in entry.synonyms]


async def incremental(client, resource_type, name, *changes, validate_only=False, version=1):
    request = Incremental(validate_only=validate_only, resources=[Incremental.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[Incremental.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes])])
    (response,) = (await client.call(request, version)).responses
    return response.error_code, response.error_message


async def alter(client, resource_type, name, values, validate_only=False, version=2):
    request = Alter(validate_only=validate_only, resources=[Alter.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[Alter.AlterableConfig(name=n, value=v) for n, v in values.items()])])
    (response,) = (await client.call(request, version)).responses
    return response.error_code, response.error_message


OK = (ErrorCode.NONE, None)


async def create_topic(client, name, partitions=1, configs=None):
    request = create_topic_request(name, partitions)
    for key, value in (configs or {}).items():
        request.topics[0].configs.append(request.CreatableTopicConfig(name=key, value=value))
    (created,) = (await client.call(request, 5)).topics
    assert created.error_code == ErrorCode.NONE, created.error_message


def log_config(broker, topic, index=0):
    return broker.services.replica_manager.get(topic, index).log.config


# --- precedence, sources and synonyms -----------------------------------------------------------


def test_per_broker_beats_cluster_default_beats_static(tmp_path):
    async def scenario(broker, client):
        assert [c.name for c in (await describe(client, BROKER, "")).configs] == list(FORMATTED)
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, "500000")) == OK
        default = (await configs(client, BROKER, ""))["message.max.bytes"]
        assert (default.value, default.config_source, default.read_only) == ("500000", DDBC, False)
        assert synonyms(default) == [("message.max.bytes", "500000", DDBC)]
        own = (await configs(client, BROKER, "0", ["message.max.bytes"]))["message.max.bytes"]
        assert (own.value, own.config_source) == ("500000", DDBC)
        assert synonyms(own) == [("message.max.bytes", "500000", DDBC), ("message.max.bytes", "400000", STATIC),
                                 ("message.max.bytes", "1048588", DEFAULT)]

        assert await incremental(client, BROKER, "0", ("message.max.bytes", SET, "300000")) == OK
        own = (await configs(client, BROKER, "0", ["message.max.bytes"]))["message.max.bytes"]
        assert (own.value, own.config_source) == ("300000", DBC)
        assert [s[2] for s in synonyms(own)] == [DBC, DDBC, STATIC, DEFAULT]
        # The cluster-wide resource shows only its own layer.
        default = (await configs(client, BROKER, ""))["message.max.bytes"]
        assert (default.value, synonyms(default)) == ("500000", [("message.max.bytes", "500000", DDBC)])
        assert broker.config.get("message.max.bytes") == 300000

        assert await incremental(client, BROKER, "0", ("message.max.bytes", DELETE, None)) == OK
        assert broker.config.get("message.max.bytes") == 500000
        assert await incremental(client, BROKER, "", ("message.max.bytes", DELETE, None)) == OK
        assert broker.config.get("message.max.bytes") == 400000
        assert [c.name for c in (await describe(client, BROKER, "")).configs] == list(FORMATTED)

    run(broker_config(tmp_path, message_max_bytes=400000), scenario)


def test_retention_synonyms_in_kafkas_order_and_topics_inherit_them(tmp_path):
    async def scenario(broker, client):
        await create_topic(client, "plain")
        await create_topic(client, "own", configs={"retention.ms": "1000"})
        assert await incremental(client, BROKER, "", ("log.retention.ms", SET, "5000")) == OK
        assert await incremental(client, BROKER, "0", ("log.retention.ms", SET, "6000")) == OK
        described = await configs(client, BROKER, "0", ["log.retention.ms", "log.retention.hours"])
        assert synonyms(described["log.retention.ms"]) == [
            ("log.retention.ms", "6000", DBC), ("log.retention.ms", "5000", DDBC),
            ("log.retention.hours", "100", STATIC), ("log.retention.hours", "168", DEFAULT)]
        assert described["log.retention.ms"].value == "6000"
        # What stands ahead of the described name is dropped, as Kafka's ConfigHelper does.
        assert synonyms(described["log.retention.hours"]) == [
            ("log.retention.hours", "100", STATIC), ("log.retention.hours", "168", DEFAULT)]
        assert described["log.retention.hours"].read_only

        plain = (await configs(client, TOPIC, "plain", ["retention.ms"]))["retention.ms"]
        assert (plain.value, plain.config_source) == ("6000", DBC)
        assert [s[2] for s in synonyms(plain)] == [DBC, DDBC, STATIC, DEFAULT]
        own = (await configs(client, TOPIC, "own", ["retention.ms"]))["retention.ms"]
        assert (own.value, own.config_source) == ("1000", ConfigSource.TOPIC_CONFIG)
        assert log_config(broker, "plain").retention_ms == 6000
        assert log_config(broker, "own").retention_ms == 1000

    run(broker_config(tmp_path, log_retention_hours=100), scenario)


def test_describe_every_version_and_documentation(tmp_path):
    async def scenario(broker, client):
        assert await incremental(client, BROKER, "", ("log.segment.bytes", SET, "2000000")) == OK
        for version in range(5):
            for name in ("0", ""):
                result = await describe(client, BROKER, name, ["log.segment.bytes"], version, documentation=True)
                (entry,) = result.configs
                assert entry.value == "2000000"
                assert entry.is_default is False
                if version >= 1:
                    assert entry.config_source == DDBC
                if version >= 3:
                    assert entry.config_type == ConfigType.INT
                    assert entry.documentation.startswith("The maximum size of a single log file")

    run(broker_config(tmp_path), scenario)


# --- what may change, and Kafka's errors --------------------------------------------------------


def test_update_modes_and_kafkas_messages(tmp_path):
    async def scenario(broker, client):
        assert await incremental(client, BROKER, "0", ("auto.create.topics.enable", SET, "false")) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [auto.create.topics.enable]")
        assert await alter(client, BROKER, "", {"num.partitions": "3", "log.retention.hours": "1"}) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [log.retention.hours, num.partitions]")
        # A per-broker config needs the broker's id.
        assert await incremental(client, BROKER, "", ("sasl.kerberos.service.name", SET, "kafka")) == (
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "[sasl.kerberos.service.name]")
        assert await incremental(client, BROKER, "0", ("sasl.kerberos.service.name", SET, "kafka")) == OK
        # Keystores change per listener only.
        assert await incremental(client, BROKER, "0", ("ssl.key.password", SET, "secret")) == (
            ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener "
                                       "using the listener prefix: [ssl.key.password]")
        # Invalid values: Kafka answers INVALID_REQUEST for a BROKER resource, naming the key.
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, "big")) == (
            ErrorCode.INVALID_REQUEST, "Invalid value big for configuration message.max.bytes: Not a number of type INT")
        assert await incremental(client, BROKER, "", ("log.cleanup.policy", SET, "forever")) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value forever for configuration log.cleanup.policy: String must be one of: compact, delete")
        assert await incremental(client, BROKER, "", ("num.io.threads", SET, "100")) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation "
            "failed for num.io.threads=100, value should not be greater than double the current value 8 for "
            "configuration Invalid dynamic configuration")
        # Kafka 4 made advertised.listeners read-only.
        assert await incremental(client, BROKER, "0", ("advertised.listeners", SET, "PLAINTEXT://10.0.0.1:9092")) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [advertised.listeners]")
        # Nothing refused was kept.
        assert broker.config.dynamic_configs(per_broker=False) == FORMATTED
        assert broker.config.dynamic_configs(per_broker=True) == {"sasl.kerberos.service.name": "kafka"}

    run(broker_config(tmp_path), scenario)


def test_resource_names(tmp_path):
    async def scenario(broker, client):
        for call in (lambda n: incremental(client, BROKER, n, ("message.max.bytes", SET, "1000")),
                     lambda n: alter(client, BROKER, n, {"message.max.bytes": "1000"})):
            assert await call("abc") == (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: abc")
            assert await call("7") == (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0, but received 7")
        result = await describe(client, BROKER, "abc")
        assert (result.error_code, result.error_message) == (
            ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: abc")
        result = await describe(client, BROKER, "7")
        assert (result.error_code, result.error_message) == (
            ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7")

    run(broker_config(tmp_path), scenario)


def test_request_shape_errors(tmp_path):
    async def scenario(broker, client):
        twice = Incremental(validate_only=False, resources=[
            Incremental.AlterConfigsResource(resource_type=BROKER, resource_name="", configs=[
                Incremental.AlterableConfig(name="message.max.bytes", config_operation=SET, value="1000")]),
            Incremental.AlterConfigsResource(resource_type=BROKER, resource_name="", configs=[]),
            Incremental.AlterConfigsResource(resource_type=BROKER, resource_name="0", configs=[])])
        responses = (await client.call(twice, 1)).responses
        assert [(r.error_code, r.error_message) for r in responses] == [
            (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2 + [OK]
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, "1000"),
                                 ("message.max.bytes", DELETE, None)) == (
            ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, None), ("a", APPEND, None)) == (
            ErrorCode.INVALID_REQUEST, "Null value not supported for : message.max.bytes, a")
        assert await incremental(client, BROKER, "", ("message.max.bytes", 9, "1")) == (
            ErrorCode.INVALID_REQUEST, "Unknown operations type 9")
        assert await incremental(client, 3, "x", ("a", SET, "1")) == (ErrorCode.INVALID_REQUEST, "Unknown resource type 3")
        assert broker.config.dynamic_configs(per_broker=False) == FORMATTED

    run(broker_config(tmp_path), scenario)


def test_append_and_subtract_take_list_configs_only(tmp_path):
    async def scenario(broker, client):
        await create_topic(client, "t")
        # From Kafka's default ("delete"), not from the effective value.
        assert await incremental(client, BROKER, "", ("log.cleanup.policy", APPEND, "compact")) == OK
        assert broker.config.dynamic_configs(per_broker=False) == {**FORMATTED, "log.cleanup.policy": "delete,compact"}
        assert log_config(broker, "t").cleanup_policy == ("delete", "compact")
        assert await incremental(client, BROKER, "", ("log.cleanup.policy", SUBTRACT, "delete")) == OK
        assert log_config(broker, "t").cleanup_policy == ("compact",)
        assert await incremental(client, BROKER, "", ("message.max.bytes", APPEND, "1")) == (
            ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: message.max.bytes")
        assert await incremental(client, BROKER, "0", ("log.segment.bytes", SUBTRACT, "1")) == (
            ErrorCode.INVALID_CONFIG, "Config value subtract is not allowed for config key: log.segment.bytes")
        assert await incremental(client, BROKER, "0", ("no.such.config", APPEND, "1")) == (
            ErrorCode.INVALID_CONFIG, "Unknown config name: no.such.config")

    run(broker_config(tmp_path, log_cleanup_policy="compact"), scenario)


def test_incremental_values_are_computed_as_kafkas_controller_computes_them():
    """As for every resource type (ConfigurationControlManager): APPEND adds each value the list
    lacks once, SUBTRACT removes one occurrence of each, empty items are dropped."""
    def edit(current, *changes):
        return incremental_broker_configs(current, [
            Incremental.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes])

    assert edit({}, ("log.cleanup.policy", APPEND, "compact,compact")) == {"log.cleanup.policy": "delete,compact"}
    assert edit({"log.cleanup.policy": "compact,,delete,compact"}, ("log.cleanup.policy", SUBTRACT, "compact")) == {
        "log.cleanup.policy": "delete,compact"}
    assert edit({"message.max.bytes": "10"}, ("log.cleanup.policy", SUBTRACT, "delete"),
                ("message.max.bytes", DELETE, None)) == {"log.cleanup.policy": ""}


def test_custom_and_sensitive_configs_are_kept_but_not_shown(tmp_path):
    async def scenario(broker, client):
        assert await incremental(client, BROKER, "0", ("my.plugin.setting", SET, "42"),
                                 ("listener.name.plaintext.ssl.key.password", SET, "secret")) == OK
        described = await configs(client, BROKER, "0")
        custom = described["my.plugin.setting"]
        assert (custom.value, custom.is_sensitive, custom.read_only, custom.config_type, custom.config_source) == (
            None, True, True, ConfigType.UNKNOWN, DBC)
        assert synonyms(custom) == [("my.plugin.setting", None, DBC)]
        password = described["listener.name.plaintext.ssl.key.password"]
        assert (password.value, password.is_sensitive, password.config_type) == (None, True, ConfigType.PASSWORD)
        assert all(s.value is None for s in password.synonyms)

    run(broker_config(tmp_path), scenario)


def test_validate_only_applies_and_keeps_nothing(tmp_path):
    async def scenario(broker, client):
        await create_topic(client, "t")
        image = tmp_path / "data" / METADATA_FILE
        before = image.read_text()
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, "1000"), validate_only=True) == OK
        assert await alter(client, BROKER, "0", {"log.retention.ms": "1000"}, validate_only=True) == OK
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, "x"), validate_only=True) == (
            ErrorCode.INVALID_REQUEST, "Invalid value x for configuration message.max.bytes: Not a number of type INT")
        assert image.read_text() == before
        assert broker.config.get("message.max.bytes") == 1048588
        assert log_config(broker, "t").retention_ms == 604800000
        assert [c.name for c in (await describe(client, BROKER, "")).configs] == list(FORMATTED)

    run(broker_config(tmp_path), scenario)


def test_legacy_alter_configs_replaces_the_whole_set(tmp_path):
    async def scenario(broker, client):
        assert await incremental(client, BROKER, "", ("log.retention.ms", SET, "5000"),
                                 ("log.segment.bytes", SET, "2000000")) == OK
        assert await alter(client, BROKER, "", {"log.segment.bytes": "3000000"}) == OK
        assert broker.config.dynamic_configs(per_broker=False) == {"log.segment.bytes": "3000000"}
        assert broker.config.log_config().retention_ms == 604800000
        assert await alter(client, BROKER, "", {}) == OK
        assert broker.config.dynamic_configs(per_broker=False) == {}

    run(broker_config(tmp_path), scenario)


# --- the live effect ----------------------------------------------------------------------------


def test_lower_message_max_bytes_refuses_a_produce_at_once(tmp_path):
    async def scenario(broker, client):
        await create_topic(client, "t")
        await create_topic(client, "big", configs={"max.message.bytes": "100000"})
        batch = one_batch([b"x" * 5000])

        async def produce(topic):
            (topic_response,) = (await client.call(produce_request(topic, batch), 8)).responses
            return topic_response.partition_responses[0].error_code

        assert await produce("t") == ErrorCode.NONE
        assert await incremental(client, BROKER, "", ("message.max.bytes", SET, "2000")) == OK
        assert await produce("t") == ErrorCode.MESSAGE_TOO_LARGE
        assert await produce("big") == ErrorCode.NONE, "a topic's own override stands"
        entry = (await configs(client, TOPIC, "t", ["max.message.bytes"]))["max.message.bytes"]
        assert (entry.value, entry.config_source) == ("2000", DDBC)
        assert await incremental(client, BROKER, "", ("message.max.bytes", DELETE, None)) == OK
        assert await produce("t") == ErrorCode.NONE

    run(broker_config(tmp_path), scenario)


def test_connection_limits_change_at_once(tmp_path):
    """max.connections and max.connection.creation.rate, cluster-wide and per listener (Kafka's
    SocketServer.reconfigure, KIP-612's ListenerConnectionQuota): the next connection obeys."""
    async def served(port):
        other = await Client.connect(port)
        return (await other.call(request_class(ApiKey.API_VERSIONS)(), 0)).error_code == ErrorCode.NONE

    async def scenario(broker, client):
        port, quotas = broker.endpoints[0].port, broker.connection_quotas
        assert await incremental(client, BROKER, "", ("max.connections", SET, "1")) == OK
        async with trio.open_nursery() as nursery:
            answered = trio.Event()

            async def second_connection():
                assert await served(port)
                answered.set()

            nursery.start_soon(second_connection)
            for _ in range(20):  # the broker keeps serving the first connection meanwhile
                assert (await client.call(request_class(ApiKey.API_VERSIONS)(), 0)).error_code == ErrorCode.NONE
            assert quotas.total == 1
            assert not answered.is_set()
            assert await alter(client, BROKER, "", {"listener.name.plaintext.max.connections": "2"}) == OK
            with trio.fail_after(10):
                await answered.wait()
        assert await alter(client, BROKER, "", {}) == OK
        assert await incremental(client, BROKER, "0", ("listener.name.plaintext.max.connections", SET, "0")) == (
            ErrorCode.INVALID_REQUEST, "Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
                                       "max.connections 0 for configuration Invalid dynamic configuration")
        assert await incremental(client, BROKER, "", ("max.connection.creation.rate", SET, "0")) == (
            ErrorCode.INVALID_REQUEST, "Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
                                       "max.connection.creation.rate 0 for configuration Invalid dynamic configuration")
        assert await incremental(client, BROKER, "", ("max.connections.per.ip", SET, "0")) == (
            ErrorCode.INVALID_REQUEST, "max.connections.per.ip can be set to zero only if "
                                       "max.connections.per.ip.overrides property is set.")

        for _ in range(12):  # unlimited, yet measured: 1.2 connections a second over the 10 s judged
            assert await served(port)
        assert await incremental(client, BROKER, "", ("max.connection.creation.rate", SET, "1")) == OK
        started = trio.current_time()
        assert await served(port)
        assert trio.current_time() - started >= 0.9, "throttled for up to a window (1 s)"
        assert await incremental(client, BROKER, "", ("max.connection.creation.rate", DELETE, None)) == OK
        started = trio.current_time()
        assert await served(port)
        assert trio.current_time() - started < 0.9

    run(broker_config(tmp_path), scenario)


def test_log_defaults_change_every_topics_log_config(tmp_path):
    async def scenario(broker, client):
        await create_topic(client, "a", partitions=2)
        await create_topic(client, "b", configs={"segment.bytes": "1000000", "compression.type": "gzip"})
        assert await incremental(
            client, BROKER, "",
            ("log.retention.ms", SET, "86400000000"), ("log.retention.bytes", SET, "123456789"),
            ("log.segment.bytes", SET, "2000000"), ("compression.type", SET, "lz4"),
            ("log.message.timestamp.type", SET, "LogAppendTime"), ("log.flush.interval.messages", SET, "10"),
            ("log.flush.interval.ms", SET, "5000"), ("message.max.bytes", SET, "65536")) == OK
        for topic, index in (("a", 0), ("a", 1), ("b", 0)):
            config = log_config(broker, topic, index)
            assert (config.retention_ms, config.retention_bytes) == (86400000000, 123456789)
            assert (config.message_timestamp_type, config.max_message_bytes) == ("LogAppendTime", 65536)
            assert (config.flush_messages, config.flush_ms) == (10, 5000)
        assert (log_config(broker, "a").segment_bytes, log_config(broker, "a").compression_type) == (2000000, "lz4")
        assert (log_config(broker, "b").segment_bytes, log_config(broker, "b").compression_type) == (1000000, "gzip")
        # A topic created later starts from the new defaults too.
        await create_topic(client, "c")
        assert log_config(broker, "c").retention_ms == 86400000000

    run(broker_config(tmp_path), scenario)


def test_dynamic_configs_survive_a_restart(tmp_path):
    async def first(broker, client):
        await create_topic(client, "t")
        assert await incremental(client, BROKER, "", ("log.retention.ms", SET, "7200000"),
                                 ("message.max.bytes", SET, "70000")) == OK
        assert await incremental(client, BROKER, "00", ("message.max.bytes", SET, "60000")) == OK

    async def second(broker, client):
        assert broker.config.dynamic_configs(per_broker=False) == {**FORMATTED, "log.retention.ms": "7200000",
                                                                    "message.max.bytes": "70000"}
        assert broker.config.get("message.max.bytes") == 60000
        assert (log_config(broker, "t").retention_ms, log_config(broker, "t").max_message_bytes) == (7200000, 60000)
        own = (await configs(client, BROKER, "0", ["message.max.bytes"]))["message.max.bytes"]
        assert (own.value, own.config_source) == ("60000", DBC)
        entry = (await configs(client, TOPIC, "t", ["retention.ms"]))["retention.ms"]
        assert (entry.value, entry.config_source) == ("7200000", DDBC)

    run(broker_config(tmp_path), first)
    stored = json.loads((tmp_path / "data" / METADATA_FILE).read_text())["broker_configs"]
    assert stored == {"": {**FORMATTED, "log.retention.ms": "7200000", "message.max.bytes": "70000"},
                      "0": {"message.max.bytes": "60000"}}
    # A fresh config object: only the metadata image carries the dynamic configs over.
    run(broker_config(tmp_path), second)


def test_stored_configs_that_no_longer_apply_are_skipped_at_startup(tmp_path):
    async def first(broker, client):
        assert await incremental(client, BROKER, "", ("log.segment.bytes", SET, "2000000")) == OK

    run(broker_config(tmp_path), first)
    image = tmp_path / "data" / METADATA_FILE
    data = json.loads(image.read_text())
    data["broker_configs"][""].update({"num.partitions": "9", "message.max.bytes": "lots"})
    image.write_text(json.dumps(data))

    async def second(broker, client):
        assert broker.config.dynamic_configs(per_broker=False) == {**FORMATTED, "log.segment.bytes": "2000000"}
        assert broker.config.get("num.partitions") == 1

    run(broker_config(tmp_path), second)


# --- BROKER_LOGGER ------------------------------------------------------------------------------


@pytest.fixture
def restore_logger_levels():
    levels = {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_broker_loggers(tmp_path, restore_logger_levels):
    logging.getLogger("samsa").setLevel(logging.INFO)

    async def scenario(broker, client):
        levels = {c.name: c for c in (await describe(client, BROKER_LOGGER, "0")).configs}
        assert {"root", "samsa", "samsa.broker"} <= levels.keys()
        entry = levels["samsa.broker"]
        assert (entry.value, entry.config_source, entry.read_only, entry.is_sensitive, entry.synonyms) == (
            "INFO", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, [])

        assert await incremental(client, BROKER_LOGGER, "0", ("samsa.broker", SET, "DEBUG")) == OK
        assert logging.getLogger("samsa.broker").level == logging.DEBUG
        levels = {c.name: c.value for c in (await describe(client, BROKER_LOGGER, "0", ["samsa.broker"])).configs}
        assert levels == {"samsa.broker": "DEBUG"}
        assert await incremental(client, BROKER_LOGGER, "0", ("samsa.broker", SET, "WARN"), validate_only=True) == OK
        assert logging.getLogger("samsa.broker").level == logging.DEBUG
        assert await incremental(client, BROKER_LOGGER, "0", ("samsa.broker", DELETE, None)) == OK
        assert logging.getLogger("samsa.broker").level == logging.NOTSET
        levels = {c.name: c.value for c in (await describe(client, BROKER_LOGGER, "0", ["samsa.broker"])).configs}
        assert levels == {"samsa.broker": "INFO"}, "inherited from samsa"

        assert await incremental(client, BROKER_LOGGER, "0", ("no.such.logger", SET, "DEBUG")) == (
            ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!")
        assert await incremental(client, BROKER_LOGGER, "0", ("samsa.broker", SET, "LOUD")) == (
            ErrorCode.INVALID_CONFIG, "Cannot set the log level of samsa.broker to LOUD as it is not a supported log "
                                      "level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
        assert await incremental(client, BROKER_LOGGER, "0", ("root", DELETE, None)) == (
            ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
        assert await incremental(client, BROKER_LOGGER, "0", ("root", APPEND, "DEBUG")) == (
            ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")
        assert await incremental(client, BROKER_LOGGER, "1", ("root", SET, "DEBUG")) == (
            ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 0, but received 0")
        assert await alter(client, BROKER_LOGGER, "0", {"root": "DEBUG"}) == (
            ErrorCode.INVALID_REQUEST, "Unknown resource type 8")
        for name, message in (("", "Broker id must not be empty"),
                              ("1", "Unexpected broker id, expected 0 but received 1")):
            result = await describe(client, BROKER_LOGGER, name)
            assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, message)

    run(broker_config(tmp_path), scenario)


# --- the configuration object on its own --------------------------------------------------------


def test_a_dynamic_config_wins_over_its_static_synonyms():
    config = KafkaConfig({"log.roll.hours": "2", "log.retention.minutes": "30", "log.flush.scheduler.interval.ms": "500"})
    assert (config.log_roll_ms, config.log_retention_ms, config.log_flush_interval_ms) == (7_200_000, 1_800_000, 500)
    config.update_dynamic({"log.roll.ms": "1000", "log.flush.interval.ms": "3000"}, {"log.retention.ms": "60000"})
    assert (config.log_roll_ms, config.log_retention_ms, config.log_flush_interval_ms) == (1000, 60000, 3000)
    assert (config.log_config().segment_ms, config.log_config().flush_ms) == (1000, 3000)
    # The flush scheduler keeps its static interval.
    assert config.get("log.flush.scheduler.interval.ms") == 500
    (entry,) = config.describe(["log.roll.ms"])
    assert entry.synonyms == (ConfigSynonym("log.roll.ms", "1000", DBC), ConfigSynonym("log.roll.hours", "2", STATIC),
                              ConfigSynonym("log.roll.hours", "168", DEFAULT))
    config.update_dynamic({}, {})
    assert (config.log_roll_ms, config.log_retention_ms, config.log_flush_interval_ms) == (7_200_000, 1_800_000, 500)
