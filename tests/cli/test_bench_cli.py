"""samsa bench against a real broker: a small produce and consume load, the summary table, a PNG
plot that decodes; the statistics and the plot (matplotlib) on their own."""

from __future__ import annotations

import io
import sys

from PIL import Image

from samsa.cli.bench_plot import BLUE, INSTALL_HINT, ORANGE, Panel, Series, figure, plot
from samsa.cli.bench_stats import Sample, Stats, percentile, progress_line, summary_table

COLUMNS = ["RECORDS", "MB", "SECONDS", "RECORDS/S", "MB/S", "P50-MS", "P95-MS", "P99-MS", "MAX-MS"]


def read_png(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG that decodes (Pillow, matplotlib's own dependency, reads every pixel)."""
    image = Image.open(io.BytesIO(data))
    image.load()
    assert image.format == "PNG"
    return image.size


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
    assert read_png(produce_png.read_bytes()) == (800, 550)

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


def test_plot_sizes_and_a_time_axis_without_repeated_labels():
    # 50 buckets of a 0.3 s run: the old pixel-font axis printed 0.1 and 0.2 twice each
    throughput = [(i * 0.006, i % 5) for i in range(1, 51)]
    fig = figure([Panel("throughput", [Series("MB/s", BLUE, throughput)]),
                  Panel("latency", [Series("p50", ORANGE, [(0.3, 2.0)])])], "seconds")
    fig.canvas.draw()
    labels = [label.get_text() for label in fig.axes[-1].get_xticklabels()]
    assert len(labels) >= 4 and all(labels) and len(set(labels)) == len(labels)
    assert fig.axes[-1].get_xlabel() == "seconds"
    assert read_png(plot([Panel("one", [Series("MB/s", BLUE, throughput)])], "seconds")) == (800, 290)
    assert read_png(plot([Panel("empty", [Series("none", BLUE, [])])], "seconds", width=640)) == (640, 290)


def test_plot_without_matplotlib_says_how_to_install_it(broker, samsa, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    code, out, err = samsa("bench", "produce", "bench-no-plot", "--records", "10", "--plot", str(tmp_path / "x.png"),
                           "-b", broker)
    assert (code, out, err) == (2, "", f"samsa bench: {INSTALL_HINT}\n")
    assert not (tmp_path / "x.png").exists()
    code, out, _ = samsa("topics", "list", "-b", broker)
    assert "bench-no-plot" not in out  # refused before the load


def test_a_terminal_gets_the_progress_bar(broker, samsa, monkeypatch):
    terminal = io.StringIO()
    terminal.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", terminal)
    assert samsa("bench", "produce", "bench-tty", "--records", "500", "-b", broker)[0] == 0
    last = terminal.getvalue().rpartition("\r")[2]
    assert last.startswith(f"[{'#' * 30}] 100%  500/500 records  ") and last.endswith(" MB/s\n")
