"""bench/replicated.py's table, from made-up runs (no broker started, nothing timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import load  # noqa: E402
import replicated  # noqa: E402


def test_a_run_is_split_by_role_leader_first_then_followers_by_broker_id():
    # 10 MB in 2 s; brokers 1, 2, 3 with pids 101, 102, 103; broker 2 leads.
    run = load.Run(2.0, 10_000_000, 10_000, 0.5, cpu_by_pid={101: 0.1, 102: 0.3, 103: 0.1}, requests=100)
    result = replicated.result_of(run, {1: 101, 2: 102, 3: 103}, leader=2)
    assert result.mb_per_s == pytest.approx(5.0)
    assert result.cpu_ms_per_mb == pytest.approx(50.0)
    assert result.kb_per_request == pytest.approx(100.0)
    assert result.cpu_ms_per_mb_by_broker == pytest.approx({"leader": 30.0, "follower 1": 10.0, "follower 2": 10.0})
    assert list(result.cpu_ms_per_mb_by_broker) == ["leader", "follower 1", "follower 2"]


def test_a_run_over_several_partitions_is_split_by_broker_id():
    # Every broker leads some of the partitions: no roles, only ids.
    run = load.Run(2.0, 10_000_000, 10_000, 0.5, cpu_by_pid={101: 0.1, 102: 0.3, 103: 0.1})
    result = replicated.result_of(run, {3: 103, 1: 101, 2: 102}, leader=None)
    assert result.cpu_ms_per_mb_by_broker == pytest.approx({"broker 1": 10.0, "broker 2": 30.0, "broker 3": 10.0})
    assert list(result.cpu_ms_per_mb_by_broker) == ["broker 1", "broker 2", "broker 3"]


def test_a_single_broker_is_its_own_leader():
    run = load.Run(1.0, 1_000_000, 1_000, 0.02, cpu_by_pid={7: 0.02})
    result = replicated.result_of(run, {0: 7}, leader=0)
    assert result.cpu_ms_per_mb_by_broker == pytest.approx({"leader": 20.0})
    assert result.kb_per_request is None  # requests not counted


def test_the_table_shows_medians_and_ratios_to_the_first_cluster_and_n_a_for_what_is_missing():
    def result(mb_per_s, cpu, leader):
        return replicated.Result(mb_per_s, cpu, {"leader": leader} if leader is not None else {})
    results = {"produce 1024 B": {"a": [result(10, 40, 20), result(30, 60, 30), result(20, 50, 25)],
                                  "b": [result(40, 25, 25)]}}
    table = replicated.render(results, ["a", "b", "c"]).splitlines()
    assert table[0].split() == ["case", "a", "b", "c"]
    rows = {line.split("  ")[0]: line.split("  ")[1:] for line in table[1:]}
    assert [c.strip() for c in rows["produce 1024 B (MB/s)"] if c.strip()] == ["20.0", "40.0 (2.00x)", "n/a"]
    assert [c.strip() for c in rows["produce 1024 B (broker CPU ms/MB, all brokers)"] if c.strip()] == \
        ["50.0", "25.0 (0.50x)", "n/a"]
    assert [c.strip() for c in rows["produce 1024 B (broker CPU ms/MB, leader)"] if c.strip()] == \
        ["25.0", "25.0 (1.00x)", "n/a"]
    assert [c.strip() for c in rows["produce 1024 B (KB per produce request)"] if c.strip()] == ["n/a"] * 3


def test_the_latency_table_shows_medians_per_cluster_and_n_a_for_what_is_missing():
    latencies = {"e2e 1 part": {"a": [replicated.Latency(5.0, 9.0, 3.0), replicated.Latency(7.0, 11.0, 4.0),
                                      replicated.Latency(6.0, None, 5.0)],
                                "b": [replicated.Latency(None, None, 2.0)]}}
    table = replicated.render_latencies(latencies, ["a", "b", "c"]).splitlines()
    assert table[0].split() == ["case", "a", "b", "c"]
    rows = {line.split("  ")[0]: [c.strip() for c in line.split("  ")[1:] if c.strip()] for line in table[1:]}
    assert rows["e2e 1 part (p50 ms)"] == ["6.0", "n/a", "n/a"]
    assert rows["e2e 1 part (p99 ms)"] == ["10.0", "n/a", "n/a"]
    assert rows["e2e 1 part (broker CPU s)"] == ["4.0", "2.0", "n/a"]
