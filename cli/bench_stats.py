"""What `samsa bench` measures: one sample per request (when it completed, records, bytes, its
latency), summed into throughput and latency percentiles, and cut into time buckets for the plot.

A request's latency counts once for each record it carried, so the percentiles are per record,
as Kafka's producer-perf-test reports them."""

from __future__ import annotations

import math
from typing import NamedTuple


class Sample(NamedTuple):
    at: float  # seconds since the run started, when the request completed
    records: int
    bytes: int
    latency: float  # seconds


class Summary(NamedTuple):
    records: int
    bytes: int
    seconds: float
    records_per_second: float
    mb_per_second: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


class Bucket(NamedTuple):
    """One interval of the run: where it ends, MB/s and records/s in it, latencies of its requests."""

    end: float
    mb_per_second: float
    records_per_second: float
    p50_ms: float | None
    p99_ms: float | None


MB = 1024 * 1024


def percentile(samples: list[Sample], fraction: float) -> float:
    """The latency (s) at `fraction` of the records, records weighted by their request's count
    (nearest rank); 0 without samples."""
    ordered = sorted(samples, key=lambda s: s.latency)
    total = sum(s.records for s in ordered)
    if not total:
        return 0.0
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for sample in ordered:
        seen += sample.records
        if seen >= rank:
            return sample.latency
    return ordered[-1].latency


class Stats:
    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def add(self, at: float, records: int, size: int, latency: float) -> None:
        self.samples.append(Sample(at, records, size, latency))

    @property
    def records(self) -> int:
        return sum(s.records for s in self.samples)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.samples)

    def summary(self, seconds: float) -> Summary:
        seconds = max(seconds, 1e-9)
        records, size = self.records, self.bytes
        p50, p95, p99 = (percentile(self.samples, q) * 1000 for q in (0.50, 0.95, 0.99))
        return Summary(records, size, seconds, records / seconds, size / MB / seconds, p50, p95, p99,
                       max((s.latency for s in self.samples), default=0.0) * 1000)

    def buckets(self, seconds: float, count: int = 50) -> list[Bucket]:
        """The run cut into `count` equal intervals (fewer for a short run: none shorter than 50 ms).
        A request's records and bytes are spread over the time it took, so a long request does not
        show as a spike; its latency counts in the interval where it completed (None in an
        interval where none did)."""
        count = max(1, min(count, int(seconds / 0.05)))
        width = max(seconds, 1e-9) / count
        records, size = [0.0] * count, [0.0] * count
        completed: list[list[Sample]] = [[] for _ in range(count)]
        for sample in self.samples:
            completed[min(count - 1, int(sample.at / width))].append(sample)
            start = max(0.0, sample.at - sample.latency)
            span = max(sample.at - start, 1e-9)
            last = min(count - 1, int(sample.at / width))
            for i in range(min(last, int(start / width)), last + 1):
                overlap = min(sample.at, (i + 1) * width) - max(start, i * width)
                share = max(overlap, 0.0) / span if sample.at > start else 1.0
                records[i] += sample.records * share
                size[i] += sample.bytes * share
        return [Bucket((i + 1) * width, size[i] / MB / width, records[i] / width,
                       percentile(part, 0.50) * 1000 if part else None, percentile(part, 0.99) * 1000 if part else None)
                for i, part in enumerate(completed)]


def summary_table(summary: Summary) -> str:
    """Two aligned lines: the column names and the run's numbers."""
    columns = [("RECORDS", str(summary.records)), ("MB", f"{summary.bytes / MB:.2f}"),
               ("SECONDS", f"{summary.seconds:.2f}"), ("RECORDS/S", f"{summary.records_per_second:.0f}"),
               ("MB/S", f"{summary.mb_per_second:.2f}"), ("P50-MS", f"{summary.p50_ms:.2f}"),
               ("P95-MS", f"{summary.p95_ms:.2f}"), ("P99-MS", f"{summary.p99_ms:.2f}"),
               ("MAX-MS", f"{summary.max_ms:.2f}")]
    widths = [max(len(name), len(value)) for name, value in columns]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in zip(*columns))


def progress_line(done: int, total: int, elapsed: float, size: int, bar_width: int = 30) -> str:
    """`[#####.....]  42%  42000/100000 records  12.3 MB/s` (the bar only for a terminal's line)."""
    fraction = min(1.0, done / total) if total else 1.0
    filled = int(fraction * bar_width)
    rate = size / MB / elapsed if elapsed > 0 else 0.0
    return (f"[{'#' * filled}{'.' * (bar_width - filled)}] {fraction * 100:3.0f}%  {done}/{total} records  "
            f"{rate:.1f} MB/s")
