"""OTLP MetricsData payloads for tests, written field by field in protobuf's wire format: a writer
independent of opentelemetry-proto's classes, so that what the broker reads with them is checked
against the bytes metrics.proto defines."""

from __future__ import annotations

import struct

DELTA, CUMULATIVE = 1, 2


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def message(number: int, body: bytes) -> bytes:
    return tag(number, 2) + varint(len(body)) + body


def string(number: int, text: str) -> bytes:
    return message(number, text.encode())


def fixed64(number: int, value: int) -> bytes:
    return tag(number, 1) + struct.pack("<Q", value & ((1 << 64) - 1))


def double(number: int, value: float) -> bytes:
    return tag(number, 1) + struct.pack("<d", value)


def key_value(number: int, key: str, value) -> bytes:
    if isinstance(value, bool):
        any_value = tag(2, 0) + varint(int(value))
    elif isinstance(value, int):
        any_value = tag(3, 0) + varint(value)
    elif isinstance(value, float):
        any_value = double(4, value)
    else:
        any_value = string(1, value)
    return message(number, string(1, key) + message(2, any_value))


def attributes(number: int, attrs: dict) -> bytes:
    return b"".join(key_value(number, k, v) for k, v in attrs.items())


def number_point(value, attrs=None, time_ns=1) -> bytes:
    body = attributes(7, attrs or {}) + fixed64(3, time_ns)
    body += fixed64(6, value) if isinstance(value, int) else double(4, value)
    return body


def gauge(name: str, points, description="") -> bytes:
    body = b"".join(message(1, number_point(v, a)) for v, a in points)
    return string(1, name) + string(2, description) + message(5, body)


def counter(name: str, points, temporality=DELTA, monotonic=True) -> bytes:
    body = b"".join(message(1, number_point(v, a)) for v, a in points)
    body += tag(2, 0) + varint(temporality) + tag(3, 0) + varint(int(monotonic))
    return string(1, name) + message(7, body)


def histogram(name: str, count: int, total: float, bounds, bucket_counts, attrs=None, temporality=DELTA) -> bytes:
    point = attributes(9, attrs or {}) + fixed64(3, 1) + fixed64(4, count) + double(5, total)
    point += message(6, b"".join(struct.pack("<Q", c) for c in bucket_counts))
    point += message(7, b"".join(struct.pack("<d", b) for b in bounds))
    return string(1, name) + message(9, message(1, point) + tag(2, 0) + varint(temporality))


def metrics_data(*metrics: bytes, resource=None) -> bytes:
    scope = message(1, string(1, "librdkafka")) + b"".join(message(2, m) for m in metrics)
    resource_metrics = message(1, attributes(1, resource or {})) + message(2, scope)
    return message(1, resource_metrics)
