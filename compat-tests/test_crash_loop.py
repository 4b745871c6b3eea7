"""Issue 17's crash loop: idempotent acks=all producers (librdkafka) write to two topics, one with
flush.messages=1 (every append fsynced before it is acknowledged) and one with the default flush
policy (nothing fsynced but on a roll or at flush.ms), while the broker is killed with kill -9 at
random moments and started again on the same log dir. After every restart the producers are let
finish what they had in flight (their retries reach the new process, whose producer state,
recovered from the log, answers a retried batch with its first offsets), then both topics are read
back whole: every acknowledged record is there exactly once, at its acknowledged offset and in the
order sent (compat-tests/history.py). With the default flush policy too: a process crash leaves
the page cache to the kernel, so what was written before the kill is still read after it.

Ten kills in CI; SAMSA_CRASH_LOOP_KILLS raises it (bench/soak.py runs fifty), SAMSA_CRASH_LOOP_SEED
repeats a run's kill moments, SAMSA_CRASH_LOOP_BUDGET_S bounds the time (no kill starts after it,
past the first three), and SAMSA_CRASH_LOOP_REPORT names a JSON file for the figures: kills
survived, records checked (each acknowledged record counts once per check), records lost, the
broker's peak resident memory."""

from __future__ import annotations

import json
import os
import random
import time

import pytest
from compat_util import create_topic, wait_for
from history import History
from history_clients import Restart, Writer, read_whole_log

KILLS = int(os.environ.get("SAMSA_CRASH_LOOP_KILLS", "10"))
# No new kill starts after this many seconds (a restart costs seconds on a loaded machine); at
# least MIN_KILLS are always made.
BUDGET_S = float(os.environ.get("SAMSA_CRASH_LOOP_BUDGET_S", "60"))
MIN_KILLS = 3
PARTITIONS = 2
TOPIC_CONFIGS = {"flushed": {"flush.messages": "1"}, "paged": {}}
# Small segments: the loop crosses rolls (and the snapshot written at each) many times.
BROKER = {"log.segment.bytes": 64 * 1024, "num.partitions": 1}
T = 30


def peak_memory_kb(pid: int) -> int:
    """The process's peak resident set (VmHWM), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


@pytest.mark.samsa_only("a Kafka restart takes 5-15 s: ten of them would outgrow CI's budget")
def test_kill9_at_random_moments_loses_and_duplicates_nothing(broker_factory, topic_name):
    seed = int(os.environ.get("SAMSA_CRASH_LOOP_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    broker = broker_factory(BROKER)
    topics = {kind: f"{topic_name}-{kind}" for kind in TOPIC_CONFIGS}
    for kind, topic in topics.items():
        create_topic(broker.bootstrap, topic, PARTITIONS, TOPIC_CONFIGS[kind])
    histories = {kind: History() for kind in topics}

    def acked() -> int:
        return sum(h.counts()["acked"] for h in histories.values())

    writers = {kind: Writer(broker.bootstrap, topic, histories[kind], PARTITIONS) for kind, topic in topics.items()}
    figures = {"seed": seed, "kills": 0, "records_checked": 0, "records_lost": 0, "peak_broker_memory_kb": 0,
               "restart_s": []}
    for writer in writers.values():
        writer.start()
    try:
        started = time.monotonic()
        for kill in range(KILLS):
            if kill >= MIN_KILLS and time.monotonic() - started > BUDGET_S:
                break
            acked_before = acked()
            wait_for(lambda before=acked_before: acked() > before, T,
                     what="a write acknowledged since the last restart")
            time.sleep(rng.uniform(0, 0.5))  # the fault schedule: a random moment of the traffic
            figures["peak_broker_memory_kb"] = max(figures["peak_broker_memory_kb"], peak_memory_kb(broker.proc.pid))
            broker.kill()
            killed_at = time.monotonic()
            Restart(broker).done()
            figures["restart_s"].append(round(time.monotonic() - killed_at, 2))
            figures["kills"] = kill + 1
            for writer in writers.values():
                writer.pause()
            for kind, topic in topics.items():
                anomalies = histories[kind].check(read_whole_log(broker.bootstrap, topic, PARTITIONS))
                counts = histories[kind].counts()
                figures["records_checked"] += counts["acked"]
                figures["records_lost"] += len(anomalies.lost)
                assert not anomalies, f"{kind} after kill {kill + 1} (seed {seed}): {anomalies.summary()} ({counts})"
                assert counts["failed"] == 0, (kind, counts, histories[kind].failed[:5])
            for writer in writers.values():
                writer.resume()
    finally:
        for writer in writers.values():
            writer.finish()
        report = os.environ.get("SAMSA_CRASH_LOOP_REPORT")
        if report:
            with open(report, "w") as out:
                json.dump(figures, out)
        print(f"crash loop: {figures}")
