"""Issue 17's crash loop: idempotent acks=all producers (librdkafka) write to two topics, one with
flush.messages=1 (every append fsynced before it is acknowledged) and one with the default flush
policy (nothing fsynced but on a roll or at flush.ms), while a broker is killed with kill -9 at
random moments and started again on the same log dir. After every restart the producers are let
finish what they had in flight (their retries reach the new process, whose producer state,
recovered from the log, answers a retried batch with its first offsets), then both topics are read
back whole: every acknowledged record is there exactly once, at its acknowledged offset and in the
order sent (compat-tests/history.py). With the default flush policy too: a process crash leaves
the page cache to the kernel, so what was written before the kill is still read after it.

Two forms:
- one broker, killed ten times in CI. SAMSA_CRASH_LOOP_KILLS raises it (bench/soak.py runs fifty),
  SAMSA_CRASH_LOOP_SEED repeats a run's kill moments, SAMSA_CRASH_LOOP_BUDGET_S bounds the time (no
  kill starts after it, past the first three), and SAMSA_CRASH_LOOP_REPORT names a JSON file for
  the figures: kills survived, records checked (each acknowledged record counts once per check),
  records lost, the broker's peak resident memory;
- three brokers (ZooKeeper mode, Samsa's controller), the topics with replication factor 3 and
  min.insync.replicas=2: at each random moment the leader of a random partition is killed (the
  controller too, now and then, when it is that broker), the controller elects another leader
  from the ISR (a controller elected once the killed broker registered again keeps it, as Kafka's
  does), the killed broker is started again and rejoins every ISR; a reader consumes
  throughout, so a record read and later truncated away (a phantom read) is found too. Five kills
  in CI; SAMSA_CLUSTER_CRASH_LOOP_KILLS, _SEED, _BUDGET_S and _REPORT as above (bench/soak.py's
  cluster-crash-loop scenario)."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable

import pytest
from compat_util import confluent_admin, create_topic, wait_for
from history import History
from history_clients import Reader, Restart, Writer, read_whole_log
from test_cluster_failover import SAMSA_IDS, Cluster

from samsa.wire import zk_data

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


class Settings:
    """A form's environment: SAMSA_<prefix>_KILLS, _BUDGET_S (no new kill starts after it, past the
    first MIN_KILLS), _SEED, _REPORT."""

    def __init__(self, prefix: str, kills: int, budget_s: float) -> None:
        env = lambda name, default: os.environ.get(f"SAMSA_{prefix}_{name}", default)  # noqa: E731
        self.kills = int(env("KILLS", kills))
        self.budget_s = float(env("BUDGET_S", budget_s))
        self.seed = int(env("SEED", time.time_ns() % 1_000_000))
        self.report = env("REPORT", None)


def crash_loop(settings: Settings, bootstrap: str, topics: dict[str, str], kill_and_restart: Callable[[random.Random,
               dict], None], with_readers: bool = False) -> None:
    """Write to `topics` (kind: name) while `kill_and_restart(rng, figures)` kills a broker at a
    random moment and has it back (adding to figures' peak memory); after each, every history
    checked against the topics read back whole."""
    rng = random.Random(settings.seed)
    histories = {kind: History() for kind in topics}

    def acked() -> int:
        return sum(h.counts()["acked"] for h in histories.values())

    writers = {kind: Writer(bootstrap, topic, histories[kind], PARTITIONS) for kind, topic in topics.items()}
    readers = {kind: Reader(bootstrap, topic, histories[kind], PARTITIONS)
               for kind, topic in topics.items()} if with_readers else {}
    figures = {"seed": settings.seed, "kills": 0, "records_checked": 0, "records_lost": 0,
               "peak_broker_memory_kb": 0, "restart_s": []}
    for thread in [*writers.values(), *readers.values()]:
        thread.start()
    try:
        started = time.monotonic()
        for kill in range(settings.kills):
            if kill >= MIN_KILLS and time.monotonic() - started > settings.budget_s:
                break
            acked_before = acked()
            wait_for(lambda before=acked_before: acked() > before, T,
                     what="a write acknowledged since the last restart")
            time.sleep(rng.uniform(0, 0.5))  # the fault schedule: a random moment of the traffic
            killed_at = time.monotonic()
            kill_and_restart(rng, figures)
            figures["restart_s"].append(round(time.monotonic() - killed_at, 2))
            figures["kills"] = kill + 1
            for writer in writers.values():
                writer.pause()
            for kind, topic in topics.items():
                anomalies = histories[kind].check(read_whole_log(bootstrap, topic, PARTITIONS))
                counts = histories[kind].counts()
                figures["records_checked"] += counts["acked"]
                figures["records_lost"] += len(anomalies.lost)
                assert not anomalies, (f"{kind} after kill {kill + 1} (seed {settings.seed}): {anomalies.summary()} "
                                       f"({counts})")
                assert counts["failed"] == 0, (kind, counts, histories[kind].failed[:5])
            for writer in writers.values():
                writer.resume()
    finally:
        for thread in [*writers.values(), *readers.values()]:
            thread.finish()
        if settings.report:
            with open(settings.report, "w") as out:
                json.dump(figures, out)
        print(f"crash loop: {figures}")


@pytest.mark.samsa_only("a Kafka restart takes 5-15 s: ten of them would outgrow CI's budget")
def test_kill9_at_random_moments_loses_and_duplicates_nothing(broker_factory, topic_name):
    broker = broker_factory(BROKER)
    topics = {kind: f"{topic_name}-{kind}" for kind in TOPIC_CONFIGS}
    for kind, topic in topics.items():
        create_topic(broker.bootstrap, topic, PARTITIONS, TOPIC_CONFIGS[kind])

    def kill_and_restart(rng: random.Random, figures: dict) -> None:
        figures["peak_broker_memory_kb"] = max(figures["peak_broker_memory_kb"], peak_memory_kb(broker.proc.pid))
        broker.kill()
        Restart(broker).done()

    crash_loop(Settings("CRASH_LOOP", 10, 60), broker.bootstrap, topics, kill_and_restart)


def test_leaders_killed_at_random_moments_in_a_cluster_lose_and_duplicate_nothing(kafka39_factory, topic_name):
    from confluent_kafka.admin import NewTopic

    cluster = Cluster(kafka39_factory, "samsa", overrides={b: BROKER for b in SAMSA_IDS})
    try:
        topics = {kind: f"{topic_name}-{kind}" for kind in TOPIC_CONFIGS}
        admin = confluent_admin(cluster.bootstrap)  # kept: the results' futures die with it
        assignment = [[SAMSA_IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)]
        created = admin.create_topics([NewTopic(topic, PARTITIONS, replica_assignment=assignment,
                                                config={"min.insync.replicas": "2", **TOPIC_CONFIGS[kind]})
                                       for kind, topic in topics.items()], operation_timeout=T)
        for future in created.values():
            future.result(timeout=T)
        for topic in topics.values():
            cluster.wait_full_isrs(topic, partitions=PARTITIONS)

        def kill_and_restart(rng: random.Random, figures: dict) -> None:
            topic, partition = rng.choice(sorted(topics.values())), rng.randrange(PARTITIONS)
            victim_id = cluster.state(topic, partition).leader
            victim = cluster.samsa[victim_id]
            figures["peak_broker_memory_kb"] = max(figures["peak_broker_memory_kb"], peak_memory_kb(victim.proc.pid))
            killed_session = cluster.session(zk_data.broker_path(victim_id))
            victim.kill()
            restart = Restart(victim)
            # The victim restarts from the moment of its kill and may register again as its old
            # session expires: a controller elected after that keeps it as the leader (Kafka's
            # onControllerFailover), or is the victim itself; either way registered anew.
            wait_for(lambda: cluster.failed_over(topic, killed_session, partition), T, interval=0.1,
                     what=f"a live leader of {topic}-{partition} and a live controller after broker {victim_id}'s kill")
            restart.done()
            for each in topics.values():
                cluster.wait_full_isrs(each, partitions=PARTITIONS)

        crash_loop(Settings("CLUSTER_CRASH_LOOP", 5, 30), cluster.bootstrap, topics, kill_and_restart,
                   with_readers=True)
    finally:
        cluster.close()
