"""The metrics endpoint (metrics.port) of a real broker, over real HTTP: the counters against what
was sent, the gauges against what the broker holds, health and readiness, and bad HTTP."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import trio
from group_requests import commit_request, groups_config
from loopback import Client, create_topic_request, fetch_request, one_batch, produce_request, run_with_broker
from security_helpers import PLAIN_JAAS, closed, sasl_plain
from security_helpers import config as security_config
from security_helpers import run as run_secured
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from samsa.server.broker import Broker
from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.zookeeper.zk_client import ZooKeeperClientTimeoutException
from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

PRODUCE_VERSION = 9
ApiVersions = request_class(ApiKey.API_VERSIONS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_config(tmp_path, **overrides) -> KafkaConfig:
    return groups_config(tmp_path, metrics_port=free_port(), **overrides)


async def http(port: int, raw: bytes) -> tuple[int, bytes]:
    """Send `raw` and read the response to its end: (status, body); (0, b"") if closed unanswered."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    data = bytearray()
    async with stream:
        try:
            await stream.send_all(raw)
            while chunk := await stream.receive_some(1 << 16):
                data += chunk
        except trio.BrokenResourceError:  # closed while we were still sending: reset
            pass
    if not data:
        return 0, b""
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def get(port: int, path: str) -> tuple[int, bytes]:
    return await http(port, f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())


async def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    status, body = await get(port, "/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def grew(before: dict, after: dict, name: str, **labels) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0) - before.get(key, 0)


def test_counters_during_a_produce_load_grow_by_what_was_produced(tmp_path):
    batches = [one_batch([b"v" * size] * count) for size, count in ((10, 1), (300, 5), (1000, 17)) * 10]

    async def scenario(broker):
        port = broker.metrics_port
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("t"), 7)
        before = await scrape(port)
        scrapes = []

        async def scrape_meanwhile():
            while True:
                scrapes.append(await scrape(port))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(scrape_meanwhile)
            for batch in batches:
                response = await client.call(produce_request("t", batch), PRODUCE_VERSION)
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
                await trio.sleep(0)
            nursery.cancel_scope.cancel()
        fetched = await client.call(fetch_request("t", 0), 12)
        after = await scrape(port)

        assert scrapes  # scraped while producing, the bytes counted growing
        seen = [grew(before, s, "kafka_server_brokertopicmetrics_bytesin_total", topic="t") for s in scrapes]
        assert seen == sorted(seen)
        assert grew(before, after, "kafka_server_brokertopicmetrics_bytesin_total", topic="t") == sum(map(len, batches))
        assert grew(before, after, "kafka_server_brokertopicmetrics_bytesin_total") == sum(map(len, batches))
        assert grew(before, after, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 10 * (1 + 5 + 17)
        assert grew(before, after, "kafka_network_requestmetrics_requests_total",
                    request="Produce", version=str(PRODUCE_VERSION)) == len(batches)
        for time_name in ("requestqueuetimems", "localtimems", "remotetimems", "throttletimems",
                          "responsesendtimems", "totaltimems"):
            name = f"kafka_network_requestmetrics_{time_name}"
            assert grew(before, after, f"{name}_count", request="Produce") == len(batches)
            assert grew(before, after, f"{name}_bucket", request="Produce", le="+Inf") == len(batches)
        fetched_bytes = len(fetched.responses[0].partitions[0].records)
        assert grew(before, after, "kafka_server_brokertopicmetrics_bytesout_total", topic="t") == fetched_bytes
        assert grew(before, after, "kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") == 1
        assert after[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "t")))] == 10 * (1 + 5 + 17)
        assert after[("kafka_log_log_size", (("partition", "0"), ("topic", "t")))] == sum(map(len, batches))
        assert after[("kafka_log_log_numlogsegments", (("partition", "0"), ("topic", "t")))] == 1
        assert after[("kafka_server_replicamanager_leadercount", ())] == after[
            ("kafka_server_replicamanager_partitioncount", ())] >= 1
        assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
        assert after[("kafka_server_socket_server_metrics_connection_count", (("listener", "PLAINTEXT"),))] == 1

    run_with_broker(metrics_config(tmp_path), scenario)


def test_failed_produce_requests_count_what_kafka_counts(tmp_path):
    """An unknown topic is an error Kafka does not count as a failed produce (nor gives a series of its
    own); a record Kafka's validation refuses (a timestamp hours ahead) is one."""
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("t"), 7)
        before = await scrape(broker.metrics_port)
        response = await client.call(produce_request("no-such-topic", one_batch([b"x"])), PRODUCE_VERSION)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ahead = int(time.time() * 1000) + 3 * 3600_000
        batch = records.build_batch([records.Record(0, 0, None, b"x", [])], base_timestamp=ahead, max_timestamp=ahead)
        response = await client.call(produce_request("t", batch), PRODUCE_VERSION)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TIMESTAMP
        after = await scrape(broker.metrics_port)
        failed = "kafka_server_brokertopicmetrics_failedproducerequests_total"
        assert grew(before, after, failed) == 1
        assert grew(before, after, failed, topic="t") == 1
        assert grew(before, after, "kafka_server_brokertopicmetrics_bytesin_total") == 0
        assert not [key for key in after if ("topic", "no-such-topic") in key[1]]  # no series of its own

    run_with_broker(metrics_config(tmp_path), scenario)


def log_gauges(samples: dict, topic: str) -> dict[tuple[str, str], float]:
    """The kafka_log_log_* samples of the topic's logs, by (gauge, partition)."""
    return {(name.removeprefix("kafka_log_log_"), dict(labels)["partition"]): value
            for (name, labels), value in samples.items()
            if name.startswith("kafka_log_log_") and ("topic", topic) in labels}


def test_log_gauges_cover_every_log_after_a_clean_restart_without_opening_it(tmp_path):
    config = metrics_config(tmp_path, log_segment_bytes=300)
    DeleteRecords = request_class(ApiKey.DELETE_RECORDS)
    before_restart = {}

    async def write(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("t", partitions=2), 7)
        for _ in range(6):
            produced = await client.call(produce_request("t", one_batch([b"v" * 100])), PRODUCE_VERSION)
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        trimmed = await client.call(DeleteRecords(topics=[DeleteRecords.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecords.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=5000), 2)
        assert trimmed.topics[0].partitions[0].error_code == ErrorCode.NONE
        before_restart.update(log_gauges(await scrape(broker.metrics_port), "t"))

    async def restarted(broker):
        after_restart = log_gauges(await scrape(broker.metrics_port), "t")
        assert [log.name for log in broker.services.log_manager.opened_logs() if log.topic == "t"] == []
        assert after_restart == before_restart

    run_with_broker(config, write)
    assert before_restart[("logstartoffset", "0")] == 2 and before_restart[("logendoffset", "0")] == 6
    assert before_restart[("numlogsegments", "0")] > 1 and before_restart[("size", "0")] > 600
    assert [before_restart[(gauge, "1")] for gauge in ("size", "numlogsegments", "logstartoffset", "logendoffset")] == [
        0, 1, 0, 0]
    run_with_broker(config, restarted)


def test_consumer_group_lag_per_partition(tmp_path):
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("topic"), 7)
        await client.call(produce_request("topic", one_batch([b"a", b"b", b"c", b"d"])), PRODUCE_VERSION)
        committed = await client.call(commit_request("g", "", -1, {0: 1}), 8)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
        after = await scrape(broker.metrics_port)
        labels = (("consumergroup", "g"), ("partition", "0"), ("topic", "topic"))
        assert after[("kafka_consumergroup_current_offset", labels)] == 1
        assert after[("kafka_consumergroup_lag", labels)] == 3

    run_with_broker(metrics_config(tmp_path), scenario)


def test_group_and_share_coordinator_metrics(tmp_path):
    """group-count by protocol, share-group-count by state, share group rebalances, and the
    share coordinator's partitions, as Kafka 4.4 names them."""
    Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
    Alter = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
    member = "9a7c1a50-1d35-4a1e-8d4c-6a1c2ae3f9b1"

    def gauge(samples, name, **labels):
        return samples[(f"kafka_server_{name}", tuple(sorted(labels.items())))]

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("topic"), 7)
        before = await scrape(broker.metrics_port)
        assert [gauge(before, "group_coordinator_metrics_group_count", protocol=p)
                for p in ("classic", "consumer", "share")] == [0, 0, 0]
        # __share_group_state does not exist until a share partition's state is first kept.
        assert gauge(before, "share_coordinator_metrics_num_partitions", state="active") == 0
        await client.call(commit_request("g", "", -1, {0: 1}), 8)
        joined = await client.call(Heartbeat(group_id="busy", member_id=member, member_epoch=0,
                                             subscribed_topic_names=["topic"]), 1)
        assert joined.error_code == ErrorCode.NONE
        altered = await client.call(Alter(group_id="idle", topics=[Alter.AlterShareGroupOffsetsRequestTopic(
            topic_name="topic", partitions=[Alter.AlterShareGroupOffsetsRequestPartition(partition_index=0)])]), 0)
        assert altered.error_code == ErrorCode.NONE
        after = await scrape(broker.metrics_port)
        assert [gauge(after, "group_coordinator_metrics_group_count", protocol=p)
                for p in ("classic", "consumer", "share")] == [1, 0, 2]
        assert [gauge(after, "group_coordinator_metrics_share_group_count", state=s)
                for s in ("Empty", "Stable", "Dead")] == [1, 1, 0]
        assert grew(before, after, "kafka_server_group_coordinator_metrics_share_group_rebalance_total") == 1
        assert [gauge(after, "share_coordinator_metrics_num_partitions", state=s)
                for s in ("active", "loading", "failed")] == [50, 0, 0]

    run_with_broker(metrics_config(tmp_path), scenario)


def test_share_fetch_metrics(tmp_path):
    """ShareGroupMetrics' records acknowledged by type, the share requests counted as
    BrokerTopicMetrics counts them, and SharePartitionMetrics' in-flight gauges."""
    from share_helpers import ACCEPT, RELEASE, MemoryPersister, share_acknowledge, share_fetch

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        await client.call(create_topic_request("topic"), 7)
        topic_id = broker.services.metadata_cache.topics["topic"].topic_id
        broker.services.share_partitions.persister = MemoryPersister()  # no group initializes its state here
        broker.services.group_configs.update_group_config("sg", {"share.auto.offset.reset": "earliest"})
        await client.call(produce_request("topic", one_batch([b"a", b"b", b"c", b"d"])), PRODUCE_VERSION)
        before = await scrape(broker.metrics_port)
        with trio.fail_after(10):
            fetched = await client.call(share_fetch("sg", "m1", 0, topic_id, max_wait_ms=5000), 2)
        assert fetched.error_code == ErrorCode.NONE and fetched.responses
        during = await scrape(broker.metrics_port)
        labels = (("group", "sg"), ("partition", "0"), ("topic", "topic"))
        assert during[("kafka_server_sharepartitionmetrics_inflightmessagecount", labels)] == 4
        assert during[("kafka_server_sharepartitionmetrics_inflightbatchcount", labels)] == 1
        acked = await client.call(share_acknowledge("sg", "m1", 1, topic_id, {0: [(0, 2, [ACCEPT]), (3, 3, [RELEASE])]}), 2)
        assert acked.error_code == ErrorCode.NONE
        after = await scrape(broker.metrics_port)
        name = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
        assert [grew(before, after, name, ackType=t) for t in ("Accept", "Release", "Reject", "Renew")] == [3, 1, 0, 0]
        assert grew(before, after, "kafka_server_brokertopicmetrics_totalsharefetchrequests_total") == 1
        assert grew(before, after, "kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total") == 1
        assert grew(before, after, "kafka_server_brokertopicmetrics_failedsharefetchrequests_total") == 0
        # Accepted records leave the window; the released one is still tracked, available again.
        assert after[("kafka_server_sharepartitionmetrics_inflightmessagecount", labels)] == 1

    run_with_broker(metrics_config(tmp_path), scenario)


def test_health_and_readiness_wait_for_log_recovery(tmp_path, monkeypatch):
    recovering = threading.Event()
    loaded = Broker._load

    def slow_load(self):
        recovering.wait(10)
        return loaded(self)

    monkeypatch.setattr(Broker, "_load", slow_load)
    config = metrics_config(tmp_path)
    port = config.get("metrics.port")

    async def main():
        broker = Broker(config)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(broker.run)
            while broker.metrics_port is None:
                await trio.sleep(0.01)
            assert (await get(port, "/healthz"))[0] == 503
            assert (await get(port, "/readyz"))[0] == 503
            recovering.set()
            await broker.started.wait()
            assert await get(port, "/healthz") == (200, b"ok\n")
            assert await get(port, "/readyz") == (200, b"ok\n")
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_in_a_cluster_not_ready_before_the_broker_registered(tmp_path):
    config = metrics_config(tmp_path, zookeeper_connect=f"127.0.0.1:{free_port()}",
                            zookeeper_connection_timeout_ms=2000)
    port = config.get("metrics.port")

    async def main():
        broker = Broker(config)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(broker.run)
            while broker.metrics_port is None:
                await trio.sleep(0.01)
            # Still trying to reach ZooKeeper (nothing listens there): neither recovered nor registered.
            assert (await get(port, "/healthz"))[0] == 503
            assert (await get(port, "/readyz"))[0] == 503
            status, body = await get(port, "/metrics")
            assert status == 200 and b"kafka_network_requestmetrics_requests_total" in body

    with pytest.raises(BaseExceptionGroup) as raised:  # then the broker gives up, as Kafka does
        trio.run(main)
    assert raised.value.subgroup(ZooKeeperClientTimeoutException) is not None


def test_unknown_paths_bad_methods_and_garbage_leave_the_broker_serving(tmp_path):
    async def scenario(broker):
        port = broker.metrics_port
        assert (await get(port, "/nope"))[0] == 404
        assert (await http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"))[0] == 405
        assert (await http(port, b"\x00\xff\x16\x03\x01 garbage\r\n\r\n"))[0] == 400
        assert (await http(port, b"GET /metrics SPDY/9\r\n\r\n"))[0] == 400
        # A head without end: answered 400, or reset when the client is still sending as the server closes.
        assert (await http(port, b"GET /" + b"a" * 100_000))[0] in (400, 0)
        half = await trio.open_tcp_stream("127.0.0.1", port)  # a request never finished
        await half.send_all(b"GET /metr")
        await half.aclose()
        head = await http(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
        assert head == (200, b"")
        assert await get(port, "/healthz?verbose=1") == (200, b"ok\n")
        client = await Client.connect(broker.endpoints[0].port)
        assert (await client.call(ApiVersions(), 0)).error_code == ErrorCode.NONE

    run_with_broker(metrics_config(tmp_path), scenario)


def test_components_register_their_collectors_on_the_broker_registry(tmp_path):
    class Telemetry:
        def collect(self):
            yield GaugeMetricFamily("samsa_test_gauge", "A collector registered from outside.", value=42)

    async def scenario(broker):
        broker.metrics.register(Telemetry())
        assert (await scrape(broker.metrics_port))[("samsa_test_gauge", ())] == 42

    run_with_broker(metrics_config(tmp_path), scenario)


def test_no_endpoint_by_default(tmp_path):
    async def scenario(broker):
        assert broker.metrics_port is None
        assert broker.config.get("metrics.port") == 0 and broker.config.get("metrics.host") == "127.0.0.1"

    run_with_broker(groups_config(tmp_path), scenario)


def test_failed_authentications_are_counted_by_listener(tmp_path):
    sasl = security_config(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **{
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "metrics.port": str(free_port())})

    async def scenario(broker, ports):
        before = await scrape(broker.metrics_port)
        client = await Client.connect(ports["SASL_PLAINTEXT"])
        failed = await sasl_plain(client, "alice", "wrong")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert await closed(client)
        after = await scrape(broker.metrics_port)
        name = "kafka_server_socket_server_metrics_failed_authentication_total"
        assert grew(before, after, name, listener="SASL_PLAINTEXT") == 1
        assert grew(before, after, name, listener="PLAINTEXT") == 0

    run_secured(sasl, scenario)


def test_in_a_cluster_not_ready_while_the_zookeeper_session_is_lost(tmp_path):
    broker = Broker(metrics_config(tmp_path, zookeeper_connect="127.0.0.1:2181"))
    broker.zookeeper = object()  # as join_cluster leaves it
    assert not broker._ready()
    broker.recovered = broker.registered = True
    assert broker._ready()
    broker.zookeeper_session_lost()  # not registered until again
    assert not broker._ready()
    broker.registered_again()
    assert broker._ready()
