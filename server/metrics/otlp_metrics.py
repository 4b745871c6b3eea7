"""OTLP metrics as KIP-714 clients push them: an opentelemetry.proto.metrics.v1.MetricsData
message (what ClientTelemetryUtils serializes, librdkafka too), read with wire/protobuf.py into
the few shapes Prometheus can show: gauges, sums (monotonic or not, delta or cumulative),
histograms with explicit bounds and summaries. Exponential histograms give their count and sum.
Field numbers are metrics.proto's and common.proto's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from ...wire.protobuf import (
    I64,
    as_double,
    as_int64,
    as_string,
    fields,
    packed_double,
    packed_fixed64,
)


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
    time_unix_nano: int = 0
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
    """A MetricsData message; ProtobufError (a ValueError) if it is malformed. The resource
    attributes of every ResourceMetrics are merged (a client sends one)."""
    result = MetricsData()
    resource: dict[str, str] = {}
    for number, _, resource_metrics in fields(payload):
        if number != 1:  # resource_metrics
            continue
        for n, _, v in fields(resource_metrics):
            if n == 1:  # resource
                resource.update(_attributes(v, 1))
            elif n == 2:  # scope_metrics
                for sn, _, sv in fields(v):
                    if sn == 2:  # metrics
                        result.metrics.append(_metric(sv))
    result.resource_attributes = tuple(sorted(resource.items()))
    return result


def _metric(data) -> Metric:
    metric = Metric(name="")
    for number, _, value in fields(data):
        if number == 1:
            metric.name = as_string(value)
        elif number == 2:
            metric.description = as_string(value)
        elif number == 3:
            metric.unit = as_string(value)
        elif number == 5:  # gauge
            metric.kind = Kind.GAUGE
            metric.points = [_number_point(v) for n, _, v in fields(value) if n == 1]
        elif number == 7:  # sum
            metric.kind = Kind.SUM
            for n, _, v in fields(value):
                if n == 1:
                    metric.points.append(_number_point(v))
                elif n == 2:
                    metric.temporality = _temporality(v)
                elif n == 3:
                    metric.monotonic = bool(v)
        elif number in (9, 10):  # histogram, exponential_histogram
            metric.kind = Kind.HISTOGRAM
            for n, _, v in fields(value):
                if n == 1:
                    metric.points.append(_distribution_point(v, 1 if number == 10 else 9, buckets=number == 9))
                elif n == 2:
                    metric.temporality = _temporality(v)
        elif number == 11:  # summary
            metric.kind = Kind.SUMMARY
            metric.temporality = Temporality.CUMULATIVE
            metric.points = [_distribution_point(v, 7, buckets=False) for n, _, v in fields(value) if n == 1]
    return metric


def _temporality(value: int) -> Temporality:
    return Temporality(value) if value in Temporality._value2member_map_ else Temporality.UNSPECIFIED


def _number_point(data) -> DataPoint:
    point = DataPoint(attributes=_attributes(data, 7))
    for number, _, value in fields(data):
        if number == 3:
            point.time_unix_nano = value
        elif number == 4:  # as_double
            point.value = as_double(value)
        elif number == 6:  # as_int (sfixed64)
            point.value = float(as_int64(value))
    return point


def _distribution_point(data, attributes_field: int, *, buckets: bool) -> DataPoint:
    """A HistogramDataPoint (attributes 9, bucket_counts 6, explicit_bounds 7),
    ExponentialHistogramDataPoint (attributes 1; its buckets are not read) or SummaryDataPoint
    (attributes 7; its quantiles are not read): time 3, count 4 and sum 5 in each."""
    point = DataPoint(attributes=_attributes(data, attributes_field))
    counts: list[int] = []
    bounds: list[float] = []
    for number, _, value in fields(data):
        if number == 3:
            point.time_unix_nano = value
        elif number == 4:
            point.count = value
        elif number == 5:
            point.sum = as_double(value)
        elif number == 6 and buckets:
            counts.extend(packed_fixed64(value))
        elif number == 7 and buckets:
            bounds.extend(packed_double(value))
    if len(counts) == len(bounds) + 1:
        point.bounds, point.bucket_counts = tuple(bounds), tuple(counts)
    return point


def _attributes(data, number: int) -> Attributes:
    """The KeyValue fields numbered `number` of a message, their values as text, sorted by key."""
    result = {}
    for n, _, kv in fields(data):
        if n != number:
            continue
        key, text = "", ""
        for kn, _, kvalue in fields(kv):
            if kn == 1:
                key = as_string(kvalue)
            elif kn == 2:
                text = _any_value_text(kvalue)
        result[key] = text
    return tuple(sorted(result.items()))


def _any_value_text(data) -> str:
    """AnyValue: string 1, bool 2, int 3, double 4 (arrays, lists and bytes are shown as empty)."""
    for number, wire_type, value in fields(data):
        if number == 1:
            return as_string(value)
        if number == 2:
            return "true" if value else "false"
        if number == 3:
            return str(as_int64(value))
        if number == 4 and wire_type == I64:
            return repr(as_double(value))
    return ""
