"""What one request costs a broker: sequential Produce v3 and Fetch v4 requests over a raw socket,
each carrying one 1 KB record (the versions every compared system speaks).

Throughput runs hide per-request costs behind 1 MB batches; a latency-bound client (linger.ms 0,
one record per request) meets them head on. CPU microseconds per request, from the broker's
/proc/<pid>/stat, are steadier than wall time on a shared machine.
"""

from __future__ import annotations

import socket
import struct
import time

import crc32c

from systems import cpu, cpu_seconds

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def one_record_batch(value: bytes) -> bytes:
    """A message format v2 batch of one record, CRC32C included."""
    return record_batch([value])


def record_batch(values: list[bytes]) -> bytes:
    """A message format v2 batch of these records (no key, no headers), CRC32C included."""
    now = int(time.time() * 1000)
    records = []
    for delta, value in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(delta) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        records.append(_varint(len(body)) + body)
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, now, now, -1, -1, -1, len(values)) + b"".join(records)
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def _string(s: str) -> bytes:
    return _I16.pack(len(s)) + s.encode()


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhi", api_key, version, correlation_id) + _string("bench")
    return _I32.pack(len(header) + len(body)) + header + body


def produce_request(topic: str, batch: bytes, correlation_id: int) -> bytes:
    body = (_I16.pack(-1) + struct.pack(">hii", 1, 30_000, 1) + _string(topic)
            + struct.pack(">iii", 1, 0, len(batch)) + batch)
    return _frame(0, 3, correlation_id, body)


def fetch_request(topic: str, offset: int, max_bytes: int, correlation_id: int) -> bytes:
    body = (struct.pack(">iiiibi", -1, 0, 1, max_bytes, 0, 1) + _string(topic)
            + struct.pack(">iiqi", 1, 0, offset, max_bytes))
    return _frame(1, 4, correlation_id, body)


def _round_trip(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    (size,) = _I32.unpack(sock.recv(4, socket.MSG_WAITALL))
    return sock.recv(size, socket.MSG_WAITALL)


def costs(port: int, pid: int, topic: str, count: int) -> dict[str, float]:
    """Broker CPU and round-trip microseconds per Produce and per Fetch request."""
    batch = one_record_batch(b"x" * 1024)
    out = {}
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _round_trip(sock, produce_request(topic, batch, 0))  # warm: the partition exists, caches filled
        error_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4
        for name, make, check in (
                ("produce", lambda i: produce_request(topic, batch, i), lambda r: _I16.unpack_from(r, error_at)[0] == 0),
                ("fetch", lambda i: fetch_request(topic, 1 + i, len(batch), i),
                 lambda r: len(batch) < len(r) < 2 * len(batch))):
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            for i in range(count):
                if not check(_round_trip(sock, make(i))):
                    raise RuntimeError(f"{name} request {i} failed")
            t1, cpu1 = time.perf_counter(), cpu_seconds(pid)
            out[f"{name} cpu"] = (cpu1 - cpu0) / count * 1e6
            out[f"{name} round trip"] = (t1 - t0) / count * 1e6
    return out


def large_produce_costs(port: int, pid: int, topic: str, count: int, values: list[bytes],
                        batch_bytes: int = 1_000_000) -> dict[str, float]:
    """Broker CPU per MB of sequential Produce v3 requests each carrying one batch of about
    `batch_bytes` (librdkafka's at the load's batch.size), user and system time apart: what a
    large frame costs beyond the request itself (reading it, checking it, writing it)."""
    per_batch = max(1, batch_bytes // (len(values[0]) + 12))  # a record takes about 10 bytes more
    batch = record_batch([values[i % len(values)] for i in range(per_batch)])
    request = produce_request(topic, batch, 0)
    error_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(3):  # warm: the partition exists, caches and buffers filled
            _round_trip(sock, request)
        cpu0, t0 = cpu(pid), time.perf_counter()
        for _ in range(count):
            if _I16.unpack_from(_round_trip(sock, request), error_at)[0] != 0:
                raise RuntimeError(f"large produce request failed: error {_I16.unpack_from(_round_trip(sock, request), error_at)[0]}")
        t1, used = time.perf_counter(), cpu(pid) - cpu0
    mb = count * len(batch) / 1e6
    return {"cpu ms/MB": used.seconds * 1e3 / mb, "user ms/MB": used.user * 1e3 / mb if used.user is not None else None,
            "system ms/MB": used.system * 1e3 / mb if used.system is not None else None,
            "MB/s": mb / (t1 - t0)}
