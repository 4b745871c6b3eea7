"""The load, through librdkafka (confluent-kafka): produce and consume throughput, end-to-end
latency at a fixed rate, idle connections. Each function measures one run against one broker.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from systems import cpu, cpu_seconds

WORDS = ("kafka samsa broker partition segment offset record batch fetch produce index leader epoch "
         "replica watermark consumer group coordinator commit topic stream append sendfile page cache").split()


def payloads(size: int, count: int = 64, seed: int = 7) -> list[bytes]:
    """Records of `size` bytes of text, as compressible as typical log lines (lz4 about 2-3x)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) + str(rng.randrange(10_000)) for _ in range(size // 4 + 1))
        out.append(text.encode()[:size])
    return out


def half_random_payloads(size: int, count: int = 64, seed: int = 7) -> list[bytes]:
    """Records of `size` bytes, the first half text and the second random (issue 16's load): lz4
    compresses them less than 2x."""
    rng = random.Random(seed)
    return [text + rng.randbytes(size - len(text)) for text in payloads(size // 2, count, seed)]


# How the client hands records to librdkafka: "batch" is produce_batch, 4,096 records a call (a
# tenth of produce()'s Python cost per record, so the client sharing the two cores leaves more of
# the machine to the broker), with text records; "record" is produce() per record with records
# half random, as a new user's program would (issue 16).
SHAPES = ("batch", "record")


def producer_config(bootstrap: str, acks: str = "1", compression: str = "none", linger_ms: int = 5) -> dict:
    return {"bootstrap.servers": bootstrap, "log_level": 3, "acks": acks, "compression.type": compression,
            "batch.size": 1_000_000, "linger.ms": linger_ms, "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
            "delivery.report.only.error": True, "request.timeout.ms": 60_000}


BATCH = 4096  # records per produce_batch call


@dataclass
class Run:
    seconds: float
    bytes: int
    records: int
    cpu: float  # broker CPU seconds during the run (summed over the brokers of a cluster), to the ns
    errors: int = 0
    cpu_by_pid: dict[int, float] = field(default_factory=dict)  # each broker's share of `cpu`
    requests: int | None = None  # requests the client sent to the brokers (librdkafka's statistics)
    cpu_system: float | None = None  # the system time's part of `cpu` (systems.Cpu.system)

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes / self.seconds / 1e6 if self.bytes else None

    @property
    def cpu_per_gb(self) -> float | None:
        return self.cpu / (self.bytes / 1e9) if self.bytes else None

    @property
    def system_cpu_per_gb(self) -> float | None:
        return self.cpu_system / (self.bytes / 1e9) if self.bytes and self.cpu_system is not None else None


def _counting_failures(config: dict, errors: list) -> dict:
    """`config` with a delivery callback that adds each record's failure to `errors`."""
    config["on_delivery"] = lambda err, _msg: errors.append(err) if err else None
    return config


def warm_up(producer: Producer, topic: str, partitions: int) -> None:
    """Connections and metadata settled, every partition's leader known, before timing."""
    for p in range(partitions if partitions <= 64 else 1):
        producer.produce(topic, b"warm-up", partition=p)
    if producer.flush(60) != 0:
        raise KafkaException("warm-up produce was not acknowledged")


def produce(bootstrap: str, pid: int | Sequence[int], topic: str, partitions: int, record_size: int,
            total_bytes: int, acks: str = "1", compression: str = "none", count_requests: bool = False,
            shape: str = "batch") -> Run:
    """Produce `total_bytes` of records; the broker CPU is that of `pid`, or the sum over several
    brokers' pids (a cluster's), each one's share kept in `cpu_by_pid`. `count_requests`: also
    count the requests sent during the run, from librdkafka's statistics every 100 ms. `shape`:
    one of SHAPES."""
    pids = [pid] if isinstance(pid, int) else list(pid)
    errors = []
    config = _counting_failures(producer_config(bootstrap, acks, compression), errors)
    sent = []  # requests sent so far, at each statistics callback
    if count_requests:
        config["statistics.interval.ms"] = 100
        config["stats_cb"] = lambda stats: sent.append(sum(b["tx"] for b in json.loads(stats)["brokers"].values()))
    producer = Producer(config)
    warm_up(producer, topic, partitions)
    values = _values(record_size, shape)
    count = total_bytes // record_size // BATCH * BATCH
    if count_requests:
        producer.poll(0.2)  # the statistics after the warm-up
    before = sent[-1] if sent else 0
    cpu0, t0 = {p: cpu(p) for p in pids}, time.perf_counter()
    _send(producer, topic, values, count, shape)
    left = producer.flush(300)
    t1, cpu1 = time.perf_counter(), {p: cpu(p) for p in pids}
    used = [cpu1[p] - cpu0[p] for p in pids]
    by_pid = {p: u.seconds for p, u in zip(pids, used)}
    systems = [u.system for u in used]
    if count_requests:
        producer.poll(0.2)  # the statistics after the last acknowledgement
    requests = sent[-1] - before if sent else None
    return Run(t1 - t0, count * record_size, count, sum(by_pid.values()), len(errors) + left, by_pid, requests,
               None if None in systems else sum(systems))


def _values(record_size: int, shape: str) -> list[bytes]:
    return payloads(record_size) if shape == "batch" else half_random_payloads(record_size)


def _send(producer: Producer, topic: str, values: list[bytes], count: int, shape: str) -> None:
    """Hand `count` of `values` to librdkafka in the load's `shape` (without waiting for them)."""
    if shape == "batch":
        chunk = [{"value": v} for v in values] * (BATCH // 64)
        for _ in range(count // BATCH):
            queued = producer.produce_batch(topic, chunk)
            while queued < BATCH:  # the local queue is full: let it drain
                producer.poll(0.01)
                queued += producer.produce_batch(topic, chunk[queued:])
    else:
        produce_one = producer.produce  # no key, no partition: librdkafka's partitioner, as for produce_batch
        for i in range(count):
            while True:
                try:
                    produce_one(topic, values[i & 63])
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.005)


def produce_together(bootstrap: str, pid: int, topic: str, partitions: int, record_size: int, total_bytes: int,
                     acks: str = "1", compression: str = "none", shape: str = "batch", producers: int = 2) -> Run:
    """`total_bytes` of records from `producers` client processes at once, each its share. One
    Python producer holds one core, and at 100 B it sets every broker's pace on a two-core machine
    (bench/README.md, "Two producers, and the 100 B cases"); two hold both, so the brokers' CPU
    decides their MB/s. Each process connects and warms up first; the run is timed from their
    common start to the last acknowledgement."""
    share = total_bytes // producers // record_size // BATCH * BATCH * record_size
    command = [sys.executable, __file__, "--producer", bootstrap, topic, str(partitions), str(record_size),
               str(share), acks, compression, shape]
    processes = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for _ in range(producers)]
    try:
        for process in processes:
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a producer process did not start (exit {process.wait()})")
        cpu0, t0 = cpu(pid), time.perf_counter()
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        results = [json.loads(process.stdout.readline() or "null") for process in processes]
        t1, used = time.perf_counter(), cpu(pid) - cpu0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    if None in results:
        raise RuntimeError("a producer process ended without its result")
    records = sum(r["records"] for r in results)
    return Run(t1 - t0, records * record_size, records, used.seconds, sum(r["errors"] for r in results),
               {pid: used.seconds}, None, used.system)


def _one_of_several_producers(bootstrap: str, topic: str, partitions: int, record_size: int, share: int,
                              acks: str, compression: str, shape: str) -> None:
    """produce_together's child: warm up, say "ready", wait for "go", produce `share` bytes, and
    print what was sent and how much was not acknowledged."""
    errors = []
    config = _counting_failures(producer_config(bootstrap, acks, compression), errors)
    producer = Producer(config)
    warm_up(producer, topic, partitions)
    values = _values(record_size, shape)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    count = share // record_size
    _send(producer, topic, values, count, shape)
    left = producer.flush(300)
    print(json.dumps({"records": count, "errors": len(errors) + left}), flush=True)


def consume(bootstrap: str, pid: int, topic: str, expected: int, record_size: int, timeout: float = 300.0) -> Run:
    """Read `expected` records from offset 0 of partition 0 with kcat (C: the Python consumer
    tops out near 60 MB/s here, far below the brokers)."""
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "0", "-c", str(expected),
                          "-q", "-f", "%o\n", "-X", "log_level=3"], capture_output=True, timeout=timeout)
    t1, cpu1 = time.perf_counter(), cpu_seconds(pid)
    got = out.stdout.count(b"\n")
    if got < expected:
        raise RuntimeError(f"kcat read {got} of {expected} records: {out.stderr.decode()[-200:].strip()}")
    return Run(t1 - t0, got * record_size, got, cpu1 - cpu0)


def drop_page_cache(files: list[Path]) -> None:
    """Write back and evict the files' pages (POSIX_FADV_DONTNEED drops only clean pages)."""
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, record_size: int = 1024,
               linger_ms: int = 5, acks: str = "1", partitions: int = 1) -> dict:
    """Latency from produce() to the consumer's receipt at a fixed rate: p50, p99, p99.9 in ms, and
    how many records arrived of those sent. The records go round `partitions` partitions (0..n-1),
    all of which the consumer reads."""
    latencies: list[float] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "log_level": 3, "group.id": "bench-unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    stop = threading.Event()
    stamp = struct.Struct(">q")

    def receive() -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)  # consume(n) would wait for n records or its timeout
            if message is not None and message.error() is None:
                value = message.value()
                if len(value) >= 9 and value[:1] == b"\x01":
                    latencies.append((time.perf_counter_ns() - stamp.unpack_from(value, 1)[0]) / 1e6)

    producer = Producer(producer_config(bootstrap, acks, "none", linger_ms=linger_ms))
    warm_up(producer, topic, partitions)
    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    time.sleep(0.5)  # the consumer has its first fetch parked
    pad = b"x" * (record_size - 9)
    total = int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, b"\x01" + stamp.pack(time.perf_counter_ns()) + pad, partition=i % partitions)
        producer.poll(0)
    producer.flush(30)
    deadline = time.perf_counter() + 5
    while len(latencies) < total and time.perf_counter() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join()
    consumer.close()
    values = sorted(latencies)
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99), "p999": percentile(values, 0.999),
            "received": len(values), "sent": total}


def open_idle_connections(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each completed one ApiVersions exchange, then stay idle."""
    sockets = []
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    request = struct.pack(">i", len(body)) + body
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(request)
        sockets.append(s)
    for s in sockets:
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        s.recv(size, socket.MSG_WAITALL)
    return sockets


if __name__ == "__main__" and sys.argv[1:2] == ["--producer"]:
    bootstrap, topic, partitions, record_size, share, acks, compression, shape = sys.argv[2:]
    _one_of_several_producers(bootstrap, topic, int(partitions), int(record_size), int(share), acks, compression, shape)
