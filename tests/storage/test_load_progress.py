"""Startup after an unclean shutdown loads every log: the broker says how far it got every few
seconds (done / total, elapsed, ETA), and how long the whole load took."""

from __future__ import annotations

import itertools
import logging
import re

from storage_helpers import make_batch, small_config

from samsa.storage.load_progress import LoadProgress
from samsa.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

PARTITIONS = 60


def test_an_unclean_start_of_many_partitions_logs_its_progress(tmp_path, clock, caplog):
    manager = LogManager([tmp_path], small_config(), clock)
    manager.startup()
    for partition in range(PARTITIONS):
        manager.create_log("many", partition).append_as_leader(make_batch([1000]))
    manager.shutdown()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()

    ticks = itertools.count()  # one second passes each time the progress looks at the clock
    manager = LogManager([tmp_path], small_config(), clock, progress_interval_s=10, monotonic=lambda: float(next(ticks)))
    with caplog.at_level(logging.INFO, logger="samsa.storage"):
        manager.startup()
    assert len(manager.opened_logs()) == PARTITIONS
    messages = [r.getMessage() for r in caplog.records]
    assert f"Attempting recovery for all logs in {tmp_path} since no clean shutdown file was found" in messages
    progress = [m for m in messages if m.startswith("Loading logs in")]
    assert progress[0] == f"Loading logs in {tmp_path}: 10/{PARTITIONS} completed, 10.0s elapsed, ETA 50.0s"
    assert progress[-1] == f"Loading logs in {tmp_path}: 50/{PARTITIONS} completed, 50.0s elapsed, ETA 10.0s"
    assert len(progress) == 5  # every 10 s, and none once all are done
    assert messages[-1] == f"Loaded {PARTITIONS} logs in 61000ms from {tmp_path}"
    assert sum(bool(re.match(r"Recovering unflushed segment 0\. 0/1 recovered for many-\d+\.$", m))
               for m in messages) == PARTITIONS
    manager.shutdown()


def test_a_clean_start_loads_nothing_and_says_so(tmp_path, clock, caplog):
    manager = LogManager([tmp_path], small_config(), clock)
    manager.startup()
    manager.create_log("few", 0)
    manager.shutdown()
    with caplog.at_level(logging.INFO, logger="samsa.storage"):
        manager = LogManager([tmp_path], small_config(), clock)
        manager.startup()
    assert [r.getMessage() for r in caplog.records] == [
        f"Skipping recovery of 1 logs from {tmp_path} since clean shutdown file was found"]
    manager.shutdown()


def test_a_quick_load_logs_no_progress(tmp_path, caplog):
    progress = LoadProgress(tmp_path, 3, interval_s=5, monotonic=itertools.repeat(0.0).__next__)
    with caplog.at_level(logging.INFO, logger="samsa.storage"):
        for _ in range(3):
            progress.completed()
        progress.finished()
    assert [r.getMessage() for r in caplog.records] == [f"Loaded 3 logs in 0ms from {tmp_path}"]
