"""Client telemetry (KIP-714) with real clients and against Kafka 4.4.

* The subscription answers: a client-metrics resource set with IncrementalAlterConfigs, then
  GetTelemetrySubscriptions and PushTelemetry sent with Samsa's codec (wire_client.py), the same
  bytes to Samsa and to Kafka: the same metrics (in Kafka's order), interval, compression types,
  size limit, the subscription id Kafka's formula gives for the instance id each broker chose, and
  the same errors (a Get too early, a stale subscription id). Kafka 4.4 answers these requests
  though, without a ClientTelemetryReceiver plugin, it does not list them in ApiVersions.
* librdkafka (confluent-kafka, 2.5 or later, enable.metrics.push) and Kafka's Java producer
  (java/TelemetryProducer.java) against Samsa: each finds the APIs in ApiVersions, gets its
  subscription and pushes OTLP metrics (the Java client zstd-compressed), which the broker's
  metrics endpoint (metrics.port) shows labelled by client id and instance id. The broker runs in
  this process (in a thread) so the test can also read the client metrics manager's state.
"""

from __future__ import annotations

import subprocess
import threading
import urllib.request
import uuid

import confluent_kafka
import pytest
import trio
from compat_util import wait_for
from confluent_kafka import Producer
from server_process import HOST, free_port
from test_java_client import java_client  # noqa: F401 (a fixture: compiles compat-tests/java/)
from wire_client import WireClient

from samsa.coordinator.client_metrics import java_hash_order, kafka_uuid_string, subscription_id
from samsa.server.broker import Broker
from samsa.server.config.kafka_config import KafkaConfig
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Incremental = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
Describe = request_class(ApiKey.DESCRIBE_CONFIGS)
GetSubscriptions = request_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
Push = request_class(ApiKey.PUSH_TELEMETRY)
ListConfigResources = request_class(ApiKey.LIST_CONFIG_RESOURCES)
CLIENT_METRICS, SET, DELETE = 16, 0, 1
ZERO = uuid.UUID(int=0)
PRODUCER, CONSUMER = "org.apache.kafka.producer.", "org.apache.kafka.consumer."
T = 30  # seconds


def set_subscription(wire: WireClient, name: str, **configs: str) -> tuple[int, str | None]:
    request = Incremental(resources=[Incremental.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[Incremental.AlterableConfig(name=key.replace("_", "."), config_operation=SET if value else DELETE,
                                             value=value) for key, value in configs.items()])])
    (response,) = wire.call(request, 1).responses
    return response.error_code, response.error_message


def test_subscription_answers_are_kafkas(broker_factory):
    b = broker_factory()
    with WireClient(HOST, b.port, client_id="telemetry-app") as admin:
        assert set_subscription(admin, "apps", metrics=f"{PRODUCER},{CONSUMER}", interval_ms="1000",
                                match="client_id=telemetry-.*") == (ErrorCode.NONE, None)
        assert set_subscription(admin, "bad", interval_ms="50")[0] == ErrorCode.INVALID_REQUEST
        assert set_subscription(admin, "bad", match="client_id")[0] == ErrorCode.INVALID_CONFIG
        listed = admin.call(ListConfigResources(), 0)
        assert [r.resource_name for r in listed.config_resources] == ["apps"]
        # v1 (KIP-1142), no types given: every type, client metrics first, then this broker as
        # BROKER_LOGGER and BROKER (no topic exists yet).
        every = admin.call(ListConfigResources(resource_types=[]), 1)
        assert [(r.resource_name, r.resource_type) for r in every.config_resources] == [
            ("apps", 16), ("0", 8), ("0", 4)], every
        assert admin.call(ListConfigResources(resource_types=[3]), 1).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert set_subscription(admin, "defaults", metrics="*") == (ErrorCode.NONE, None)
        described = admin.call(Describe(include_synonyms=True, include_documentation=True, resources=[
            Describe.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None)
            for name in ("apps", "defaults", "none")]), 4).results
        assert [[(c.name, c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms], c.config_type,
                  c.documentation) for c in result.configs] for result in described] == [
            [("interval.ms", "1000", 7, [("interval.ms", "1000", 7)], 3, "Metrics push interval in milliseconds"),
             ("match", "client_id=telemetry-.*", 7, [("match", "client_id=telemetry-.*", 7)], 7, "Client match criteria"),
             ("metrics", f"{PRODUCER},{CONSUMER}", 7, [("metrics", f"{PRODUCER},{CONSUMER}", 7)], 7,
              "Telemetry metric name prefix list")],
            [("interval.ms", "300000", 5, [], 3, "Metrics push interval in milliseconds"),
             ("match", "", 5, [], 7, "Client match criteria"),
             ("metrics", "*", 7, [("metrics", "*", 7)], 7, "Telemetry metric name prefix list")],
            [("interval.ms", "300000", 5, [], 3, "Metrics push interval in milliseconds"),
             ("match", "", 5, [], 7, "Client match criteria"),
             ("metrics", "", 5, [], 7, "Telemetry metric name prefix list")]]
        assert set_subscription(admin, "defaults", metrics="") == (ErrorCode.NONE, None)  # deleted

    def subscribed(wire: WireClient):
        # Kafka applies a config change through its metadata log: the subscription shows up shortly.
        answers = []

        def matched():
            answer = wire.call(GetSubscriptions(client_instance_id=ZERO), 0)
            answers.append(answer)
            return answer.requested_metrics
        wait_for(matched, T, what="the subscription to reach the broker's client metrics manager")
        return answers[-1]

    with WireClient(HOST, b.port, client_id="telemetry-app") as wire:
        answer = subscribed(wire)
        assert answer.error_code == ErrorCode.NONE
        assert answer.client_instance_id != ZERO
        assert answer.requested_metrics == java_hash_order([PRODUCER, CONSUMER])
        assert (answer.push_interval_ms, answer.telemetry_max_bytes, answer.delta_temporality) == (1000, 1048576, True)
        assert answer.accepted_compression_types == [4, 3, 1, 2]
        assert answer.subscription_id == subscription_id(answer.requested_metrics, 1000, answer.client_instance_id)

        again = wire.call(GetSubscriptions(client_instance_id=answer.client_instance_id), 0)
        assert (again.error_code, again.client_instance_id) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED, ZERO)
        stale = Push(client_instance_id=answer.client_instance_id, subscription_id=answer.subscription_id + 1,
                     metrics=b"")
        assert wire.call(stale, 0).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        zero = Push(client_instance_id=ZERO, subscription_id=answer.subscription_id, metrics=b"")
        assert wire.call(zero, 0).error_code == ErrorCode.INVALID_REQUEST
        final = Push(client_instance_id=answer.client_instance_id, subscription_id=answer.subscription_id,
                     terminating=True, metrics=b"")
        assert wire.call(final, 0).error_code == ErrorCode.NONE
        assert wire.call(final, 0).error_code == ErrorCode.INVALID_REQUEST  # nothing after a terminating push

    with WireClient(HOST, b.port, client_id="other") as other:  # `match` leaves it out: the defaults
        answer = other.call(GetSubscriptions(client_instance_id=ZERO), 0)
        assert (answer.requested_metrics, answer.push_interval_ms) == ([], 300000)
        assert answer.subscription_id == subscription_id([], 300000, answer.client_instance_id)


class InProcessBroker:
    """A Samsa broker in this process, on its own trio thread."""

    def __init__(self, tmp_path):
        self.broker = Broker(KafkaConfig({"listeners": f"PLAINTEXT://{HOST}:0", "log.dirs": str(tmp_path / "data"),
                                          "metrics.port": str(free_port())}))
        self._started = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)
        self._thread.start()
        assert self._started.wait(T), "the broker did not start"

    async def _main(self):
        async with trio.open_nursery() as nursery:
            self._token = trio.lowlevel.current_trio_token()
            self._cancel = nursery.cancel_scope
            await nursery.start(self.broker.run)
            self._started.set()

    @property
    def port(self) -> int:
        return self.broker.endpoints[0].port

    def stop(self) -> None:
        trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        self._thread.join(T)


def scrape(server: InProcessBroker) -> str:
    """The broker's metrics endpoint (metrics.port), as Prometheus reads it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.broker.metrics_port}/metrics", timeout=T) as answer:
        return answer.read().decode()


@pytest.mark.skipif(confluent_kafka.libversion()[1] < 0x02050000, reason="librdkafka pushes telemetry from 2.5")
def test_librdkafka_pushes_and_the_collector_shows_its_metrics(tmp_path):
    server = InProcessBroker(tmp_path)
    try:
        with WireClient(HOST, server.port) as admin:
            assert set_subscription(admin, "producers", metrics=PRODUCER, interval_ms="500",
                                    match="client_id=telemetry-.*") == (ErrorCode.NONE, None)
        telemetry = server.broker.client_telemetry
        producer = Producer({"bootstrap.servers": f"{HOST}:{server.port}", "client.id": "telemetry-producer",
                             "enable.metrics.push": True, "linger.ms": 5})
        try:
            for i in range(20):
                producer.produce("telemetry-topic", b"value-%d" % i)
            assert producer.flush(T) == 0

            def pushed():
                producer.poll(0.1)
                return any(c.client_id == "telemetry-producer" and c.metrics for c in list(telemetry.clients.values()))
            wait_for(pushed, T, what=f"librdkafka's first PushTelemetry (instances: {telemetry.manager.instances})")
            (client,) = [c for c in telemetry.clients.values() if c.client_id == "telemetry-producer"]
            instance = telemetry.manager.instances[client.client_instance_id]
            assert instance.metrics == [PRODUCER] and instance.push_interval_ms == 500
            # What ApiVersions said the client is (a subscription's `match` may test it).
            assert instance.attributes.software_name == "confluent-kafka-python"
            assert all(name.startswith(PRODUCER) for name in client.metrics), sorted(client.metrics)
            text = scrape(server)
            labels = f'client_id="telemetry-producer",client_instance_id="{kafka_uuid_string(client.client_instance_id)}"'
            shown = [line for line in text.splitlines() if labels in line]
            assert any(line.startswith("org_apache_kafka_producer_node_request_latency_avg{") for line in shown), text
            assert not any("_total_total" in line for line in shown), text
        finally:
            producer.flush(T)
            producer.close()  # librdkafka sends a terminating push as it closes, then its connections go
        wait_for(lambda: not telemetry.clients, T, what="the closed client's metrics to go")
    finally:
        server.stop()


def test_the_java_producer_pushes_and_the_collector_shows_its_metrics(tmp_path, java_client):  # noqa: F811
    server = InProcessBroker(tmp_path)
    try:
        with WireClient(HOST, server.port) as admin:
            assert set_subscription(admin, "java", metrics=PRODUCER, interval_ms="500",
                                    match="client_software_name=apache-kafka-java") == (ErrorCode.NONE, None)
        telemetry = server.broker.client_telemetry
        command = [*java_client[:-1], "TelemetryProducer", f"{HOST}:{server.port}", "java-telemetry-topic",
                   "java-telemetry", "8"]
        producer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def pushed():
                assert producer.poll() is None, producer.communicate()
                return [c for c in list(telemetry.clients.values()) if c.client_id == "java-telemetry" and c.metrics]
            (client,) = wait_for(pushed, 60, what="the Java producer's first PushTelemetry")
            instance = telemetry.manager.instances[client.client_instance_id]
            assert (instance.metrics, instance.push_interval_ms) == ([PRODUCER], 500)
            assert instance.attributes.software_name == "apache-kafka-java"
            assert all(name.startswith(PRODUCER) for name in client.metrics), sorted(client.metrics)
            labels = f'client_id="java-telemetry",client_instance_id="{kafka_uuid_string(client.client_instance_id)}"'
            shown = [line for line in scrape(server).splitlines() if labels in line]
            assert any(line.startswith("org_apache_kafka_producer_record_queue_time_avg{") for line in shown), shown
        finally:
            out, err = producer.communicate(timeout=60)
        assert producer.returncode == 0 and out.strip() == "done", err[-4000:]
        wait_for(lambda: not telemetry.clients, T, what="the closed client's metrics to go")
    finally:
        server.stop()
