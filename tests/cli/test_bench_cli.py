"""samsa bench against a real broker: a small produce and consume load, the summary table, a valid
PNG plot; and the statistics and the PNG writer on their own."""

from __future__ import annotations

import io
import struct
import sys
import zlib

from samsa.cli.bench_stats import Sample, Stats, percentile, progress_line, summary_table
from samsa.cli.png_plot import BLUE, Canvas, Panel, Series, plot

COLUMNS = ["RECORDS", "MB", "SECONDS", "RECORDS/S", "MB/S", "P50-MS", "P95-MS", "P99-MS", "MAX-MS"]


def read_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the raw scanlines of an RGB PNG, every chunk's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert struct.unpack_from(">I", data, pos + 8 + length)[0] == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + length
    assert list(chunks)[-1] == b"IEND"
    width, height, depth, color_type = struct.unpack_from(">IIBB", chunks[b"IHDR"])
    assert (depth, color_type) == (8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == height * (1 + 3 * width)
    return width, height, raw


def summary_values(out: str) -> dict[str, float]:
    header, values = out.splitlines()[-2:]
    assert header.split() == COLUMNS
    return dict(zip(COLUMNS, map(float, values.split())))


def test_bench_produce_then_consume_with_plots(broker, samsa, tmp_path):
    produce_png, consume_png = tmp_path / "produce.png", tmp_path / "consume.png"
    code, out, err = samsa("bench", "produce", "bench-topic", "--records", "3000", "--record-size", "50",
                           "--batch-size", "5000", "--partitions", "3", "--compression", "lz4",
                           "--plot", str(produce_png), "-b", broker)
    assert code == 0, err
    produced = summary_values(out)
    assert produced["RECORDS"] == 3000 and produced["MB"] == round(3000 * 50 / 2**20, 2)
    assert 0 < produced["P50-MS"] <= produced["P95-MS"] <= produced["P99-MS"] <= produced["MAX-MS"]
    assert err == f"plot written to {produce_png}\n"  # not a terminal, and too short for a progress line
    width, height, _ = read_png(produce_png.read_bytes())
    assert (width, height) == (800, 550)

    code, out, _ = samsa("topics", "describe", "bench-topic", "-b", broker)
    assert "PartitionCount: 3" in out

    code, out, err = samsa("bench", "consume", "bench-topic", "--records", "10000", "--plot", str(consume_png),
                           "-b", broker)
    assert code == 0, err
    consumed = summary_values(out)
    assert consumed["RECORDS"] == 3000  # all the topic holds
    read_png(consume_png.read_bytes())


def test_bench_usage_and_broker_errors(broker, samsa, tmp_path):
    assert samsa("bench", "produce", "t", "--records", "-1", "-b", broker)[0] == 2
    assert samsa("bench", "fly", "t", "-b", broker)[0] == 2
    code, _, err = samsa("bench", "consume", "no-such-topic", "-b", broker)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, _, err = samsa("bench", "produce", "bench-bad", "--records", "10", "--plot", str(tmp_path / "no" / "x.png"),
                         "-b", broker)
    assert code == 2 and "cannot write" in err


def test_percentiles_count_each_record():
    samples = [Sample(0.1, 98, 0, 0.001), Sample(0.2, 1, 0, 0.050), Sample(0.3, 1, 0, 0.100)]
    assert percentile(samples, 0.50) == 0.001
    assert percentile(samples, 0.98) == 0.001
    assert percentile(samples, 0.99) == 0.050
    assert percentile(samples, 1.0) == 0.100
    assert percentile([], 0.5) == 0.0


def test_summary_and_buckets():
    stats = Stats()
    stats.add(0.25, 100, 1 << 20, 0.002)
    stats.add(0.75, 100, 1 << 20, 0.004)
    summary = stats.summary(1.0)
    assert (summary.records, summary.mb_per_second, summary.records_per_second) == (200, 2.0, 200.0)
    assert (summary.p50_ms, summary.p99_ms, summary.max_ms) == (2.0, 4.0, 4.0)
    buckets = stats.buckets(1.0, count=2)
    assert [(b.end, b.mb_per_second, b.p99_ms) for b in buckets] == [(0.5, 2.0, 2.0), (1.0, 2.0, 4.0)]
    lines = summary_table(summary).splitlines()
    assert lines[0].split() == COLUMNS
    assert lines[1].split() == ["200", "2.00", "1.00", "200", "2.00", "2.00", "4.00", "4.00", "4.00"]
    assert progress_line(50, 200, 1.0, 1 << 20, bar_width=4) == "[#...]  25%  50/200 records  1.0 MB/s"


def test_png_pixels():
    canvas = Canvas(4, 3)
    canvas.line(0, 0, 3, 2, BLUE)
    _, _, raw = read_png(canvas.png())
    rows = [raw[1 + r * 13:(r + 1) * 13] for r in range(3)]
    assert rows[0][:3] == bytes(BLUE) and rows[2][9:12] == bytes(BLUE)
    assert rows[0][9:12] == b"\xff\xff\xff"
    width, height, _ = read_png(plot([Panel("empty", [Series("none", BLUE, [])])], "seconds"))
    assert (width, height) == (800, 290)


def test_a_terminal_gets_the_progress_bar(broker, samsa, monkeypatch):
    terminal = io.StringIO()
    terminal.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", terminal)
    assert samsa("bench", "produce", "bench-tty", "--records", "500", "-b", broker)[0] == 0
    last = terminal.getvalue().rpartition("\r")[2]
    assert last.startswith(f"[{'#' * 30}] 100%  500/500 records  ") and last.endswith(" MB/s\n")
