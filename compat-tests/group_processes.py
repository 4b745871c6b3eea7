"""Consumer group members as separate processes (group_member.py, node/kafkajs_member.js), a
producer that keeps writing, and waits on what the members' journals say (rebalance_journal.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from compat_util import NODE_DIR, wait_for
from rebalance_journal import Analysis, analyse

HERE = Path(__file__).resolve().parent
# kafka-python members run the 2.3 line (compat-tests/install.sh puts it here). kafka-python 3.0.12,
# which every other compat test uses, wedges now and then when a leader rejoins (about 5 runs in
# 200 of the kafka-python scenario here): the broker answers its SyncGroup and the kernel shows the
# client read every byte, then the client's main thread waits forever on a task its IO thread
# never runs, and its heartbeats stop; the group, rightly, drops it.
KAFKA_PYTHON_2 = HERE / ".kafka-python-2"


class MemberExited(AssertionError):
    pass


class ContinuousProducer(threading.Thread):
    """Writes `rate` messages a second, round robin over the partitions, until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 100.0) -> None:
        super().__init__(name="producer", daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "reconnect.backoff.max.ms": 1000})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.stopping = threading.Event()
        self.sent = 0
        self.errors: list[str] = []

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                self.producer.produce(self.topic, value=str(self.sent).encode(),
                                      partition=self.sent % self.partitions, on_delivery=self._delivered)
                self.sent += 1
            self.producer.poll(0.02)

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)
        remaining = self.producer.flush(60)
        assert remaining == 0 and not self.errors, f"{remaining} messages undelivered, errors {self.errors[:3]}"


class Member:
    """A member process and its journal."""

    def __init__(self, name: str, settings: dict, journal: Path) -> None:
        self.name, self.journal = name, journal
        settings = self.settings = dict(settings, name=name, journal=str(journal))
        if settings["client"] == "kafkajs":
            if shutil.which("node") is None or not (NODE_DIR / "node_modules" / "kafkajs").is_dir():
                pytest.skip("node or kafkajs missing (compat-tests/install.sh)")
            cmd = ["node", str(NODE_DIR / "kafkajs_member.js"), json.dumps(settings)]
        else:
            cmd = [sys.executable, str(HERE / "group_member.py"), json.dumps(settings)]
        env = None
        if settings["client"] == "kafka-python":
            if not (KAFKA_PYTHON_2 / "kafka").is_dir():
                pytest.skip(f"kafka-python 2.3 missing in {KAFKA_PYTHON_2} (compat-tests/install.sh)")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(KAFKA_PYTHON_2),
                                                                              os.environ.get("PYTHONPATH")])))
        self.ended_by_test = False
        self.log = open(journal.with_suffix(".log"), "wb")  # noqa: SIM115 - the process writes to it until it ends
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM: the member stops consuming, commits and leaves the group."""
        self.ended_by_test = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"member {self.name} did not stop within {timeout}s") from None
        self.log.close()

    def kill(self) -> None:
        """SIGKILL; the journal gets the moment the process was gone, which ends its ownerships."""
        self.ended_by_test = True
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
            with open(self.journal, "a") as f:
                f.write(json.dumps({"ev": "killed", "t": time.time()}) + "\n")
        self.log.close()

    def kill_mid_batch(self, timeout: float = 30) -> None:
        """SIGUSR2 (the member hangs after journaling its next batch, before committing it), then
        SIGKILL: a crash that leaves consumed messages uncommitted."""
        self.proc.send_signal(signal.SIGUSR2)
        wait_for(lambda: '"stalled"' in self.journal.read_text() or self.proc.poll() is not None, timeout,
                 interval=0.05, what=f"{self.name} stalled after a batch")
        if self.proc.poll() is not None:
            raise MemberExited(f"{self.name} exited with {self.proc.returncode} before stalling:\n{self.output()}")
        self.kill()

    def output(self, limit: int = 3000) -> str:
        try:
            return self.journal.with_suffix(".log").read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return ""


class GroupRun:
    """Members of one group on one topic; `settings` go to every member (client, assignor, ...)."""

    def __init__(self, tmp_path: Path, bootstrap: str, topic: str, group: str, partitions: int, **settings) -> None:
        self.dir = tmp_path
        self.topic, self.group, self.partitions = topic, group, partitions
        self.settings = dict(settings, bootstrap=bootstrap, topic=topic, group=group)
        self.members: dict[str, Member] = {}
        self.journals: dict[str, Path] = {}

    def start(self, name: str, **extra) -> Member:
        journal = self.dir / f"{name}.jsonl"
        self.journals[name] = journal
        member = self.members[name] = Member(name, dict(self.settings, **extra), journal)
        return member

    def analysis(self) -> Analysis:
        return analyse(self.journals)

    def live(self) -> set[str]:
        return {n for n, m in self.members.items() if m.proc.poll() is None}

    def wait(self, pred, timeout: float, what: str):
        """Poll pred() until it returns something truthy; fail after timeout seconds, or at once
        when a member the test neither stopped nor killed has exited."""
        deadline = time.monotonic() + timeout
        while True:
            gone = [m for m in self.members.values() if m.proc.poll() is not None and not m.ended_by_test]
            if gone:
                raise MemberExited(f"{gone[0].name} exited with {gone[0].proc.returncode} while waiting for {what}:\n"
                                   f"{gone[0].output()}")
            result = pred()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.diagnosis()}")
            time.sleep(0.2)

    def diagnosis(self) -> str:
        """What each member last journaled and logged, with the stacks of its threads (SIGUSR1
        makes a Python member print them), to tell a client that hung from a broker that did not
        answer."""
        for m in self.members.values():
            if m.proc.poll() is None and m.settings["client"] != "kafkajs":
                m.proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        parts = []
        for n, m in self.members.items():
            lines = m.journal.read_text(errors="replace").splitlines() if m.journal.exists() else []
            parts.append(f"--- {n} ({m.settings['client']}, pid {m.proc.pid}, exit {m.proc.poll()}), journal tail:\n"
                         + "\n".join(lines[-8:]) + f"\n--- {n} output tail:\n{m.output(8000)}")
        return "\n".join(parts) + "\n--- connections to the broker:\n" + self._socket_queues()

    def _socket_queues(self) -> str:
        """`ss` on the connections to the broker, with the kernel's view of each (bytes queued,
        retransmissions, milliseconds since the last send and receive): a response the client never
        read sits in its Recv-Q, one the broker never wrote is in no queue at all."""
        port = self.settings["bootstrap"].rsplit(":", 1)[1]
        try:
            return subprocess.run(["ss", "-tnpiH", f"( sport = :{port} or dport = :{port} )"], capture_output=True,
                                  text=True, timeout=10, check=False).stdout
        except (OSError, subprocess.SubprocessError) as e:
            return f"(ss failed: {e})"

    def wait_owned(self, counts: dict[str, int], timeout: float = 60) -> Analysis:
        """Until the named members (and no one else) own every partition, so many each."""
        def settled():
            a = self.analysis()
            owners = a.owners()
            if {n: len(ps) for n, ps in owners.items()} != counts:
                return None
            return a if sorted(p for ps in owners.values() for p in ps) == list(range(self.partitions)) else None

        try:
            return self.wait(settled, timeout, f"partitions owned {counts}")
        except MemberExited:
            raise
        except AssertionError as e:
            what, _, diagnosis = str(e).partition("\n")
            raise AssertionError(f"{what}; they are owned {self._owned()}\n{diagnosis}") from None

    def _owned(self) -> dict[str, list[int]]:
        return {n: sorted(ps) for n, ps in self.analysis().owners().items()}

    def wait_consumed(self, high_watermarks: dict[int, int], timeout: float = 60) -> Analysis:
        def done():
            a = self.analysis()
            return a if all(set(range(hw)) <= set(a.consumed(p)) for p, hw in high_watermarks.items()) else None

        return self.wait(done, timeout, "every message consumed")

    def wait_progress(self, after: float, timeout: float = 60) -> None:
        """Until every live member consumed and committed something after `after`."""
        def progressed():
            a = self.analysis()
            return all(any(ev["ev"] == "committed" and ev["t"] > after for ev in a.events[n]) for n in self.live())

        self.wait(progressed, timeout, f"commits after {after:.3f} by {sorted(self.live())}")

    def stop_all(self) -> None:
        for m in self.members.values():
            if m.proc.poll() is None:
                m.ended_by_test = True
                m.proc.send_signal(signal.SIGTERM)
        for m in self.members.values():
            m.stop()

    def kill_all(self) -> None:
        for m in self.members.values():
            m.kill()

    def outputs(self) -> str:
        return "\n".join(f"--- {n} (exit {m.proc.poll()}):\n{m.output()}" for n, m in self.members.items())


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def committed_offsets(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)}
    finally:
        c.close()


class CommittedOffsetsWatch:
    """A group's committed offsets as its coordinator answers OffsetFetch, asked again and again
    (`sample()`) while brokers fail: an offset lower than one answered before (or none after one)
    is a commit the group lost. Asks through a consumer that never joins the group."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.latest: dict[int, int] = {}
        self.samples = 0
        self.backwards: list[tuple[int, int, int]] = []  # (partition, answered before, answered after)

    def sample(self, timeout: float = 5) -> dict[int, int] | None:
        """The offsets answered now (None: no answer, e.g. while the coordinator moves)."""
        from confluent_kafka import KafkaException

        try:
            answered = self.consumer.committed(self.partitions, timeout=timeout)
        except KafkaException:
            return None
        self.samples += 1
        for tp in answered:
            if tp.error is not None:
                continue
            before = self.latest.get(tp.partition)
            if before is not None and tp.offset < before:
                self.backwards.append((tp.partition, before, tp.offset))
            else:
                self.latest[tp.partition] = tp.offset
        return {tp.partition: tp.offset for tp in answered if tp.error is None}

    def close(self) -> None:
        self.consumer.close()
