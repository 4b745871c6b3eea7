"""Client telemetry (KIP-714) over loopback: client-metrics config resources through the config
APIs and ListConfigResources, GetTelemetrySubscriptions and PushTelemetry against a real broker
(trio's MockClock moves the push interval), and the Prometheus collector of what was pushed."""

from __future__ import annotations

import uuid

import trio
import trio.testing
from loopback import Client, broker_config, run_with_broker
from otlp_payloads import CUMULATIVE, counter, gauge, histogram, metrics_data
from prometheus_client import CollectorRegistry, generate_latest

from samsa.coordinator.client_metrics import kafka_uuid_string, subscription_id
from samsa.server.config.kafka_config import ConfigSource, ConfigType
from samsa.server.handlers import ListenerType, load_handlers
from samsa.server.handlers.api_versions import api_keys
from samsa.wire.compression import compress
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class, response_class

Describe = request_class(ApiKey.DESCRIBE_CONFIGS)
Incremental = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
Alter = request_class(ApiKey.ALTER_CONFIGS)
GetSubscriptions = request_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
Push = request_class(ApiKey.PUSH_TELEMETRY)
ListConfigResources = request_class(ApiKey.LIST_CONFIG_RESOURCES)
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
GZIP, ZSTD = 1, 4
PRODUCER = "org.apache.kafka.producer."
CLIENT_METRICS_CONFIG = ConfigSource.CLIENT_METRICS_CONFIG
Synonym = response_class(ApiKey.DESCRIBE_CONFIGS).DescribeConfigsSynonym
ZERO = uuid.UUID(int=0)


def run(tmp_path, scenario, **overrides):
    clock = trio.testing.MockClock()

    async def with_client(broker):
        await scenario(broker, await Client.connect(broker.endpoints[0].port), clock)

    run_with_broker(broker_config(tmp_path, **overrides), with_client, clock)


async def incremental(client, name, *changes, validate_only=False):
    request = Incremental(validate_only=validate_only, resources=[Incremental.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[Incremental.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes])])
    (response,) = (await client.call(request, 1)).responses
    return response.error_code, response.error_message


async def describe(client, name, keys=("metrics",), documentation=False):
    request = Describe(resources=[Describe.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None if keys is None else list(keys))],
        include_synonyms=True, include_documentation=documentation)
    (result,) = (await client.call(request, 4)).results
    return result


async def listed(client, version=1, types=()):
    response = await client.call(ListConfigResources(resource_types=list(types)), version)
    return response.error_code, [(r.resource_name, r.resource_type) for r in response.config_resources]


OK = (ErrorCode.NONE, None)


def test_the_telemetry_apis_are_advertised_by_a_single_broker_only():
    load_handlers()
    single = {k.api_key: (k.min_version, k.max_version) for k in api_keys(ListenerType.BROKER)}
    cluster = {k.api_key for k in api_keys(ListenerType.ZK_BROKER)}
    assert single[71] == (0, 0) and single[72] == (0, 0) and single[74] == (0, 1)
    assert not {71, 72, 74} & cluster  # Kafka 3.9 in ZooKeeper mode lists none of them


def test_client_metrics_resources_are_set_described_listed_and_deleted(tmp_path):
    async def scenario(broker, client, clock):
        assert await incremental(client, "producers", ("metrics", SET, PRODUCER), ("interval.ms", SET, "1000"),
                                 ("match", SET, "client_id=app.*")) == OK
        assert await incremental(client, "producers", ("metrics", APPEND, "org.apache.kafka.consumer.,x")) == OK
        assert await incremental(client, "producers", ("metrics", SUBTRACT, "x")) == OK
        result = await describe(client, "producers")
        assert result.error_code == ErrorCode.NONE
        assert [(c.name, c.value, c.config_source, c.synonyms) for c in result.configs] == [
            ("metrics", PRODUCER + ",org.apache.kafka.consumer.", CLIENT_METRICS_CONFIG,
             [Synonym(name="metrics", value=PRODUCER + ",org.apache.kafka.consumer.", source=CLIENT_METRICS_CONFIG)])]
        assert await incremental(client, "producers", ("match", DELETE, None)) == OK
        # As Kafka 4.4: every config, unset ones with their defaults.
        everything = await describe(client, "producers", keys=None, documentation=True)
        assert [(c.name, c.value, c.config_source, len(c.synonyms), c.config_type, c.documentation)
                for c in everything.configs] == [
            ("interval.ms", "1000", CLIENT_METRICS_CONFIG, 1, ConfigType.INT, "Metrics push interval in milliseconds"),
            ("match", "", ConfigSource.DEFAULT_CONFIG, 0, ConfigType.LIST, "Client match criteria"),
            ("metrics", PRODUCER + ",org.apache.kafka.consumer.", CLIENT_METRICS_CONFIG, 1, ConfigType.LIST,
             "Telemetry metric name prefix list")]
        unknown = await describe(client, "unknown", keys=None)
        assert [(c.name, c.value, c.config_source) for c in unknown.configs] == [
            ("interval.ms", "300000", ConfigSource.DEFAULT_CONFIG), ("match", "", ConfigSource.DEFAULT_CONFIG),
            ("metrics", "", ConfigSource.DEFAULT_CONFIG)]
        empty = await describe(client, "")
        assert (empty.error_code, empty.error_message) == (
            ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")

        assert await listed(client, version=0) == (ErrorCode.NONE, [("producers", CLIENT_METRICS)])
        assert await listed(client, types=[CLIENT_METRICS]) == (ErrorCode.NONE, [("producers", CLIENT_METRICS)])
        assert await listed(client) == (ErrorCode.NONE, [("producers", CLIENT_METRICS), ("0", BROKER_LOGGER),
                                                         ("0", BROKER)])
        assert (await listed(client, types=[3]))[0] == ErrorCode.UNSUPPORTED_VERSION

        assert broker.services.metadata.client_metrics["producers"]["interval.ms"] == "1000"
        assert list(broker.client_telemetry.manager.subscriptions) == ["producers"]
        assert await incremental(client, "producers", ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                                 ("match", DELETE, None)) == OK
        assert await listed(client, version=0) == (ErrorCode.NONE, [])
        assert not broker.client_telemetry.manager.subscriptions

    run(tmp_path, scenario, broker_id=0)


def test_kafkas_validation_of_client_metrics_configs(tmp_path):
    async def scenario(broker, client, clock):
        assert await incremental(client, "s", ("color", SET, "red")) == (
            ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: color")
        assert await incremental(client, "s", ("interval.ms", SET, "99")) == (
            ErrorCode.INVALID_REQUEST, "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)")
        assert await incremental(client, "s", ("interval.ms", SET, "soon")) == (
            ErrorCode.INVALID_CONFIG, "Invalid value soon for configuration interval.ms: Not a number of type INT")
        for pattern in ("client_id", "color=red", "client_id=(", "client_id=a=b"):
            assert await incremental(client, "s", ("match", SET, pattern)) == (
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        assert await incremental(client, "s", ("interval.ms", APPEND, "5")) == (
            ErrorCode.INVALID_CONFIG, "Can't APPEND to key interval.ms because its type is not LIST.")
        assert await incremental(client, "", ("metrics", SET, "*")) == (
            ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        assert await incremental(client, "s", ("metrics", SET, "*"), validate_only=True) == OK
        assert "s" not in broker.services.metadata.client_metrics
        # Legacy AlterConfigs replaces the whole set.
        assert await incremental(client, "s", ("metrics", SET, "*"), ("interval.ms", SET, "200")) == OK
        request = Alter(resources=[Alter.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name="s",
                                                              configs=[Alter.AlterableConfig(name="metrics", value="a")])])
        (response,) = (await client.call(request, 2)).responses
        assert response.error_code == ErrorCode.NONE
        assert broker.services.metadata.client_metrics["s"] == {"metrics": "a"}
        assert broker.client_telemetry.manager.subscriptions["s"].interval_ms == 300000

    run(tmp_path, scenario)


def test_subscriptions_survive_a_restart(tmp_path):
    async def create(broker, client, clock):
        assert await incremental(client, "kept", ("metrics", SET, PRODUCER), ("interval.ms", SET, "500")) == OK

    async def check(broker, client, clock):
        assert broker.client_telemetry.manager.subscriptions["kept"].interval_ms == 500
        kept = (await describe(client, "kept", keys=None)).configs
        assert [(c.name, c.value, c.config_source) for c in kept] == [
            ("interval.ms", "500", CLIENT_METRICS_CONFIG), ("match", "", ConfigSource.DEFAULT_CONFIG),
            ("metrics", PRODUCER, CLIENT_METRICS_CONFIG)]

    run(tmp_path, create)
    run(tmp_path, check)


async def get_subscriptions(client, client_instance_id=ZERO):
    return await client.call(GetSubscriptions(client_instance_id=client_instance_id), 0)


async def push(client, response, payload, compression=0, terminating=False):
    metrics = compress(compression, payload) if compression else payload
    request = Push(client_instance_id=response.client_instance_id, subscription_id=response.subscription_id,
                   terminating=terminating, compression_type=compression, metrics=metrics)
    return (await client.call(request, 0)).error_code


def scrape(broker) -> str:
    registry = CollectorRegistry()
    registry.register(broker.client_telemetry)
    return generate_latest(registry).decode()


def test_a_client_gets_its_subscription_pushes_and_the_collector_shows_the_latest_values(tmp_path):
    async def scenario(broker, client, clock):
        assert await incremental(client, "s", ("metrics", SET, PRODUCER), ("interval.ms", SET, "1000")) == OK
        sub = await get_subscriptions(client)
        assert sub.error_code == ErrorCode.NONE
        assert sub.client_instance_id != ZERO
        assert sub.requested_metrics == [PRODUCER]
        assert (sub.push_interval_ms, sub.telemetry_max_bytes, sub.delta_temporality) == (1000, 1048576, True)
        assert sub.accepted_compression_types == [4, 3, 1, 2]
        assert sub.subscription_id == subscription_id([PRODUCER], 1000, sub.client_instance_id)
        instance = kafka_uuid_string(sub.client_instance_id)

        first = metrics_data(
            gauge("org.apache.kafka.producer.node.request.latency.avg", [(12.5, {"node.id": 0})], "latency"),
            counter("org.apache.kafka.producer.record.sent", [(3, {"topic": "t"})]),
            counter("org.apache.kafka.producer.connection.creation.total", [(1, {})]),
            histogram("org.apache.kafka.producer.latency", 3, 30.0, [10.0, 20.0], [1, 1, 1]))
        assert await push(client, sub, first, GZIP) == ErrorCode.NONE
        text = scrape(broker)
        labels = f'client_id="test",client_instance_id="{instance}"'
        assert f'org_apache_kafka_producer_node_request_latency_avg{{{labels},node_id="0"}} 12.5' in text
        assert "# HELP org_apache_kafka_producer_node_request_latency_avg latency" in text
        assert f'org_apache_kafka_producer_record_sent_total{{{labels},topic="t"}} 3.0' in text
        assert f"org_apache_kafka_producer_connection_creation_total{{{labels}}} 1.0" in text  # _total once
        assert f'org_apache_kafka_producer_latency_bucket{{{labels},le="10.0"}} 1.0' in text
        assert f'org_apache_kafka_producer_latency_bucket{{{labels},le="+Inf"}} 3.0' in text

        assert await push(client, sub, first) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        clock.jump(1.0)
        second = metrics_data(
            gauge("org.apache.kafka.producer.node.request.latency.avg", [(7.0, {"node.id": 0})]),
            counter("org.apache.kafka.producer.record.sent", [(2, {"topic": "t"})]),  # a delta: 5 in all
            counter("org.apache.kafka.producer.connections", [(4, {})], temporality=CUMULATIVE, monotonic=False),
            histogram("org.apache.kafka.producer.latency", 1, 25.0, [10.0, 20.0], [0, 0, 1]))
        assert await push(client, sub, second, ZSTD) == ErrorCode.NONE
        text = scrape(broker)
        assert f'org_apache_kafka_producer_node_request_latency_avg{{{labels},node_id="0"}} 7.0' in text
        assert f'org_apache_kafka_producer_record_sent_total{{{labels},topic="t"}} 5.0' in text
        assert f"org_apache_kafka_producer_connections{{{labels}}} 4.0" in text  # not monotonic: a gauge
        assert f'org_apache_kafka_producer_latency_bucket{{{labels},le="20.0"}} 2.0' in text
        assert f"org_apache_kafka_producer_latency_count{{{labels}}} 4.0" in text
        assert f"org_apache_kafka_producer_latency_sum{{{labels}}} 55.0" in text

        clock.jump(1.0)
        assert await push(client, sub, b"\x0a\xff") == ErrorCode.INVALID_RECORD  # a truncated message
        clock.jump(1.0)
        assert await push(client, sub, b"not gzip", GZIP) == ErrorCode.INVALID_RECORD
        assert await push(client, sub, b"", terminating=True) == ErrorCode.NONE
        clock.jump(1.0)
        assert await push(client, sub, first) == ErrorCode.INVALID_REQUEST
        await client.stream.aclose()
        await wait_until(lambda: not broker.client_telemetry.clients)  # the connection closed: its metrics go
        assert "org_apache" not in scrape(broker)

    run(tmp_path, scenario)


def test_telemetry_errors(tmp_path):
    async def scenario(broker, client, clock):
        assert await incremental(client, "s", ("metrics", SET, "*"), ("interval.ms", SET, "100")) == OK
        sub = await get_subscriptions(client)
        assert sub.requested_metrics == ["*"]
        again = await get_subscriptions(client, sub.client_instance_id)
        assert (again.error_code, again.client_instance_id) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED, ZERO)
        assert await push(client, sub, bytes(65)) == ErrorCode.TELEMETRY_TOO_LARGE
        clock.jump(0.1)
        stale = Push(client_instance_id=sub.client_instance_id, subscription_id=sub.subscription_id + 1, metrics=b"")
        assert (await client.call(stale, 0)).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        zero = Push(client_instance_id=ZERO, subscription_id=sub.subscription_id, metrics=b"")
        assert (await client.call(zero, 0)).error_code == ErrorCode.INVALID_REQUEST
        # A changed subscription is answered at once, even within the interval.
        assert await incremental(client, "s", ("interval.ms", SET, "200")) == OK
        changed = await get_subscriptions(client, sub.client_instance_id)
        assert (changed.error_code, changed.client_instance_id, changed.push_interval_ms) == (
            ErrorCode.NONE, sub.client_instance_id, 200)

    run(tmp_path, scenario, telemetry_max_bytes=64)


async def wait_until(condition):
    while not condition():
        await trio.sleep(0)
