"""bench/share.py without a broker or a JVM: its conversation with the client (a stand-in speaking
ConsumeBench's JSON lines), and its table from made-up figures. Nothing timed is asserted."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import share  # noqa: E402


def stand_in(done: str, closing: str = '{"event":"closed","seconds":0.01}') -> list[str]:
    """A client that answers every `consume` with "first", then `done` and `closing`."""
    code = textwrap.dedent(f"""
        import sys
        print('{{"event":"ready"}}', flush=True)
        for line in sys.stdin:
            if line.startswith("quit"):
                break
            print('{{"event":"first"}}', flush=True)
            sum(range(200_000))  # some CPU of the client's own between the two
            print({done!r}, flush=True)
            print({closing!r}, flush=True)
    """)
    return [sys.executable, "-c", code]


DONE = ('{"event":"done","records":1000,"bytes":1024000,"timed_records":900,"timed_bytes":900000,'
        '"seconds":0.5,"polls":3,"redelivered":2,"failed_acks":0,"error":null}')


def test_a_run_counts_what_arrived_after_the_first_poll_and_the_cpu_meanwhile():
    client = share.Client(stand_in(DONE))
    try:
        measure = client.consume("share", "127.0.0.1:1", os.getpid(), "t", "g", 1000)
    finally:
        client.close()
    assert (measure.records, measure.bytes, measure.seconds, measure.redelivered) == (900, 900_000, 0.5, 2)
    assert measure.records_per_s == pytest.approx(1800)
    # CPU clocks tick in 10 ms steps: a stand-in that does nothing between its lines may read 0.
    assert measure.broker_cpu >= 0 and measure.client_cpu >= 0
    assert measure.broker_cpu_ms_per_mb == pytest.approx(measure.broker_cpu * 1e3 / 0.9)


def test_lines_that_arrive_together_are_read_one_by_one():
    # "first", "done" and "closed" in one write: a select() on the pipe would wait for a line that
    # is already in the stream's buffer.
    code = ("import sys\nprint('{\"event\":\"ready\"}', flush=True)\nsys.stdin.readline()\n"
            f"sys.stdout.write('{{\"event\":\"first\"}}\\n' + {DONE!r} + '\\n{{\"event\":\"closed\",\"seconds\":0}}\\n')\n"
            "sys.stdout.flush()\nsys.stdin.readline()\n")
    client = share.Client([sys.executable, "-c", code])
    try:
        started = time.monotonic()
        assert client.consume("share", "127.0.0.1:1", os.getpid(), "t", "g", 1000).records == 900
        assert time.monotonic() - started < 60
    finally:
        client.close()


def test_fewer_records_than_asked_or_an_error_fail_the_run():
    client = share.Client(stand_in(DONE))
    try:
        with pytest.raises(RuntimeError, match="1000 of 2000 records"):
            client.consume("classic", "127.0.0.1:1", os.getpid(), "t", "g", 2000)
    finally:
        client.close()
    stalled = DONE.replace('"error":null', '"error":"stalled at 1000 of 2000 records"')
    client = share.Client(stand_in(stalled))
    try:
        with pytest.raises(RuntimeError, match="stalled at 1000"):
            client.consume("classic", "127.0.0.1:1", os.getpid(), "t", "g", 2000)
        # the conversation is still in step: the next run reads its own answers
        with pytest.raises(RuntimeError, match="stalled at 1000"):
            client.consume("classic", "127.0.0.1:1", os.getpid(), "t", "g", 1000)
    finally:
        client.close()


def test_a_failure_while_closing_fails_the_run_with_its_reason():
    client = share.Client(stand_in(DONE, '{"event":"failed","error":"TimeoutException: close"}'))
    try:
        with pytest.raises(RuntimeError, match="closing the consumer: TimeoutException"):
            client.consume("share", "127.0.0.1:1", os.getpid(), "t", "g", 1000)
    finally:
        client.close()


def test_a_client_that_exits_is_reported_with_its_stderr():
    code = "import sys; print('{\"event\":\"ready\"}', flush=True); sys.stdin.readline(); sys.stderr.write('boom')"
    client = share.Client([sys.executable, "-c", code])
    try:
        with pytest.raises(RuntimeError, match="exited with 0: boom"):
            client.consume("share", "127.0.0.1:1", os.getpid(), "t", "g", 1000)
    finally:
        client.close()


def test_the_table_shows_median_and_spread_and_the_others_ratio_to_the_first_system():
    figures: share.Figures = {}
    for value in (100, 300, 200):
        share.add(figures, "share group (records/s)", "samsa", value)
    share.add(figures, "share group (records/s)", "kafka", 400)
    share.add(figures, "classic group (records/s)", "samsa", None)
    share.add(figures, "classic group (records/s)", "kafka", 5.0)
    lines = share.render(figures, ["samsa", "kafka"]).splitlines()
    assert lines[0].split() == ["measure", "samsa", "kafka"]
    rows = {line.split("  ")[0]: [c.strip() for c in line.split("  ")[1:] if c.strip()] for line in lines[1:]}
    assert rows["share group (records/s)"] == ["200 (100-300)", "400 2.00x"]
    assert rows["classic group (records/s)"] == ["n/a", "5.00"]


def test_each_share_mode_is_set_against_the_classic_group_of_its_round():
    def measure(records_per_s: float, cpu: float) -> share.Measure:
        return share.Measure(int(records_per_s), 1_000_000, 1.0, cpu, 0.0)
    figures: share.Figures = {}
    share.record_against_classic(figures, "samsa", {"classic": measure(1000, 0.002), "share": measure(500, 0.006),
                                                    "share-explicit": None})
    label = share.MODE_LABELS["share"]
    assert figures[f"{label} / classic (records/s)"]["samsa"] == pytest.approx([0.5])
    assert figures[f"{label} / classic (broker CPU ms/MB)"]["samsa"] == pytest.approx([3.0])
    assert not any(share.MODE_LABELS["share-explicit"] in row for row in figures)
