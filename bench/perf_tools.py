"""Kafka's own load generators, kafka-producer-perf-test and kafka-consumer-perf-test (Kafka 4.4's
ProducerPerformance and ConsumerPerformance, from the jar cache `scripts/fetch-jars.sh` fills), as
a second load beside the confluent-kafka one: the Java client, its default batching (batch.size
16 KB, linger.ms 5), one tool run per measure.

Each tool runs as bin/kafka-*-perf-test.sh runs it (kafka-run-class's default heap and G1). The
figures are the tool's own (timed from its first record to its last, so the JVM's start is not
counted); the broker's CPU seconds are read from /proc around the whole tool run.
"""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import tempfile
import time

from systems import CHECKOUT, Unavailable, cpu_seconds

sys.path.insert(0, str(CHECKOUT / "compat-tests"))
from kafka_oracle import OracleUnavailable, class_path, java  # noqa: E402

# kafka-run-class.sh's defaults for a tool: KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS.
TOOL_JVM_OPTS = ["-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                 "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                 "-Djava.awt.headless=true"]
PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
# `20000 records sent, 41237.1 records/sec (3.93 MB/sec), ...`
PRODUCER_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def tool_command(main_class: str, *args: str) -> list[str]:
    try:
        return [java(), *TOOL_JVM_OPTS, "-cp", class_path("kafka4"), main_class, *args]
    except OracleUnavailable as e:
        raise Unavailable(str(e)) from None


# The producer tool reports progress every 5 s: silent this long, it is stuck (a broker that takes
# its connection and never answers a produce), and waiting out `timeout` would cost ten minutes.
PRODUCER_STALL_S = 60.0


def run_tool(pid: int, cmd: list[str], timeout: float, stall: float | None = None) -> tuple[str, float]:
    """The tool's stdout and the broker's CPU seconds while it ran; a failure raises, as does
    `stall` seconds without a line of output."""
    cpu0 = cpu_seconds(pid)
    deadline = time.monotonic() + timeout
    # stderr to a file: a pipe nobody reads while the tool runs could fill and stall it.
    with tempfile.TemporaryFile("w+") as errors, \
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True) as proc, \
            selectors.DefaultSelector() as selector:
        assert proc.stdout is not None
        selector.register(proc.stdout, selectors.EVENT_READ)
        lines: list[str] = []
        while True:
            left = deadline - time.monotonic()
            wait = left if stall is None else min(left, stall)
            if left <= 0 or not selector.select(wait):
                proc.kill()
                why = f"not done in {timeout:.0f} s" if wait == left else f"no output in {stall:.0f} s"
                raise RuntimeError(f"{why}: {''.join(lines).strip()[-300:]}")
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        proc.wait()
        errors.seek(0)
        stderr = errors.read()
    cpu = cpu_seconds(pid) - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {stderr.strip()[-300:]}")
    return "".join(lines), cpu


def figures(records: int, record_size: int, records_per_s: float, cpu: float) -> dict:
    mb = records * record_size / 1e6
    return {"records/s": records_per_s, "MB/s": records_per_s * record_size / 1e6,
            "broker CPU s/GB": cpu / (mb / 1e3) if mb else None}


def produce(bootstrap: str, pid: int, topic: str, records: int, record_size: int, acks: str,
            compression: str, timeout: float = 600.0) -> dict:
    """kafka-producer-perf-test, unthrottled: records/s, MB/s, broker CPU s per GB (= ms per MB)."""
    stdout, cpu = run_tool(pid, tool_command(
        PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--record-size", str(record_size), "--throughput", "-1",
        "--command-property", f"acks={acks}", "--command-property", f"compression.type={compression}"), timeout,
        stall=PRODUCER_STALL_S)
    found = PRODUCER_SUMMARY.findall(stdout)
    if not found or int(found[-1][0]) != records:
        raise RuntimeError(f"no summary of {records} records sent: {stdout.strip()[-300:]}")
    return figures(records, record_size, float(found[-1][1]), cpu)


def consume(bootstrap: str, pid: int, topic: str, records: int, record_size: int, timeout: float = 600.0) -> dict:
    """kafka-consumer-perf-test (a consumer group of its own) reading `records` from the start;
    the rate is its fetch.nMsg.sec, the time after the group's first assignment."""
    stdout, cpu = run_tool(pid, tool_command(
        CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--timeout", str(int(timeout * 1000))), timeout + 60)
    lines = [line for line in stdout.splitlines() if line.strip()]
    row = dict(zip((h.strip() for h in lines[0].split(",")), (v.strip() for v in lines[-1].split(","))))
    read = int(row["data.consumed.in.nMsg"])
    if read < records:
        raise RuntimeError(f"read {read} of {records} records")
    return figures(read, record_size, float(row["fetch.nMsg.sec"]), cpu)
