"""Client telemetry (KIP-714) in the broker: the shell around coordinator/client_metrics.py's
ClientMetricsManager (the handlers of GetTelemetrySubscriptions and PushTelemetry call it), the
latest metrics each client instance pushed, and a Prometheus collector of them.

Kafka hands pushed payloads to a ClientTelemetryReceiver plugin; Samsa's receiver is built in: the
payload is decompressed (the client's compression type), read as OTLP MetricsData
(server/metrics/otlp_metrics.py) and kept per client instance, replacing what the instance pushed before
(cumulative values) or added to it (delta sums and histograms: Kafka asks clients for delta
temporality). A payload that cannot be read is Kafka's plugin failure: INVALID_RECORD.

`ClientTelemetry.collect()` is a prometheus_client custom collector: one metric family per OTLP
metric name (made a Prometheus name: `org.apache.kafka.producer.record.queue.time.avg` is
`org_apache_kafka_producer_record_queue_time_avg`), a sample per client instance and data point,
labelled client_instance_id, client_id and the data point's own attributes. A client's metrics go
when its instance does (its connection closed, or no request for max(60 s, 3 push intervals)).
collect() may run on another thread (an HTTP server's): a client's metrics are replaced whole,
never changed in place, so it reads a consistent snapshot of each.
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...coordinator.client_metrics import ClientAttributes, ClientMetricsManager, Subscription, kafka_uuid_string
from ...wire.compression import CompressionType, DecompressionError, decompress
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..clock import loop_ms
from .otlp_metrics import Attributes, DataPoint, Kind, Temporality, decode_metrics_data

if TYPE_CHECKING:
    from prometheus_client.core import Metric

log = logging.getLogger("samsa.client_telemetry")

GetTelemetrySubscriptionsResponse = response_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
PushTelemetryResponse = response_class(ApiKey.PUSH_TELEMETRY)

_EXPIRY_CHECK_MS = 1000  # how often requests look for expired instances
_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
_PROMETHEUS_TYPES = {Kind.GAUGE: "gauge", Kind.SUM: "counter", Kind.HISTOGRAM: "histogram", Kind.SUMMARY: "summary"}
CLIENT_LABELS = ("client_instance_id", "client_id")


def prometheus_name(name: str) -> str:
    name = _INVALID_NAME_CHARS.sub("_", name)
    return "_" + name if name[:1].isdigit() else name


def prometheus_label(name: str) -> str:
    name = _INVALID_LABEL_CHARS.sub("_", name)
    return "_" + name if name[:1].isdigit() else name


@dataclass(frozen=True)
class PushedMetric:
    """One OTLP metric of a client, as last pushed (delta values accumulated)."""

    name: str
    description: str
    kind: Kind
    monotonic: bool
    points: dict[Attributes, DataPoint]


@dataclass(frozen=True)
class ClientMetrics:
    """What one client instance pushed: its metrics by OTLP name."""

    client_instance_id: uuid.UUID
    client_id: str
    metrics: dict[str, PushedMetric]


def _accumulate(old: DataPoint | None, new: DataPoint, kind: Kind) -> DataPoint:
    """A delta data point added to the running total of its series."""
    if old is None:
        return new
    if kind == Kind.SUM:
        return replace(new, value=old.value + new.value)
    if kind == Kind.HISTOGRAM and old.bounds == new.bounds:
        return replace(new, count=old.count + new.count, sum=old.sum + new.sum,
                       bucket_counts=tuple(a + b for a, b in zip(old.bucket_counts, new.bucket_counts)))
    return new


def merge_push(previous: ClientMetrics | None, client_instance_id: uuid.UUID, client_id: str,
               payload: bytes) -> ClientMetrics:
    """A client's metrics after a push of the OTLP `payload` (ValueError if it is malformed)."""
    data = decode_metrics_data(payload)
    metrics = dict(previous.metrics) if previous is not None else {}
    for metric in data.metrics:
        if not metric.name:
            continue
        old = metrics.get(metric.name)
        delta = metric.temporality == Temporality.DELTA and metric.kind in (Kind.SUM, Kind.HISTOGRAM)
        points = dict(old.points) if delta and old is not None and old.kind == metric.kind else {}
        for point in metric.points:
            points[point.attributes] = _accumulate(points.get(point.attributes), point, metric.kind) if delta else point
        metrics[metric.name] = PushedMetric(metric.name, metric.description, metric.kind,
                                            metric.monotonic or metric.kind != Kind.SUM, points)
    return ClientMetrics(client_instance_id, client_id, metrics)


class ClientTelemetry:
    """The broker's client telemetry: sessions, pushed metrics and their collector."""

    def __init__(self, telemetry_max_bytes: int) -> None:
        self.manager = ClientMetricsManager(telemetry_max_bytes)
        self.clients: dict[uuid.UUID, ClientMetrics] = {}
        self._next_expiry_check_ms = 0

    # --- subscriptions (client-metrics config resources) ---

    def update_subscription(self, name: str, subscription: Subscription | None) -> None:
        self.manager.update_subscription(name, subscription)

    def subscription_names(self) -> list[str]:
        return list(self.manager.subscriptions)

    # --- requests ---

    def get_subscriptions(self, ctx, request):
        now_ms = self._tick()
        answer = self.manager.get_subscriptions(now_ms, request.client_instance_id, _client(ctx))
        if answer.error_code != ErrorCode.NONE:
            log.debug("GetTelemetrySubscriptions: %s", answer.message)
            return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=answer.error_code)
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, client_instance_id=answer.client_instance_id,
            subscription_id=answer.subscription_id, accepted_compression_types=list(answer.accepted_compression_types),
            push_interval_ms=answer.push_interval_ms, telemetry_max_bytes=answer.telemetry_max_bytes,
            delta_temporality=answer.delta_temporality, requested_metrics=list(answer.requested_metrics))

    def push(self, ctx, request):
        now_ms = self._tick()
        payload = request.metrics or b""
        answer = self.manager.push(now_ms, request.client_instance_id, request.subscription_id, request.terminating,
                                   request.compression_type, len(payload), _client(ctx))
        if answer.error_code != ErrorCode.NONE:
            log.debug("PushTelemetry: %s", answer.message)
            return PushTelemetryResponse(throttle_time_ms=0, error_code=answer.error_code)
        if payload:
            try:
                self._receive(request.client_instance_id, ctx.client_id or "", request.compression_type, payload)
            except (DecompressionError, ValueError) as error:
                log.error("Error exporting client metrics for client instance id: %s: %s",
                          kafka_uuid_string(request.client_instance_id), error)
                return PushTelemetryResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_RECORD)
        return PushTelemetryResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)

    def _receive(self, client_instance_id: uuid.UUID, client_id: str, compression_type: int, payload: bytes) -> None:
        if compression_type != CompressionType.NONE:
            payload = decompress(compression_type, bytes(payload))
        self.clients[client_instance_id] = merge_push(self.clients.get(client_instance_id), client_instance_id,
                                                      client_id, bytes(payload))

    # --- instance lifetime ---

    def disconnected(self, connection_id: str) -> None:
        gone = self.manager.disconnected(connection_id)
        if gone is not None:
            self.clients.pop(gone, None)

    def _tick(self) -> int:
        now_ms = loop_ms()
        if now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = now_ms + _EXPIRY_CHECK_MS
            for gone in self.manager.expire(now_ms):
                self.clients.pop(gone, None)
        return now_ms

    # --- the Prometheus collector ---

    def collect(self) -> Iterator[Metric]:
        # Imported here: only a broker that serves metrics (metrics.port) collects.
        from prometheus_client.core import Metric
        families: dict[str, Metric] = {}
        kinds: dict[str, Kind] = {}
        for client in list(self.clients.values()):
            client_labels = {"client_instance_id": kafka_uuid_string(client.client_instance_id),
                             "client_id": client.client_id}
            for metric in list(client.metrics.values()):
                kind = Kind.GAUGE if metric.kind == Kind.SUM and not metric.monotonic else metric.kind
                name = prometheus_name(metric.name)
                if kind == Kind.SUM and name.endswith("_total"):
                    name = name[:-len("_total")]  # a counter's samples get the suffix back, once
                family = families.get(name)
                if family is None:
                    family = families[name] = Metric(name, metric.description or metric.name, _PROMETHEUS_TYPES[kind])
                    kinds[name] = kind
                elif kinds[name] != kind:
                    continue  # another client's metric of this name has another type: the first one wins
                for point in metric.points.values():
                    labels = {prometheus_label(k): v for k, v in point.attributes
                              if prometheus_label(k) not in CLIENT_LABELS and prometheus_label(k) != "le"}
                    labels.update(client_labels)
                    _add_samples(family, kind, labels, point)
        yield from families.values()


def _add_samples(family: Metric, kind: Kind, labels: dict[str, str], point: DataPoint) -> None:
    from prometheus_client.utils import floatToGoString
    name = family.name
    if kind == Kind.GAUGE:
        family.add_sample(name, labels, point.value)
    elif kind == Kind.SUM:
        family.add_sample(name + "_total", labels, point.value)
    elif kind == Kind.HISTOGRAM:
        cumulative = 0
        for bound, count in zip((*point.bounds, math.inf), point.bucket_counts or (point.count,)):
            cumulative += count
            family.add_sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, cumulative)
        family.add_sample(name + "_count", labels, point.count)
        family.add_sample(name + "_sum", labels, point.sum)
    else:
        family.add_sample(name + "_count", labels, point.count)
        family.add_sample(name + "_sum", labels, point.sum)


def _client(ctx) -> ClientAttributes:
    """The client's attributes a subscription's `match` may test (ClientMetricsInstanceMetadata)."""
    connection = ctx.connection
    return ClientAttributes(client_id=ctx.client_id, software_name=connection.client_software_name,
                            software_version=connection.client_software_version,
                            source_address=connection.client_host, source_port=connection.client_port,
                            connection_id=connection.id)
