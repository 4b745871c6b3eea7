"""Dynamic broker configs (KIP-226) through real admin clients: confluent-kafka's AdminClient
(incremental_alter_configs, describe_configs) on the BROKER resource "0" (sources, synonyms,
errors, the live effect on produce, on a topic's configs and on the connection creation rate
(KIP-612), a restart), and kafka-python's on a BROKER_LOGGER (KIP-412)."""

from __future__ import annotations

import logging
import os
import time

import pytest
from compat_util import confluent_admin, create_topic, wait_for
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
from wire_client import WireClient

from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

T = 15  # seconds: bound on every single client call

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND = AlterConfigOpType.APPEND


def alter(admin, name, *changes, validate_only=False):
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, op, value in changes])
    return admin.incremental_alter_configs([resource], request_timeout=T,
                                           validate_only=validate_only)[resource].result(T)


def alter_error(admin, name, *changes):
    with pytest.raises(KafkaException) as caught:
        alter(admin, name, *changes)
    return caught.value.args[0]


def describe(admin, resource_type, name):
    resource = ConfigResource(resource_type, name)
    return admin.describe_configs([resource], request_timeout=T)[resource].result(T)


def produce_error(bootstrap, topic, size):
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "message.max.bytes": 2_000_000,
                         "retries": 0})
    producer.produce(topic, b"x" * size, partition=0, on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(T) == 0
    return errors[0]


@pytest.mark.samsa_only("on Kafka a DescribeConfigs right after the SET still showed 900000 (KRaft applies it later?): to check")
def test_per_broker_configs_apply_at_once_and_survive_a_restart(broker_factory, topic_name):
    b = broker_factory(overrides={"message.max.bytes": 900000})
    admin = confluent_admin(b.bootstrap)
    create_topic(b.bootstrap, topic_name)
    # librdkafka refuses a ConfigResource with an empty name, so the cluster-wide resource ""
    # is out of its reach (tests/server/test_dynamic_configs.py covers it on the wire).
    with pytest.raises(ValueError):
        describe(admin, ResourceType.BROKER, "")

    alter(admin, "0", ("log.retention.ms", SET, "7200000"), ("message.max.bytes", SET, "10000"))
    described = describe(admin, ResourceType.BROKER, "0")
    own = described["message.max.bytes"]
    assert (own.value, own.source, own.is_read_only) == ("10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    retention = described["log.retention.ms"]
    assert (retention.value, retention.source) == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # Synonyms in Kafka's order (confluent-kafka keeps one per name).
    assert [(name, s.value, s.source) for name, s in retention.synonyms.items()] == [
        ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value)]
    assert described["auto.create.topics.enable"].is_read_only

    # Topics without overrides inherit the new values at once.
    topic = describe(admin, ResourceType.TOPIC, topic_name)
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == (
        "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (topic["max.message.bytes"].value, topic["max.message.bytes"].source) == (
        "10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert produce_error(b.bootstrap, topic_name, 15000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter(admin, "0", ("message.max.bytes", DELETE, None))
    assert produce_error(b.bootstrap, topic_name, 15000) is None, "back to the static 900000"
    alter(admin, "0", ("message.max.bytes", SET, "20000"))

    # Kafka's refusals.
    error = alter_error(admin, "0", ("auto.create.topics.enable", SET, "false"))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: [auto.create.topics.enable]" in error.str()
    assert alter_error(admin, "0", ("message.max.bytes", APPEND, "1")).code() == KafkaError.INVALID_CONFIG
    assert alter_error(admin, "0", ("message.max.bytes", SET, "many")).code() == KafkaError.INVALID_REQUEST
    alter(admin, "0", ("log.segment.bytes", SET, "2000000"), validate_only=True)
    assert describe(admin, ResourceType.BROKER, "0")["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    if os.environ.get("SAMSA_COMPAT_BROKER_CMD"):
        return
    b.restart()
    admin = confluent_admin(b.bootstrap)
    described = describe(admin, ResourceType.BROKER, "0")
    assert {name: e.value for name, e in described.items() if e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value} == {
        "log.retention.ms": "7200000", "message.max.bytes": "20000"}
    assert describe(admin, ResourceType.TOPIC, topic_name)["retention.ms"].value == "7200000"
    assert produce_error(b.bootstrap, topic_name, 25000).code() == KafkaError.MSG_SIZE_TOO_LARGE


def own_dynamic_value(admin, key):
    """Broker 0's own dynamic value of `key` as it describes it (None: not set)."""
    entry = describe(admin, ResourceType.BROKER, "0").get(key)
    return entry.value if entry is not None and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value else None


def seconds_to_connect(b, connections: int) -> float:
    """Open `connections` connections one after another, each answered an ApiVersions."""
    started = time.monotonic()
    for _ in range(connections):
        with WireClient(b.host, b.port, client_id="rate") as client:
            assert client.call(request_class(ApiKey.API_VERSIONS)(), 0).error_code == ErrorCode.NONE
    return time.monotonic() - started


@pytest.mark.parametrize("key", ["max.connection.creation.rate", "listener.name.plaintext.max.connection.creation.rate"])
def test_connection_creation_rates_change_at_once(broker_factory, key):
    """max.connection.creation.rate and its listener form (KIP-612) as dynamic configs: a new limit
    throttles the next connections, judged on the rate measured before it was set (quota.window.num
    11 windows of 1 s: 15 connections are 1.5 per second, and each over 1/s waits up to a window)."""
    b = broker_factory()
    admin = confluent_admin(b.bootstrap)
    seconds_to_connect(b, 15)
    alter(admin, "0", (key, SET, "1"))
    # Kafka answers once its controller committed the change; the broker applies it a little later.
    wait_for(lambda: own_dynamic_value(admin, key) == "1", T, what=f"{key}=1 applied")
    assert seconds_to_connect(b, 3) >= 2, f"{key}=1 throttles new connections"
    alter(admin, "0", (key, DELETE, None))
    wait_for(lambda: own_dynamic_value(admin, key) is None, T, what=f"{key} deleted")
    assert seconds_to_connect(b, 3) < 2, f"{key} deleted: unlimited again"


@pytest.mark.samsa_only("Samsa's logger names (samsa.broker); Kafka's are its Java classes")
def test_broker_logger_levels_with_kafka_python(broker):
    from kafka.admin import AlterConfigOp, ConfigResource as KafkaPythonResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=T * 1000)
    try:
        resource = KafkaPythonResource(ConfigResourceType.BROKER_LOGGER, "0")
        levels = admin.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
        assert levels["root"]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
        assert "samsa.broker" in levels

        change = KafkaPythonResource(ConfigResourceType.BROKER_LOGGER, "0",
                                     configs={"samsa.broker": (AlterConfigOp.SET, "DEBUG")})
        assert admin.alter_configs([change], incremental=True)["broker_logger"]["0"] == "OK"
        levels = admin.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
        assert levels["samsa.broker"]["value"] == "DEBUG"

        reset = KafkaPythonResource(ConfigResourceType.BROKER_LOGGER, "0",
                                    configs={"samsa.broker": (AlterConfigOp.DELETE, None)})
        assert admin.alter_configs([reset], incremental=True)["broker_logger"]["0"] == "OK"
        levels = admin.describe_configs([resource], config_filter="all")["broker_logger"]["0"]
        assert levels["samsa.broker"]["value"] == levels["samsa"]["value"]
    finally:
        admin.close()
        logging.getLogger("kafka").setLevel(logging.WARNING)
