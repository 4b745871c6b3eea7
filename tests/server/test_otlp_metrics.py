"""Reading OTLP MetricsData as KIP-714 clients push it (tests/server/otlp_payloads.py writes it)."""

from __future__ import annotations

import pytest
from otlp_payloads import CUMULATIVE, DELTA, counter, double, fixed64, gauge, histogram, message, metrics_data, string

from samsa.server.metrics.otlp_metrics import Kind, Temporality, decode_metrics_data


def test_gauges_sums_and_histograms_with_their_attributes():
    data = decode_metrics_data(metrics_data(
        gauge("g", [(1.5, {"node.id": 3, "ok": True}), (2, {"ratio": 0.25})], "a gauge"),
        counter("c", [(-4, {"topic": "t"})], temporality=CUMULATIVE, monotonic=False),
        histogram("h", 3, 6.0, [1.0, 2.0], [1, 1, 1], {"k": "v"}),
        resource={"client_rack": "r1", "group_id": "g1"}))
    assert data.resource_attributes == (("client_rack", "r1"), ("group_id", "g1"))
    g, c, h = data.metrics
    assert (g.name, g.description, g.kind) == ("g", "a gauge", Kind.GAUGE)
    assert [(p.attributes, p.value) for p in g.points] == [((("node.id", "3"), ("ok", "true")), 1.5),
                                                           ((("ratio", "0.25"),), 2.0)]
    assert (c.kind, c.temporality, c.monotonic) == (Kind.SUM, Temporality.CUMULATIVE, False)
    assert c.points[0].value == -4.0
    assert (h.kind, h.temporality) == (Kind.HISTOGRAM, Temporality.DELTA)
    (p,) = h.points
    assert (p.attributes, p.count, p.sum, p.bounds, p.bucket_counts) == ((("k", "v"),), 3, 6.0, (1.0, 2.0), (1, 1, 1))


def test_summaries_exponential_histograms_and_unknown_fields():
    summary_point = fixed64(3, 1) + fixed64(4, 9) + double(5, 4.5) + message(6, double(1, 0.5) + double(2, 1.0))
    summary = string(1, "s") + message(11, message(1, summary_point))
    exponential_point = message(1, string(1, "k") + message(2, string(1, "v"))) + fixed64(4, 2) + double(5, 3.0)
    exponential = string(1, "e") + message(10, message(1, exponential_point) + b"\x10" + bytes([DELTA]))
    unknown = b"\xa2\x06\x02hi"  # field 100, never defined: skipped
    s, e = decode_metrics_data(metrics_data(summary + unknown, exponential)).metrics
    assert (s.kind, s.points[0].count, s.points[0].sum) == (Kind.SUMMARY, 9, 4.5)
    assert (e.kind, e.points[0].attributes, e.points[0].count, e.points[0].sum) == (
        Kind.HISTOGRAM, (("k", "v"),), 2, 3.0)
    assert e.points[0].bucket_counts == ()


def test_histogram_buckets_that_do_not_fit_their_bounds_are_dropped():
    (h,) = decode_metrics_data(metrics_data(histogram("h", 2, 1.0, [1.0, 2.0], [1, 1]))).metrics
    assert (h.points[0].count, h.points[0].bucket_counts) == (2, ())


def test_an_empty_payload_is_no_metrics():
    assert decode_metrics_data(b"").metrics == []


@pytest.mark.parametrize("payload", [
    b"\x0a\x05ab",  # a length past the end
    b"\x08",  # a varint cut short
    b"\x09\x00\x00",  # a 64-bit field cut short
    b"\x0b",  # a group never ended
    b"\x00\x01",  # field number 0
    metrics_data(string(1, "h") + message(9, message(1, message(6, b"\x00" * 9)))),  # 9 bytes of fixed64s
    metrics_data(message(1, b"\xff\xfe")),  # a name that is not UTF-8
])
def test_malformed_payloads_are_value_errors(payload):
    with pytest.raises(ValueError):  # what the push handler answers INVALID_RECORD for
        decode_metrics_data(payload)
