"""Issue 17's mixed load with faults: three Samsa brokers (ZooKeeper mode, Samsa's controller;
every topic with replication factor 3 and min.insync.replicas=2) serve all at once
- two idempotent acks=all writers (librdkafka) on the partitions of one topic, and a reader of it:
  every acknowledged record is in the final log exactly once, at its acknowledged offset, in the
  order sent, and nothing read vanished (compat-tests/history.py);
- an acks=1 writer on another topic: throughput only (acks=1 may lose what a dead leader took);
- a consumer group on the checked topic whose members (processes, group_member.py) join, leave
  and are killed at random moments, committing after every batch: the committed offsets the
  coordinator answers never go backwards, and the group consumes every record at least once;
- a transactional consume-transform-produce from the checked topic to a third one
  (transactional_transform.py): a read_committed reader of its output sees each input exactly
  once, in order;
while faults strike at random moments from a seeded RNG (the seed is printed): kill -9 of a
broker (the controller, a partition's leader, or any) and its restart; SIGSTOP of a broker for a
while (past replica.lag.time.max.ms and the ZooKeeper session timeout, sometimes) and SIGCONT; a
rolling controlled shutdown (SIGTERM, restart, one broker after the other). Between two faults
the cluster heals: every replica back in every ISR.

In CI one fault of each kind (in an order the seed picks). Its long form (bench/soak.py's
mixed-load scenario) goes on for SAMSA_MIXED_LOAD_BUDGET_S seconds (no fault starts after it), at
most SAMSA_MIXED_LOAD_KILLS faults; SAMSA_MIXED_LOAD_SEED repeats a run's schedule (the faults'
and the group's), SAMSA_MIXED_LOAD_REPORT names a JSON file for the figures: faults survived by
kind, records checked, lost, duplicated, transactions committed and aborted, group rebalances,
each broker's peak resident memory."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections import Counter

from compat_util import confluent_admin, wait_for
from group_processes import CommittedOffsetsWatch, GroupRun, MemberExited, high_watermarks
from history import Anomalies, History
from history_clients import Reader, Restart, Writer, read_whole_log
from rebalance_journal import duplicates
from test_cluster_failover import SAMSA_IDS, SESSION_TIMEOUT_MS, Cluster
from test_crash_loop import Settings, peak_memory_kb
from transactional_transform import Transform, read_committed

from samsa.wire import zk_data

T = 30
HEAL_S = 90  # every replica back in every ISR after a fault, on a busy machine
PARTITIONS = 4
LAG_MS = 2000
BROKER = {
    "min.insync.replicas": 2, "default.replication.factor": 3, "replica.lag.time.max.ms": LAG_MS,
    "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 2,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 2, "group.initial.rebalance.delay.ms": 0,
    "log.segment.bytes": 1024 * 1024,
}
INTERNAL_TOPICS = {"__consumer_offsets": 2, "__transaction_state": 2}
WRITE_RATE = 50  # values a second, each checked writer
BULK_RATE = 150  # the acks=1 writer's
FAULT_KINDS = ("kill", "pause", "rolling")
GROUP_ACTIONS = ("join", "join", "leave", "kill")  # a round of them keeps the number of members
MAX_MEMBERS = 3


def test_mixed_load_with_faults_loses_and_duplicates_nothing(kafka39_factory, topic_name, tmp_path):
    settings = Settings("MIXED_LOAD", len(FAULT_KINDS), 0)
    cluster = Cluster(kafka39_factory, "samsa", overrides={b: BROKER for b in SAMSA_IDS})
    try:
        MixedLoad(cluster, settings, topic_name, tmp_path).run()
    finally:
        cluster.close()


class MixedLoad:
    def __init__(self, cluster: Cluster, settings: Settings, name: str, tmp_path) -> None:
        self.cluster, self.settings = cluster, settings
        self.checked, self.bulk, self.transformed = (f"{name}-{kind}" for kind in ("checked", "bulk", "transformed"))
        self.bootstrap = cluster.bootstrap
        self.tmp_path = tmp_path
        self.figures: dict = {
            "seed": settings.seed, "faults": 0, "faults_by_kind": Counter(), "kill_targets": Counter(),
            "pauses_past_lag_time": 0, "pauses_past_session_timeout": 0, "records_checked": 0, "records_lost": 0,
            "duplicates": 0, "reordered": 0, "phantom_reads": 0, "write_failures": 0, "bulk_records": 0,
            "bulk_records_per_s": 0, "bulk_failures": 0, "transactions_committed": 0, "transactions_aborted": 0,
            "transactional_producers": 0, "transaction_calls_stuck": 0, "group_members": Counter(), "group_rebalances": 0,
            "group_consumed_again": 0, "committed_offset_samples": 0, "committed_offsets_backwards": 0,
            "peak_broker_memory_kb": 0, "peak_memory_kb_by_broker": {}, "load_s": 0,
            "fault_s": []}
        self.stopping = threading.Event()
        self.churned = threading.Event()  # the group's churn is over
        self.group_stopped = threading.Event()
        self.errors: list[BaseException] = []  # from the background threads

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> None:
        print(f"mixed load: seed {self.settings.seed}")
        self.create_topics()
        self.histories = {"a": History(), "b": History(), "reads": History()}
        self.writers = [Writer(self.bootstrap, self.checked, self.histories[w], PARTITIONS, prefix=w.encode(),
                               rate=WRITE_RATE) for w in ("a", "b")]
        self.reader = Reader(self.bootstrap, self.checked, self.histories["reads"], PARTITIONS)
        self.bulk_history = History()
        self.bulk_writer = Writer(self.bootstrap, self.bulk, self.bulk_history, PARTITIONS, padding=100,
                                  rate=BULK_RATE, **{"acks": "1", "enable.idempotence": False, "linger.ms": 20})
        self.group = GroupRun(self.tmp_path, self.bootstrap, self.checked, "mixed", PARTITIONS,
                              client="confluent-kafka", assignor="range", session_timeout_ms=6000,
                              heartbeat_interval_ms=500)
        self.committed = CommittedOffsetsWatch(self.bootstrap, self.checked, "mixed", PARTITIONS)
        self.transform = Transform(self.bootstrap, self.checked, self.transformed, "mixed-transform",
                                   "mixed-transform-txn")
        threads = [threading.Thread(target=self.guarded, args=(target,), name=target.__name__, daemon=True)
                   for target in (self.churn_group, self.run_transform, self.watch)]
        for thread in [*self.writers, self.reader, self.bulk_writer]:
            thread.start()
        try:
            for name in ("m1", "m2"):
                self.start_member(name)
            for thread in threads:
                thread.start()
            started = time.monotonic()
            wait_for(lambda: self.transform.committed > 0 and self.acked() > 0, T * 2,
                     what="the first transaction and the first acknowledged writes")
            try:
                self.inflict_faults()
            finally:
                self.figures["load_s"] = round(time.monotonic() - started)
            self.stopping.set()
            self.raise_errors()
            self.finish_and_check(started, threads)
        finally:
            self.stopping.set()
            self.group.kill_all()
            self.group_stopped.set()
            for client in (self.transform, self.committed):
                client.close()
            for name in ("faults_by_kind", "kill_targets", "group_members"):
                self.figures[name] = dict(self.figures[name])
            if self.settings.report:
                with open(self.settings.report, "w") as out:
                    json.dump(self.figures, out)
            print(f"mixed load: {self.figures}")

    def create_topics(self) -> None:
        from confluent_kafka.admin import NewTopic

        admin = confluent_admin(self.bootstrap)  # kept: the results' futures die with it
        created = admin.create_topics([NewTopic(topic, PARTITIONS, 3)
                                       for topic in (self.checked, self.bulk, self.transformed)], operation_timeout=T)
        for future in created.values():
            future.result(timeout=T)
        self.topics = {self.checked: PARTITIONS, self.bulk: PARTITIONS, self.transformed: PARTITIONS}
        self.heal()

    def acked(self) -> int:
        return sum(h.counts()["acked"] for h in self.histories.values())

    def guarded(self, target) -> None:
        """A background thread's body: what it raises fails the test (at the next check)."""
        try:
            target()
        except BaseException as e:  # noqa: BLE001 - raised again by raise_errors()
            self.errors.append(e)
            self.stopping.set()

    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors[0]
        gone = [m for m in self.group.members.values() if m.proc.poll() is not None and not m.ended_by_test]
        if gone:
            raise MemberExited(f"{gone[0].name} exited with {gone[0].proc.returncode}:\n{gone[0].output()}")

    # -- faults ----------------------------------------------------------------------------
    def inflict_faults(self) -> None:
        """Faults at random moments, in rounds of one of each kind (shuffled), until the budget
        is spent; at least one round."""
        rng = random.Random(self.settings.seed)
        faults = {"kill": self.kill, "pause": self.pause, "rolling": self.rolling_shutdown}
        started, pending = time.monotonic(), []
        while self.figures["faults"] < self.settings.kills:
            if self.figures["faults"] >= len(FAULT_KINDS) and time.monotonic() - started > self.settings.budget_s:
                break
            if not pending:
                pending = rng.sample(FAULT_KINDS, len(FAULT_KINDS))
            acked_before = self.acked()
            wait_for(lambda before=acked_before: self.acked() > before or self.errors, T,
                     what="a write acknowledged since the last fault")
            self.raise_errors()
            time.sleep(rng.uniform(0, 2))  # the fault schedule: a random moment of the traffic
            kind = pending.pop()
            struck = time.monotonic()
            faults[kind](rng)
            self.figures["fault_s"].append((kind, round(time.monotonic() - struck, 1)))
            self.figures["faults"] += 1
            self.figures["faults_by_kind"][kind] += 1
            self.raise_errors()

    def kill(self, rng: random.Random) -> None:
        """kill -9 of the controller, of a partition's leader or of any broker; started again."""
        target = rng.choice(("controller", "leader", "any"))
        if target == "controller":
            victim_id = self.cluster.controller_id()
        elif target == "leader":
            victim_id = self.cluster.state(rng.choice(sorted(self.topics)), rng.randrange(PARTITIONS)).leader
        else:
            victim_id = rng.choice(SAMSA_IDS)
        if victim_id not in self.cluster.samsa:
            victim_id, target = rng.choice(SAMSA_IDS), "any"
        self.figures["kill_targets"][target] += 1
        victim = self.cluster.samsa[victim_id]
        killed_session = self.cluster.session(zk_data.broker_path(victim_id))
        self.sample_memory()
        victim.kill()
        restart = Restart(victim)
        wait_for(lambda: self.cluster.session(zk_data.CONTROLLER) not in (None, killed_session), T, interval=0.1,
                 what=f"a live controller after broker {victim_id}'s kill")
        restart.done()
        self.heal()

    def pause(self, rng: random.Random) -> None:
        """SIGSTOP for up to two and a half times replica.lag.time.max.ms (and so sometimes past
        the ZooKeeper session timeout too), then SIGCONT."""
        victim = self.cluster.samsa[rng.choice(SAMSA_IDS)]
        seconds = rng.uniform(0.5, 2.5 * LAG_MS / 1000)
        self.figures["pauses_past_lag_time"] += seconds * 1000 > LAG_MS
        self.figures["pauses_past_session_timeout"] += seconds * 1000 > SESSION_TIMEOUT_MS
        os.kill(victim.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)  # the fault itself
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        self.heal()

    def rolling_shutdown(self, rng: random.Random) -> None:
        """SIGTERM (a controlled shutdown), restart and heal, one broker after the other."""
        for broker_id in rng.sample(SAMSA_IDS, len(SAMSA_IDS)):
            broker = self.cluster.samsa[broker_id]
            self.sample_memory()
            code = broker.stop(timeout=T)
            assert code == 0 and not broker.sigterm_timed_out, (
                f"broker {broker_id} after SIGTERM: exit code {code}, timed out {broker.sigterm_timed_out}")
            Restart(broker).done()
            self.heal()

    def heal(self) -> None:
        """Until a controller is elected and every replica of every topic is in its ISR."""
        topics = dict(self.topics)
        for internal, partitions in INTERNAL_TOPICS.items():
            if self.cluster.zk.exists(zk_data.topic_path(internal)):
                topics[internal] = partitions
        wait_for(lambda: self.cluster.controller_id() is not None, HEAL_S, interval=0.1, what="a controller")
        wait_for(lambda: self.full_isrs(topics), HEAL_S, interval=0.1, what="every replica in every ISR")

    def full_isrs(self, topics: dict[str, int]) -> bool:
        """True when every ISR is whole; raises with those that are not (wait_for shows the last)."""
        short = {f"{topic}-{p}": state for topic, partitions in topics.items() for p in range(partitions)
                 if set((state := self.cluster.state(topic, p)).isr) != set(SAMSA_IDS)}
        if short:
            raise AssertionError(f"controller {self.cluster.controller_id()}, ISRs short: {short}")
        return True

    # -- the background --------------------------------------------------------------------
    def start_member(self, name: str) -> None:
        self.group.start(name)
        self.figures["group_members"]["joined"] += 1

    def churn_group(self) -> None:
        """Members join, leave (SIGTERM: they commit and leave the group) and are killed (SIGKILL)
        at random moments, one to MAX_MEMBERS at a time."""
        rng = random.Random(self.settings.seed + 1)
        joined = len(self.group.members)
        try:
            self._churn(rng, joined)
        finally:
            self.churned.set()
            # A member dies with the thread that started it (group_member.py's PR_SET_PDEATHSIG):
            # this one lasts until the test has done with the group.
            self.group_stopped.wait()

    def _churn(self, rng: random.Random, joined: int) -> None:
        pending: list[str] = []
        while not self.stopping.wait(rng.uniform(1, 5)):
            if not pending:
                pending = rng.sample(GROUP_ACTIONS, len(GROUP_ACTIONS))
            action = pending.pop()
            live = sorted(self.group.live())
            if action != "join" and len(live) <= 1 or action == "join" and len(live) >= MAX_MEMBERS:
                pending.insert(0, action)  # later, when there are members enough (or room)
                continue
            if action == "join":
                joined += 1
                self.start_member(f"m{joined}")
            elif action == "leave":
                self.group.members[rng.choice(live)].stop()
                self.figures["group_members"]["left"] += 1
            else:
                self.group.members[rng.choice(live)].kill()
                self.figures["group_members"]["killed"] += 1

    def run_transform(self) -> None:
        while not self.stopping.is_set():
            self.transform.step(max_records=100, timeout=0.5)

    def watch(self) -> None:
        """Each second: the brokers' peak memory, the group's committed offsets."""
        while not self.stopping.wait(1):
            self.sample_memory()
            self.committed.sample()

    def sample_memory(self) -> None:
        peaks = self.figures["peak_memory_kb_by_broker"]
        for broker_id, broker in self.cluster.samsa.items():
            proc = broker.proc
            if proc is not None:
                peaks[broker_id] = max(peaks.get(broker_id, 0), peak_memory_kb(proc.pid))
        self.figures["peak_broker_memory_kb"] = max(peaks.values(), default=0)

    # -- the end ---------------------------------------------------------------------------
    def finish_and_check(self, started: float, threads: list[threading.Thread]) -> None:
        figures = self.figures
        for thread in threads:
            if thread.name == "churn_group":  # it lasts as long as the group
                assert self.churned.wait(T * 2), f"the group's churn did not stop:\n{stack(thread)}"
            else:
                thread.join(T * 4)
                assert not thread.is_alive(), f"{thread.name} did not stop:\n{stack(thread)}"
        self.raise_errors()
        for thread in [*self.writers, self.reader, self.bulk_writer]:
            thread.finish()
        bulk = self.bulk_history.counts()
        figures["bulk_records"], figures["bulk_failures"] = bulk["acked"], bulk["failed"]
        figures["bulk_records_per_s"] = round(bulk["acked"] / max(time.monotonic() - started, 1))

        ends = high_watermarks(self.bootstrap, self.checked, PARTITIONS)
        final_log = read_whole_log(self.bootstrap, self.checked, PARTITIONS, timeout=T + sum(ends.values()) / 5000)
        found = Anomalies()
        for history in self.histories.values():
            anomalies = history.check(final_log)
            for name in ("lost", "reordered", "phantom_reads"):
                getattr(found, name).extend(getattr(anomalies, name))
            found.duplicated = anomalies.duplicated  # each history sees the same log: counted once
            counts = history.counts()
            figures["records_checked"] += counts["acked"]
            figures["write_failures"] += counts["failed"]
        figures.update(records_lost=len(found.lost), duplicates=len(found.duplicated),
                       reordered=len(found.reordered), phantom_reads=len(found.phantom_reads))

        # The transform: every input once in its output, in order, once it has caught up.
        wait_for(lambda: self.caught_up(ends), HEAL_S, what=f"the transform at the end of {ends}")
        transform = self.transform
        figures.update(transactions_committed=transform.committed, transactions_aborted=transform.aborted,
                       transactional_producers=transform.producers, transaction_calls_stuck=transform.stuck)
        inputs = {p: [b"out-" + value for _, value in final_log[p]] for p in range(PARTITIONS)}
        outputs = read_committed(self.bootstrap, self.transformed, PARTITIONS, sum(ends.values()),
                                 timeout=T + sum(ends.values()) / 5000)

        # The group: everything consumed, and committed, its committed offsets never backwards.
        analysis = self.group.wait_consumed(ends, HEAL_S)
        self.group.wait(lambda: self.committed.sample() == ends, HEAL_S, what=f"the group's commits at {ends}")
        self.group.stop_all()
        self.group_stopped.set()
        figures["group_rebalances"] = len({ev.get("gen") for events in analysis.events.values() for ev in events
                                           if ev["ev"] == "assigned"})
        figures["group_consumed_again"] = duplicates(analysis)
        figures["committed_offset_samples"] = self.committed.samples
        figures["committed_offsets_backwards"] = len(self.committed.backwards)

        seed = f"seed {self.settings.seed}"
        assert not found, f"{found.summary()} ({seed})"
        assert figures["write_failures"] == 0, [h.failed[:5] for h in self.histories.values()]
        assert not self.committed.backwards, f"committed offsets went backwards: {self.committed.backwards[:10]} ({seed})"
        consumed = {p: set(analysis.consumed(p)) for p in range(PARTITIONS)}
        unconsumed = [(p, o) for h in ("a", "b") for p, o, _, _ in self.histories[h].acked
                      if o is not None and o not in consumed[p]]
        assert not unconsumed, f"acknowledged and never consumed by the group: {unconsumed[:10]} ({seed})"
        for p in range(PARTITIONS):
            assert outputs[p] == inputs[p], (
                f"partition {p} of the transform's output: {len(outputs[p])} values for {len(inputs[p])} inputs, "
                f"first difference at {next((i for i, (a, b) in enumerate(zip(outputs[p], inputs[p])) if a != b), None)}"
                f" ({seed})")

    def caught_up(self, ends: dict[int, int]) -> bool:
        """The transform committed transactions up to every partition's end (stepped here: its
        thread has stopped)."""
        self.transform.step(max_records=500, timeout=0.5)
        return all(self.transform.processed.get(p, 0) >= end for p, end in ends.items())


def stack(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"
