"""The broker's figures as Prometheus metric families, read at scrape time (a prometheus_client
custom collector): counters the request path keeps (request_metrics, topic_stats), and gauges
computed by walking the partitions, logs and groups, which the request path never maintains.

Names are those Prometheus's JMX exporter gives Kafka's MBeans with its standard Kafka rules
(example_configs/kafka-2_0_0.yml, lowercased): a meter `kafka.server<type=BrokerTopicMetrics,
name=BytesInPerSec, topic=t>` is `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`, a
gauge `kafka.log<type=Log, name=Size, topic=t, partition=0>` is `kafka_log_log_size{...}`. As
there, a BrokerTopicMetrics family carries the broker-wide series (no label) next to the topics'.
Where Kafka's broker has no MBean (consumer lag) the names are kafka_exporter's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample

from ...storage.errors import StorageError
from .request_metrics import REQUEST_TIMES
from .sources import LoadedBroker

log = logging.getLogger("samsa.metrics")

# BrokerTopicMetrics meters: (JMX exporter name, TopicStats field, Kafka's description).
TOPIC_METERS = (
    ("bytesin", "bytes_in", "Bytes appended to the topic's partitions from produce requests (the record batches as received)."),
    ("messagesin", "messages_in", "Records appended to the topic's partitions."),
    ("bytesout", "bytes_out", "Record bytes sent to consumers in fetch responses."),
    ("replicationbytesin", "replication_bytes_in", "Record bytes appended as a follower, fetched from the leader."),
    ("replicationbytesout", "replication_bytes_out", "Record bytes sent to followers in fetch responses."),
    ("failedproducerequests", "failed_produce_requests", "Partitions of produce requests answered with an error."),
    ("failedfetchrequests", "failed_fetch_requests", "Partitions of fetch requests answered with an error."),
)


class BrokerCollector:
    """Everything the broker reports; before its logs are loaded (`loaded` says None), only what it
    has counted."""

    def __init__(self, request_metrics, connection_quotas, loaded: Callable[[], LoadedBroker | None]) -> None:
        self._request_metrics = request_metrics
        self._connection_quotas = connection_quotas
        self._loaded = loaded

    def collect(self) -> Iterator[Metric]:
        yield from request_families(self._request_metrics)
        yield from socket_server_families(self._connection_quotas, self._request_metrics)
        loaded = self._loaded()
        if loaded is None:
            return
        replica_manager = loaded.replica_manager
        yield from topic_families(replica_manager.topic_stats)
        yield from replica_manager_families(replica_manager)
        yield from controller_families(*loaded.controller_counts())
        yield from log_families(loaded.log_manager)
        yield from consumer_lag_families(loaded.groups, replica_manager)
        yield from group_coordinator_families(loaded.groups)
        if loaded.share_coordinator is not None:
            yield from share_coordinator_families(loaded.share_coordinator)
        if loaded.share_partitions is not None:
            yield from share_fetch_families(loaded.share_partitions)


def request_families(metrics) -> Iterator[Metric]:
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                   "Requests received, by request name and version.", labels=["request", "version"])
    for count in metrics.requests.values():
        requests.add_metric([count.name, str(count.version)], count.count)
    yield requests
    for time_name in REQUEST_TIMES:
        family = HistogramMetricFamily(f"kafka_network_requestmetrics_{time_name.lower()}",
                                       f"Kafka's {time_name} of requests, by request name (ms).", labels=["request"])
        for name, times in sorted(metrics.times.items()):
            histogram = times.by_name()[time_name]
            family.add_metric([name], histogram.cumulative_buckets(), histogram.sum_ns / 1e6)
        yield family
    throttle = CounterMetricFamily(
        "kafka_server_quota_throttle_time_ms",
        "Throttle time given to a client's responses (ms), by quota type (Produce, Fetch, Request) and client id.",
        labels=["resource", "clientId"])
    for (resource, client_id), ms in sorted(metrics.throttle_time_ms.items()):
        throttle.add_metric([resource, client_id], ms)
    yield throttle


def socket_server_families(connection_quotas, request_metrics) -> Iterator[Metric]:
    connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                    "Connections open, by listener.", labels=["listener"])
    for listener, count in sorted(connection_quotas.by_listener.items()):
        connections.add_metric([listener], count)
    yield connections
    failed = CounterMetricFamily("kafka_server_socket_server_metrics_failed_authentication",
                                 "Connections that failed authentication, by listener.", labels=["listener"])
    for listener in sorted(connection_quotas.by_listener):
        failed.add_metric([listener], request_metrics.failed_authentication.get(listener, 0))
    yield failed


def topic_families(topic_stats) -> Iterator[Metric]:
    all_topics = topic_stats.all_topics()
    topics = sorted(topic_stats.topics.items())
    for name, field, doc in TOPIC_METERS:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
        family.samples.append(Sample(f"{family.name}_total", {}, getattr(all_topics, field)))
        for topic, stats in topics:
            family.add_metric([topic], getattr(stats, field))
        yield family


def replica_manager_families(replica_manager) -> Iterator[Metric]:
    leaders = under_replicated = under_min_isr = 0
    partitions = replica_manager.partitions
    for partition in partitions.values():
        if not partition.is_leader:
            continue
        leaders += 1
        isr = len(partition.isr)
        if isr < len(partition.replicas):
            under_replicated += 1
        # A scrape opens no log: a partition whose log is untouched since startup is left out here.
        log_ = partition.opened_log
        if log_ is not None and isr < log_.config.min_insync_replicas:
            under_min_isr += 1
    yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker.", len(partitions))
    yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", leaders)
    yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions led here whose ISR is smaller than their replica set.", under_replicated)
    yield _gauge("kafka_server_replicamanager_underminisrpartitioncount",
                 "Partitions led here whose ISR is smaller than min.insync.replicas.", under_min_isr)
    changes = replica_manager.isr_changes
    yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                              "ISR shrinks of partitions led here (confirmed by the controller).", changes.shrinks)
    yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                              "ISR expansions of partitions led here (confirmed by the controller).", changes.expands)


def controller_families(active: int, offline: int) -> Iterator[Metric]:
    """Kafka reports these on the active controller only (0 elsewhere)."""
    yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                 "1 on the active controller, else 0.", active)
    yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                 "Partitions without a leader (on the active controller).", offline)


def log_families(log_manager) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "The log's size on disk, in bytes.", labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "The log's segments.", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "The log end offset.", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The log start offset.", labels=labels)
    # Every log, opened or not: the log manager describes one untouched since a clean startup
    # without opening it (startup and a scrape stay cheap with thousands of partitions).
    for summary in log_manager.log_summaries():
        values = [summary.topic, str(summary.partition)]
        size.add_metric(values, summary.size)
        segments.add_metric(values, summary.num_segments)
        end.add_metric(values, summary.log_end_offset)
        start.add_metric(values, summary.log_start_offset)
    yield from (size, segments, end, start)


def consumer_lag_families(groups, replica_manager) -> Iterator[Metric]:
    """Each group's committed offset and lag (high watermark less the committed offset) for the
    partitions this broker leads, as kafka_exporter names them."""
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "The group's committed offset of the partition.", labels=labels)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "The partition's high watermark less the group's committed offset.", labels=labels)
    for coordinator in groups.coordinators():
        offsets = coordinator.offsets
        for group_id in sorted(offsets.group_ids()):
            for topic, committed in sorted(offsets.group_offsets(group_id).items()):
                for index, offset in sorted(committed.items()):
                    partition = replica_manager.get(topic, index)
                    if partition is None or not partition.is_leader:
                        continue
                    try:
                        high_watermark = partition.log.high_watermark
                    except StorageError:
                        continue
                    values = [group_id, topic, str(index)]
                    current.add_metric(values, offset.offset)
                    lag.add_metric(values, max(high_watermark - offset.offset, 0))
    yield from (current, lag)


# Kafka's Group.GroupType names, the protocol tag of group-count.
GROUP_TYPES = ("classic", "consumer", "share")
# ShareGroup.ShareGroupState: a deleted group is gone here, so Dead is always 0 (as it is in Kafka,
# which removes a group as it dies).
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")


def group_coordinator_families(groups) -> Iterator[Metric]:
    """kafka.server:type=group-coordinator-metrics (Kafka's GroupCoordinatorMetrics) for the groups
    this broker coordinates: group-count by protocol, share-group-count by state, and the share
    groups' rebalances (share-group-rebalance-count: heartbeats that bumped a group's epoch)."""
    by_type = dict.fromkeys(GROUP_TYPES, 0)
    share_states = dict.fromkeys(SHARE_GROUP_STATES, 0)
    for coordinator in groups.coordinators():
        for group in coordinator.groups.values():
            by_type[group.type] = by_type.get(group.type, 0) + 1
            if group.type == "share":
                share_states[group.state_name] = share_states.get(group.state_name, 0) + 1
    count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                              "The number of groups this broker coordinates, by protocol (group type).",
                              labels=["protocol"])
    for kind, n in by_type.items():
        count.add_metric([kind], n)
    yield count
    states = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                               "The number of share groups in each state.", labels=["state"])
    for state, n in share_states.items():
        states.add_metric([state], n)
    yield states
    yield CounterMetricFamily("kafka_server_group_coordinator_metrics_share_group_rebalance",
                              "Share group rebalances (heartbeats that bumped a group's epoch).",
                              groups.share_group_rebalances)


def share_coordinator_families(share_coordinator) -> Iterator[Metric]:
    """kafka.server:type=share-coordinator-metrics (Kafka's ShareCoordinatorRuntimeMetrics):
    num-partitions of __share_group_state by state, active (loaded here) or loading (in a cluster,
    led here and being replayed); none fails to load here."""
    partitions = share_coordinator.partitions
    loading = 0 if partitions is None else len(partitions.loading)
    family = GaugeMetricFamily("kafka_server_share_coordinator_metrics_num_partitions",
                               "Partitions of __share_group_state this broker coordinates, by state.", labels=["state"])
    for state, n in (("loading", loading), ("active", len(share_coordinator.owned_shards())), ("failed", 0)):
        family.add_metric([state], n)
    yield family


# Kafka's AcknowledgeType ids and the ackType tag of RecordAcknowledgementsPerSec (capitalized names).
ACKNOWLEDGE_TYPES = ((1, "Accept"), (2, "Release"), (3, "Reject"), (4, "Renew"))
# BrokerTopicMetrics' share meters: (JMX exporter name, ShareFetchMetrics field, description).
SHARE_REQUEST_METERS = (
    ("totalsharefetchrequests", "fetch_requests", "ShareFetch requests."),
    ("failedsharefetchrequests", "failed_fetch_requests", "ShareFetch requests answered with an error."),
    ("totalshareacknowledgementrequests", "acknowledgement_requests", "ShareAcknowledge requests."),
    ("failedshareacknowledgementrequests", "failed_acknowledgement_requests",
     "ShareAcknowledge requests answered with an error."),
)


def share_fetch_families(share_partitions) -> Iterator[Metric]:
    """The share fetch path (Kafka's ShareGroupMetrics, SharePartitionMetrics, BrokerTopicMetrics'
    share meters and DelayedShareFetchMetrics): records acknowledged by type, share fetch and
    acknowledge requests (broker-wide: Kafka also counts them per topic), long polls that expired,
    and each share partition's in-flight records and batches."""
    metrics = share_partitions.metrics
    acknowledged = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                                       "Records acknowledged, by acknowledgement type.", labels=["ackType"])
    for type_id, name in ACKNOWLEDGE_TYPES:
        acknowledged.add_metric([name], metrics.acknowledgements.get(type_id, 0))
    yield acknowledged
    for name, field, doc in SHARE_REQUEST_METERS:
        yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, getattr(metrics, field))
    yield CounterMetricFamily("kafka_server_delayedsharefetchmetrics_expires",
                              "Share fetches whose long poll ended at max_wait_ms.", metrics.expired_delayed_fetches)
    labels = ["group", "topic", "partition"]
    messages = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightmessagecount",
                                 "Records in flight in the share partition (SPEO - SPSO + 1 while any is).",
                                 labels=labels)
    batches = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightbatchcount",
                                "Batches of in-flight records the share partition tracks.", labels=labels)
    for key, hosted in sorted(share_partitions.partitions.items()):
        values = [key.group_id, hosted.topic, str(key.partition)]
        messages.add_metric(values, hosted.state.in_flight_records)
        batches.add_metric(values, hosted.state.in_flight_batch_count)
    yield from (messages, batches)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
