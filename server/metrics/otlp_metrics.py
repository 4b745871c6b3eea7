"""OTLP metrics as KIP-714 clients push them: an opentelemetry.proto.metrics.v1.MetricsData
message (what ClientTelemetryUtils serializes, librdkafka too), parsed by opentelemetry-proto's
generated classes (protobuf's upb runtime) and read into the few shapes Prometheus can show: gauges,
sums (monotonic or not, delta or cumulative), histograms with explicit bounds and summaries.
Exponential histograms give their count and sum.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported at the first push (decode_metrics_data)
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1 import metrics_pb2


class Kind(IntEnum):
    GAUGE = 0
    SUM = 1
    HISTOGRAM = 2
    SUMMARY = 3


class Temporality(IntEnum):
    """AggregationTemporality."""

    UNSPECIFIED = 0
    DELTA = 1
    CUMULATIVE = 2


Attributes = tuple[tuple[str, str], ...]  # sorted (key, value as text)


@dataclass
class DataPoint:
    attributes: Attributes
    value: float = 0.0  # a gauge's or sum's
    count: int = 0  # a histogram's or summary's
    sum: float = 0.0
    bounds: tuple[float, ...] = ()  # a histogram's explicit bounds (bucket i is <= bounds[i])
    bucket_counts: tuple[int, ...] = ()  # len(bounds) + 1, the last one +Inf


@dataclass
class Metric:
    name: str
    description: str = ""
    unit: str = ""
    kind: Kind = Kind.GAUGE
    monotonic: bool = False
    temporality: Temporality = Temporality.UNSPECIFIED
    points: list[DataPoint] = field(default_factory=list)


@dataclass
class MetricsData:
    resource_attributes: Attributes = ()
    metrics: list[Metric] = field(default_factory=list)


def decode_metrics_data(payload: bytes) -> MetricsData:
    """A MetricsData message; ValueError if it is malformed. The resource attributes of every
    ResourceMetrics are merged (a client sends one)."""
    # Imported at the first push, not at startup: protobuf's import takes 15-40 ms, which a broker
    # no client pushes to never needs.
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData as MetricsDataMessage

    try:
        message = MetricsDataMessage.FromString(payload)
    except DecodeError as e:
        raise ValueError(f"malformed OTLP MetricsData: {e}") from None
    result = MetricsData()
    resource: dict[str, str] = {}
    for resource_metrics in message.resource_metrics:
        resource.update(_attributes(resource_metrics.resource.attributes))
        for scope_metrics in resource_metrics.scope_metrics:
            result.metrics.extend(_metric(m) for m in scope_metrics.metrics)
    result.resource_attributes = tuple(sorted(resource.items()))
    return result


def _metric(data: metrics_pb2.Metric) -> Metric:
    metric = Metric(data.name, data.description, data.unit)
    kind = data.WhichOneof("data")
    if kind == "gauge":
        metric.points = [_number_point(p) for p in data.gauge.data_points]
    elif kind == "sum":
        metric.kind = Kind.SUM
        metric.temporality = _temporality(data.sum.aggregation_temporality)
        metric.monotonic = data.sum.is_monotonic
        metric.points = [_number_point(p) for p in data.sum.data_points]
    elif kind == "histogram":
        metric.kind = Kind.HISTOGRAM
        metric.temporality = _temporality(data.histogram.aggregation_temporality)
        metric.points = [_histogram_point(p) for p in data.histogram.data_points]
    elif kind == "exponential_histogram":  # its buckets are not read
        metric.kind = Kind.HISTOGRAM
        metric.temporality = _temporality(data.exponential_histogram.aggregation_temporality)
        metric.points = [_distribution_point(p) for p in data.exponential_histogram.data_points]
    elif kind == "summary":  # its quantiles are not read
        metric.kind = Kind.SUMMARY
        metric.temporality = Temporality.CUMULATIVE
        metric.points = [_distribution_point(p) for p in data.summary.data_points]
    return metric


def _temporality(value: int) -> Temporality:
    return Temporality(value) if value in Temporality._value2member_map_ else Temporality.UNSPECIFIED


def _number_point(data: metrics_pb2.NumberDataPoint) -> DataPoint:
    value = data.as_int if data.WhichOneof("value") == "as_int" else data.as_double
    return DataPoint(_attributes(data.attributes), value=float(value))


def _distribution_point(data: metrics_pb2.HistogramDataPoint | metrics_pb2.ExponentialHistogramDataPoint
                        | metrics_pb2.SummaryDataPoint) -> DataPoint:
    return DataPoint(_attributes(data.attributes), count=data.count, sum=data.sum)


def _histogram_point(data: metrics_pb2.HistogramDataPoint) -> DataPoint:
    point = _distribution_point(data)
    bounds, counts = data.explicit_bounds, data.bucket_counts
    if len(counts) == len(bounds) + 1:
        point.bounds, point.bucket_counts = tuple(bounds), tuple(counts)
    return point


def _attributes(key_values: Iterable[KeyValue]) -> Attributes:
    """KeyValues, their values as text, sorted by key."""
    return tuple(sorted({kv.key: _any_value_text(kv.value) for kv in key_values}.items()))


def _any_value_text(value: AnyValue) -> str:
    """AnyValue: a string, bool, int or double as text (arrays, lists and bytes are shown as empty)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "int_value":
        return str(value.int_value)
    if kind == "double_value":
        return repr(value.double_value)
    return ""
